"""``opskit health`` reads the KRaft quorum and the reassignments through the reader port.

No sockets: the admin points at a closed port and kafka-python's own client is made to
fail (or to hang); the quorum and the reassignments health judges must be the
session's, and a failed connect keeps health's wording (it names the bootstrap servers)
while the exporter's stays its own."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from opskit.adapters.health import cluster as cluster_health
from opskit.adapters.health.cluster import gather_health_input
from opskit.adapters.kafka.admin.client import BrokerMeta, ClusterMeta, KafkaAdmin, PartitionMeta
from opskit.adapters.kafka.kafka_python_reads import NO_QUORUM_API
from opskit.adapters.kafka.reader import KeptClients, TopicConfigs
from opskit.adapters.kafka.reader.kept import KafkaPythonConnectError, KafkaPythonReads
from opskit.adapters.kafka.reader.librdkafka_reader import LibrdkafkaReader
from opskit.core.connection import ConnectionConfig
from opskit.core.health import (
    HealthPolicy,
    QuorumInfo,
    QuorumReplica,
    Reassignment,
    evaluate_health,
)
from opskit.core.models import Severity
from opskit.errors import KafkaOperationError, UnsupportedError

NOWHERE = ConnectionConfig(bootstrap="127.0.0.1:1")  # nothing listens: a read would fail
QUORUM = QuorumInfo(1, 7, 1234, (QuorumReplica(1, 1234),))
MOVING = (Reassignment("orders", 1, (1, 2), adding=(2,)),)
META = ClusterMeta("fake-cluster", 1, (BrokerMeta(1, "fake", 9092),),
                   {"orders": tuple(PartitionMeta(p, 1, (1,), (1,)) for p in (0, 1))})


def _boom(*_a: object, **_k: object) -> None:
    raise AssertionError("Kafka read outside the reader port")


@pytest.fixture
def no_kafka_python_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """KafkaAdmin's metadata and configs and kafka-python's admin client fail loudly."""
    for name in ("metadata", "topic_configs"):
        monkeypatch.setattr(KafkaAdmin, name, _boom)
    monkeypatch.setattr(KafkaAdminClient, "__init__", _boom)


class FakeSession:
    """The reads health makes of a session: one broker, topic ``orders`` (min ISR 1),
    the fake's quorum and reassignments, or the errors given."""

    bootstrap = "fake:9092"
    principal = "User:monitor"
    timeout = 5.0
    round_trips = 0

    def __init__(self, quorum: QuorumInfo | Exception = QUORUM,
                 moving: tuple[Reassignment, ...] | Exception = MOVING) -> None:
        self.quorum, self.moving = quorum, moving
        self.calls: list[str] = []

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        return META

    def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
        return {t: {"min.insync.replicas": ("1", False)} for t in topics}

    def read_quorum(self) -> QuorumInfo:
        self.calls.append("read_quorum")
        if isinstance(self.quorum, Exception):
            raise self.quorum
        return self.quorum

    def read_reassignments(self) -> tuple[Reassignment, ...]:
        self.calls.append("read_reassignments")
        if isinstance(self.moving, Exception):
            raise self.moving
        return self.moving

    def close(self) -> None:
        pass


@pytest.mark.usefixtures("no_kafka_python_of_its_own")
def test_health_reads_quorum_and_reassignments_from_the_session() -> None:
    fake = FakeSession()
    inp = gather_health_input(KafkaAdmin(NOWHERE), expected_brokers=1,
                              reader=fake)  # type: ignore[arg-type]
    assert fake.calls == ["read_quorum", "read_reassignments"]
    assert inp.quorum == QUORUM and inp.quorum_error is None
    assert inp.reassignments == MOVING and inp.reassignments_error is None
    report = evaluate_health(inp, HealthPolicy())
    (moving,) = [f for f in report.findings if f.severity is Severity.WARNING]
    assert moving.check == "reassignments" and report.severity is Severity.WARNING
    assert moving.message.startswith("1 reassignment(s) in progress")


