"""A log-directory drain on HIP-30's production listener, and no password leaks.

One single-broker Kafka 3.7 sandbox on SASL_SSL (TLS with the sandbox CA,
StandardAuthorizer) with 2 log directories; opskit logs in with SCRAM-SHA-512 through its
contexts (kafka-python's SCRAM over TLS for DescribeLogDirs and AlterReplicaLogDirs,
confluent-kafka for the configs). As admin, with ``--debug``: ``reassign plan
--remove-log-dirs``, ``execute --throttle --execute`` (the drain runs to the end) and
``verify`` (exit 0). As ``monitor`` (Describe on the cluster and the topic, no
DescribeConfigs): ``verify`` sees every replica in place but cannot read the throttle,
so it exits 3 (never 0); ``execute --execute`` is refused (exit 6). No password (in any
form a leak could take) appears in any output, the plan file or the journal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from secured_scenario import SecuredJbod, leaks, secrets, secured_jbod_sandbox, written_files

from tests.helpers import create_topic, produce

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def secured_jbod(monkeypatch: pytest.MonkeyPatch) -> Iterator[SecuredJbod]:
    with secured_jbod_sandbox(monkeypatch, "ldsec", "3.7", SecuredJbod) as c:
        yield c


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "opskit.cli.main", "--debug", *argv],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)


def test_disk_drain_on_sasl_ssl_admin_and_monitor(secured_jbod: SecuredJbod, tmp_path: Path
                                                  ) -> None:
    from opskit.adapters.acls.admin import AclsAdmin
    from opskit.core.acls import monitor_acls

    c = secured_jbod
    admin = ["--context", f"sandbox-{c.sb.name}-admin"]
    monitor = ["--context", f"sandbox-{c.sb.name}-monitor"]
    forms = secrets(c)
    found: list[str] = []

    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        p = _run(argv)
        assert p.returncode != 70, p.stderr[-800:]
        found.extend(f"{' '.join(argv)}: {w}" for text in (p.stdout, p.stderr)
                     for w in leaks(text, forms))
        return p

    topic = f"ldsec_{uuid.uuid4().hex[:6]}"
    create_topic(c.where(), topic, 4)
    produce(c.where(), topic, dict.fromkeys(range(4), 300), value=b"s" * 500)
    with AclsAdmin(c.sb.connection("admin"), timeout=15) as a:
        a.create_acls(list(monitor_acls("monitor", [topic], [])))
    node = c.state.nodes[0]
    data, other = str(node.dir / "data"), str(node.dir / "data-1")

    plan = tmp_path / "disk.json"
    p = run(["reassign", "plan", "--remove-log-dirs", f"0:{data}", "--write-plan", str(plan),
             *admin])
    assert p.returncode == 0, p.stderr[-1500:]
    doc = json.loads(plan.read_text())
    assert doc["partitions"] and all(q["log_dirs"] == [other] for q in doc["partitions"])

    refused = run(["reassign", "execute", str(plan), "--execute", *monitor])
    assert refused.returncode == 6, refused.stdout + refused.stderr[-1500:]

    drain = ["reassign", "execute", str(plan), "--throttle", "5MB", "--execute", *admin]
    ex = run([*drain, "--stall-timeout", "60"])
    if ex.returncode == 3 and "not swapped in" in ex.stderr:
        # Kafka 3.7.2 left a finished copy unswapped (its NullPointerException, as in
        # test_reassign_log_dirs_exec.py): the run said so and stopped; the remedy is a
        # broker restart, then the same command
        print("broker restarted for Kafka 3.7.2's unswapped copy")
        c.sb.stop_node(0)
        c.sb.start_node(0)
        ex = run(drain)
    assert ex.returncode == 0, ex.stdout + ex.stderr[-1500:]
    v = run(["reassign", "verify", str(plan), "-o", "json", *admin])
    assert v.returncode == 0, v.stdout + v.stderr[-1500:]
    vd = json.loads(v.stdout)
    assert {r["state"] for r in vd["replicas"]} == {"done"} and vd["throttles_left"] == []

    m = run(["reassign", "verify", str(plan), "-o", "json", *monitor])
    assert m.returncode == 3, m.stdout + m.stderr[-1500:]
    md = json.loads(m.stdout)
    assert {r["state"] for r in md["replicas"]} == {"done"} and md["throttle_unreadable"]
    assert "could not be read" in m.stderr

    for f in written_files([tmp_path]):
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        found.extend(f"file {f}: {w}" for w in leaks(text, forms))
    assert not found, "\n".join(found[:20])
