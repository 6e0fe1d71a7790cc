"""collect_lag and the exporter's cycle read Kafka only through the reader port.

A fake reader (no sockets: the admin points at a closed port and is never used for a
read) serves a cluster; the numbers, the flags and the failures must be its."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence

import pytest
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from opskit.adapters.kafka.admin.client import (
    BrokerMeta,
    ClusterMeta,
    KafkaAdmin,
    OffsetsResult,
    PartitionMeta,
)
from opskit.adapters.kafka.log_dirs import PartitionSizes
from opskit.adapters.kafka.reader import (
    ClusterReader,
    CommitsRead,
    GroupsRead,
    KeptClients,
    Prefetch,
    TopicConfigs,
)
from opskit.adapters.kafka.record_times import Position, RecordTime, RecordTimeReader
from opskit.adapters.lag.source import collect_lag
from opskit.core.connection import ConnectionConfig
from opskit.core.health import QuorumInfo, QuorumReplica, Reassignment
from opskit.core.log_end import LogEndVerdict
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupState,
    Member,
    PartitionOffsets,
    Severity,
    TopicPartition,
)
from opskit.errors import KafkaOperationError
from opskit.exporter.collector import KafkaSource
from opskit.exporter.families import ExporterStatus, self_families
from opskit.exporter.options import ExporterOptions

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
NOWHERE = ConnectionConfig(bootstrap="127.0.0.1:1")  # nothing listens: a read would fail
QUORUM = QuorumInfo(3000, 7, 1234, (QuorumReplica(3000, 1234), QuorumReplica(3001, 1200)))
MOVING = (Reassignment("orders", 1, (1, 2), adding=(2,)),)
#: the record at the group's committed offset on partition 0 (lag in seconds)
RECORD_AT_40 = RecordTime(40, 1_700_000_000_000, "create")


class FakeReader:
    """A cluster of one broker, topic ``orders`` (2 partitions), group ``billing``
    (a live member on both partitions): committed 40 on partition 0, partition 1's
    commit unreadable (the broker answered TOPIC_AUTHORIZATION_FAILED)."""

    def __init__(self, fail_listing: bool = False, fail_quorum: bool = False) -> None:
        self.fail_listing = fail_listing
        self.fail_quorum = fail_quorum
        self.calls: list[str] = []
        self.closed = 0
        #: the threads that used this session
        self.threads: set[int] = set()
        #: records remembered for later reads, partitions whose log end to cross-check
        self.remembered: dict[Position, RecordTime] = {}
        self.suspects: set[TopicPartition] = set()

    bootstrap = "fake:9092"
    principal = "User:monitor"
    timeout = 5.0
    round_trips = 7

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        self.calls.append("metadata")
        self.threads.add(threading.get_ident())
        ps = tuple(PartitionMeta(p, 1, (1,), (1,)) for p in (0, 1))
        return ClusterMeta("fake-cluster", 1, (BrokerMeta(1, "fake", 9092),), {"orders": ps})

    def topic_denied(self, topic: str) -> bool:
        return False

    def group_ids(self, md: ClusterMeta) -> list[str]:
        self.calls.append("group_ids")
        return ["billing"]

    def group_ids_everywhere(self, md: ClusterMeta) -> list[str]:
        self.calls.append("group_ids_everywhere")
        if self.fail_listing:
            raise KafkaOperationError("ListGroups failed on broker 1: COORDINATOR_NOT_AVAILABLE")
        return ["billing"]

    def unavailable(self, operation: str) -> list[str]:
        return []

    def groups_blind(self) -> str | None:
        return None

    def read_groups(self, ids: Sequence[str], md: ClusterMeta) -> GroupsRead:
        self.calls.append("read_groups")
        member = Member("m-1", "c-1", "/10.0.0.1", (T0, T1))
        d = GroupDescription("billing", GroupState.STABLE, (member,))
        return GroupsRead({"billing": d}, {"billing": {T0: 40}},
                          {"billing": {T1: "TOPIC_AUTHORIZATION_FAILED"}})

    def committed_offsets(self, ids: Sequence[str], partitions: Sequence[TopicPartition]
                          ) -> CommitsRead:
        return CommitsRead()

    def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
        self.calls.append("log_offsets")
        ends = {T0: 100, T1: 60}
        return OffsetsResult({tp: PartitionOffsets(tp, 0, ends[tp]) for tp in tps})

    def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                        suspects: Iterable[TopicPartition], md: ClusterMeta
                        ) -> dict[TopicPartition, LogEndVerdict]:
        return {}

    def send_prefetch(self, prefetch: Prefetch,
                      committed: Mapping[str, Mapping[TopicPartition, int]],
                      topics: Sequence[str] | None, md: ClusterMeta) -> bool:
        return False

    def topic_configs(self, topics: Iterable[str], keys: list[str] | None = None
                      ) -> TopicConfigs:
        return self.all_topic_configs(topics)

    def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
        return {t: {"retention.ms": ("86400000", False), "retention.bytes": ("-1", True),
                    "cleanup.policy": ("delete", True)} for t in topics}

    def broker_configs(self, brokers: Iterable[int]) -> dict[int, dict[str, tuple[str | None, bool]]]:
        return {b: {} for b in brokers}

    def partition_sizes(self, topics: Iterable[str],
                        leaders: Mapping[TopicPartition, int] | None = None) -> PartitionSizes:
        return PartitionSizes({T0: 1000, T1: 600}, None)

    def read_quorum(self) -> QuorumInfo:
        self.calls.append("read_quorum")
        self.threads.add(threading.get_ident())
        if self.fail_quorum:
            raise KafkaOperationError("could not describe the KRaft quorum: NodeNotReadyError")
        return QUORUM

    def read_reassignments(self) -> tuple[Reassignment, ...]:
        self.calls.append("read_reassignments")
        return MOVING

    def cached_record_time(self, position: Position) -> RecordTime | None:
        self.threads.add(threading.get_ident())
        return None

    def cached_record_times(self, positions: Iterable[Position]) -> dict[Position, RecordTime]:
        self.threads.add(threading.get_ident())
        return {}

    def read_record_times(self, positions: Iterable[Position]
                          ) -> dict[Position, RecordTime | None]:
        self.calls.append("read_record_times")
        self.threads.add(threading.get_ident())
        return {pos: RECORD_AT_40 if pos == (T0, 40) else None for pos in positions}

    def close(self) -> None:
        self.closed += 1

    # offset resets
    def offsets_for_times(self, tps: Iterable[TopicPartition], ts_ms: int, md: ClusterMeta
                          ) -> dict[TopicPartition, int | None]:
        self.calls.append("offsets_for_times")
        return {tp: 40 if tp == T0 else None for tp in tps}

    # throughput/snapshot
    def require(self, operation: str, what: str | None = None) -> None:
        self.calls.append(f"require {operation}")

    def describe_groups(self, ids: Iterable[str]) -> dict[str, GroupDescription]:
        self.calls.append("describe_groups")
        member = Member("m-1", "c-1", "10.0.0.1", (T0, T1))
        return {g: GroupDescription(g, GroupState.STABLE, (member,), coordinator=1)
                for g in ids if g == "billing"}

    def unauthorised_groups(self) -> frozenset[str]:
        return frozenset()

    def remember_record_times(self, records: Mapping[Position, RecordTime]) -> None:
        self.remembered.update(records)

    def read_record_times_with_leaders(self, positions: Iterable[Position],
                                       leaders: Mapping[TopicPartition, int],
                                       brokers: Mapping[int, tuple[str, int]]
                                       ) -> dict[Position, RecordTime | None]:
        return self.read_record_times(positions)

    def log_end_suspects(self) -> frozenset[TopicPartition]:
        return frozenset(self.suspects)

    def add_log_end_suspects(self, tps: Iterable[TopicPartition]) -> None:
        self.suspects.update(tps)

    def record_read_denied(self) -> frozenset[str]:
        return frozenset()


def test_the_fake_is_a_cluster_reader() -> None:
    reader: ClusterReader = FakeReader()  # mypy checks the protocol here
    assert reader.bootstrap == "fake:9092"


def test_collect_lag_reads_only_through_the_reader() -> None:
    fake = FakeReader()
    report = collect_lag(None, ["billing"], reader=fake)
    assert fake.calls == ["metadata", "read_groups", "log_offsets"]
    assert report.cluster_id == "fake-cluster" and report.bootstrap == "fake:9092"
    assert report.round_trips == 7
    (g,) = report.groups
    rows = {p.tp: p for p in g.partitions}
    assert rows[T0].lag == 60 and rows[T0].committed == 40 and rows[T0].anomalies == ()
    # the unreadable commit is flagged, its lag unknown, the group UNKNOWN: never "OK"
    assert rows[T1].lag is None and rows[T1].committed is None
    assert Anomaly.COMMITTED_UNREADABLE in rows[T1].anomalies
    assert g.severity is Severity.UNKNOWN and report.severity is Severity.UNKNOWN
    assert report.commit_errors == {"billing": {T1: "TOPIC_AUTHORIZATION_FAILED"}}
    assert fake.closed == 0  # a reader handed in is the caller's to close


def _source(fake: FakeReader) -> KafkaSource:
    opts = ExporterOptions(lag_time=False, log_dirs=True, kafka_python=False)
    return KafkaSource(NOWHERE, opts, open_reader=lambda _admin, _kept: fake)


def test_exporter_cycle_reads_only_through_the_reader() -> None:
    fake = FakeReader()
    src = _source(fake)
    try:
        inputs, _now = src.collect()
    finally:
        src.close()
    assert inputs.cluster_id == "fake-cluster"
    (g,) = inputs.groups
    lags = {p.tp: p.lag for p in g.partitions}
    assert lags == {T0: 60, T1: None} and g.severity is Severity.UNKNOWN
    assert inputs.offsets[T1] == PartitionOffsets(T1, 0, 60)
    assert inputs.retention == {"orders": (86400000, -1)}
    assert inputs.sizes == {T0: 1000, T1: 600}
    assert all(f.ok for f in inputs.families.values()), inputs.families
    assert "group_ids_everywhere" in fake.calls
    assert fake.closed == 1  # one session for the whole cycle (its slow families inline)


def test_exporter_failed_listing_is_not_nothing_there() -> None:
    fake = FakeReader(fail_listing=True)
    src = _source(fake)
    try:
        inputs, _now = src.collect()
    finally:
        src.close()
    groups = inputs.families["groups"]
    assert not groups.ok and groups.kind is not None
    assert "COORDINATOR_NOT_AVAILABLE" in (groups.message or "")
    assert inputs.groups == [] and "read_groups" not in fake.calls
    # the partitions' offsets are still read (their own family), through the reader
    assert inputs.offsets[T0] == PartitionOffsets(T0, 0, 100) and inputs.families["offsets"].ok


def test_kafka_admin_is_never_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Were any read to bypass the port, it would reach the admin: make that loud."""
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("read through the admin, not the reader port")
    for name in ("metadata", "list_groups", "describe_groups", "committed_offsets",
                 "log_offsets", "topic_configs", "broker_configs"):
        monkeypatch.setattr(KafkaAdmin, name, boom)
    test_collect_lag_reads_only_through_the_reader()
    test_exporter_cycle_reads_only_through_the_reader()


