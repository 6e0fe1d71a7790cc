"""Benchmark: partition reassignment.

Parts (a) and (b), ``plan``: plan quality and planning time. A sandbox (Kafka 3.7) of 3
brokers with 4 topics of P partitions in all (replication factors 1, 2, 3 and 3, replicas
placed by Kafka, records of random sizes so partitions differ in bytes), then 3 more
brokers join empty. On that cluster:

* (a) ``opskit reassign plan --add-brokers 3,4,5`` and Kafka's tool
  ``kafka-reassign-partitions --generate --broker-list 0,1,2,3,4,5`` for every topic:
  replicas moved and bytes moved by each, divided by the lower bound (replicas: sum over
  brokers of max(0, count - ceil(total / 6)); bytes: each broker's smallest replicas
  beyond ceil(total / 6)). Goal: opskit 1.00.
* (b) planning time, each command timed from start to exit (both read the cluster:
  opskit its topology with partition sizes, Kafka's tool its metadata), median of 3 runs:
  Kafka's tool's --generate / opskit's plan; also opskit's pure planning step in-process.

    python benchmarks/bench_reassign.py plan [--partitions 1200] [--full]

``--full``: 10,000 partitions.

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

Part (d), ``racks``: rack-aware plans. Real Kafka 3.7 sandboxes whose brokers carry
``broker.rack``, topics of RF 1, 2, 3 and 3 (records of 1-8 KB, 1-4 per partition):

* ``zone``: 3 brokers in rack a hold the topics; broker 2 moves to rack b (restart),
  brokers 3, 4, 5 join in racks b, c, c (racks a, a, b, b, c, c);
* ``grow``: 3 brokers in racks a, b, c (Kafka places the topics rack-aware), 3 join (a, b,
  c); then two topics concentrated in rack a are added; with ``--grow-to 12`` six more
  empty brokers join (a, b, c, ...).

At each stage, on the same cluster: ``opskit reassign plan --rebalance`` (rack-aware: the
racks are read from the cluster) and Kafka's ``kafka-reassign-partitions --generate
--broker-list <all brokers>`` for every topic (rack-aware, as broker.rack is set):
replicas and bytes moved, divided by the lower bound opskit prints and by the exact
minimum (a min-cost flow, :func:`exact_min_moves`); partitions whose replicas do not span
min(RF, racks) racks before and after each plan; planning time, each whole command,
median of ``--runs`` (default 5), the two commands taking turns run by run (ABAB...), with
the median of the run pairs' ratios too. ``--baseline TREE``: a third command in the turns,
``opskit reassign plan`` run from another source tree (a worktree of main), its plan
compared with this tree's.

    python benchmarks/bench_reassign.py racks [--partitions 1200] [--full] [--scenarios zone,grow]
        [--grow-to 12] [--runs 5] [--baseline /path/to/other/tree]
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
from collections.abc import Iterable, Mapping, Sequence
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


class _Deliveries:
    """Delivery reports of a fill. ``flush`` alone counts only records still queued, not
    the ones that failed (a just-created topic's partitions may not be known on every
    broker yet: UNKNOWN_TOPIC_OR_PART), so failed records are produced again until every
    record is delivered; a fill that silently lost records would change what is measured."""

    def __init__(self) -> None:
        self.failed: list[tuple[str, int, bytes]] = []
        self.first_error = ""

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed.append((msg.topic(), msg.partition(), msg.value()))
            self.first_error = self.first_error or str(err)

    def check(self, producer: Any, timeout: float, rounds: int = 10) -> None:
        for _ in range(rounds):
            left = producer.flush(timeout)
            if left:
                raise SystemExit(f"filling the topics failed: {left} records undelivered")
            again, self.failed = self.failed, []
            if not again:
                return
            time.sleep(2)
            for topic, part, value in again:
                while True:
                    try:
                        producer.produce(topic, value=value, partition=part, on_delivery=self)
                        break
                    except BufferError:
                        producer.poll(0.1)
                    except Exception as e:  # the producer's metadata may lag: "Unknown topic"
                        if "nknown topic" not in str(e):
                            raise
                        producer.poll(1.0)
        raise SystemExit(f"filling the topics failed: records still not delivered after "
                         f"{rounds} rounds ({self.first_error})")


def _wait_partitions_known(nodes: Any, topics: list[str], partitions: int,
                           timeout: float = 900) -> None:
    """Until every broker's own metadata has every partition of ``topics`` with a leader:
    on a loaded machine brokers apply a 10,000-partition creation late, and records sent
    meanwhile fail with UNKNOWN_TOPIC_OR_PART."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    for node in nodes:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.port}"})
        while True:
            md = admin.list_topics(timeout=30)
            ok = all(t in md.topics and len(md.topics[t].partitions) == partitions
                     and all(p.leader >= 0 for p in md.topics[t].partitions.values())
                     for t in topics)
            if ok:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"broker {node.node_id} never learnt every partition")
            time.sleep(2)


