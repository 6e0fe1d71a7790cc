"""Metadata, ListGroups and DescribeConfigs at the protocol level equal librdkafka's answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing, contextmanager

import pytest

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.protocol import cluster as cluster_wire
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.client import WireUnsupported
from opskit.adapters.kafka.reader import ClusterReader, KeptClients, open_reader
from opskit.adapters.kafka.record_times import RecordTimeReader
from opskit.adapters.lag.source import collect_lag
from opskit.adapters.lag.timed.report import RETENTION_KEYS
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from tests.helpers import commit_retrying, create_topic, produce

#: the record reader's time budget: it covers a fresh librdkafka consumer's connect,
#: metadata and first fetch, which took over 10 s on a loaded CI machine (2026-11-27)
READ_TIMEOUT = 60


class _Serving(KeptClients):
    """Kept clients whose record-time reader is the test's (``READ_TIMEOUT``): lag in time
    reads the records through the session, with this reader."""

    def __init__(self, reader: RecordTimeReader) -> None:
        super().__init__(reader.conn, READ_TIMEOUT)
        self.reader = reader

    def record_times(self) -> RecordTimeReader:
        return self.reader


@contextmanager
def _session(admin: KafkaAdmin, reader: RecordTimeReader) -> Iterator[ClusterReader]:
    """A read session opened as ``opskit lag`` opens one: on kept clients that outlive
    it (their record-time reader the test's), closed when the read is done."""
    with closing(open_reader(admin, _Serving(reader))) as r:
        yield r


def test_cluster_metadata_and_groups_equal_librdkafkas(kafka3, uniq) -> None:  # type: ignore[no-untyped-def]
    """On 3 brokers: every topic's leaders, replicas and ISR, and the groups of every
    coordinator (ListGroups goes to each broker)."""
    bs = kafka3.bootstrap
    t = f"cw_{uniq}"
    create_topic(bs, t, 6, rf=3)
    groups = [f"cw-g{i}-{uniq}" for i in range(12)]  # spread over the coordinators
    for g in groups:
        commit_retrying(bs, g, {(t, 0): 0})
    admin = kafka3.admin()
    want = admin.metadata()
    want_groups = admin.list_groups()
    with offsets_wire.bootstrap_client(admin.conn, 15) as client:
        got = cluster_wire.read_cluster(client)
        got_groups = cluster_wire.list_groups(client, [b.node_id for b in got.brokers])
    assert got.cluster_id == want.cluster_id and got.cluster_id
    # KRaft brokers answer Metadata with a random live broker as "controller": not comparable
    assert got.controller_id in {b.node_id for b in want.brokers}
    assert got.brokers == want.brokers and len(got.brokers) == 3
    assert got.topics == want.topics
    assert [(p.leader, sorted(p.replicas), sorted(p.isr)) for p in got.topics[t]] == \
        [(p.leader, sorted(p.replicas), sorted(p.isr)) for p in want.topics[t]]
    assert all(len(p.replicas) == 3 for p in got.topics[t])
    assert set(groups) <= set(got_groups)
    assert got_groups == want_groups
    coordinators = {d.coordinator for d in admin.describe_groups(groups).values()}
    assert len(coordinators) > 1  # the groups really came from more than one broker


def test_topic_configs_equal_librdkafkas(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t1, t2 = f"cw_ret_{uniq}", f"cw_cmp_{uniq}"
    create_topic(bs, t1, 1, config={"retention.ms": "3600000", "retention.bytes": "1048576"})
    create_topic(bs, t2, 1, config={"cleanup.policy": "compact"})
    admin = any_kafka.admin()
    want = admin.topic_configs([t1, t2])
    reader = open_reader(admin)
    try:
        got = reader.topic_configs([t1, t2], list(RETENTION_KEYS))
    finally:
        reader.close()
    for t in (t1, t2):
        assert got[t] == {k: want[t][k] for k in RETENTION_KEYS}
    assert got[t1]["retention.ms"] == ("3600000", False)
    assert got[t2]["cleanup.policy"] == ("compact", False)
    assert got[t2]["retention.ms"][1] is True  # the broker default
    with offsets_wire.bootstrap_client(admin.conn, 15) as client, pytest.raises(WireUnsupported):
        cluster_wire.topic_configs(client, [f"cw_missing_{uniq}"])


def test_lag_report_without_librdkafka_equals_with_it(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    """The all-groups lag report read over the protocol-level path (metadata and group list
    included) equals the one read with librdkafka's metadata, and librdkafka is never started."""
    bs = any_kafka.bootstrap
    t = f"cw_lag_{uniq}"
    create_topic(bs, t, 3)
    produce(bs, t, {0: 5, 1: 7, 2: 0})
    g = f"cw-lag-{uniq}"
    commit_retrying(bs, g, {(t, 0): 2, (t, 1): 7})
    admin = any_kafka.admin()
    fresh = type(admin)(admin.conn, timeout=15)
    ours = collect_lag(fresh, None)
    assert fresh._client is None  # served entirely at the protocol level
    theirs = collect_lag(admin, None, meta=admin.metadata())
    a = {x.group_id: x for x in ours.groups}
    b = {x.group_id: x for x in theirs.groups}
    assert a[g].partitions == b[g].partitions
    assert [(p.committed, p.log_start, p.log_end, p.lag) for p in a[g].partitions] == \
        [(2, 0, 5, 3), (7, 0, 7, 0), (None, 0, 0, None)]
    assert set(a) == set(b)


def test_sasl_connection_is_left_to_librdkafka() -> None:
    conn = ConnectionConfig(bootstrap="127.0.0.1:1", security_protocol="SASL_PLAINTEXT")
    with pytest.raises(WireUnsupported):
        offsets_wire.bootstrap_client(conn, 1)


@pytest.fixture
def own_kafka():  # type: ignore[no-untyped-def]
    """A broker of this test's own. On the session's shared broker, late in a full run,
    136 of 334 positions once came back unanswered from the split Fetch (they fall back to
    librdkafka, so lag in time stays right, but the one-round claim fails). Suspected, not
    proven: partitions of the new topic answered a passing error (not yet leader) and were
    given up at once; such errors are now asked again (offsets_wire.RETRIABLE_FETCH_ERRORS).
    Alone, or on a fresh broker, it holds."""
    from conftest import _start

    yield from _start("cws", 1, "3.7")


def test_record_times_split_over_connections(own_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    """A leader's Fetch over many partitions goes out as LANES requests on as many
    connections, and every partition's record time still comes back, equal to what
    was produced."""
    kafka = own_kafka
    bs = kafka.bootstrap
    t = f"cw_split_{uniq}"
    n = offsets_wire.SPLIT_FROM + 50
    create_topic(bs, t, n)
    # idempotent: a retried produce under load would add a duplicate and shift offset 2
    produce(bs, t, {p: 2 for p in range(n)}, timestamp_ms=1_700_000_000_000, idempotent=True)
    produce(bs, t, {p: 1 for p in range(n)}, timestamp_ms=1_700_000_100_000, idempotent=True)
    admin = kafka.admin()
    md = admin.metadata()
    leaders = {TopicPartition(t, p.partition): p.leader for p in md.topics[t]}
    positions = [(TopicPartition(t, p), 0) for p in range(n)] + \
        [(TopicPartition(t, p), 2) for p in range(0, n, 3)]
    with offsets_wire.bootstrap_client(admin.conn, 15) as client:
        client.learn((b.node_id, b.host, b.port) for b in md.brokers)
        found, rest = offsets_wire.record_times(client, positions, leaders)
        fetches = client.round_trips
        lanes = {lane for _node, lane in client._conns}
    assert rest == [], rest[:5]
    assert fetches == offsets_wire.LANES, fetches  # one round, split in LANES requests
    assert lanes == set(range(offsets_wire.LANES))
    for tp, off in positions:
        want_ts = 1_700_000_000_000 if off == 0 else 1_700_000_100_000
        assert found[(tp, off)][:2] == (off, want_ts), (tp, off)


def test_split_keeps_every_partition_once() -> None:
    topics = {"a": list(range(150)), "b": list(range(120))}
    parts = offsets_wire._split(topics, 4)
    assert len(parts) == 4
    flat = sorted((t, p) for chunk in parts for t, ps in chunk.items() for p in ps)
    assert flat == sorted((t, p) for t, ps in topics.items() for p in ps)
    assert offsets_wire._split({"a": [0, 1]}, 4) == [{"a": [0, 1]}]


def test_lag_time_reads_are_prefetched(kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    """With lag in time, the records at the committed offsets and the retention configs
    are fetched while the lag is computed: the reader sends nothing of its own, except
    for a partition whose committed record was deleted (read at the log start
    afterwards). The times equal a plain read."""
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient

    from opskit.adapters.lag.timed.collect import collect_timed_lag

    bs = kafka.bootstrap
    t = f"cw_ride_{uniq}"
    create_topic(bs, t, 3, config={"retention.ms": "86400000"})
    old = int(time.time() * 1000) - 60_000  # within retention
    produce(bs, t, {0: 4, 1: 3, 2: 20}, timestamp_ms=old)
    produce(bs, t, {0: 4, 1: 3, 2: 20}, timestamp_ms=old + 50_000)
    g = f"cw-ride-{uniq}"
    commit_retrying(bs, g, {(t, 0): 5, (t, 1): 6, (t, 2): 3})
    deleter = AdminClient({"bootstrap.servers": bs})  # kept referenced until the futures end
    for f in deleter.delete_records([CkTP(t, 2, 30)]).values():
        f.result(30)
    admin = kafka.admin()
    with RecordTimeReader(admin.conn, timeout=READ_TIMEOUT) as reader, \
            _session(admin, reader) as r:
        timed = collect_timed_lag(admin, True, [g], cluster=r)
        assert reader._wire is not None  # the deleted record's partition needed a read
        assert reader._consumer is None
    with RecordTimeReader(admin.conn, timeout=READ_TIMEOUT) as plain:
        want = plain.read([(TopicPartition(t, 0), 5), (TopicPartition(t, 2), 30)])
    (gl,) = timed.groups
    p0, p1, p2 = (timed.partition_time(g, p.tp) for p in gl.partitions)
    assert p0 is not None and p1 is not None and p2 is not None
    assert p0.lag_time.record_timestamp_ms == want[(TopicPartition(t, 0), 5)].timestamp_ms \
        == old + 50_000
    assert p1.lag_time.basis.value == "no_lag"
    assert p2.lag_time.record_timestamp_ms == want[(TopicPartition(t, 2), 30)].timestamp_ms \
        == old + 50_000  # the log start's record: retention deleted the committed one
    assert p0.retention is not None and p0.retention.basis.value == "time"

    # nothing deleted: the reader opens no connection at all
    g2 = f"cw-ride2-{uniq}"
    commit_retrying(bs, g2, {(t, 0): 1, (t, 1): 6})
    with RecordTimeReader(admin.conn, timeout=READ_TIMEOUT) as reader, \
            _session(admin, reader) as r:
        timed = collect_timed_lag(admin, True, [g2], cluster=r)
        assert reader._wire is None and reader._consumer is None
        assert reader.reads == 1
    pt = timed.partition_time(g2, TopicPartition(t, 0))
    assert pt is not None and pt.lag_time.record_timestamp_ms == old


def test_lag_time_when_the_prefetch_fails(kafka, uniq, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A prefetch the broker cannot decode (it drops those connections) costs nothing
    but time: the lag is read as usual, the record times are read the slow way, and the
    report is the same."""
    from opskit.adapters.kafka.protocol import codec as kp
    from opskit.adapters.lag.timed.collect import collect_timed_lag

    bs = kafka.bootstrap
    t = f"cw_fail_{uniq}"
    create_topic(bs, t, 2)
    produce(bs, t, {0: 3, 1: 3}, timestamp_ms=1_700_000_000_000)
    g = f"cw-fail-{uniq}"
    commit_retrying(bs, g, {(t, 0): 1, (t, 1): 2})
    admin = kafka.admin()
    real = offsets_wire.fetch_calls
    broken_sent: list[int] = []

    def broken(*a, **k):  # type: ignore[no-untyped-def]
        calls, no_leader = real(*a, **k)
        broken_sent.append(len(calls))
        return [(node, kp.Request(req.api_key, req.version, b"\xff\xff", req.decode))
                for node, req in calls], no_leader

    monkeypatch.setattr(offsets_wire, "fetch_calls", broken)
    with RecordTimeReader(admin.conn, timeout=READ_TIMEOUT) as reader, \
            _session(admin, reader) as r:
        timed = collect_timed_lag(admin, True, [g], cluster=r)
        # sent (and broken) twice: the prefetch, then the reader's own fetch
        assert len(broken_sent) == 2 and broken_sent[0] >= 1
        # the reader's own fetch is broken the same way: it falls back to librdkafka
        assert reader._consumer is not None and reader.reads == 2
    (gl,) = timed.groups
    assert [(p.committed, p.log_end, p.lag) for p in gl.partitions] == [(1, 3, 2), (2, 3, 1)]
    for p in gl.partitions:
        pt = timed.partition_time(g, p.tp)
        assert pt is not None and pt.lag_time.record_timestamp_ms == 1_700_000_000_000


def test_lag_time_prefetch_on_three_brokers(kafka3, uniq) -> None:  # type: ignore[no-untyped-def]
    """Leaders spread over 3 brokers: the prefetch reaches every leader (the reader
    sends nothing of its own), and each partition's lag time is its committed record's."""
    from opskit.adapters.lag.timed.collect import collect_timed_lag

    bs = kafka3.bootstrap
    t = f"cw_ride3_{uniq}"
    create_topic(bs, t, 6, rf=3)
    base = int(time.time() * 1000) - 600_000
    for k in range(3):  # records 3k..3k+2 of every partition carry base + k minutes
        produce(bs, t, {p: 3 for p in range(6)}, timestamp_ms=base + k * 60_000)
    g = f"cw-ride3-{uniq}"
    commit_retrying(bs, g, {(t, p): p for p in range(6)})  # partition p committed at p
    admin = kafka3.admin()
    leaders = {p.leader for p in admin.metadata().topics[t]}
    assert len(leaders) > 1  # the test means something only with several leaders
    with RecordTimeReader(admin.conn, timeout=READ_TIMEOUT) as reader, \
            _session(admin, reader) as r:
        timed = collect_timed_lag(admin, True, [g], cluster=r)
        assert reader._wire is None and reader._consumer is None
        assert reader.reads == 6
    (gl,) = timed.groups
    for p in gl.partitions:
        assert (p.committed, p.log_end, p.lag) == (p.tp.partition, 9, 9 - p.tp.partition)
        pt = timed.partition_time(g, p.tp)
        assert pt is not None
        assert pt.lag_time.record_timestamp_ms == base + (p.tp.partition // 3) * 60_000


def test_partition_sizes_equal_kafka_pythons(kafka3, uniq, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """DescribeLogDirs at the protocol level, asked of every broker, gives the sizes
    kafka-python's describe_log_dirs gives: the leader's replica of each partition."""
    from opskit.adapters.kafka import log_dirs
    bs = kafka3.bootstrap
    t = f"cw_sizes_{uniq}"
    create_topic(bs, t, 4, rf=3, config={"retention.bytes": "10000000"})
    produce(bs, t, {0: 50, 1: 10, 2: 0, 3: 200})
    admin = kafka3.admin()
    leaders = {TopicPartition(t, p.partition): p.leader for p in admin.metadata().topics[t]}
    deadline = time.time() + 30
    while True:  # the followers catch up before the sizes of all replicas agree
        ours = log_dirs.read_partition_sizes(admin.conn, [t], leaders, timeout=10)
        monkeypatch.setattr(log_dirs, "usable", lambda _conn: False)  # kafka-python's path
        theirs = log_dirs.read_partition_sizes(admin.conn, [t], leaders, timeout=10)
        monkeypatch.undo()
        if ours == theirs or time.time() > deadline:
            break
        time.sleep(0.5)
    assert ours.unavailable is None and theirs.unavailable is None
    assert ours.sizes == theirs.sizes
    assert set(ours.sizes) == {TopicPartition(t, p) for p in range(4)}
    assert ours.sizes[TopicPartition(t, 2)] == 0
    assert ours.sizes[TopicPartition(t, 3)] > ours.sizes[TopicPartition(t, 0)] > \
        ours.sizes[TopicPartition(t, 1)] > 0
