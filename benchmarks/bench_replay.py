"""Benchmark of the Spark lag-replay against a single consumer and Kafka's read ceiling.

One run, one dedicated sandbox (Kafka 3.7, 1 broker, started and stopped here):

1. produce N HIP-30 ``events_plugin_ingestion`` envelopes of about 500 bytes
   (default 1,000,000) over P partitions, like the seed's producer benchmark;
2. ``kafka-consumer-perf-test`` (``org.apache.kafka.tools.ConsumerPerformance``)
   reads all of them: the broker's read ceiling on this machine;
3. the Spark job (``spark_jobs/lag_replay.py``, events pipeline, ``local[K]``)
   reads the range, parses and validates every envelope, writes Parquet
   partitioned by event date and type, and verifies what it wrote;
4. a single confluent-kafka consumer does the same work (parse, validate,
   Parquet by date and type with pyarrow).

Prints records/s of each and the ratios, as Markdown. Usage::

    python benchmarks/bench_replay.py [--records 1000000] [--partitions 4] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, NewTopic

from opskit.adapters.spark_submit import (
    SubmitOptions,
    build_command,
    ensure_spark_jars,
    run_spark_submit,
)
from opskit.sandbox.cluster import Sandbox, free_port_block
from opskit.sandbox.dist import ensure_kafka_dist
from opskit.sandbox.load import make_event

TOPIC = "events_plugin_ingestion"
SCHEMA_ID = "hanzo.stream.v1"
REQUIRED = ("id", "type", "source", "timestamp")


def padded_events(count: int, size: int, seed: int = 1) -> list[tuple[bytes, bytes]]:
    """A pool of distinct HIP-30 envelopes padded to about ``size`` bytes."""
    rnd = random.Random(seed)
    base = time.time() - 86400
    pool = []
    for i in range(count):
        key, ev = make_event("events_plugin_ingestion", rnd, base + i * 0.5)
        raw = json.dumps(ev)
        pad = max(0, size - len(raw) - 20)
        ev["data"]["properties"]["$pad"] = "x" * pad
        pool.append((key.encode(), json.dumps(ev).encode()))
    return pool


def produce(bootstrap: str, records: int, partitions: int, size: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, partitions, 1)]).values():
        f.result(30)
    time.sleep(1)
    pool = padded_events(20_000, size)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "compression.type": "lz4", "acks": "1", "queue.buffering.max.messages": 500_000})
    t0 = time.monotonic()
    for i in range(records):
        key, value = pool[i % len(pool)]
        while True:
            try:
                p.produce(TOPIC, value=value, key=key)
                break
            except BufferError:
                p.poll(0.05)
        if i % 10_000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return time.monotonic() - t0


def log_ends(bootstrap: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {p: c.get_watermark_offsets(CkTP(TOPIC, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


def perf_test(version: str, bootstrap: str, records: int) -> dict[str, float]:
    dist = ensure_kafka_dist(version)
    args = ["--bootstrap-server", bootstrap, "--topic", TOPIC, "--messages", str(records),
            "--timeout", "120000", "--group", f"perf-{uuid.uuid4().hex[:6]}"]
    t0 = time.monotonic()
    proc = subprocess.run(dist.java_cmd("org.apache.kafka.tools.ConsumerPerformance", *args,
                                        heap="1g"), capture_output=True, text=True, timeout=600,
                          check=False)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"perf test failed: {proc.stderr[-500:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    row = dict(zip(header, values))
    return {"records": float(row["data.consumed.in.nMsg"]),
            "rate": float(row["fetch.nMsg.sec"]), "rate_incl_join": float(row["nMsg.sec"]),
            "wall": wall}


def spark_job(bootstrap: str, ends: dict[int, int], out: Path, master: str) -> dict[str, Any]:
    jars = ensure_spark_jars()
    spec = {"replay_id": "rp-bench", "group": "bench", "pipeline": "events",
            "ranges": [[TOPIC, p, 0, e] for p, e in sorted(ends.items())]}
    cmd = build_command(jars, SubmitOptions(master=master, driver_memory="2g"),
                        ["--spec", json.dumps(spec), "--bootstrap", bootstrap,
                         "--output", str(out)])
    t0, cpu0 = time.monotonic(), _cpu(resource.RUSAGE_CHILDREN)
    res = run_spark_submit(cmd, lambda m: print(f"  spark: {m}", file=sys.stderr))
    wall, cpu = time.monotonic() - t0, _cpu(resource.RUSAGE_CHILDREN) - cpu0
    if res.returncode != 0 or res.result_line is None:
        raise SystemExit(f"spark job failed: {res.tail}")
    result = json.loads(res.result_line)
    records = sum(p["records"] for p in result["partitions"])
    return {"records": records, "job_seconds": result["seconds"], "wall": wall,
            "verified": result["verified_rows"], "cpu": cpu}


def _cpu(who: int) -> float:
    """User + system CPU seconds of this process or of its waited-for children."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _envelope(raw: bytes | None) -> tuple[dict[str, Any] | None, datetime | None, str | None]:
    """The job's validation in Python: (envelope, event time, reason or None)."""
    if raw is None:
        return None, None, "empty value"
    try:
        ev = json.loads(raw)
    except ValueError:
        return None, None, "not a JSON object"
    if not isinstance(ev, dict):
        return None, None, "not a JSON object"
    if ev.get("schema") != SCHEMA_ID:
        return None, None, f"unknown schema {ev.get('schema') or '(none)'}"
    for f in REQUIRED:
        if not ev.get(f):
            return None, None, f"missing field '{f}'"
    try:
        ts = datetime.fromisoformat(str(ev["timestamp"]))
    except ValueError:
        return None, None, f"bad timestamp {ev['timestamp']}"
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    return ev, ts, None


