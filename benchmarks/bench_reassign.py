"""Benchmark: partition reassignment.

Part (c), ``exec``: execution time under a throttle. A 3-broker sandbox (Kafka 3.7),
one topic of P partitions with replication factor 1 spread over the brokers, D bytes
per broker. The plan adds one replica to every partition (on the next broker), so
every broker receives D bytes and sends D bytes. Timed, on the same cluster:

* ``opskit reassign execute PLAN --throttle L --execute`` (wall time of the command:
  throttles, submission, the copy, the preferred election, throttle removal);
* Kafka's tool: ``kafka-reassign-partitions --execute --throttle L`` then ``--verify``
  every second until it reports completion (``--verify`` is what removes its throttles).

Between the two the partitions are put back to one replica (opskit, no data copied).
Both are compared with the physical bound D / L (Kafka's own duration model: the
throttle caps each broker's replication in and out). Goal: opskit within 1.25x of it.

    python benchmarks/bench_reassign.py exec [--mb-per-broker 30] [--throttle-mb 3] [--full]

``--full``: 200 MB per broker at 10 MB/s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _opskit(*args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", *args]


def _replicas(admin: Any, topic: str) -> dict[int, list[int]]:
    md = admin.list_topics(topic, timeout=30).topics[topic]
    return {p.id: list(p.replicas) for p in md.partitions.values()}


def _plan(path: Path, topic: str, targets: dict[int, list[int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(targets.items())]}))
    return path


def _fill(bootstrap: str, topic: str, partitions: int, total_bytes: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1",
                  "batch.size": 1 << 20, "compression.type": "none"})
    value = os.urandom(10_000)  # incompressible
    n = total_bytes // len(value)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.1)
        if i % 100 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def _run_opskit(bootstrap: str, plan: Path, throttle: int) -> float:
    t0 = time.monotonic()
    r = subprocess.run(_opskit("reassign", "execute", str(plan), "--throttle", str(throttle),
                               "--rate-interval", "0", "--execute", "-b", bootstrap),
                       capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"opskit failed: {r.stderr}")
    return wall


def _reassign_class(dist: Any) -> str:
    new = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    return new if dist._has_class("kafka-tools-", new) else "kafka.admin.ReassignPartitionsCommand"


def _run_tool(dist: Any, bootstrap: str, plan: Path, throttle: int) -> tuple[float, int]:
    cls = _reassign_class(dist)
    t0 = time.monotonic()
    r = dist.run_tool(cls, "--bootstrap-server", bootstrap, "--reassignment-json-file", str(plan),
                      "--execute", "--throttle", str(throttle))
    if r.returncode != 0:
        raise SystemExit(f"kafka-reassign-partitions --execute failed: {r.stderr[-500:]}")
    verifies = 0
    while True:
        time.sleep(1.0)
        verifies += 1
        v = dist.run_tool(cls, "--bootstrap-server", bootstrap, "--reassignment-json-file",
                          str(plan), "--verify")
        # done: every partition "is completed" (the same run clears the throttles)
        if v.returncode == 0 and "in progress" not in v.stdout and "is completed" in v.stdout:
            break
        if time.monotonic() - t0 > 3600:
            raise SystemExit("Kafka's tool did not finish within an hour")
    return time.monotonic() - t0, verifies


def bench_exec(mb_per_broker: int, throttle_mb: float, partitions: int) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    from opskit.sandbox.cluster import Sandbox, free_port_block
    from opskit.sandbox.dist import ensure_kafka_dist

    sb = Sandbox(f"bench-rx-{uuid.uuid4().hex[:6]}")
    st, _ = sb.up(brokers=3, version="3.7", port=free_port_block(3))
    try:
        bootstrap = st.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = "bench_reassign"
        for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
            f.result(60)
        time.sleep(2)
        per = [sum(1 for r in _replicas(admin, topic).values() if r[0] == b) for b in range(3)]
        if len(set(per)) != 1:  # Kafka spreads partitions round-robin over the brokers
            raise SystemExit(f"partitions not spread evenly over the brokers: {per}")
        per_broker = mb_per_broker * 1_000_000
        _fill(bootstrap, topic, partitions, per_broker * 3)
        base = _replicas(admin, topic)
        up = {p: r + [(r[0] + 1) % 3] for p, r in base.items()}
        throttle = int(throttle_mb * 1_000_000)
        bound = per_broker / throttle
        tmp = Path(tempfile.mkdtemp(prefix="bench-rx-"))
        plan_up = _plan(tmp / "up.json", topic, up)
        plan_down = _plan(tmp / "down.json", topic, base)

        ops = _run_opskit(bootstrap, plan_up, throttle)
        assert _replicas(admin, topic) == up
        _run_opskit(bootstrap, plan_down, throttle)  # back to RF 1: nothing copied
        assert _replicas(admin, topic) == base
        tool, verifies = _run_tool(ensure_kafka_dist("3.7"), bootstrap, plan_up, throttle)
        assert _replicas(admin, topic) == up
        return {
            "bytes_per_broker": per_broker, "throttle_bytes_per_s": throttle,
            "partitions": partitions, "bound_s": round(bound, 1),
            "opskit_s": round(ops, 1), "opskit_vs_bound": round(ops / bound, 2),
            "tool_s": round(tool, 1), "tool_vs_bound": round(tool / bound, 2),
            "tool_verify_runs": verifies, "tool_vs_opskit": round(tool / ops, 2),
        }
    finally:
        sb.down()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    ex = sub.add_parser("exec", help="(c) execution time under a throttle vs D/L and Kafka's tool")
    ex.add_argument("--mb-per-broker", type=int, default=30)
    ex.add_argument("--throttle-mb", type=float, default=3.0)
    ex.add_argument("--partitions", type=int, default=6, help="a multiple of 3")
    ex.add_argument("--full", action="store_true", help="200 MB per broker at 10 MB/s")
    args = ap.parse_args()
    if args.part == "exec":
        mb, thr = (200, 10.0) if args.full else (args.mb_per_broker, args.throttle_mb)
        res = bench_exec(mb, thr, args.partitions)
        print(json.dumps(res, indent=2))
        print(f"opskit {res['opskit_s']} s = {res['opskit_vs_bound']}x the bound D/L "
              f"({res['bound_s']} s); Kafka's tool --execute + --verify loop {res['tool_s']} s "
              f"= {res['tool_vs_bound']}x the bound ({res['tool_vs_opskit']}x opskit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