class Sessions:
    """open_reader for a KafkaSource: a fresh fake reader per session, all kept."""

    def __init__(self, **fake: bool) -> None:
        self.fake = fake
        self.opened: list[FakeReader] = []
        self.kept: list[KeptClients] = []

    def __call__(self, _admin: KafkaAdmin, kept: KeptClients) -> ClusterReader:
        r = FakeReader(**self.fake)
        self.opened.append(r)
        self.kept.append(kept)
        return r


@pytest.fixture
def no_kafka_but_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way around the port fails loudly: KafkaAdmin's reads, kafka-python's admin
    client, the record-time reader."""
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("Kafka read outside the reader port")
    for name in ("metadata", "list_groups", "describe_groups", "committed_offsets",
                 "log_offsets", "topic_configs", "broker_configs"):
        monkeypatch.setattr(KafkaAdmin, name, boom)
    monkeypatch.setattr(KafkaAdminClient, "__init__", boom)
    for name in ("__init__", "read", "cached"):
        monkeypatch.setattr(RecordTimeReader, name, boom)


def _every_family(sessions: Sessions) -> KafkaSource:
    opts = ExporterOptions(lag_time=True, log_dirs=True, kafka_python=True)
    return KafkaSource(NOWHERE, opts, open_reader=sessions)


def _family_up(inputs_families: Mapping[str, object], name: str) -> float:
    st = ExporterStatus(up=True, collections=1, served_snapshot_s=time.time(),
                        families=inputs_families,  # type: ignore[arg-type]
                        expected_families=tuple(inputs_families))
    (m,) = [m for m in self_families(st, time.time(), 0) if m.name == "opskit_exporter_family_up"]
    (v,) = [s.value for s in m.samples if s.labels["family"] == name]
    return float(v)


@pytest.mark.usefixtures("no_kafka_but_the_port")
def test_exporter_cycle_with_every_family_reads_only_through_the_reader() -> None:
    sessions = Sessions()
    src = _every_family(sessions)
    try:
        inputs, _now = src.collect()
    finally:
        src.close()
    fams = inputs.families
    for name in ("metadata", "groups", "offsets", "topic_configs", "broker_configs",
                 "log_dirs", "quorum", "reassignments", "record_times"):
        assert fams[name].ok, (name, fams[name])
        assert _family_up(fams, name) == 1
    # the values served are the fake's
    assert inputs.extras.quorum == QUORUM and inputs.extras.quorum_error is None
    assert inputs.extras.reassignments == MOVING and inputs.extras.reassignments_error is None
    assert inputs.record_ts == {(T0, 40): RECORD_AT_40.timestamp_ms}
    assert inputs.sizes == {T0: 1000, T1: 600}
    # one session for the cycle (--once: the slow families inline), closed
    (r,) = sessions.opened
    assert r.closed == 1
    assert {"metadata", "group_ids_everywhere", "read_groups", "log_offsets", "read_quorum",
            "read_reassignments", "read_record_times"} <= set(r.calls)


@pytest.mark.usefixtures("no_kafka_but_the_port")
def test_a_failed_quorum_read_is_a_failed_family_not_an_empty_quorum() -> None:
    sessions = Sessions(fail_quorum=True)
    src = _every_family(sessions)
    try:
        inputs, _now = src.collect()
    finally:
        src.close()
    q = inputs.families["quorum"]
    assert not q.ok and q.kind == "kafka" and q.data_at_s is None
    assert "NodeNotReadyError" in (q.message or "")
    assert _family_up(inputs.families, "quorum") == 0
    assert inputs.extras.quorum is None
    assert "NodeNotReadyError" in (inputs.extras.quorum_error or "")
    # the other kafka-python family is its own
    assert inputs.families["reassignments"].ok and inputs.extras.reassignments == MOVING


@pytest.mark.usefixtures("no_kafka_but_the_port")
def test_one_session_per_cycle_and_per_slow_round_each_on_one_thread() -> None:
    sessions = Sessions()
    src = _every_family(sessions)
    try:
        src.start_background()
        for _ in range(2):
            src.collect()
        deadline = time.monotonic() + 60
        while not any("read_quorum" in r.calls for r in sessions.opened):
            assert time.monotonic() < deadline, "no slow-family round ran"
            time.sleep(0.05)
    finally:
        src.close()
    cycles = [r for r in sessions.opened if "metadata" in r.calls]
    rounds = [r for r in sessions.opened if "read_quorum" in r.calls]
    assert len(cycles) == 2 and rounds and not set(map(id, cycles)) & set(map(id, rounds))
    # a fresh session each cycle and each round, closed, used by one thread only
    assert all(r.closed == 1 and len(r.threads) == 1 for r in sessions.opened)
    assert {t for r in cycles for t in r.threads} != {t for r in rounds for t in r.threads}
    # the clients kept between sessions are the source's, the same for every session
    assert len({id(k) for k in sessions.kept}) == 1


def test_a_session_that_failed_does_not_poison_the_next_cycle() -> None:
    class Broken(FakeReader):
        def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
            raise KafkaOperationError("connection to broker 1 closed")

    opened: list[FakeReader] = []

    def open_reader(_admin: KafkaAdmin, _kept: KeptClients) -> ClusterReader:
        opened.append(Broken() if not opened else FakeReader())
        return opened[-1]

    opts = ExporterOptions(lag_time=False, log_dirs=False, kafka_python=False)
    src = KafkaSource(NOWHERE, opts, open_reader=open_reader)
    try:
        first, _ = src.collect()
        second, _ = src.collect()
    finally:
        src.close()
    assert not first.families["groups"].ok
    assert second.families["groups"].ok and second.families["offsets"].ok
    assert second.offsets[T0] == PartitionOffsets(T0, 0, 100)
    assert [r.closed for r in opened] == [1, 1]


def test_health_reads_metadata_and_configs_through_the_reader(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opskit.adapters.health.cluster import gather_health_input

    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("read through the admin, not the reader port")
    for name in ("metadata", "topic_configs"):
        monkeypatch.setattr(KafkaAdmin, name, boom)

    class WithMinIsr(FakeReader):
        def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
            return {t: {"min.insync.replicas": ("2", False)} for t in topics}

    fake = WithMinIsr()
    inp = gather_health_input(KafkaAdmin(NOWHERE), expected_brokers=1, kafka_python=False,
                              reader=fake)
    assert inp.brokers == (1,) and inp.controller_id == 1
    assert [(p.topic, p.partition) for p in inp.partitions] == [("orders", 0), ("orders", 1)]
    assert inp.min_isr == {"orders": 2} and inp.min_isr_unknown is None
    assert inp.quorum_error == "not asked"  # kafka-python off: not read
    assert fake.closed == 0  # a reader handed in is the caller's to close


def test_health_refused_configs_are_unknown_not_min_isr_one() -> None:
    from opskit.adapters.health.cluster import gather_health_input
    from opskit.errors import NotAuthorisedError

    class Refused(FakeReader):
        def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
            raise NotAuthorisedError("DescribeConfigs denied")

    inp = gather_health_input(KafkaAdmin(NOWHERE), kafka_python=False, reader=Refused())
    assert inp.min_isr == {}
    assert inp.min_isr_unknown == ("min.insync.replicas not readable: User:monitor has no "
                                   "DescribeConfigs ACL on the topics")
