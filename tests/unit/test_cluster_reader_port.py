"""collect_lag and the exporter's cycle read Kafka only through the reader port.

A fake reader (no sockets: the admin points at a closed port and is never used for a
read) serves a cluster; the numbers, the flags and the failures must be its."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pytest

from opskit.adapters.kafka_admin import (
    BrokerMeta,
    ClusterMeta,
    KafkaAdmin,
    OffsetsResult,
    PartitionMeta,
)
from opskit.adapters.lag_source import collect_lag
from opskit.adapters.log_dirs import PartitionSizes
from opskit.adapters.reader import ClusterReader, CommitsRead, GroupsRead, Prefetch, TopicConfigs
from opskit.core.connection import ConnectionConfig
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
from opskit.exporter.options import ExporterOptions

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
NOWHERE = ConnectionConfig(bootstrap="127.0.0.1:1")  # nothing listens: a read would fail


class FakeReader:
    """A cluster of one broker, topic ``orders`` (2 partitions), group ``billing``
    (a live member on both partitions): committed 40 on partition 0, partition 1's
    commit unreadable (the broker answered TOPIC_AUTHORIZATION_FAILED)."""

    def __init__(self, fail_listing: bool = False) -> None:
        self.fail_listing = fail_listing
        self.calls: list[str] = []
        self.closed = 0

    bootstrap = "fake:9092"
    principal = "User:monitor"
    timeout = 5.0
    round_trips = 7

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        self.calls.append("metadata")
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

    def close(self) -> None:
        self.closed += 1


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
    return KafkaSource(NOWHERE, opts, open_reader=lambda _admin: fake)


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
    assert "group_ids_everywhere" in fake.calls and fake.closed >= 3


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
