"""Benchmark of the Spark lag-replay on a Spark standalone cluster, against what
the job does not control: Spark's Kafka connector alone, a single consumer
doing the same work, and the broker's read ceiling.

One run, one backlog, one dedicated Kafka sandbox (3.7, 1 broker) and one Spark
standalone cluster (a master and one worker of 2 cores, started from the
installed PySpark on loopback; ``tests/spark_cluster.py``), all stopped at the end:

1. produce N HIP-30 ``events_plugin_ingestion`` envelopes of about 500 bytes
   over P partitions (default: a CI-sized 200,000 over 8; ``--full``: 4,000,000);
2. ``kafka-consumer-perf-test`` (``org.apache.kafka.tools.ConsumerPerformance``)
   reads them all: the broker's read ceiling (reported, not a target);
3. the full job (``spark_jobs/lag_replay.py``, events pipeline, client deploy
   mode) with 1 worker core, then 2 (``spark.cores.max``): read the range,
   parse and validate every envelope, Parquet by event date and type, count
   while reading, read back to verify;
4. Spark's Kafka connector alone (``spark_jobs/bench_read_count.py``: the same
   range and source options, count per partition only), 1 core then 2;
5. a single confluent-kafka consumer doing the job's work in this process.

For each line: records/s, seconds inside the job and wall seconds (the
difference is the fixed start-up: spark-submit, driver JVM, session, executor
registration), CPU seconds (user + system of every process of the line: for
Spark the spark-submit tree, the master, and the worker with its executors,
read from /proc after the executors have exited) and the 1-minute load
average before and after. Then the ratios. Usage::

    python benchmarks/bench_replay.py [--records N | --full] [--partitions 8]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import signal
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

from opskit.adapters.spark.submit import (
    JOB,
    SubmitOptions,
    build_command,
    ensure_spark_jars,
    run_spark_submit,
)
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.dist import ensure_kafka_dist
from opskit.sandbox.load import make_event
from opskit.sandbox.ports import free_port_block
from tests.spark_cluster import SparkStandalone, start_standalone

READ_COUNT = ROOT / "spark_jobs" / "bench_read_count.py"
FULL_RECORDS = 4_000_000
DEFAULT_LINES = "ceiling,job1,job2,read1,read2,single,batch"

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
    t0, cpu0 = time.monotonic(), _cpu(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(dist.java_cmd("org.apache.kafka.tools.ConsumerPerformance", *args,
                                        heap="1g"), capture_output=True, text=True, timeout=600,
                          check=False)
    wall, cpu = time.monotonic() - t0, _cpu(resource.RUSAGE_CHILDREN) - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"perf test failed: {proc.stderr[-500:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    row = dict(zip(header, values))
    return {"records": float(row["data.consumed.in.nMsg"]),
            "rate": float(row["fetch.nMsg.sec"]), "rate_incl_join": float(row["nMsg.sec"]),
            "wall": wall, "cpu": cpu}


def _proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process and of its reaped children."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    # fields after the name start at field 3 (state): utime 14, stime 15, cutime 16, cstime 17
    return sum(int(fields[i - 3]) for i in (14, 15, 16, 17)) / os.sysconf("SC_CLK_TCK")


def _live_children(pid: int) -> list[int]:
    """Child processes that still run (not zombies: spark-class leaves its launcher's)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            try:
                state = Path(f"/proc/{kid}/stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if state != "Z":
                out.append(kid)
    return out


def _cluster_cpu(cluster: SparkStandalone) -> float:
    """CPU seconds so far of the master, the workers and their exited executors."""
    daemons = [cluster.master, *cluster.worker_daemons]
    return sum(_proc_cpu(d.proc.pid) for d in daemons if d is not None)


def _wait_executors_gone(cluster: SparkStandalone, timeout: float = 120.0) -> None:
    """Until every executor JVM has exited and been reaped (its CPU is then counted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(_live_children(d.proc.pid) for d in cluster.worker_daemons):
            return
        time.sleep(0.2)
    raise SystemExit("the executors did not exit after the application")


def spark_run(cluster: SparkStandalone, bootstrap: str, ends: dict[int, int], out: Path,
              cores: int, job: Path) -> dict[str, Any]:
    """One application on the standalone cluster with ``cores`` executor cores."""
    jars = ensure_spark_jars()
    spec = {"replay_id": f"rp-bench-{job.stem.replace('_', '-')}-{cores}c", "group": "bench",
            "pipeline": "events", "ranges": [[TOPIC, p, 0, e] for p, e in sorted(ends.items())]}
    conf = (("spark.driver.host", "127.0.0.1"), ("spark.driver.bindAddress", "127.0.0.1"),
            ("spark.cores.max", str(cores)),
            # the executor is up before the job's clock starts (start-up stays apart)
            ("spark.scheduler.minRegisteredResourcesRatio", "1.0"))
    opts = SubmitOptions(master=cluster.url, deploy_mode="client", driver_memory="1g",
                         executor_memory="2g", conf=conf)
    cmd = build_command(jars, opts, ["--spec", json.dumps(spec), "--bootstrap", bootstrap,
                                     "--output", str(out)], job=job)
    load0 = os.getloadavg()[0]
    t0, cpu0 = time.monotonic(), _cpu(resource.RUSAGE_CHILDREN)
    ccpu0 = _cluster_cpu(cluster)
    res = run_spark_submit(cmd, lambda m: print(f"  spark: {m}", file=sys.stderr))
    wall = time.monotonic() - t0
    _wait_executors_gone(cluster)
    cpu = _cpu(resource.RUSAGE_CHILDREN) - cpu0 + _cluster_cpu(cluster) - ccpu0
    if res.returncode != 0 or res.result_line is None:
        raise SystemExit(f"spark job failed: {res.tail}")
    result = json.loads(res.result_line)
    if "verified_rows" in result:  # lag_replay.py, or a peer version of it
        records = sum(p["records"] for p in result["partitions"])
        verified = result["verified_rows"]
    else:
        records = verified = int(result["records"])
    return {"records": records, "seconds": float(result["seconds"]), "wall": wall,
            "verified": verified, "cpu": cpu, "load": (load0, os.getloadavg()[0])}


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

    load0 = os.getloadavg()[0]
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
    return {"records": n, "seconds": secs, "wall": secs, "verified": verified, "cpu": cpu,
            "load": (load0, os.getloadavg()[0])}


#: job output columns with few distinct values: the only ones dictionary-encoded, as in
#: the job's Parquet writer (spark_jobs/lag_replay.py LOW_CARDINALITY)
DICT_COLUMNS = ["source", "team_id", "org_id", "key", "topic", "partition", "reason"]


def _envelope_fast(raw: bytes | None) -> tuple[dict[str, Any] | None, datetime | None,
                                                str | None]:
    """:func:`_envelope` with orjson (the same checks and reasons)."""
    import orjson

    if raw is None:
        return None, None, "empty value"
    try:
        ev = orjson.loads(raw)
    except orjson.JSONDecodeError:
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


def single_consumer_batched(bootstrap: str, ends: dict[int, int], out: Path) -> dict[str, Any]:
    """The fair one-process baseline: the job's work with the best Python tools for it.
    confluent-kafka in batches of 10,000, orjson for parsing and for ``data`` as text,
    columns gathered per (date, type) and written with pyarrow from column lists (no
    per-row dicts), dictionary encoding only for the job's low-cardinality columns,
    snappy; dead letters with reasons; per-partition count/min/max; read-back."""
    import orjson
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.string()), ("source", pa.string()),
                        ("event_ts", pa.timestamp("us", tz="UTC")), ("team_id", pa.string()),
                        ("org_id", pa.string()), ("data", pa.string()), ("key", pa.string()),
                        ("topic", pa.string()), ("partition", pa.int32()),
                        ("offset", pa.int64()), ("kafka_timestamp", pa.int64())])
    names = schema.names
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-single-batched",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20, "enable.partition.eof": True})
    c.assign([CkTP(TOPIC, p, 0) for p in ends])
    remaining = {p for p, e in ends.items() if e > 0}
    cols: dict[tuple[str, str], dict[str, list[Any]]] = {}
    dead: dict[str, list[Any]] = {k: [] for k in ("topic", "partition", "offset", "key",
                                                   "reason", "original")}
    seen: dict[int, list[int]] = {}
    files = 0
    n = 0

    def flush(final: bool = False) -> None:
        nonlocal files
        for (date, typ), buf in cols.items():
            if buf["id"] and (final or len(buf["id"]) >= 50_000):
                d = out / "sink=events" / f"event_date={date}" / f"event_type={typ}"
                d.mkdir(parents=True, exist_ok=True)
                pq.write_table(pa.Table.from_pydict(buf, schema=schema),
                               d / f"part-{files:05d}.parquet", use_dictionary=DICT_COLUMNS)
                files += 1
                for k in names:
                    buf[k] = []
        if final and dead["offset"]:
            (out / "sink=dead_letter").mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.Table.from_pydict(dead),
                           out / "sink=dead_letter" / "part-0.parquet")

    load0 = os.getloadavg()[0]
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
            ev, ts, reason = _envelope_fast(raw)
            k = msg.key()
            key = k.decode() if k else None
            if ev is None or ts is None:
                for name, v in (("topic", TOPIC), ("partition", part), ("offset", off),
                                ("key", key), ("reason", reason),
                                ("original", raw.decode(errors="replace") if raw else None)):
                    dead[name].append(v)
                continue
            slot = (ts.date().isoformat(), ev["type"])
            buf = cols.get(slot)
            if buf is None:
                buf = cols[slot] = {k: [] for k in names}
            buf["id"].append(ev["id"])
            buf["source"].append(ev["source"])
            buf["event_ts"].append(ts)
            buf["team_id"].append(ev.get("team_id"))
            buf["org_id"].append(ev.get("org_id"))
            buf["data"].append(orjson.dumps(ev.get("data")).decode())
            buf["key"].append(key)
            buf["topic"].append(TOPIC)
            buf["partition"].append(part)
            buf["offset"].append(off)
            buf["kafka_timestamp"].append(msg.timestamp()[1])
        flush()
    flush(final=True)
    back = ds.dataset(out, format="parquet", partitioning="hive").to_table(
        columns=["sink", "partition"]).group_by(["sink", "partition"]).aggregate(
        [([], "count_all")])
    verified = sum(back.column("count_all").to_pylist())
    secs, cpu = time.monotonic() - t0, _cpu(resource.RUSAGE_SELF) - cpu0
    c.close()
    assert sum(v[0] for v in seen.values()) == n
    return {"records": n, "seconds": secs, "wall": secs, "verified": verified, "cpu": cpu,
            "load": (load0, os.getloadavg()[0])}


def _row(name: str, r: dict[str, Any], total: int, ceiling: float) -> str:
    rate, wall_rate = total / r["seconds"], total / r["wall"]
    start = r["wall"] - r["seconds"]
    return (f"| {name} | {rate:,.0f} | {wall_rate:,.0f} | {rate / ceiling:.0%} | "
            f"{r['seconds']:.1f} | {r['wall']:.1f} | {start:.1f} | {r['cpu']:.1f} | "
            f"{r['load'][0]:.2f} / {r['load'][1]:.2f} |")


def _progress(key: str, r: dict[str, Any], total: int, ceiling: float) -> None:
    """Each line as soon as it is measured (a run cut short keeps what it measured)."""
    print(f"  done: {_row(key, r, total, ceiling)}", file=sys.stderr, flush=True)


def report(a: argparse.Namespace, version: str, total: int, perf: dict[str, Any],
           runs: dict[str, dict[str, Any]], load_start: float) -> None:
    ceiling = perf["rate"]
    cmd = (f"python benchmarks/bench_replay.py --records {a.records} --partitions "
           f"{a.partitions} --size {a.size}" + (f" --lines {a.lines}" if a.lines != DEFAULT_LINES
                                               else "")
           + (f" --peer-job {a.peer_job}" if a.peer_job else ""))
    print(f"\n`{cmd}` (Kafka {version}, 1 broker; Spark standalone, 1 worker of 2 cores, "
          f"client deploy mode; {os.cpu_count()} CPUs; {total:,} records of ~{a.size} B in "
          f"{a.partitions} partitions; {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; "
          f"1-minute load average {load_start:.2f} at start; load averages 1/5/15 min at the "
          f"end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())})\n")
    print("| line | records/s (job) | records/s (wall) | vs ceiling (job) | job s | wall s "
          "| start-up s | CPU s | load before / after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    if not math.isnan(ceiling):  # measured
        print(f"| kafka-consumer-perf-test, read only (ceiling, not a target) | {ceiling:,.0f} | "
              f"{total / perf['wall']:,.0f} | 100% | | {perf['wall']:.1f} | | "
              f"{perf['cpu']:.1f} | {perf['load'][0]:.2f} / {perf['load'][1]:.2f} |")
    names = {"job1": "full job, 1 core", "job2": "full job, 2 cores",
             "peer1": f"peer job ({a.peer_job}), 1 core", "peer2": f"peer job ({a.peer_job}), 2 cores",
             "read1": "connector alone (read + count), 1 core",
             "read2": "connector alone (read + count), 2 cores",
             "single": "single confluent-kafka consumer, same work",
             "batch": "single consumer, orjson + pyarrow columns (fair baseline)"}
    for key, name in names.items():
        if key in runs:
            print(_row(name, runs[key], total, ceiling))

    def rate(key: str, wall: bool = False) -> float:
        return total / float(runs[key]["wall" if wall else "seconds"])

    def have(*keys: str) -> bool:
        return all(k in runs for k in keys)

    print()
    if have("job1", "job2"):
        speed = rate("job2") / rate("job1")
        print(f"- scaling, full job 1 -> 2 cores: {speed:.2f}x inside the job (efficiency "
              f"{speed / 2:.0%}; goal 1.8x), {rate('job2', True) / rate('job1', True):.2f}x "
              f"incl. start-up (start-up {runs['job1']['wall'] - runs['job1']['seconds']:.1f} s "
              f"and {runs['job2']['wall'] - runs['job2']['seconds']:.1f} s)")
    if have("read1", "read2"):
        print(f"- connector alone 1 -> 2 cores: {rate('read2') / rate('read1'):.2f}x")
    for c in (1, 2):
        if have(f"job{c}", f"read{c}"):
            print(f"- full job / connector alone, {c} core{'s' if c > 1 else ''}: "
                  f"{rate(f'job{c}') / rate(f'read{c}'):.0%} of the read-only rate (goal 70%)")
    if have("job2", "batch"):
        print(f"- full job (2 cores) / fair single-process baseline: "
              f"{rate('job2') / rate('batch'):.2f}x inside the job, "
              f"{rate('job2', True) / rate('batch'):.2f}x incl. start-up (goal 1.5x)")
    if have("job2", "single"):
        print(f"- full job (2 cores) / single consumer: {rate('job2') / rate('single'):.2f}x "
              f"inside the job, {rate('job2', True) / rate('single'):.2f}x incl. start-up "
              "(goal: faster)")
    per_m = ", ".join(f"{names[k].split(',')[0].split(' (')[0]} {k[-1] if k[-1].isdigit() else ''}"
                      .rstrip() + f" {r['cpu'] * 1e6 / total:.1f}" for k, r in runs.items())
    print(f"- CPU seconds per 1M records (start-up included): {per_m}")
    for c in (1, 2):
        if have(f"job{c}", f"peer{c}"):
            print(f"- full job / peer job, {c} core{'s' if c > 1 else ''}: CPU "
                  f"{runs[f'job{c}']['cpu'] / runs[f'peer{c}']['cpu']:.2f}x, records/s inside "
                  f"the job {rate(f'job{c}') / rate(f'peer{c}'):.2f}x")
        if have(f"job{c}", f"read{c}"):
            print(f"- full job / connector alone CPU, {c} core{'s' if c > 1 else ''}: "
                  f"{runs[f'job{c}']['cpu'] / runs[f'read{c}']['cpu']:.2f}x (goal at most 1.2x)")


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--full", action="store_true",
                    help=f"the recorded run: {FULL_RECORDS:,} records (overrides --records)")
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--kafka-version", default="3.7")
    ap.add_argument("--lines", default=DEFAULT_LINES,
                    help="comma-separated lines to run, in this order: ceiling, job1, job2, "
                    "read1, read2, single, and peer1, peer2 with --peer-job (default: all but "
                    "the peer)")
    ap.add_argument("--peer-job", type=Path, default=None,
                    help="another version of lag_replay.py (e.g. `git show "
                    "main:spark_jobs/lag_replay.py > /tmp/before.py`) measured as lines peer1/2 "
                    "in the same run: before/after on one backlog and one machine")
    a = ap.parse_args(argv)
    lines = [x.strip() for x in a.lines.split(",") if x.strip()]
    known = {"ceiling", "job1", "job2", "read1", "read2", "single", "batch", "peer1", "peer2"}
    if set(lines) - known:
        ap.error(f"unknown --lines {sorted(set(lines) - known)}; known: {sorted(known)}")
    if any(x.startswith("peer") for x in lines) and a.peer_job is None:
        ap.error("--lines peer1/peer2 need --peer-job FILE")
    if a.peer_job is not None and not a.peer_job.is_file():
        ap.error(f"--peer-job {a.peer_job}: no such file")
    # SIGTERM (e.g. `timeout`) stops like Ctrl-C: the running spark-submit, the Spark
    # cluster and the Kafka sandbox are stopped, and the lines measured so far stay printed
    signal.signal(signal.SIGTERM, _interrupt)
    if a.full:
        a.records = FULL_RECORDS
    own_state = "OPSKIT_STATE" not in os.environ
    if own_state:
        os.environ["OPSKIT_STATE"] = tempfile.mkdtemp(prefix="opskit-bench-replay-")
    work = Path(tempfile.mkdtemp(prefix="bench-replay-out-"))
    load_start = os.getloadavg()[0]
    sb = Sandbox(f"bench-replay-{uuid.uuid4().hex[:6]}")
    cluster: SparkStandalone | None = None
    runs: dict[str, dict[str, Any]] = {}
    try:
        st, _ = sb.up(brokers=1, version=a.kafka_version, port=free_port_block(1))
        cluster = start_standalone(workers=1, cores=2, memory="3g", base=work / "spark")
        b = st.bootstrap
        print(f"producing {a.records:,} records of ~{a.size} B to {a.partitions} partitions",
              file=sys.stderr)
        prod = produce(b, a.records, a.partitions, a.size)
        ends = log_ends(b, a.partitions)
        total = sum(ends.values())
        print(f"  produced in {prod:.1f}s", file=sys.stderr)
        perf: dict[str, Any] = {"rate": float("nan"), "wall": float("nan"),
                                "cpu": float("nan")}
        perf_load = (float("nan"), float("nan"))
        if "ceiling" in lines:
            load0 = os.getloadavg()[0]
            perf = perf_test(st.version, b, total)
            perf_load = (load0, os.getloadavg()[0])
            print(f"  done: ceiling {perf['rate']:,.0f} records/s, {perf['cpu']:.1f} CPU s, "
                  f"load {perf_load[0]:.2f} / {perf_load[1]:.2f}", file=sys.stderr, flush=True)
        jobs = {"job": JOB, "read": READ_COUNT, "peer": a.peer_job}
        for key in lines:
            if key == "batch":
                print(f"  single consumer, batched (load average {os.getloadavg()[0]:.2f})",
                      file=sys.stderr)
                runs["batch"] = single_consumer_batched(b, ends, work / "batch")
                _progress("batch", runs["batch"], total, perf["rate"])
                continue
            if key in ("ceiling", "single"):
                if key == "single":
                    print(f"  single consumer (load average {os.getloadavg()[0]:.2f})",
                          file=sys.stderr)
                    runs["single"] = single_consumer(b, ends, work / "single")
                    _progress("single", runs["single"], total, perf["rate"])
                continue
            job, cores = jobs[key[:-1]], int(key[-1])
            assert job is not None
            print(f"  {key}: {job.name} with {cores} core(s) (load average "
                  f"{os.getloadavg()[0]:.2f})", file=sys.stderr)
            runs[key] = spark_run(cluster, b, ends, work / key, cores, job)
            shutil.rmtree(work / key, ignore_errors=True)
            _progress(key, runs[key], total, perf["rate"])
    finally:
        if cluster is not None:
            cluster.stop()
        sb.down()
        shutil.rmtree(work, ignore_errors=True)
        if own_state:
            shutil.rmtree(os.environ["OPSKIT_STATE"], ignore_errors=True)
    for key, r in runs.items():
        assert r["records"] == total == r["verified"], (key, r, total)
    report(a, st.version, total, {**perf, "load": perf_load}, runs, load_start)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
