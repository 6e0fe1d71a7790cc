"""One small scenario on a (possibly secured) sandbox cluster, shared by the security matrix
and the secret-grep test: a topic with records, groups with committed offsets, a registry
file naming them (with a security section), and HIP-30 monitor ACLs for them.

Everything is made as ``admin`` (the super user). The ``monitor`` principal gets exactly
what a HIP-30 monitor holds: Describe on the cluster, on the topic and on the groups; no
Read (a monitor never consumes events) and no DescribeConfigs.

Also the secured single-broker JBOD sandbox of the disk-drain tests (:func:`secured_jbod_sandbox`)
and the secret grep's tools.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from opskit.paths import config_file, state_dir
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block
from opskit.sandbox.security import PRINCIPALS
from opskit.sandbox.state import sandboxes_root
from tests.helpers import Where, commit, create_topic, produce

PARTITIONS = 4
RECORDS = 10  # per partition
COMMITTED = 3  # group G, on every partition: lag 7 each, 28 in all


@dataclass
class Scenario:
    cluster: Any  # conftest.Cluster
    topic: str
    group: str  # committed at COMMITTED everywhere (read commands)
    reset_group_admin: str  # offsets reset --execute as admin
    reset_group_monitor: str  # offsets reset --execute as monitor (refused)
    service: str  # a registry principal (acls diff)
    registry: Path
    #: a group on the topic the monitor may not describe (listed, then left out with a note)
    hidden_group: str = ""

    @property
    def total_lag(self) -> int:
        return PARTITIONS * (RECORDS - COMMITTED)

    def args(self, role: str) -> list[str]:
        return list(self.cluster.cli_args(role))


def _where(cluster: Any) -> Where:
    """The test clients' settings: the admin's login on a secured cluster."""
    return cluster.conn("admin").to_librdkafka() if cluster.secured else cluster.bootstrap


def build(cluster: Any, tmp: Path) -> Scenario:
    u = uuid.uuid4().hex[:8]
    s = Scenario(cluster, f"sec_{u}", f"sec-{u}", f"sec-reset-a-{u}", f"sec-reset-m-{u}",
                 f"svc-{u}", tmp / f"registry-{u}.yaml", f"sec-hidden-{u}")
    where = _where(cluster)
    create_topic(where, s.topic, PARTITIONS)
    produce(where, s.topic, dict.fromkeys(range(PARTITIONS), RECORDS))
    for g, at in ((s.group, COMMITTED), (s.reset_group_admin, 5), (s.reset_group_monitor, 5),
                  (s.hidden_group, 1)):
        commit(where, g, {(s.topic, part): at for part in range(PARTITIONS)})
    s.registry.write_text(yaml.safe_dump({
        "topics": [{"name": s.topic, "partitions": PARTITIONS, "retention": "7d"}],
        "groups": [{"name": g, "topics": [s.topic]}
                   for g in (s.group, s.reset_group_admin, s.reset_group_monitor)],
        "security": {"principals": [{"name": s.service, "topics": {s.topic: ["WRITE"]}}]},
    }))
    if cluster.secured:
        from opskit.adapters.acls.admin import AclsAdmin
        from opskit.core.acls import AclEntry, monitor_acls

        with AclsAdmin(cluster.conn("admin"), timeout=15) as a:
            a.create_acls([*monitor_acls("monitor", [s.topic], [s.group, s.reset_group_admin,
                                                                s.reset_group_monitor]),
                           AclEntry(f"User:{s.service}", "TOPIC", s.topic, "WRITE")])
    return s


# ----------------------------------------------------------------- a secured JBOD broker

#: the mechanism of the opskit contexts written for a secured JBOD sandbox
JBOD_MECHANISM = "SCRAM-SHA-512"


class SecuredJbod:
    """A running single-broker SASL_SSL sandbox with 2 log directories (see :func:`secured_jbod_sandbox`)."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb, self.state = sb, sb.require()

    def password(self, user: str) -> str:
        return self.sb.security(self.state).password(user)  # type: ignore[no-any-return]

    def where(self) -> dict[str, Any]:
        return self.sb.connection("admin", "PLAIN").to_librdkafka()  # type: ignore[no-any-return]


J = TypeVar("J", bound=SecuredJbod)


@contextmanager
def secured_jbod_sandbox(monkeypatch: pytest.MonkeyPatch, prefix: str, version: str,
                 kind: type[J]) -> Iterator[J]:
    """A sandbox ``PREFIX-xxxxxx`` of Kafka ``version``: one broker on SASL_SSL (TLS with the
    sandbox CA, StandardAuthorizer) with 2 log directories, and opskit contexts
    ``sandbox-NAME-admin`` / ``-monitor`` logging in with :data:`JBOD_MECHANISM`; as a
    ``kind``. Removed on exit."""
    from opskit.sandbox.security import write_contexts

    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    sb = Sandbox(f"{prefix}-{uuid.uuid4().hex[:6]}")
    try:
        st, _ = sb.up(brokers=1, version=version, port=free_port_block(1), security="sasl_ssl",
                      log_dirs=2)
        write_contexts(sb.name, st.bootstrap, sb.security(st), JBOD_MECHANISM)
        yield kind(sb)
    finally:
        sb.down()


# ----------------------------------------------------------------- the secret grep's tools


def secrets(cluster: Any) -> dict[str, list[str]]:
    """user -> the forms its password could leak in (as written, repr-escaped, the base64
    PLAIN token, base64)."""
    out = {}
    for user in PRINCIPALS:
        pw = cluster.password(user)
        assert len(pw) >= 16, "a password too short to grep for without false positives"
        plain_token = base64.b64encode(f"\0{user}\0{pw}".encode()).decode()
        out[user] = [pw, repr(pw)[1:-1], plain_token, base64.b64encode(pw.encode()).decode()]
    return out


def leaks(text: str, forms: dict[str, list[str]]) -> list[str]:
    return [f"{user}'s password" for user, fs in forms.items() if any(f in text for f in fs)]


def written_files(extra: list[Path]) -> Iterator[Path]:
    """Every file opskit may have written, except the sandbox brokers' own directories."""
    skip = sandboxes_root().resolve()
    roots = [state_dir(), *extra]
    for root in roots:
        if not root.exists():
            continue
        for p in [root] if root.is_file() else root.rglob("*"):
            if p.is_file() and skip not in p.resolve().parents:
                yield p
    if config_file().exists():
        yield config_file()


def _parents() -> dict[int, int]:
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            out[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return out


def children(pid: int) -> list[int]:
    """The direct children of ``pid``."""
    return [c for c, ppid in _parents().items() if ppid == pid]


def descendants(pid: int) -> list[int]:
    """Children, grandchildren... of ``pid`` (spark-submit -> JVM -> Python driver)."""
    parents = _parents()
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def proc_text(pid: int, what: str) -> str | None:
    """``/proc/PID/cmdline`` or ``environ`` as text (NULs as spaces); None once gone."""
    try:
        raw = (Path("/proc") / str(pid) / what).read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode(errors="replace")
