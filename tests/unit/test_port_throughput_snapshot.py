"""throughput, snapshot and the timed lag read (lag --time) read Kafka only through the
reader port.

A fake reader (tests/unit/test_cluster_reader_port.py's cluster: topic ``orders``,
group ``billing``) serves the reads; every way around the port (KafkaAdmin's client
and its ApiVersions probe, kafka-python, the record-time reader, any Python socket)
fails loudly. The numbers, the notes and the exit codes must be the fake's."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Mapping, Sequence

import pytest
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin, OffsetsResult
from opskit.adapters.kafka.log_dirs import PartitionSizes
from opskit.adapters.kafka.reader import ClusterReader, CommitsRead
from opskit.adapters.kafka.record_times import Position, RecordTime, RecordTimeReader
from opskit.adapters.lag.timed.collect import _uncached, collect_timed_lag
from opskit.cli import exits, snapshot, throughput
from opskit.core.log_end import LogEndSource, LogEndVerdict
from opskit.core.models import LagThresholds, PartitionOffsets, TopicPartition
from opskit.errors import InconsistentStateError, UnsupportedError
from tests.helpers import run_cli
from tests.unit.test_cluster_reader_port import RECORD_AT_40, T0, T1, FakeReader

NOW_MS = RECORD_AT_40.timestamp_ms + 90_000  # the record at billing's commit is 90 s old


@pytest.fixture(autouse=True)
def no_kafka_but_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("Kafka read outside the reader port")
    for name in ("metadata", "list_groups", "describe_groups", "committed_offsets",
                 "log_offsets", "topic_configs", "broker_configs", "require", "unavailable"):
        monkeypatch.setattr(KafkaAdmin, name, boom)
    # librdkafka's admin client and the ApiVersions probe: any other read of the admin
    monkeypatch.setattr(KafkaAdmin, "_admin", property(boom))
    monkeypatch.setattr(KafkaAdmin, "capabilities", property(boom))
    monkeypatch.setattr(KafkaAdminClient, "__init__", boom)
    for name in ("__init__", "read", "cached", "remember", "uncached_offsets"):
        monkeypatch.setattr(RecordTimeReader, name, boom)
    # opskit's own protocol client, DescribeLogDirs, the log-end cross-check: sockets
    monkeypatch.setattr(socket, "create_connection", boom)
    monkeypatch.setattr(socket.socket, "connect", boom)
    monkeypatch.setattr(throughput, "_sleep", lambda _s: None)


class Cluster(FakeReader):
    """The fake cluster read twice by ``throughput`` (each log_offsets call is a reading:
    orders-0 100 -> 130, orders-1 60 -> 70, 1000 -> 1300 and 600 -> 700 bytes; billing
    commits 40 -> 50 on orders-0), with group ``secret`` the principal may not read."""

    def __init__(self, *, unread: bool = False, contradicted: bool = False,
                 no_listing: bool = False, no_sizes: bool = False,
                 no_group_listing: bool = False) -> None:
        super().__init__()
        self.unread = unread
        self.contradicted = contradicted
        self.no_listing = no_listing
        self.no_sizes = no_sizes
        self.no_group_listing = no_group_listing
        self.readings = 0
        self.protocol_first: list[bool] = []
        self.checked: list[list[TopicPartition]] = []
        self.remembered_calls = 0

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        self.protocol_first.append(protocol_first)
        return super().metadata(protocol_first)

    def group_ids(self, md: ClusterMeta) -> list[str]:
        self.calls.append("group_ids")
        if self.no_group_listing:
            raise UnsupportedError("the broker at fake:9092 does not support ListGroups "
                                   "(API key 16; not advertised), needed for listing consumer "
                                   "groups")
        return ["billing", "secret"]

    def committed_offsets(self, ids: Sequence[str], partitions: Sequence[TopicPartition]
                          ) -> CommitsRead:
        self.calls.append("committed_offsets")
        assert sorted(partitions) == [T0, T1]
        n = self.readings
        return CommitsRead({"billing": {T0: 40 + 10 * n}} if "billing" in ids else {},
                           {gid: {} for gid in ids}, frozenset({"secret"} & set(ids)))

    def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
        self.calls.append("log_offsets")
        ends = [{T0: 100, T1: 60}, {T0: 130, T1: 70}][self.readings]
        self.readings += 1
        res = OffsetsResult({tp: PartitionOffsets(tp, 0, ends[tp]) for tp in tps})
        if self.unread and self.readings == 2:
            del res.offsets[T1]
            res.errors[T1] = "NOT_LEADER_OR_FOLLOWER"
        return res

    def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                        suspects: Iterable[TopicPartition], md: ClusterMeta
                        ) -> dict[TopicPartition, LogEndVerdict]:
        self.calls.append("settle_log_ends")
        self.checked.append(sorted(suspects))
        if self.contradicted:
            return {T0: LogEndVerdict(None, LogEndSource.INCONSISTENT,
                                      "ListOffsets said 100, Fetch said 90")}
        return {}

    def partition_sizes(self, topics: Iterable[str],
                        leaders: Mapping[TopicPartition, int] | None = None) -> PartitionSizes:
        self.calls.append("partition_sizes")
        assert leaders == {T0: 1, T1: 1}
        if self.no_sizes:
            return PartitionSizes({}, "DescribeLogDirs not authorised")
        n = self.readings - 1
        return PartitionSizes({T0: 1000 + 300 * n, T1: 600 + 100 * n})

    def require(self, operation: str, what: str | None = None) -> None:
        super().require(operation, what)
        if self.no_listing:
            raise UnsupportedError(f"the broker at fake:9092 does not support ListGroups (API "
                                   f"key 16; not advertised), needed for {what}")

    def unauthorised_groups(self) -> frozenset[str]:
        return frozenset({"secret"})

    def remember_record_times(self, records: Mapping[Position, RecordTime]) -> None:
        self.remembered_calls += 1
        super().remember_record_times(records)

    def read_record_times_with_leaders(self, positions: Iterable[Position],
                                       leaders: Mapping[TopicPartition, int],
                                       brokers: Mapping[int, tuple[str, int]]
                                       ) -> dict[Position, RecordTime | None]:
        self.calls.append("read_record_times_with_leaders")
        assert leaders[T0] == 1 and brokers == {1: ("fake", 9092)}
        return self.read_record_times(positions)


def _serve(monkeypatch: pytest.MonkeyPatch, fake: ClusterReader) -> None:
    """The commands' sessions are ``fake``."""
    monkeypatch.setattr(throughput, "open_reader", lambda _admin: fake)
    monkeypatch.setattr(snapshot, "open_reader", lambda _admin: fake)


