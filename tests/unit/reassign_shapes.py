"""Seeded synthetic topologies shaped like benchmarks/bench_reassign.py's stages (pure, no
broker): topics of RF 1, 2, 3 and 3 placed round-robin on the first brokers (as Kafka's
tool places them: each replica list a shifted run over the brokers, rack-alternating
when the brokers are), record sizes drawn at random, and the benchmark's racks.

Used by test_reassign_plan_pinned.py (plans pinned by a hash) and to time the planner at
10,000 partitions without a cluster (``python tests/unit/reassign_shapes.py``)."""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time

from opskit.core.reassign.model import (
    Broker,
    Goal,
    GoalKind,
    PartitionState,
    Plan,
    Policy,
    Topology,
)

RFS = (1, 2, 3, 3)
#: topics concentrated in rack a (brokers 0 and 3 of a, b, c, a, b, c), as in the benchmark
CONCENTRATED = {2: [[0, 3], [3, 0]], 3: [[0, 3, 1], [3, 0, 2], [1, 0, 3], [2, 3, 0]]}


def _topics(rnd: random.Random, per_topic: int, holders: list[int]) -> list[PartitionState]:
    parts = []
    n = len(holders)
    for t, rf in enumerate(RFS):
        start = rnd.randrange(n)
        shift = rnd.randrange(n)
        for p in range(per_topic):
            first = (start + p) % n
            step = 1 + (shift + p // n) % (n - 1) if n > 1 else 0
            reps = [holders[first]]
            k = first
            while len(reps) < rf:
                k = (k + step) % n
                if holders[k] in reps:
                    k = (k + 1) % n
                reps.append(holders[k])
            size = sum(rnd.randrange(1000, 8000) for _ in range(rnd.randrange(1, 5)))
            parts.append(PartitionState(f"t{t}_rf{rf}", p, tuple(reps), tuple(reps), reps[0], size))
    return parts


def shape(name: str, partitions: int, seed: int = 11) -> tuple[Topology, Goal]:
    """``zone`` (racks a a b b c c, the data on brokers 0-2), ``grow1`` (a b c a b c, data on
    0-2), ``grow2`` (grow1 + two topics concentrated in rack a), ``grow3`` (grow2 on 12
    brokers), ``norack`` (3 -> 6 brokers without racks: add-brokers 3,4,5), ``drain``
    (grow1's racks, data on all 6, remove broker 5)."""
    rnd = random.Random(seed)
    per_topic = partitions // len(RFS)
    holders = [0, 1, 2, 3, 4, 5] if name == "drain" else [0, 1, 2]
    parts = _topics(rnd, per_topic, holders)
    if name in ("grow2", "grow3"):
        for rf, layout in CONCENTRATED.items():
            for p in range(max(4, per_topic // 4)):
                reps = layout[p % len(layout)]
                size = sum(rnd.randrange(1000, 8000) for _ in range(rnd.randrange(1, 5)))
                parts.append(PartitionState(f"conc_rf{rf}", p, tuple(reps), tuple(reps), reps[0],
                                            size))
    n = 12 if name == "grow3" else 6
    racks: list[str | None]
    if name == "zone":
        racks = ["a", "a", "b", "b", "c", "c"]
    elif name == "norack":
        racks = [None] * n
    else:
        racks = ["abc"[b % 3] for b in range(n)]
    topo = Topology(tuple(Broker(b, r) for b, r in enumerate(racks)), tuple(parts))
    if name == "norack":
        return topo, Goal(GoalKind.ADD_BROKERS, brokers=(3, 4, 5))
    if name == "drain":
        return topo, Goal(GoalKind.REMOVE_BROKERS, brokers=(5,))
    return topo, Goal(GoalKind.REBALANCE)


SHAPES = ("zone", "grow1", "grow2", "grow3", "norack", "drain")


def plan_digest(plan: Plan) -> str:
    """A hash of everything a plan says (targets, bases, estimates with the bounds and the
    bytes per broker), without its creation time."""
    d = plan.to_dict()
    d["opskit"].pop("created")
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def timed(topology: Topology, goal: Goal, policy: Policy) -> tuple[Plan, float]:
    """The plan and the CPU seconds it took."""
    from datetime import UTC, datetime

    from opskit.core.reassign.plan import plan_reassignment

    t = time.process_time()
    plan = plan_reassignment(topology, goal, policy, datetime.now(UTC))
    return plan, time.process_time() - t


if __name__ == "__main__":  # time the pure planner: python tests/unit/reassign_shapes.py [N]
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else SHAPES
    for name in names:
        for policy in (Policy(), Policy(byte_tolerance_pct=10)):
            topo, goal = shape(name, size)
            plan, cpu = timed(topo, goal, policy)
            est = plan.estimates
            print(f"{name:7} bytes={policy.byte_tolerance_pct} partitions={len(topo.partitions)} "
                  f"moved={est.replicas_moved} bound={est.replicas_lower_bound} "
                  f"cpu={cpu:.2f}s digest={plan_digest(plan)}", flush=True)