def _fill(bootstrap: str, topic: str, partitions: int, total_bytes: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "1",
                  "batch.size": 1 << 20, "compression.type": "none",
                  "message.timeout.ms": 600_000})
    done = _Deliveries()
    value = os.urandom(10_000)  # incompressible
    n = total_bytes // len(value)
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % partitions, on_delivery=done)
                break
            except BufferError:
                p.poll(0.1)
        if i % 100 == 0:
            p.poll(0)
    done.check(p, 600)


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

    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.dist import ensure_kafka_dist
    from opskit.sandbox.ports import free_port_block

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


def _sizes_and_replicas(bootstrap: str) -> tuple[Any, dict[tuple[str, int], int]]:
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.adapters.reassign.topology import read_topology
    from opskit.core.connection import ConnectionConfig

    with KafkaAdmin(ConnectionConfig(bootstrap), timeout=60) as admin:
        topo = read_topology(admin).topology
    return topo, {(p.topic, p.partition): p.size_bytes for p in topo.partitions}


def _moved(topo: Any, target: dict[tuple[str, int], list[int]]) -> tuple[int, int]:
    replicas = moved_bytes = 0
    for p in topo.partitions:
        new = set(target.get((p.topic, p.partition), p.replicas)) - set(p.replicas)
        replicas += len(new)
        moved_bytes += len(new) * p.size_bytes
    return replicas, moved_bytes