B = ("-b", "127.0.0.1:1")  # nothing listens there: a read around the port would fail


# ------------------------------------------------------------------------- throughput


def test_throughput_reads_through_the_port() -> None:
    fake = Cluster()
    got = throughput.read_throughput(fake, None, None, 0.1)
    assert fake.protocol_first == [False]  # librdkafka's view of the cluster, as before
    reading = ["committed_offsets", "log_offsets", "settle_log_ends", "partition_sizes"]
    assert fake.calls == ["metadata", "group_ids", *reading, *reading]
    assert fake.checked == [[T0, T1], [T0, T1]]  # every log end cross-checked
    (row,) = got.data["topics"]
    assert (row["topic"], row["partitions"], row["messages"], row["bytes"]) == \
        ("orders", 2, 30 + 10, 300 + 100)
    assert row["log_end_unread"] == 0 and row["bytes_note"] is None
    assert [(g["group"], g["topic"], g["messages"], g["rewound"]) for g in got.data["groups"]] \
        == [("billing", "orders", 10, False)]
    assert got.hidden == ["secret"] and got.groups_note is None
    assert fake.closed == 0  # the session is the caller's


def test_throughput_named_groups_and_topics_are_not_listed() -> None:
    fake = Cluster()
    got = throughput.read_throughput(fake, ["orders"], ["billing"], 0.1)
    assert "group_ids" not in fake.calls and got.hidden == []
    assert [g["group"] for g in got.data["groups"]] == ["billing"]


def test_throughput_cli_note_for_groups_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Cluster()
    _serve(monkeypatch, fake)
    r = run_cli("throughput", *B, "--interval", "0.1s", "-o", "json")
    assert r.code == exits.OK, r.err
    assert r.json()["topics"][0]["messages"] == 40
    assert ("note: left out 1 group(s) User:monitor may not describe (no Describe ACL): "
            "secret") in " ".join(r.err.split())
    assert fake.closed == 1


def test_throughput_cli_unread_log_end_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(monkeypatch, Cluster(unread=True))
    r = run_cli("throughput", *B, "--interval", "0.1s", "-o", "json")
    assert r.code == exits.UNKNOWN
    row = r.json()["topics"][0]
    assert row["messages"] is None and row["log_end_unread"] == 1
    assert ("throughput of 1 topic(s) unknown: log end not read on 1 partition(s), e.g. "
            "orders:1: NOT_LEADER_OR_FOLLOWER") in " ".join(r.err.split())


def test_throughput_cli_contradicted_log_end_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(monkeypatch, Cluster(contradicted=True))
    r = run_cli("throughput", *B, "--interval", "0.1s")
    assert r.code == exits.exit_code_for(InconsistentStateError("x"))
    assert "the broker's answers about the log end of orders:0 contradict each other " \
           "(ListOffsets said 100, Fetch said 90)" in " ".join(r.err.split())


def test_throughput_cli_group_listing_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    _serve(monkeypatch, Cluster(no_group_listing=True, no_sizes=True))
    r = run_cli("throughput", *B, "--interval", "0.1s", "-o", "json")
    assert r.code == exits.UNKNOWN
    data = r.json()
    assert data["groups"] == [] and data["groups_note"].startswith(
        "consumed rates unknown: the broker at fake:9092 does not support ListGroups")
    assert data["topics"][0]["messages"] == 40  # the topics still count
    assert data["topics"][0]["bytes_note"] == "DescribeLogDirs not authorised"


# ------------------------------------------------------------------------- snapshot


def _thresholds(_gid: str) -> LagThresholds:
    return LagThresholds()


