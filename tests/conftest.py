"""Shared fixtures. Integration tests run against real Kafka brokers started here.

Every test session gets its own OPSKIT_STATE / OPSKIT_CONFIG / HOME-like dirs so
it never touches a developer's real contexts or sandboxes. Kafka jars are
cached in the normal cache dir (``~/.cache/opskit``) so they are fetched once.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# No timing assertions in tests: hypothesis' default 200 ms deadline per example fails
# property tests on a loaded 2-core machine (seen: test_capabilities under load ~40)
settings.register_profile("opskit", deadline=None)
settings.load_profile("opskit")

# the real non-Apache brokers (Hanzo Stream gateway, Heraclitus, StreamNest, Tansu)
from compat_fixtures import (  # noqa: F401 - fixtures
    fresh_heraclitus,
    hanzo_stream,
    heraclitus,
    streamnest,
    tansu,
)

_SESSION_DIR: Path | None = None
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:CICompilerCount=1"


def pytest_configure(config: pytest.Config) -> None:
    global _SESSION_DIR
    import tempfile

    _SESSION_DIR = Path(tempfile.mkdtemp(prefix="opskit-tests-"))
    os.environ["OPSKIT_STATE"] = str(_SESSION_DIR / "state")
    os.environ["OPSKIT_CONFIG"] = str(_SESSION_DIR / "config.yaml")
    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    os.environ.pop("OPSKIT_CONTEXT", None)
    # Kafka's JVMs (sandbox nodes, Kafka's own tools) with C1 only and the serial collector:
    # about half the CPU to start a node on 2 cores, where the suite runs two pytest processes
    os.environ.setdefault("OPSKIT_SANDBOX_JVM_OPTS", LIGHT_JVM)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The session's dir is removed when every test passed (nothing left in /tmp); after
    a failure it is kept and its path printed (it holds the state and config the tests
    left; a sandbox its fixture already tore down has no broker logs left in it)."""
    import shutil
    import sys

    if _SESSION_DIR is None or not _SESSION_DIR.exists():
        return
    if exitstatus == 0:
        shutil.rmtree(_SESSION_DIR, ignore_errors=True)
    else:
        print(f"\nopskit test state kept for inspection: {_SESSION_DIR}", file=sys.stderr)


class Cluster:
    """A running sandbox cluster and helpers to drive it.

    ``security`` is ``plaintext`` (default), ``sasl_plaintext`` or ``sasl_ssl``
    (see :mod:`opskit.sandbox.security`). A secured cluster also has opskit
    contexts ``sandbox-NAME-admin`` and ``sandbox-NAME-monitor`` in the test
    session's config file (names in :attr:`admin_context`, :attr:`monitor_context`).
    """

    def __init__(self, name: str, brokers: int, version: str, security: str = "plaintext") -> None:
        from opskit.sandbox.cluster import Sandbox
        from opskit.sandbox.ports import free_port_block

        self.sandbox = Sandbox(name)
        st, _ = self.sandbox.up(brokers=brokers, version=version, port=free_port_block(brokers),
                                security=security)
        self.state = st
        self.bootstrap = st.bootstrap
        self.version = st.version
        self.security = st.security
        self.admin_context = self.monitor_context = ""
        if st.security != "plaintext":
            from opskit.sandbox.security import write_contexts

            self.admin_context, self.monitor_context = write_contexts(
                self.sandbox.name, st.bootstrap, self.sandbox.security(st))

    @property
    def secured(self) -> bool:
        return self.security != "plaintext"

    def conn(self, user: str = "admin", mechanism: str = "PLAIN"):  # type: ignore[no-untyped-def]
        """ConnectionConfig logging in as ``user`` (admin, monitor or a HIP-30 service)
        with ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); the plain bootstrap
        on a plaintext cluster."""
        return self.sandbox.connection(user, mechanism)

    def password(self, user: str = "admin") -> str:
        """The generated password of ``user`` (for secret-grep tests)."""
        return self.sandbox.security(self.state).password(user)  # type: ignore[no-any-return]

    def password_file(self, user: str = "admin") -> str:
        return str(self.sandbox.security(self.state).password_file(user))

    @property
    def ca_file(self) -> str | None:
        """The sandbox CA certificate (sasl_ssl only)."""
        sec = self.sandbox.security(self.state)
        return str(sec.ca_file) if sec.tls else None

    def cli_args(self, user: str = "admin") -> list[str]:
        """Connection flags for an opskit command: ``--context sandbox-NAME-USER`` on a
        secured cluster (admin or monitor), ``-b bootstrap`` otherwise."""
        if not self.secured:
            return ["-b", self.bootstrap]
        ctx = {"admin": self.admin_context, "monitor": self.monitor_context}.get(user)
        if not ctx:
            raise ValueError(f"no context for {user!r}: write one with opskit context set")
        return ["--context", ctx]

    def command_config(self, path: Path, user: str = "admin", mechanism: str = "PLAIN") -> Path:
        """A Kafka tool ``--command-config`` file (0600) logging in as ``user``."""
        lines = []
        if self.secured:
            c = self.conn(user, mechanism)
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            lines += [f"security.protocol={c.security_protocol}", f"sasl.mechanism={mechanism}",
                      f'sasl.jaas.config={module} required username="{user}" password="{c.password}";']
            if c.ca_file:
                lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={c.ca_file}"]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def dist(self):  # type: ignore[no-untyped-def]
        from opskit.sandbox.dist import ensure_kafka_dist

        return ensure_kafka_dist(self.version)

    def admin(self):  # type: ignore[no-untyped-def]
        from opskit.adapters.kafka.admin.client import KafkaAdmin
        from opskit.core.connection import ConnectionConfig

        return KafkaAdmin(self.conn() if self.secured else ConnectionConfig(self.bootstrap), timeout=15)

    def down(self) -> None:
        self.sandbox.down()
        if self.secured:
            from opskit.adapters.files.config_file import OpskitConfig

            cfg = OpskitConfig.load()
            for ctx in (self.admin_context, self.monitor_context):
                cfg.contexts.pop(ctx, None)
                if cfg.current_context == ctx:
                    cfg.current_context = None
            cfg.save()


