"""Batched ListOffsets and Fetch-based record timestamps against a real broker.

Each answer of the protocol-level path is checked against librdkafka's answer
(log offsets) or against the timestamps the records were produced with.
"""

from __future__ import annotations

import time

from confluent_kafka import Producer

from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.record_times import RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from tests.helpers import create_topic, produce


def _client(c):  # type: ignore[no-untyped-def]
    client = offsets_wire.bootstrap_client(ConnectionConfig(c.bootstrap), 10)
    return client


def test_log_offsets_equal_librdkafka(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    t = f"ow_lo_{uniq}"
    create_topic(any_kafka.bootstrap, t, 6)
    produce(any_kafka.bootstrap, t, {0: 3, 1: 0, 2: 7, 3: 1, 4: 12, 5: 2})
    admin = any_kafka.admin()
    tps = [TopicPartition(t, p) for p in range(6)]
    want = admin.log_offsets(tps).offsets
    with _client(any_kafka) as client:
        lead = offsets_wire.leaders(client, [t])
        got, rest = offsets_wire.log_offsets(client, tps, lead)
        trips = client.round_trips
    assert rest == [] and got == want
    assert [got[TopicPartition(t, p)].log_end for p in range(6)] == [3, 0, 7, 1, 12, 2]
    assert trips == 3  # Metadata, ListOffsets earliest + latest (versions: the cached probe)


def test_record_times_are_the_produced_timestamps(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t = f"ow_rt_{uniq}"
    create_topic(bs, t, 3)
    base = int(time.time() * 1000) - 3_600_000
    p = Producer({"bootstrap.servers": bs, "linger.ms": 50})
    for i in range(20):  # partition 0: 20 records, 1 s apart; batched together by linger
        p.produce(t, value=b"v", partition=0, timestamp=base + i * 1000)
    p.produce(t, value=b"v", partition=1, timestamp=base + 42)
    p.flush(30)
    positions = [(TopicPartition(t, 0), o) for o in (0, 5, 19, 20)] + \
        [(TopicPartition(t, 1), 0), (TopicPartition(t, 2), 0)]
    with _client(any_kafka) as client:
        lead = offsets_wire.leaders(client, [t])
        found, rest = offsets_wire.record_times(client, positions, lead)
    assert rest == []
    assert found[(TopicPartition(t, 0), 0)] == (0, base, "create")
    assert found[(TopicPartition(t, 0), 5)] == (5, base + 5000, "create")
    assert found[(TopicPartition(t, 0), 19)] == (19, base + 19000, "create")
    assert found[(TopicPartition(t, 1), 0)] == (0, base + 42, "create")
    # at the log end, and an empty partition: no record, and nothing to retry
    assert (TopicPartition(t, 0), 20) not in found and (TopicPartition(t, 2), 0) not in found


def test_transaction_markers_are_skipped(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t = f"ow_tx_{uniq}"
    create_topic(bs, t, 1)
    base = int(time.time() * 1000) - 60_000
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"ow-{uniq}"})
    p.init_transactions(30)
    for k in range(2):
        p.begin_transaction()
        p.produce(t, value=b"v", partition=0, timestamp=base + k * 100)
        p.commit_transaction(30)
    # offsets: 0 record, 1 marker, 2 record, 3 marker; asking at 1 gives the record at 2
    tp = TopicPartition(t, 0)
    with _client(any_kafka) as client:
        lead = offsets_wire.leaders(client, [t])
        found, _rest = offsets_wire.record_times(client, [(tp, 0), (tp, 1), (tp, 3)], lead)
    assert found[(tp, 0)] == (0, base, "create")
    assert found[(tp, 1)] == (2, base + 100, "create")
    assert (tp, 3) not in found  # only a marker there: left for the slow path to confirm
    reader = RecordTimeReader(ConnectionConfig(bs), timeout=5)
    try:
        got = reader.read([(tp, 1), (tp, 3)])
    finally:
        reader.close()
    assert got[(tp, 1)] is not None and got[(tp, 1)].offset == 2
    assert got[(tp, 3)] is None


def test_compressed_batches_fall_back_to_the_consumer(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t = f"ow_lz4_{uniq}"
    create_topic(bs, t, 1)
    base = int(time.time() * 1000) - 120_000
    p = Producer({"bootstrap.servers": bs, "compression.type": "lz4", "linger.ms": 50})
    for i in range(10):  # HIP-30 producers use lz4
        p.produce(t, value=b"payload" * 20, partition=0, timestamp=base + i * 10)
    p.flush(30)
    tp = TopicPartition(t, 0)
    reader = RecordTimeReader(ConnectionConfig(bs), timeout=5)
    try:
        got = reader.read([(tp, 0), (tp, 7)])
    finally:
        reader.close()
    assert got[(tp, 0)] is not None and (got[(tp, 0)].offset, got[(tp, 0)].timestamp_ms) == (0, base)
    assert got[(tp, 7)] is not None and (got[(tp, 7)].offset, got[(tp, 7)].timestamp_ms) == (7, base + 70)
