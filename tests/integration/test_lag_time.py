"""`opskit lag` in time against a real broker: record timestamps, retention, lost records."""

from __future__ import annotations

import time

from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient

from opskit.adapters.kafka.record_times import RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from tests.helpers import commit, create_topic, produce, run_cli


def _timed_cli(*args: str):  # type: ignore[no-untyped-def]
    before = time.time() * 1000
    r = run_cli(*args)
    after = time.time() * 1000
    return r, before, after


def test_lag_seconds_is_age_of_record_at_committed_offset(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"aged_{uniq}", f"aged-{uniq}"
    create_topic(bs, t, 3)
    now = int(time.time() * 1000)
    old, newer = now - 120_000, now - 30_000
    produce(bs, t, {0: 10, 1: 5}, timestamp_ms=old)
    produce(bs, t, {0: 10, 1: 5}, timestamp_ms=newer)
    produce(bs, t, {2: 4})  # no commit on partition 2 at the head
    # p0 at the first "newer" record, p1 at an "old" one, p2 at the head
    commit(bs, g, {(t, 0): 10, (t, 1): 2, (t, 2): 4})
    r, before, after = _timed_cli("lag", "-g", g, "-b", bs, "-o", "json")
    assert r.code == 0, r.err
    grp = r.json()["groups"][0]
    parts = {p["partition"]: p for p in grp["partitions"]}
    truth0 = ((before - newer) / 1000, (after - newer) / 1000)
    truth1 = ((before - old) / 1000, (after - old) / 1000)
    assert truth0[0] - 1 <= parts[0]["lag_seconds"] <= truth0[1] + 1
    assert truth1[0] - 1 <= parts[1]["lag_seconds"] <= truth1[1] + 1
    assert parts[0]["lag_time_basis"] == "committed_record"
    assert parts[0]["lag_time_confidence"] == "exact"
    assert parts[0]["oldest_unconsumed_timestamp_ms"] == newer
    assert parts[2]["lag_seconds"] is None and parts[2]["lag_time_basis"] == "no_lag"
    assert grp["max_lag_seconds"] == parts[1]["lag_seconds"]
    # default retention (7 days) leaves about 7 days minus the record's age
    left = parts[1]["retention_time_left_seconds"]
    assert abs(left - (7 * 86400 - parts[1]["lag_seconds"])) < 2
    # existing fields unchanged
    assert parts[0]["lag"] == 10 and parts[1]["lag"] == 8 and parts[0]["records_lost"] == 0
    print(f"lag_seconds error p0={parts[0]['lag_seconds'] - (before + after) / 2000 + newer / 1000:+.3f}s "
          f"p1={parts[1]['lag_seconds'] - (before + after) / 2000 + old / 1000:+.3f}s "
          f"(call took {(after - before) / 1000:.3f}s)")

    table = run_cli("lag", "-g", g, "-b", bs)
    assert "LAG-TIME" in table.out and "RETENTION-LEFT" in table.out
    assert "2m0" in table.out or "2m1" in table.out  # ~2 minutes on partition 1

    no_time = run_cli("lag", "-g", g, "-b", bs, "-o", "json", "--no-time")
    p = no_time.json()["groups"][0]["partitions"][0]
    assert p["lag_seconds"] is None and p["lag"] == 10
    assert "LAG-TIME" not in run_cli("lag", "-g", g, "-b", bs, "--no-time").out


def test_short_retention_shows_headroom(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"shortret_{uniq}", f"shortret-{uniq}"
    create_topic(bs, t, 1, config={"retention.ms": str(3_600_000)})
    ts = int(time.time() * 1000) - 600_000  # 10 minutes old
    produce(bs, t, {0: 20}, timestamp_ms=ts)
    commit(bs, g, {(t, 0): 5})
    r = run_cli("lag", "-g", g, "-b", bs, "-o", "json")
    p = r.json()["groups"][0]["partitions"][0]
    assert p["retention_basis"] == "time"
    assert 3000 - 3 <= p["retention_time_left_seconds"] <= 3000 + 1  # 60m - 10m
    assert p["retention_eligible_now"] is False
    # a record older than retention.ms: eligible for deletion now, 0 left
    t2 = f"expired_{uniq}"
    create_topic(bs, t2, 1, config={"retention.ms": str(3_600_000)})
    produce(bs, t2, {0: 5}, timestamp_ms=int(time.time() * 1000) - 2 * 3_600_000)
    commit(bs, g + "-x", {(t2, 0): 0})
    r = run_cli("lag", "-g", g + "-x", "-b", bs, "-o", "json")
    p = r.json()["groups"][0]["partitions"][0]
    if p["log_start_offset"] == 0:  # not yet deleted by the log cleaner
        assert p["retention_time_left_seconds"] == 0 and p["retention_eligible_now"] is True


def test_deleted_records_give_lower_bound(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"lost_{uniq}", f"lost-{uniq}"
    create_topic(bs, t, 1)
    now = int(time.time() * 1000)
    produce(bs, t, {0: 60}, timestamp_ms=now - 300_000)
    produce(bs, t, {0: 40}, timestamp_ms=now - 60_000)
    commit(bs, g, {(t, 0): 10})
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_records([CkTP(t, 0, 70)]).values():
        f.result(30)
    r, before, after = _timed_cli("lag", "-g", g, "-b", bs, "-o", "json")
    p = r.json()["groups"][0]["partitions"][0]
    assert p["records_lost"] == 60 and p["log_start_offset"] == 70
    assert p["lag_time_basis"] == "log_start_record"
    assert p["lag_time_confidence"] == "lower_bound"
    assert (before - (now - 60_000)) / 1000 - 1 <= p["lag_seconds"] <= (after - (now - 60_000)) / 1000 + 1
    table = run_cli("lag", "-g", g, "-b", bs)
    assert ">=1m0" in table.out and "60 records lost" in table.out


def test_reader_cache_and_offset_gaps(kafka, uniq):
    bs = kafka.bootstrap
    t = f"gaps_{uniq}"
    create_topic(bs, t, 2)
    now = int(time.time() * 1000)
    produce(bs, t, {0: 5, 1: 5}, timestamp_ms=now - 10_000)
    produce(bs, t, {0: 5}, timestamp_ms=now - 5_000)
    # transactional records leave a marker at an offset that holds no record
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{uniq}"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(t, b"tx", partition=1, timestamp=now - 3_000)
    p.commit_transaction(30)
    # the coordinator writes the commit marker after answering: wait for it (offset 6)
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bs, "group.id": f"wm-{uniq}"})
    deadline = time.time() + 30
    while c.get_watermark_offsets(CkTP(t, 1), timeout=10)[1] < 7 and time.time() < deadline:
        time.sleep(0.1)
    c.close()
    produce(bs, t, {1: 1}, timestamp_ms=now - 1_000)  # offset 7 (6 is the marker)
    tp0, tp1 = TopicPartition(t, 0), TopicPartition(t, 1)
    with RecordTimeReader(ConnectionConfig(bs), timeout=5) as reader:
        got = reader.read([(tp0, 0), (tp0, 5), (tp1, 6), (tp1, 5), (tp1, 8)])
        assert got[(tp0, 0)].timestamp_ms == now - 10_000
        assert got[(tp0, 5)].timestamp_ms == now - 5_000
        assert got[(tp1, 5)].timestamp_ms == now - 3_000
        # the marker at 6 is skipped: the first record after it is at 7
        assert got[(tp1, 6)].offset == 7 and got[(tp1, 6)].timestamp_ms == now - 1_000
        assert got[(tp1, 8)] is None  # at the log end: nothing to read, not cached
        reads = reader.reads
        again = reader.read([(tp0, 0), (tp0, 5), (tp1, 6)])
        assert reader.reads == reads  # all from the cache
        assert again[(tp1, 6)].offset == 7


def test_reader_reads_many_partitions_at_once(kafka, uniq):
    """Regression: every partition answers in one bounded read (no starved partitions)."""
    bs = kafka.bootstrap
    t = f"wide_{uniq}"
    create_topic(bs, t, 40)
    ts = int(time.time() * 1000) - 50_000
    produce(bs, t, {p: 20 for p in range(40)}, timestamp_ms=ts)
    with RecordTimeReader(ConnectionConfig(bs), timeout=5) as reader:
        start = time.monotonic()
        got = reader.read([(TopicPartition(t, p), 7) for p in range(40)])
        took = time.monotonic() - start
    assert all(v is not None and v.offset == 7 and v.timestamp_ms == ts for v in got.values())
    assert reader.reads == 40 and took < 3