@pytest.mark.usefixtures("no_kafka_python_of_its_own")
def test_failed_session_reads_are_unknown_with_the_port_reason() -> None:
    fake = FakeSession(quorum=UnsupportedError(NO_QUORUM_API),
                       moving=KafkaOperationError("could not list partition reassignments: x"))
    inp = gather_health_input(KafkaAdmin(NOWHERE), expected_brokers=1,
                              reader=fake)  # type: ignore[arg-type]
    assert inp.quorum is None and inp.quorum_error == NO_QUORUM_API
    assert inp.reassignments is None
    assert inp.reassignments_error == "could not list partition reassignments: x"
    assert evaluate_health(inp, HealthPolicy()).severity is Severity.UNKNOWN


class MetaFromFake(LibrdkafkaReader):
    """The port's own session (its quorum and reassignments through the kept kafka-python
    client) with the metadata and configs of the fake."""

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        return META

    def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
        return FakeSession().all_topic_configs(topics)


@pytest.fixture
def sessions(monkeypatch: pytest.MonkeyPatch) -> list[MetaFromFake]:
    """Every session health opens, made on the clients it hands in."""
    opened: list[MetaFromFake] = []

    def open_reader(admin: KafkaAdmin, kept: KeptClients | None = None) -> MetaFromFake:
        assert kept is not None  # health's own: its waits bounded
        opened.append(MetaFromFake(admin, kept))
        return opened[-1]
    monkeypatch.setattr(cluster_health, "open_reader", open_reader)
    return opened


def test_a_failed_connect_names_the_bootstrap_servers_once_for_both_checks(
        monkeypatch: pytest.MonkeyPatch, sessions: list[MetaFromFake]) -> None:
    connects: list[dict[str, Any]] = []

    def refused(_self: object, **cfg: Any) -> None:
        connects.append(cfg)
        raise OSError("Connection refused")
    monkeypatch.setattr(KafkaAdminClient, "__init__", refused)
    inp = gather_health_input(KafkaAdmin(NOWHERE, timeout=3.0), expected_brokers=1)
    msg = "kafka-python could not connect to 127.0.0.1:1: Connection refused"
    assert inp.quorum is None and inp.quorum_error == msg
    assert inp.reassignments is None and inp.reassignments_error == msg
    assert len(connects) == 1  # tried once in the session
    (s,) = sessions
    assert s.kept.wait_s == 5.0  # the timeout plus 2 s
    # the exporter's kept clients (no wait given) keep their own wording
    with pytest.raises(KafkaOperationError) as caught:
        KeptClients(NOWHERE, 3.0).kafka_python()
    assert str(caught.value) == "kafka-python could not connect: OSError: Connection refused"


@pytest.fixture
def hanging_connect(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kafka-python's connect never returns (until the test ends)."""
    release = threading.Event()

    def hang(_self: object, **_cfg: Any) -> None:
        release.wait()
    monkeypatch.setattr(KafkaAdminClient, "__init__", hang)
    yield
    release.set()


@pytest.mark.usefixtures("hanging_connect")
def test_health_connect_is_bounded_by_the_timeout_plus_two(
        sessions: list[MetaFromFake]) -> None:
    inp = gather_health_input(KafkaAdmin(NOWHERE, timeout=0.25), expected_brokers=1)
    msg = "kafka-python could not connect to 127.0.0.1:1: no answer within 2.25s"
    assert inp.quorum_error == msg and inp.reassignments_error == msg


@pytest.mark.usefixtures("hanging_connect")
def test_kept_clients_with_a_wait_bound_the_connect() -> None:
    with pytest.raises(KafkaPythonConnectError) as caught:
        KeptClients(NOWHERE, 0.1, wait_s=0.2).kafka_python()
    assert caught.value.bootstrap == "127.0.0.1:1"
    assert str(caught.value.cause) == "no answer within 0.2s"


class HangingQuorum:
    def __init__(self) -> None:
        self.release = threading.Event()

    def describe_metadata_quorum(self) -> Any:
        self.release.wait()
        raise RuntimeError("released")

    def close(self) -> None:
        self.release.set()


def test_the_wait_bounds_describe_quorum() -> None:
    kept = KeptClients(NOWHERE, 0.1, wait_s=0.3)
    client = HangingQuorum()
    kept._kp = client  # connected
    try:
        with pytest.raises(KafkaOperationError, match=r"^DescribeQuorum: no answer within 0.3s$"):
            KafkaPythonReads(kept, 0.1).quorum()
    finally:
        kept.close()
    assert client.release.is_set()
