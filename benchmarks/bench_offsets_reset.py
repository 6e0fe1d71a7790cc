"""Benchmark: reset a group's offsets on N partitions, opskit vs kafka-consumer-groups.sh --execute.

One real Kafka broker (sandbox), N partitions (topics of 100 partitions, 2
records each), one group committed at the log end on every partition. Before
each timed run the group is put back at the log end (untimed); the run resets
it `--to-earliest --all-topics --execute`. Runs alternate between the two tools;
after each, every committed offset is checked to be 0.

opskit's run includes what the reference tool does not do: the automatic backup
of the current offsets and the compare-and-set re-read before the commit. Record
timestamps for the preview are skipped (`--no-times`), as the tool has no preview.

    python benchmarks/bench_offsets_reset.py [--partitions 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--kafka-version", default="3.7")
    args = ap.parse_args()
    os.environ.setdefault("OPSKIT_STATE", tempfile.mkdtemp(prefix="opskit-bench-"))
    from confluent_kafka import ConsumerGroupTopicPartitions, Producer
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient, NewTopic

    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.dist import ensure_kafka_dist
    from opskit.sandbox.ports import free_port_block

    sb = Sandbox("bench-reset")
    st, _ = sb.up(brokers=1, version=args.kafka_version, port=free_port_block(1))
    bs = st.bootstrap
    dist = ensure_kafka_dist(st.version)
    group = "bench-reset-group"
    try:
        admin = AdminClient({"bootstrap.servers": bs})
        n_topics = max(1, args.partitions // 100)
        topics = [f"reset_t{i:03d}" for i in range(n_topics)]
        for i in range(0, n_topics, 50):
            for f in admin.create_topics([NewTopic(t, 100, 1) for t in topics[i:i + 50]]).values():
                f.result(300)
        time.sleep(3)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 50})
        for t in topics:
            for part in range(100):
                p.produce(t, value=b"x" * 50, partition=part)
                p.produce(t, value=b"y" * 50, partition=part)
            p.poll(0)
        p.flush(300)
        all_tps = [(t, part) for t in topics for part in range(100)]

        def set_offsets(value: int) -> None:
            tps = [CkTP(t, part, value) for t, part in all_tps]
            for f in admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, tps)], request_timeout=120).values():
                f.result(180)

        def committed_values() -> set[int]:
            req = [ConsumerGroupTopicPartitions(group)]
            res = next(iter(admin.list_consumer_group_offsets(req, request_timeout=120).values())).result(180)
            return {tp.offset for tp in res.topic_partitions}

        print(f"cluster: Kafka {st.version}, {len(all_tps)} partitions, group {group}", flush=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmds = {
            "opskit": [sys.executable, "-m", "opskit.cli.main", "offsets", "reset", "--group", group,
                       "--all-topics", "--to-earliest", "--execute", "--yes", "--no-times",
                       "-b", bs, "--timeout", "120", "-o", "json"],
            "kafka-consumer-groups": dist.java_cmd(
                dist.consumer_groups_class, "--bootstrap-server", bs, "--reset-offsets", "--group", group,
                "--all-topics", "--to-earliest", "--execute", heap="1g"),
        }
        times: dict[str, list[float]] = {k: [] for k in cmds}
        for _ in range(args.runs):
            for name, cmd in cmds.items():
                set_offsets(2)
                assert committed_values() == {2}
                t0 = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200, check=False)
                dt = time.perf_counter() - t0
                if proc.returncode != 0:
                    print(f"{name} failed rc={proc.returncode}: {(proc.stderr or proc.stdout)[-600:]}")
                    return 1
                got = committed_values()
                if got != {0}:
                    print(f"{name}: offsets after reset are {sorted(got)[:5]}, expected all 0")
                    return 1
                times[name].append(dt)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{'command':<24}{'median s':>10}{'min s':>10}{'max s':>10}")
        for name, v in times.items():
            print(f"{name:<24}{med[name]:>10.2f}{min(v):>10.2f}{max(v):>10.2f}")
        print(f"every run left all {len(all_tps)} committed offsets at 0")
        print(f"ratio kafka-consumer-groups / opskit (wall clock, median of {args.runs}): "
              f"{med['kafka-consumer-groups'] / med['opskit']:.2f}x")
        return 0
    finally:
        sb.down()


if __name__ == "__main__":
    sys.exit(main())