def test_snapshot_reads_through_the_port() -> None:
    fake = Cluster()
    before = time.time()
    st = snapshot.read_state(fake, True, _thresholds)
    after = time.time()
    assert fake.protocol_first == [False, True]  # the document's view, then the lag read's
    assert fake.calls[:5] == ["metadata", "require list_groups", "metadata", "group_ids",
                              "read_groups"]
    assert {"read_record_times_with_leaders", "describe_groups"} <= set(fake.calls)
    assert st.md.cluster_id == "fake-cluster" and st.bootstrap == "fake:9092"
    assert st.groups_missing is None and set(st.descs) == {"billing"}
    (g,) = st.lag["groups"]
    rows = {(p["topic"], p["partition"]): p for p in g["partitions"]}
    assert rows[("orders", 0)]["lag"] == 60
    # the age of the fake's record at billing's commit
    age = rows[("orders", 0)]["lag_seconds"]
    assert before - RECORD_AT_40.timestamp_ms / 1000 - 1 <= age
    assert age <= after - RECORD_AT_40.timestamp_ms / 1000 + 1
    assert rows[("orders", 1)]["lag"] is None  # its commit unreadable: never 0
    assert st.lag["severity"] == "UNKNOWN"
    assert st.lag["notes"] == [("left out 1 group(s) User:monitor may not describe (no "
                                "Describe ACL): secret")]
    assert fake.remembered_calls == 1 and fake.closed == 0


def test_snapshot_without_time_reads_no_record() -> None:
    fake = Cluster()
    st = snapshot.read_state(fake, False, _thresholds)
    assert "read_record_times" not in fake.calls and fake.remembered_calls == 0
    (g,) = st.lag["groups"]
    assert g["partitions"][0]["lag"] == 60 and g["partitions"][0].get("lag_seconds") is None


def test_snapshot_cli_document_and_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Cluster()
    _serve(monkeypatch, fake)
    r = run_cli("snapshot", *B, "-o", "json")
    assert r.code == exits.UNKNOWN  # billing's orders-1 commit could not be read
    doc = r.json()
    assert doc["cluster"] == {"bootstrap": "fake:9092", "cluster_id": "fake-cluster",
                              "controller_id": 1,
                              "brokers": [{"id": 1, "host": "fake", "port": 9092}]}
    (g,) = doc["groups"]
    assert g["coordinator"] == 1 and g["members_detail"] == [
        {"member_id": "m-1", "client_id": "c-1", "host": "10.0.0.1",
         "assignment": ["orders:0", "orders:1"]}]
    err = " ".join(r.err.split())
    assert "note: left out 1 group(s) User:monitor may not describe (no Describe ACL): " \
           "secret" in err
    assert "snapshot written, lag severity UNKNOWN: 1 group(s) with lag unknown (billing)" in err
    assert fake.closed == 1


def test_snapshot_cli_broker_without_group_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Cluster(no_listing=True)
    _serve(monkeypatch, fake)
    r = run_cli("snapshot", *B, "-o", "json")
    assert r.code == exits.UNKNOWN
    doc = r.json()
    assert doc["groups"] == [] and doc["topics"][0]["topic"] == "orders"
    assert doc["groups_note"] == ("groups not included: the broker at fake:9092 does not "
                                  "support ListGroups (API key 16; not advertised), needed for "
                                  "listing consumer groups")
    assert "group_ids" not in fake.calls
    assert "snapshot without consumer groups: the broker at fake:9092" in " ".join(r.err.split())


# ------------------------------------------------------------------------- lag --time


def test_timed_lag_reads_records_through_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log-end suspects of earlier reads are cross-checked again, new ones kept; the
    records are read through the session; topics it was refused on are noted."""

    class Suspicious(Cluster):
        def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                            suspects: Iterable[TopicPartition], md: ClusterMeta
                            ) -> dict[TopicPartition, LogEndVerdict]:
            self.checked.append(sorted(suspects))
            return {T0: LogEndVerdict(100, LogEndSource.FETCH_HIGH_WATERMARK, "settled")}

        def record_read_denied(self) -> frozenset[str]:
            return frozenset({"orders", "elsewhere"})

    fake = Suspicious()
    fake.suspects = {T1}
    timed = collect_timed_lag(None, True, ["billing"], clock=lambda: NOW_MS / 1000,
                              cluster=fake)
    assert fake.checked == [[T1]]  # the earlier suspect, though its answers agree now
    assert fake.suspects == {T0, T1}
    assert "read_record_times_with_leaders" in fake.calls
    assert timed.lag_seconds("billing")[T0] == 90
    assert timed.read_denied == frozenset({"orders"})
    assert timed.notes[0].startswith("lag in time omitted for orders: User:monitor has no "
                                     "Read ACL on it")


def test_the_prefetch_skips_records_the_session_has() -> None:
    class Cached(FakeReader):
        def cached_record_time(self, position: Position) -> RecordTime | None:
            return RECORD_AT_40 if position == (T0, 40) else None

    assert _uncached(Cached(), {T0: [40, 45], T1: [7]}) == {T0: [45], T1: [7]}
    assert _uncached(Cached(), {T0: [40]}) == {}