def _median_wall(cmd: list[str] | None, run: Any = None, runs: int = 3) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system, of the child process
    for a command; of this process for ``run``) over ``runs`` runs: CPU seconds hold up
    on a loaded machine, wall seconds do not."""
    import resource

    walls, cpus = [], []
    for _ in range(runs):
        who = resource.RUSAGE_CHILDREN if cmd is not None else resource.RUSAGE_SELF
        u0 = resource.getrusage(who)
        t0 = time.monotonic()
        if cmd is not None:
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SystemExit(f"{cmd[:4]} failed: {r.stderr[-500:]}")
        else:
            run()
        walls.append(time.monotonic() - t0)
        u1 = resource.getrusage(who)
        cpus.append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
    return sorted(walls)[len(walls) // 2], sorted(cpus)[len(cpus) // 2]


def _alternate_walls(cmds: Sequence[list[str]], runs: int,
                     trees: Sequence[Path | None] | None = None
                     ) -> list[tuple[list[float], list[float]]]:
    """Wall and CPU seconds (user + system of the child) of each command over ``runs``
    rounds, the commands taking turns within a round (ABAB...) so that a change of load
    weighs on all alike; per command (walls, cpus), run by run. ``trees``: per command,
    a source tree to run it in (:func:`_in_tree`), None for this one."""
    import resource

    out: list[tuple[list[float], list[float]]] = [([], []) for _ in cmds]
    for _ in range(runs):
        for k, (cmd, (walls, cpus)) in enumerate(zip(cmds, out, strict=True)):
            tree = trees[k] if trees is not None else None
            u0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.monotonic()
            r = subprocess.run(cmd, capture_output=True, text=True, check=False,
                               **_in_tree(tree))
            walls.append(time.monotonic() - t0)
            u1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                raise SystemExit(f"{cmd[:4]} failed: {r.stderr[-500:]}")
            cpus.append(u1.ru_utime - u0.ru_utime + u1.ru_stime - u0.ru_stime)
    return out


def _in_tree(tree: Path | None) -> dict[str, Any]:
    """subprocess.run's cwd and env to run ``python -m opskit...`` from another source
    tree (``--baseline``: e.g. a worktree of main): it is first on the path."""
    if tree is None:
        return {}
    return {"cwd": tree, "env": {**os.environ, "PYTHONPATH": str(tree)}}


def _same_plan(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """The same targets and estimates, but the brokers' capacity (by default the free
    space of their disks, which moves between two reads of a running cluster)."""
    def plan_of(p: Mapping[str, Any]) -> Any:
        est = dict(p["opskit"]["estimates"])
        if isinstance(est.get("bytes_per_broker"), dict):
            est["bytes_per_broker"] = {k: v for k, v in est["bytes_per_broker"].items()
                                       if k != "capacity"}
        return p["partitions"], est
    return bool(plan_of(a) == plan_of(b))


def _median(xs: Sequence[float]) -> float:
    """The middle value (of an even count: the upper middle, as :func:`_median_wall`)."""
    return sorted(xs)[len(xs) // 2]


def _fill_random(bootstrap: str, topics: list[str], partitions: int, seed: int) -> None:
    """Records of random sizes (1-8 KB, 1-4 per partition) so partitions differ in bytes."""
    import random

    from confluent_kafka import Producer

    rnd = random.Random(seed)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "1",
                  "compression.type": "none", "message.timeout.ms": 600_000})
    done = _Deliveries()
    for topic in topics:
        for part in range(partitions):
            for _ in range(rnd.randrange(1, 5)):
                while True:
                    try:
                        p.produce(topic, value=os.urandom(rnd.randrange(1000, 8000)),
                                  partition=part, on_delivery=done)
                        break
                    except BufferError:
                        p.poll(0.1)
            p.poll(0)
    # every partition must hold its records: an undelivered record would leave empty
    # partitions (ties at size 0) and change what the byte bound measures
    done.check(p, 600)


#: replication factors of the benchmark's topics (HIP-30 has topics of RF 1 and RF 3)
PLAN_TOPIC_RFS = (1, 2, 3, 3)


def bench_plan(partitions: int, seed: int = 7) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    from opskit.core.reassign.model import Goal, GoalKind, Policy
    from opskit.core.reassign.plan import plan_reassignment
    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.dist import ensure_kafka_dist
    from opskit.sandbox.ports import free_port_block
    from opskit.sandbox.scale import add_brokers

    sb = Sandbox(f"bench-rp-{uuid.uuid4().hex[:6]}")
    old_heap = os.environ.get("OPSKIT_SANDBOX_HEAP")
    os.environ.setdefault("OPSKIT_SANDBOX_HEAP", "768m")
    try:
        st, _ = sb.up(brokers=3, version="3.7", port=free_port_block(6))
        bootstrap = st.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        names = [f"bench_plan_rf{rf}_{i}" for i, rf in enumerate(PLAN_TOPIC_RFS)]
        per_topic = partitions // len(names)
        for n, rf in zip(names, PLAN_TOPIC_RFS, strict=True):
            # one topic per request: KRaft refuses more than 10,000 records in one operation
            for f in admin.create_topics([NewTopic(n, per_topic, rf)]).values():
                f.result(300)
        _wait_partitions_known(st.nodes, names, per_topic)
        _fill_random(bootstrap, names, per_topic, seed)
        st = add_brokers(sb, 3, wait_timeout=900)
        bootstrap = st.bootstrap
        topo, _sizes = _sizes_and_replicas(bootstrap)
        assert {p.topic for p in topo.partitions} == set(names), "only the benchmark's topics"
        tmp = Path(tempfile.mkdtemp(prefix="bench-rp-"))
        # (a) opskit
        ops_cmd = _opskit("reassign", "plan", "--add-brokers", "3,4,5", "-o", "json",
                          "-b", bootstrap, "--timeout", "60")
        r = subprocess.run(ops_cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise SystemExit(f"opskit reassign plan failed: {r.stderr}")
        plan = json.loads(r.stdout)
        est = plan["opskit"]["estimates"]
        ops_target = {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}
        ops_replicas, ops_bytes = _moved(topo, ops_target)
        assert (ops_replicas, ops_bytes) == (est["replicas_moved"], est["bytes_moved"])
        lb_replicas, lb_bytes = est["replicas_lower_bound"], est["bytes_lower_bound"]
        # (a) Kafka's tool
        dist = ensure_kafka_dist("3.7")
        cls = _reassign_class(dist)
        topics_file = tmp / "topics.json"
        topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": n} for n in names]}))
        gen_args = ("--bootstrap-server", bootstrap, "--topics-to-move-json-file", str(topics_file),
                    "--broker-list", "0,1,2,3,4,5", "--generate")
        g = dist.run_tool(cls, *gen_args)
        if g.returncode != 0:
            raise SystemExit(f"kafka-reassign-partitions --generate failed: {g.stderr[-500:]}")
        proposed = json.loads(g.stdout.strip().splitlines()[-1])
        tool_target = {(p["topic"], p["partition"]): p["replicas"] for p in proposed["partitions"]}
        tool_replicas, tool_bytes = _moved(topo, tool_target)
        # (b) planning time
        load = os.getloadavg()[0]
        ops_wall, ops_cpu = _median_wall(ops_cmd)
        tool_wall, tool_cpu = _median_wall(dist.java_cmd(cls, *gen_args))
        goal = Goal(GoalKind.ADD_BROKERS, brokers=(3, 4, 5))
        from datetime import UTC, datetime

        pure, pure_cpu = _median_wall(None, lambda: plan_reassignment(topo, goal, Policy(),
                                                                       datetime.now(UTC)))
        return {
            "partitions": len(topo.partitions), "replicas": sum(len(p.replicas) for p in topo.partitions),
            "brokers": "3 -> 6", "bytes_total": sum(p.size_bytes * len(p.replicas) for p in topo.partitions),
            "lower_bound_replicas": lb_replicas, "lower_bound_bytes": lb_bytes,
            "opskit_replicas": ops_replicas, "opskit_bytes": ops_bytes,
            "opskit_replicas_vs_bound": round(ops_replicas / lb_replicas, 2) if lb_replicas else None,
            "opskit_bytes_vs_bound": round(ops_bytes / lb_bytes, 2) if lb_bytes else None,
            "tool_replicas": tool_replicas, "tool_bytes": tool_bytes,
            "tool_replicas_vs_bound": round(tool_replicas / lb_replicas, 2) if lb_replicas else None,
            "tool_bytes_vs_bound": round(tool_bytes / lb_bytes, 2) if lb_bytes else None,
            "load_average_1m": round(load, 1),
            "opskit_plan_s": round(ops_wall, 2), "tool_generate_s": round(tool_wall, 2),
            "tool_vs_opskit_time": round(tool_wall / ops_wall, 2),
            "opskit_plan_cpu_s": round(ops_cpu, 2), "tool_generate_cpu_s": round(tool_cpu, 2),
            "tool_vs_opskit_cpu": round(tool_cpu / ops_cpu, 2),
            "opskit_pure_planning_s": round(pure, 3), "opskit_pure_planning_cpu_s": round(pure_cpu, 3),
        }
    finally:
        sb.down()
        if old_heap is None:
            os.environ.pop("OPSKIT_SANDBOX_HEAP", None)


# --------------------------------------------------------------------------- part (d): racks


def rack_violations(replica_sets: Iterable[Sequence[int]], rack_of: Mapping[int, str]) -> int:
    """Partitions whose replicas do not span min(RF, racks) racks (the racks of the
    brokers in ``rack_of``)."""
    racks = len(set(rack_of.values()))
    return sum(1 for rs in replica_sets if len({rack_of[b] for b in rs}) < min(len(rs), racks))


def rack_limit(rf: int, rack_sizes: Mapping[str, int]) -> int:
    """The fewest replicas of one partition a rack must be allowed to hold so that the
    racks can hold RF: the least L with sum over racks of min(L, brokers) >= RF."""
    return next(lim for lim in range(1, rf + 1)
                if sum(min(lim, n) for n in rack_sizes.values()) >= rf)


class _MinCostFlow:
    """Successive shortest paths (Bellman-Ford queue), augmenting by the bottleneck."""

    def __init__(self, nodes: int) -> None:
        self.g: list[list[list[int]]] = [[] for _ in range(nodes)]

    def add(self, u: int, v: int, cap: int, cost: int) -> list[int]:
        edge = [v, cap, cost, len(self.g[v])]
        self.g[u].append(edge)
        self.g[v].append([u, 0, -cost, len(self.g[u]) - 1])
        return edge

    def run(self, s: int, t: int, want: int) -> tuple[int, int]:
        from collections import deque

        flow = cost = 0
        n = len(self.g)
        while flow < want:
            dist: list[float] = [float("inf")] * n
            prev: list[tuple[int, int] | None] = [None] * n
            dist[s] = 0
            queue, queued = deque([s]), [False] * n
            queued[s] = True
            while queue:
                u = queue.popleft()
                queued[u] = False
                for i, (v, cap, c, _) in enumerate(self.g[u]):
                    if cap > 0 and dist[u] + c < dist[v]:
                        dist[v] = dist[u] + c
                        prev[v] = (u, i)
                        if not queued[v]:
                            queued[v] = True
                            queue.append(v)
            if prev[t] is None:
                break
            push, v = want - flow, t
            while v != s:
                u, i = prev[v]  # type: ignore[misc]
                push = min(push, self.g[u][i][1])
                v = u
            v = t
            while v != s:
                u, i = prev[v]  # type: ignore[misc]
                e = self.g[u][i]
                e[1] -= push
                self.g[v][e[3]][1] += push
                v = u
            flow += push
            cost += push * int(dist[t])
        return flow, cost


def exact_min_moves(current: Sequence[Sequence[int]], rack_of: Mapping[int, str],
                    weights: Sequence[int] | None = None) -> int | None:
    """The exact minimum of sum(weight x replicas added) over every result on the brokers
    of ``rack_of`` in which no rack holds more than ``rack_limit(RF)`` replicas of a
    partition and every broker holds floor or ceil of (replicas / brokers), replication
    factors unchanged (opskit's rack + balance goal; leaders are not counted: a leader
    change moves no data). None: no such result. Weights 1 give replicas, partition sizes
    give bytes.

    A min-cost flow: source -> partition class (RF x count) -> (class, rack) (limit x
    count) -> broker (count; cost 0 where the class already has a replica, its weight
    elsewhere) -> sink (floor at a large negative cost, then ceil - floor at 0). Partitions
    with the same replica set and weight form one class: a class's flow splits back into
    per-partition replica sets (they are the bases of a laminar matroid, whose base
    polytope has the integer decomposition property), so the class graph's optimum is the
    per-partition one; the benchmark's topologies have a few classes for replicas and one
    per partition for bytes."""
    weights = weights if weights is not None else [1] * len(current)
    brokers = sorted(rack_of)
    sizes: dict[str, int] = {}
    for b in brokers:
        sizes[rack_of[b]] = sizes.get(rack_of[b], 0) + 1
    racks = sorted(sizes)
    classes: dict[tuple[frozenset[int], int, int], int] = {}
    for rs, w in zip(current, weights, strict=True):
        key = (frozenset(rs), len(rs), w)
        classes[key] = classes.get(key, 0) + 1
    total = sum(len(rs) for rs in current)
    floor, ceil = total // len(brokers), -(-total // len(brokers))
    big = sum(weights) * 3 + 1  # above any result's cost: every floor unit is used if possible
    node = {b: 2 + i for i, b in enumerate(brokers)}
    nxt = 2 + len(brokers)
    flow = _MinCostFlow(nxt + len(classes) * (1 + len(racks)))
    for (held, rf, w), count in classes.items():
        c, nxt = nxt, nxt + 1
        flow.add(0, c, rf * count, 0)
        limit = rack_limit(rf, sizes)
        for r in racks:
            cr, nxt = nxt, nxt + 1
            flow.add(c, cr, limit * count, 0)
            for b in brokers:
                if rack_of[b] == r:
                    flow.add(cr, node[b], count, 0 if b in held else w)
    floors = [flow.add(node[b], 1, floor, -big) for b in brokers]
    for b in brokers:
        flow.add(node[b], 1, ceil - floor, 0)
    sent, cost = flow.run(0, 1, total)
    if sent < total or any(e[1] for e in floors):
        return None
    return cost + big * floor * len(brokers)


def _generate(dist: Any, cls: str, bootstrap: str, topics: list[str], brokers: list[int],
              tmp: Path) -> tuple[list[str], dict[tuple[str, int], list[int]]]:
    """Kafka's tool's ``--generate`` (rack-aware: broker.rack is set): its command line
    and its proposal."""
    topics_file = tmp / f"topics-{uuid.uuid4().hex[:6]}.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in topics]}))
    args = ("--bootstrap-server", bootstrap, "--topics-to-move-json-file", str(topics_file),
            "--broker-list", ",".join(map(str, brokers)), "--generate")
    g = dist.run_tool(cls, *args)
    if g.returncode != 0:
        raise SystemExit(f"kafka-reassign-partitions --generate failed: {g.stderr[-500:]}")
    proposed = json.loads(g.stdout.strip().splitlines()[-1])
    return dist.java_cmd(cls, *args), {(p["topic"], p["partition"]): p["replicas"]
                                       for p in proposed["partitions"]}


def _compare_racks(label: str, bootstrap: str, topics: list[str], tmp: Path,
                   runs: int, baseline: Path | None = None) -> dict[str, Any]:
    """opskit's ``reassign plan --rebalance`` against Kafka's ``--generate`` over every
    broker, on the cluster as it is now."""
    from opskit.sandbox.dist import ensure_kafka_dist

    load_before = os.getloadavg()
    topo, _ = _sizes_and_replicas(bootstrap)
    assert {p.topic for p in topo.partitions} == set(topics), "only the benchmark's topics"
    rack_of = {b.id: str(b.rack) for b in topo.brokers}
    assert all(b.rack for b in topo.brokers), "every broker has a rack"
    brokers = sorted(rack_of)
    ops_cmd = _opskit("reassign", "plan", "--rebalance", "-o", "json", "-b", bootstrap,
                      "--timeout", "120")
    r = subprocess.run(ops_cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"opskit reassign plan failed: {r.stderr}")
    plan = json.loads(r.stdout)
    est = plan["opskit"]["estimates"]
    ops_target = {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}
    ops_replicas, ops_bytes = _moved(topo, ops_target)
    assert (ops_replicas, ops_bytes) == (est["replicas_moved"], est["bytes_moved"]), est
    dist = ensure_kafka_dist("3.7")
    cls = _reassign_class(dist)
    tool_cmd, tool_target = _generate(dist, cls, bootstrap, topics, brokers, tmp)
    tool_replicas, tool_bytes = _moved(topo, tool_target)
    current = [list(p.replicas) for p in topo.partitions]
    sizes = [p.size_bytes for p in topo.partitions]

    def after(target: dict[tuple[str, int], list[int]]) -> list[list[int]]:
        return [list(target.get((p.topic, p.partition), p.replicas)) for p in topo.partitions]

    def spread(reps: list[list[int]]) -> int:
        counts = dict.fromkeys(brokers, 0)
        for rs in reps:
            for b in rs:
                counts[b] += 1
        return max(counts.values()) - min(counts.values())

    exact_r = exact_min_moves(current, rack_of)
    exact_b = exact_min_moves(current, rack_of, sizes) if len(current) <= 2500 else None
    cmds = [ops_cmd, tool_cmd]
    trees: list[Path | None] = [None, None]
    base_same = None
    if baseline is not None:  # the baseline tree's opskit: its plan, then timed in turn
        rb = subprocess.run(ops_cmd, capture_output=True, text=True, check=False,
                            **_in_tree(baseline))
        if rb.returncode != 0:
            raise SystemExit(f"baseline opskit reassign plan failed: {rb.stderr}")
        base_same = _same_plan(json.loads(rb.stdout), plan)
        cmds.append(ops_cmd)
        trees.append(baseline)
    timed = _alternate_walls(cmds, runs, trees)
    (ops_walls, ops_cpus), (tool_walls, tool_cpus) = timed[0], timed[1]
    ops_wall, ops_cpu = _median(ops_walls), _median(ops_cpus)
    tool_wall, tool_cpu = _median(tool_walls), _median(tool_cpus)
    from datetime import UTC, datetime

    from opskit.core.reassign.model import Goal, GoalKind, Policy
    from opskit.core.reassign.plan import plan_reassignment

    pure, pure_cpu = _median_wall(None, lambda: plan_reassignment(
        topo, Goal(GoalKind.REBALANCE), Policy(), datetime.now(UTC)), runs=runs)
    lb_r, lb_b = est["replicas_lower_bound"], est["bytes_lower_bound"]

    def ratio(a: int, b: int | None) -> float | None:
        return round(a / b, 3) if b else None

    return {
        "case": label, "brokers": len(brokers),
        "racks": "".join(rack_of[b] for b in brokers),
        "partitions": len(topo.partitions), "replicas": sum(map(len, current)),
        "bytes_total": sum(s * len(rs) for s, rs in zip(sizes, current, strict=True)),
        "violations_before": rack_violations(current, rack_of),
        "printed_bound_replicas": lb_r, "printed_bound_bytes": lb_b,
        "printed_rack_bound_replicas": est.get("rack_replicas_lower_bound"),
        "exact_min_replicas": exact_r, "exact_min_bytes": exact_b,
        "opskit_replicas": ops_replicas, "opskit_bytes": ops_bytes,
        "opskit_replicas_vs_bound": ratio(ops_replicas, lb_r),
        "opskit_replicas_vs_exact": ratio(ops_replicas, exact_r),
        "opskit_bytes_vs_bound": ratio(ops_bytes, lb_b),
        "opskit_bytes_vs_exact": ratio(ops_bytes, exact_b),
        "opskit_violations_after": rack_violations(after(ops_target), rack_of),
        "opskit_unspread_after": est.get("unspread_after"),
        "opskit_count_spread_after": spread(after(ops_target)),
        "tool_replicas": tool_replicas, "tool_bytes": tool_bytes,
        "tool_replicas_vs_bound": ratio(tool_replicas, lb_r),
        "tool_replicas_vs_exact": ratio(tool_replicas, exact_r),
        "tool_bytes_vs_bound": ratio(tool_bytes, lb_b),
        "tool_bytes_vs_exact": ratio(tool_bytes, exact_b),
        "tool_violations_after": rack_violations(after(tool_target), rack_of),
        "tool_count_spread_after": spread(after(tool_target)),
        "opskit_plan_s": round(ops_wall, 2), "tool_generate_s": round(tool_wall, 2),
        "tool_vs_opskit_time": round(tool_wall / ops_wall, 2),
        "opskit_plan_cpu_s": round(ops_cpu, 2), "tool_generate_cpu_s": round(tool_cpu, 2),
        "tool_vs_opskit_cpu": round(tool_cpu / ops_cpu, 2),
        "timing": "alternated", "runs": runs,
        "opskit_plan_walls_s": [round(x, 2) for x in ops_walls],
        "tool_generate_walls_s": [round(x, 2) for x in tool_walls],
        "opskit_plan_cpus_s": [round(x, 2) for x in ops_cpus],
        "tool_generate_cpus_s": [round(x, 2) for x in tool_cpus],
        "tool_vs_opskit_time_pairs_median": round(_median(
            [t / o for t, o in zip(tool_walls, ops_walls, strict=True)]), 2),
        "tool_vs_opskit_cpu_pairs_median": round(_median(
            [t / o for t, o in zip(tool_cpus, ops_cpus, strict=True)]), 2),
        "opskit_pure_planning_s": round(pure, 3), "opskit_pure_planning_cpu_s": round(pure_cpu, 3),
        **({} if baseline is None else {
            "baseline": str(baseline), "baseline_same_plan": base_same,
            "baseline_plan_s": round(_median(timed[2][0]), 2),
            "baseline_plan_cpu_s": round(_median(timed[2][1]), 2),
            "baseline_plan_walls_s": [round(x, 2) for x in timed[2][0]],
            "baseline_plan_cpus_s": [round(x, 2) for x in timed[2][1]],
            "baseline_vs_opskit_time_pairs_median": round(_median(
                [b / o for b, o in zip(timed[2][0], ops_walls, strict=True)]), 2),
            "baseline_vs_opskit_cpu_pairs_median": round(_median(
                [b / o for b, o in zip(timed[2][1], ops_cpus, strict=True)]), 2),
            "tool_vs_baseline_time_pairs_median": round(_median(
                [t / b for t, b in zip(tool_walls, timed[2][0], strict=True)]), 2)}),
        "load_before": [round(x, 1) for x in load_before],
        "load_after": [round(x, 1) for x in os.getloadavg()],
    }


#: topics concentrated in rack a (brokers 0 and 3 of a, b, c, a, b, c): RF 2 wholly in
#: it, RF 3 with two replicas in it; as a rack-blind tool or an old layout leaves them
CONCENTRATED = {2: [[0, 3], [3, 0]], 3: [[0, 3, 1], [3, 0, 2], [1, 0, 3], [2, 3, 0]]}


def _create(admin: Any, names: list[str], per_topic: int, rfs: Sequence[int], nodes: Any) -> None:
    from confluent_kafka.admin import NewTopic

    for n, rf in zip(names, rfs, strict=True):
        for f in admin.create_topics([NewTopic(n, per_topic, rf)]).values():
            f.result(300)
    _wait_partitions_known(nodes, names, per_topic)


def bench_racks(partitions: int, scenarios: list[str], grow_to: int, runs: int,
                port: int | None, seed: int = 11,
                baseline: Path | None = None) -> list[dict[str, Any]]:
    """Scenario ``zone``: 3 brokers in rack a with the topics, then broker 2 moved to
    rack b (restart) and brokers 3, 4, 5 added in racks b, c, c. Scenario ``grow``: 3
    brokers in racks a, b, c (topics placed rack-aware by Kafka), 3 added (a, b, c);
    then topics concentrated in rack a are added; with ``grow_to`` > 6, more brokers
    (continuing a, b, c) join empty. A comparison on the cluster at each stage."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.ports import free_port_block
    from opskit.sandbox.scale import add_brokers, add_node

    class _Rows(list[dict[str, Any]]):
        def append(self, row: dict[str, Any]) -> None:  # shown as soon as measured
            print(json.dumps(row), flush=True)
            super().append(row)

    results = _Rows()
    tmp = Path(tempfile.mkdtemp(prefix="bench-rk-"))
    per_topic = partitions // len(PLAN_TOPIC_RFS)
    old_heap = os.environ.get("OPSKIT_SANDBOX_HEAP")
    os.environ.setdefault("OPSKIT_SANDBOX_HEAP", "768m" if partitions > 3000 else "512m")
    try:
        for scenario in scenarios:
            sb = Sandbox(f"bench-rk-{scenario}-{uuid.uuid4().hex[:6]}")
            try:
                st, _ = sb.up(brokers=3, version="3.7", port=port or free_port_block(6),
                              racks=["a"] if scenario == "zone" else ["a", "b", "c"])
                admin = AdminClient({"bootstrap.servers": st.bootstrap})
                names = [f"rk_{scenario}_rf{rf}_{i}" for i, rf in enumerate(PLAN_TOPIC_RFS)]
                _create(admin, names, per_topic, PLAN_TOPIC_RFS, st.nodes)
                _fill_random(st.bootstrap, names, per_topic, seed)
                if scenario == "zone":
                    sb.set_rack(2, "b", wait_timeout=900)
                    for rack in ("b", "c", "c"):
                        add_node(sb, "broker", wait_timeout=900, rack=rack)
                    st = sb.require()
                    results.append(_compare_racks("1 rack -> 3 racks, 3 -> 6 brokers",
                                                  st.bootstrap, names, tmp, runs, baseline))
                    continue
                st = add_brokers(sb, 3, wait_timeout=900)
                results.append(_compare_racks("3 racks, 3 -> 6 brokers", st.bootstrap, names,
                                              tmp, runs, baseline))
                conc = [f"rk_conc_rf{rf}" for rf in CONCENTRATED]
                for n, (rf, layout) in zip(conc, CONCENTRATED.items(), strict=True):
                    assignment = [layout[i % len(layout)] for i in range(max(4, per_topic // 4))]
                    for f in admin.create_topics([NewTopic(
                            n, len(assignment), replica_assignment=assignment)]).values():
                        f.result(300)
                    _wait_partitions_known(st.nodes, [n], len(assignment))
                    _fill_random(st.bootstrap, [n], len(assignment), seed + rf)
                names += conc
                results.append(_compare_racks("3 racks, 3 -> 6 brokers, + 2 topics in rack a",
                                              st.bootstrap, names, tmp, runs, baseline))
                if grow_to > 6:
                    os.environ["OPSKIT_SANDBOX_HEAP"] = "384m"  # empty brokers
                    st = add_brokers(sb, grow_to - 6, wait_timeout=900)
                    results.append(_compare_racks(
                        f"3 racks, 3 -> {grow_to} brokers, + 2 topics in rack a",
                        st.bootstrap, names, tmp, runs, baseline))
            finally:
                sb.down()
    finally:
        if old_heap is None:
            os.environ.pop("OPSKIT_SANDBOX_HEAP", None)
        else:
            os.environ["OPSKIT_SANDBOX_HEAP"] = old_heap
    return results


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    pl = sub.add_parser("plan", help="(a) replicas/bytes moved vs the lower bound and Kafka's "
                                     "--generate, 3 -> 6 brokers; (b) planning time")
    pl.add_argument("--partitions", type=int, default=1200)
    pl.add_argument("--full", action="store_true", help="10,000 partitions")
    ex = sub.add_parser("exec", help="(c) execution time under a throttle vs D/L and Kafka's tool")
    ex.add_argument("--mb-per-broker", type=int, default=30)
    ex.add_argument("--throttle-mb", type=float, default=3.0)
    ex.add_argument("--partitions", type=int, default=6, help="a multiple of 3")
    ex.add_argument("--full", action="store_true", help="200 MB per broker at 10 MB/s")
    rk = sub.add_parser("racks", help="(d) rack-aware plans vs Kafka's rack-aware --generate: "
                                      "moves / bounds, rack violations after, planning time")
    rk.add_argument("--partitions", type=int, default=1200)
    rk.add_argument("--full", action="store_true", help="10,000 partitions")
    rk.add_argument("--scenarios", default="zone,grow", help="zone, grow or both")
    rk.add_argument("--grow-to", type=int, default=6,
                    help="in scenario grow, add empty brokers up to this many (e.g. 12)")
    rk.add_argument("--runs", type=int, default=5,
                    help="timed runs of each command, the two alternating (median)")
    rk.add_argument("--port", type=int, default=None, help="first broker port of the sandbox")
    rk.add_argument("--baseline", type=Path, default=None,
                    help="another source tree (e.g. a worktree of main): its opskit is timed "
                         "in turn with this one's and --generate, and its plan compared")
    args = ap.parse_args()
    if args.part == "racks":
        print("load at start:", _uptime())
        rows = bench_racks(10_000 if args.full else args.partitions,
                           [s.strip() for s in args.scenarios.split(",") if s.strip()],
                           args.grow_to, args.runs, args.port,
                           baseline=args.baseline.resolve() if args.baseline else None)
        print(json.dumps(rows, indent=2))
        for res in rows:
            exact_b = ("not computed (over 2,500 partitions)" if res["exact_min_bytes"] is None
                       else f"{res['exact_min_bytes']:,}")
            print(f"{res['case']} ({res['racks']}, {res['partitions']:,} partitions, "
                  f"{res['violations_before']} over their rack limit before): replicas moved "
                  f"opskit {res['opskit_replicas']} / Kafka's --generate {res['tool_replicas']}; "
                  f"printed bound {res['printed_bound_replicas']}, exact minimum "
                  f"{res['exact_min_replicas']} -> opskit {res['opskit_replicas_vs_bound']}x the "
                  f"printed bound, {res['opskit_replicas_vs_exact']}x the exact minimum, "
                  f"--generate {res['tool_replicas_vs_bound']}x / {res['tool_replicas_vs_exact']}x; "
                  f"bytes moved opskit {res['opskit_bytes']:,} / --generate {res['tool_bytes']:,}, "
                  f"printed bound {res['printed_bound_bytes']:,}, exact minimum "
                  f"{exact_b} -> opskit {res['opskit_bytes_vs_bound']}x / "
                  f"{res['opskit_bytes_vs_exact']}x, --generate {res['tool_bytes_vs_bound']}x / "
                  f"{res['tool_bytes_vs_exact']}x; rack violations after: opskit "
                  f"{res['opskit_violations_after']}, --generate {res['tool_violations_after']}; "
                  f"replica count max-min after: opskit {res['opskit_count_spread_after']}, "
                  f"--generate {res['tool_count_spread_after']}; plan time (median of {args.runs}) "
                  f"opskit {res['opskit_plan_s']} s ({res['opskit_plan_cpu_s']} CPU s), --generate "
                  f"{res['tool_generate_s']} s ({res['tool_generate_cpu_s']} CPU s): "
                  f"{res['tool_vs_opskit_time']}x wall, {res['tool_vs_opskit_cpu']}x CPU; median of "
                  f"the run pairs' ratios {res['tool_vs_opskit_time_pairs_median']}x wall, "
                  f"{res['tool_vs_opskit_cpu_pairs_median']}x CPU (opskit's "
                  f"planning step alone {res['opskit_pure_planning_s']} s); load "
                  f"{res['load_before']} -> {res['load_after']}")
            if "baseline" in res:
                print(f"  baseline {res['baseline']}: same plan {res['baseline_same_plan']}; "
                      f"{res['baseline_plan_s']} s ({res['baseline_plan_cpu_s']} CPU s); run "
                      f"pairs' median ratio baseline / this {res['baseline_vs_opskit_time_pairs_median']}x"
                      f" wall, {res['baseline_vs_opskit_cpu_pairs_median']}x CPU; --generate / "
                      f"baseline {res['tool_vs_baseline_time_pairs_median']}x wall")
        print("load at end:", _uptime())
    if args.part == "plan":
        res = bench_plan(10_000 if args.full else args.partitions)
        print(json.dumps(res, indent=2))
        print(f"(a) replicas moved / lower bound: opskit {res['opskit_replicas_vs_bound']}, "
              f"Kafka's --generate {res['tool_replicas_vs_bound']}; bytes moved / lower bound: "
              f"opskit {res['opskit_bytes_vs_bound']}, --generate {res['tool_bytes_vs_bound']}")
        print(f"(b) {res['partitions']:,} partitions x 6 brokers: opskit reassign plan "
              f"{res['opskit_plan_s']} s, Kafka's --generate {res['tool_generate_s']} s "
              f"({res['tool_vs_opskit_time']}x); CPU {res['opskit_plan_cpu_s']} s vs "
              f"{res['tool_generate_cpu_s']} s ({res['tool_vs_opskit_cpu']}x); opskit's planning "
              f"step alone {res['opskit_pure_planning_s']} s ({res['opskit_pure_planning_cpu_s']} "
              f"CPU s); load average {res['load_average_1m']}")
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
