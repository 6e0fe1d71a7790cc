"""Shared by the replay integration tests: produce HIP-30 records (keeping each
record's partition, offset and key from the delivery reports), read offsets,
topics and Parquet back, and check a replay's output record by record."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP

from opskit.sandbox.load import make_event

T0 = 1_795_000_000.0  # fixed event time (2026-11-18), so hours and dates are known


def produce_events(bootstrap: str, topic: str, source: str, per_partition: int,
                   partitions: int, bad: dict[int, list[bytes]] | None = None,
                   by_key: bool = False, batch_records: int | None = None,
                   ) -> dict[tuple[int, int], tuple[str, dict[str, Any] | None]]:
    """Produce HIP-30 events (and raw bad values); {(partition, offset): (key, event)}.

    ``batch_records`` caps the records per producer batch (small batches make
    small fetches possible)."""
    rnd = random.Random(7)
    out: dict[tuple[int, int], tuple[str, dict[str, Any] | None]] = {}
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    if batch_records:
        conf["batch.num.messages"] = batch_records
    p = Producer(conf)

    def report(key: str, ev: dict[str, Any] | None):  # type: ignore[no-untyped-def]
        def cb(err, msg):  # type: ignore[no-untyped-def]
            assert err is None, err
            out[(msg.partition(), msg.offset())] = (key, ev)
        return cb

    for part in range(partitions):
        for i in range(per_partition):
            key, ev = make_event(source, rnd, T0 + i * 97.0)
            # by_key: partitioned by the HIP-30 key (one team per partition), as in production
            kw = {} if by_key else {"partition": part}
            p.produce(topic, key=key, value=json.dumps(ev), on_delivery=report(key, ev), **kw)
        for j, raw in enumerate((bad or {}).get(part, [])):
            p.produce(topic, key=f"bad{j}", value=raw, partition=part,
                      on_delivery=report(f"bad{j}", None))
    assert p.flush(60) == 0
    return out


def committed(cluster, group: str, topic: str) -> dict[int, int]:  # type: ignore[no-untyped-def]
    with cluster.admin() as admin:
        offs = admin.committed_offsets([group])[group]
    return {tp.partition: o for tp, o in offs.items() if tp.topic == topic}


def log_ends(cluster, topic: str, partitions: int) -> dict[int, int]:  # type: ignore[no-untyped-def]
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "x-ends"})
    try:
        return {p: c.get_watermark_offsets(CkTP(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def read_topic(bootstrap: str, topic: str) -> list[Any]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    md = c.list_topics(topic, timeout=10).topics[topic]
    c.assign([CkTP(topic, p, 0) for p in md.partitions])
    msgs, eof, deadline = [], set(), time.monotonic() + 30
    while len(eof) < len(md.partitions) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            eof.add(m.partition())
            continue
        msgs.append(m)
    c.close()
    return msgs


def parquet_rows(path: Path, columns: list[str]) -> list[dict[str, Any]]:
    files = sorted(path.rglob("*.parquet"))
    rows: list[dict[str, Any]] = []
    for f in files:
        rows += pq.read_table(f, columns=columns).to_pylist()
    return rows


ExpectedRecords = dict[tuple[int, int], tuple[str, dict[str, Any] | None]]


def check_events_exactly_once(out: Path, rid: str, expected: ExpectedRecords) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]]]:
    """Every expected record exactly once in the events or dead-letter Parquet,
    by (partition, offset), with its key, id and the replay id; (events, dead)."""
    data = out / rid / "data"
    events = parquet_rows(data / "sink=events", ["partition", "offset", "key", "id", "replay_id"])
    dead = parquet_rows(data / "sink=dead_letter", ["partition", "offset", "key", "reason",
                                                   "original"])
    seen = [(r["partition"], r["offset"]) for r in events + dead]
    assert len(seen) == len(set(seen)), "a record was written twice"
    assert set(seen) == set(expected)
    for r in events:
        key, ev = expected[(r["partition"], r["offset"])]
        assert ev is not None and r["key"] == key and r["id"] == ev["id"]
        assert r["replay_id"] == rid
    return events, dead