def _start(name: str, brokers: int, version: str, security: str = "plaintext") -> Iterator[Cluster]:
    c = Cluster(f"{name}-{uuid.uuid4().hex[:6]}", brokers, version, security)
    try:
        yield c
    finally:
        c.down()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Cluster]:
    """One broker, HIP-30's production version (3.7)."""
    yield from _start("t37", 1, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"))


@pytest.fixture(scope="session")
def kafka4() -> Iterator[Cluster]:
    """One broker, the newest Kafka 4.x."""
    yield from _start("t4x", 1, "4.x")


@pytest.fixture(scope="session")
def kafka3() -> Iterator[Cluster]:
    """Three nodes (combined node 0 + two brokers) for replication scenarios."""
    yield from _start("t3b", 3, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"))


@pytest.fixture(scope="session")
def kafka_sasl_ssl() -> Iterator[Cluster]:
    """One broker (3.7) with HIP-30's production listener: SASL_SSL (TLS 1.3, a CA
    generated for it), PLAIN + SCRAM-SHA-256/512, StandardAuthorizer with
    ``allow.everyone.if.no.acl.found=false``.

    Started on first use and shared by the session. Principals: ``admin`` (super
    user), ``monitor`` and HIP-30's services, none of which holds any ACL yet
    (grant what a test needs, as admin, and remove it after, or use unique topic
    and group names). Use::

        def test_x(kafka_sasl_ssl):
            conn = kafka_sasl_ssl.conn("monitor", "SCRAM-SHA-512")   # ConnectionConfig
            run_cli("lag", "--all-groups", *kafka_sasl_ssl.cli_args("monitor"))
            kafka_sasl_ssl.password("monitor")      # what must never be printed
            kafka_sasl_ssl.admin()                  # KafkaAdmin logged in as admin
            kafka_sasl_ssl.command_config(tmp_path / "c.properties")  # for Kafka's tools
    """
    yield from _start("tss", 1, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"), "sasl_ssl")


@pytest.fixture(scope="session")
def kafka_sasl_plaintext() -> Iterator[Cluster]:
    """As :func:`kafka_sasl_ssl` with a SASL_PLAINTEXT listener (no TLS)."""
    yield from _start("tsp", 1, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"), "sasl_plaintext")


@pytest.fixture(scope="module")
def kafka3_sasl_ssl() -> Iterator[Cluster]:
    """As :func:`kafka_sasl_ssl` with three nodes (reassignment to RF 3 on SASL_SSL). Per
    module: started for the module that asks for it and stopped after it."""
    yield from _start("ts3", 3, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"), "sasl_ssl")


@pytest.fixture(params=["sasl_plaintext", "sasl_ssl"])
def any_secured_kafka(request: pytest.FixtureRequest) -> Cluster:
    """Both secured listeners, for tests that must hold on each."""
    return request.getfixturevalue(f"kafka_{request.param}")  # type: ignore[no-any-return]


@pytest.fixture(params=["3.7", "4.x"])
def any_kafka(request: pytest.FixtureRequest) -> Cluster:
    """Both supported major versions, for tests that must hold on each."""
    return request.getfixturevalue("kafka" if request.param == "3.7" else "kafka4")  # type: ignore[no-any-return]


@pytest.fixture
def uniq() -> str:
    """A unique snake_case suffix for topic and group names."""
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def apiserver() -> Iterator[object]:
    """A real kube-apiserver + etcd on loopback (tests/k8s_apiserver.py), one per session,
    shared by the Kubernetes tests (each uses its own namespace)."""
    from k8s_apiserver import start_apiserver

    srv = start_apiserver()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone cluster (master + 2 workers of 1 core and 1 GB) started
    from the installed PySpark on loopback; stopped (no JVM left) at the end."""
    from tests.spark_cluster import start_standalone

    cluster = start_standalone(workers=2, cores=1, memory="1g",
                               base=tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()