def single_consumer(bootstrap: str, ends: dict[int, int], out: Path) -> dict[str, Any]:
    """One confluent-kafka consumer doing the job's work, written plainly: parse
    and validate every envelope (schema, required fields, timestamp), Parquet by
    event date and type plus dead letters with reasons, per-partition count and
    min/max offset while reading, and a read-back of the written files' source
    partitions to verify them, as the Spark job does."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-single",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20, "enable.partition.eof": True})
    c.assign([CkTP(TOPIC, p, 0) for p in ends])
    remaining = {p for p, e in ends.items() if e > 0}
    buf: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    dead: list[dict[str, Any]] = []
    seen: dict[int, list[int]] = {}  # partition -> [count, min offset, max offset]
    files = 0
    n = 0

    def flush(final: bool = False) -> None:
        nonlocal files
        for (date, typ), rows in list(buf.items()):
            if rows and (final or len(rows) >= 50_000):
                d = out / "sink=events" / f"event_date={date}" / f"event_type={typ}"
                d.mkdir(parents=True, exist_ok=True)
                pq.write_table(pa.Table.from_pylist(rows), d / f"part-{files:05d}.parquet")
                files += 1
                buf[(date, typ)] = []
        if final and dead:
            (out / "sink=dead_letter").mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pylist(dead),
                           out / "sink=dead_letter" / "part-0.parquet")

    t0, cpu0 = time.monotonic(), _cpu(resource.RUSAGE_SELF)
    while remaining:
        for msg in c.consume(num_messages=10_000, timeout=1.0):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    remaining.discard(msg.partition())
                continue
            part, off = msg.partition(), msg.offset()
            if off >= ends[part]:
                remaining.discard(part)
                continue
            if off == ends[part] - 1:
                remaining.discard(part)
            n += 1
            st = seen.get(part)
            if st is None:
                seen[part] = [1, off, off]
            else:
                st[0] += 1
                st[1] = min(st[1], off)
                st[2] = max(st[2], off)
            raw = msg.value()
            ev, ts, reason = _envelope(raw)
            key = msg.key().decode() if msg.key() else None
            if ev is None or ts is None:
                dead.append({"topic": TOPIC, "partition": part, "offset": off, "key": key,
                             "reason": reason,
                             "original": raw.decode(errors="replace") if raw else None})
                continue
            buf[(ts.date().isoformat(), ev["type"])].append({
                "id": ev["id"], "source": ev["source"], "event_ts": ts,
                "team_id": ev.get("team_id"), "org_id": ev.get("org_id"),
                "data": json.dumps(ev.get("data")), "key": key, "topic": TOPIC,
                "partition": part, "offset": off, "kafka_timestamp": msg.timestamp()[1]})
        flush()
    flush(final=True)
    back = ds.dataset(out, format="parquet", partitioning="hive").to_table(
        columns=["sink", "partition"]).group_by(["sink", "partition"]).aggregate(
        [([], "count_all")])
    verified = sum(back.column("count_all").to_pylist())
    secs, cpu = time.monotonic() - t0, _cpu(resource.RUSAGE_SELF) - cpu0
    c.close()
    assert sum(v[0] for v in seen.values()) == n
    return {"records": n, "seconds": secs, "verified": verified, "cpu": cpu}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--kafka-version", default="3.7")
    a = ap.parse_args(argv)
    own_state = "OPSKIT_STATE" not in os.environ
    if own_state:
        os.environ["OPSKIT_STATE"] = tempfile.mkdtemp(prefix="opskit-bench-replay-")
    work = Path(tempfile.mkdtemp(prefix="bench-replay-out-"))
    load = {"start": os.getloadavg()[0]}
    sb = Sandbox(f"bench-replay-{uuid.uuid4().hex[:6]}")
    st, _ = sb.up(brokers=1, version=a.kafka_version, port=free_port_block(1))
    try:
        b = st.bootstrap
        print(f"producing {a.records:,} records of ~{a.size} B to {a.partitions} partitions",
              file=sys.stderr)
        prod = produce(b, a.records, a.partitions, a.size)
        ends = log_ends(b, a.partitions)
        total = sum(ends.values())
        print(f"  produced in {prod:.1f}s; running kafka-consumer-perf-test", file=sys.stderr)
        perf = perf_test(st.version, b, total)
        load["spark"] = os.getloadavg()[0]
        print(f"  running the Spark job (load average {load['spark']:.2f})", file=sys.stderr)
        spark = spark_job(b, ends, work / "spark", a.master)
        load["single"] = os.getloadavg()[0]
        print(f"  running the single consumer (load average {load['single']:.2f})",
              file=sys.stderr)
        single = single_consumer(b, ends, work / "single")
    finally:
        sb.down()
        shutil.rmtree(work, ignore_errors=True)
        if own_state:
            shutil.rmtree(os.environ["OPSKIT_STATE"], ignore_errors=True)
    assert spark["records"] == total == single["records"], (spark, total, single)
    assert spark["verified"] == total == single["verified"], (spark, single)
    spark_rate = total / spark["job_seconds"]
    spark_wall_rate = total / spark["wall"]
    single_rate = total / single["seconds"]
    ceiling = perf["rate"]
    print(f"\n`python benchmarks/bench_replay.py --records {a.records} --partitions "
          f"{a.partitions} --master '{a.master}'` (Kafka {st.version}, 1 broker, "
          f"{os.cpu_count()} cores, {total:,} records of ~{a.size} B; 1-minute load "
          f"average {load['start']:.2f} at start, {load['spark']:.2f} before Spark, "
          f"{load['single']:.2f} before the single consumer)\n")
    print("| reader | records/s | vs ceiling | seconds | CPU seconds |")
    print("|---|---:|---:|---:|---:|")
    print(f"| kafka-consumer-perf-test (read only; fetch rate) | {ceiling:,.0f} | 100% | "
          f"{perf['wall']:.1f} wall | |")
    print(f"| Spark job ({a.master}), inside the job | {spark_rate:,.0f} | "
          f"{spark_rate / ceiling:.0%} | {spark['job_seconds']:.1f} | |")
    print(f"| Spark job incl. spark-submit/JVM start | {spark_wall_rate:,.0f} | "
          f"{spark_wall_rate / ceiling:.0%} | {spark['wall']:.1f} | {spark['cpu']:.1f} |")
    print(f"| single confluent-kafka consumer | {single_rate:,.0f} | "
          f"{single_rate / ceiling:.0%} | {single['seconds']:.1f} | {single['cpu']:.1f} |")
    print(f"\nSpark / single consumer: {spark_rate / single_rate:.2f}x (job), "
          f"{spark_wall_rate / single_rate:.2f}x (incl. start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
