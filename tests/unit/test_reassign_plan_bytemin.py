"""Bytes moved by replica-minimal plans (issue 24 item 5): among the plans moving the
fewest replicas, add and rebalance plans prefer the smallest replicas. Checked against
the exact solver of ``test_reassign_plan_racks`` (a dynamic program over every
rack-spread replica set of every partition) with the weight "one replica, then its
bytes", which gives the byte minimum among the replica-minimal balanced results, on 300
tiny topologies (3-5 brokers, racks or none, 4-9 partitions of sizes spread over three
orders of magnitude).

Figures on these seeds (0-299; 260 cases with bytes to move), bytes moved / that
minimum: before the exchange pass (``balance.trim_bytes``) 206 optimal, 90th percentile
1.70, at most 29.8 (seed 64); with it 239 optimal, 90th percentile 1.00, at most 16.8.
What is left comes mostly from the leader repair (``leaders.repair_leaders`` exchanges
moves to let leadership cross, size-blind): without leader balancing, before 210
optimal, at most 29.8; with the pass 244, at most 5.7 (seed 108)."""

from __future__ import annotations

import random

from test_reassign_plan_racks import NOW, exact_minimum

from opskit.core.reassign.model import (
    Broker,
    Goal,
    GoalKind,
    PartitionState,
    Policy,
    Topology,
)
from opskit.core.reassign.plan import plan_reassignment

SEEDS = range(300)
ONE_REPLICA = 10**9  # above any case's total bytes: replicas first, then bytes


def skewed_case(seed: int) -> tuple[Topology, Goal, list[int]]:
    """A rebalance or an added broker on 3-5 brokers (no racks, 2 or 3 racks; a new
    broker maybe in a new rack), 4-9 partitions of RF 1-3 placed at random, sizes
    10 B-10 kB (log-uniform)."""
    rnd = random.Random(seed)
    n = rnd.randint(3, 5)
    racks = rnd.choice([0, 0, 2, 3])
    rack_of: list[str | None] = [f"r{b % racks}" if racks else None for b in range(n)]
    rnd.shuffle(rack_of)
    kind = rnd.choice([GoalKind.REBALANCE, GoalKind.ADD_BROKERS])
    if kind is GoalKind.ADD_BROKERS:
        rack_of.append(rnd.choice([*sorted(set(map(str, rack_of))), "new"]) if racks else None)
    stay = list(range(len(rack_of)))
    parts = []
    for p in range(rnd.randint(4, 9)):
        reps = rnd.sample(range(n), rnd.randint(1, 3))
        parts.append(PartitionState(f"t{p % 2}", p, tuple(reps), tuple(reps), reps[0],
                                    int(10 ** rnd.uniform(1, 4))))
    goal = Goal(kind, brokers=(n,)) if kind is GoalKind.ADD_BROKERS else Goal(kind)
    return Topology(tuple(Broker(b, r) for b, r in enumerate(rack_of)), tuple(parts)), goal, stay


def _ratios(balance_leaders: bool) -> list[float]:
    out = []
    for seed in SEEDS:
        topology, goal, stay = skewed_case(seed)
        best = exact_minimum(topology, stay, True, lambda p: ONE_REPLICA + p.size_bytes)
        if best is None:
            continue  # no balanced rack-spread result
        replicas, byte_min = divmod(best, ONE_REPLICA)
        est = plan_reassignment(topology, goal, Policy(balance_leaders=balance_leaders), NOW).estimates
        assert est.replicas_moved == replicas, seed  # still replica-minimal
        assert est.bytes_moved >= byte_min, seed
        if byte_min:
            out.append(est.bytes_moved / byte_min)
        else:
            assert est.bytes_moved == 0, seed
    return sorted(out)


def test_replica_minimal_plans_move_near_the_byte_minimum() -> None:
    ratios = _ratios(balance_leaders=True)
    assert len(ratios) == 260
    assert sum(r == 1 for r in ratios) >= 235  # was 206
    assert ratios[int(0.9 * len(ratios))] == 1.0  # was 1.70
    assert ratios[-1] < 20  # was 29.8


def test_without_leader_balance_the_exchanges_reach_the_minimum_nearly_always() -> None:
    ratios = _ratios(balance_leaders=False)
    assert sum(r == 1 for r in ratios) >= 240  # was 210
    assert ratios[-1] < 6  # was 29.8


def test_a_smaller_replica_moves_instead() -> None:
    # broker 0 holds 5 of 11 replicas and sheds 2; its smallest (17 B, 33 B, 45 B) are on
    # the brokers at the count each receiver is given first, so 1,458 B went before
    sizes = [17, 1458, 1092, 33, 45, 2785]
    layout = [(1, 2, 0), (3, 0), (3,), (0,), (0, 2, 1), (0,)]
    topology = Topology(tuple(Broker(b, None) for b in range(4)),
                        tuple(PartitionState("t", p, rs, rs, rs[0], s)
                              for p, (rs, s) in enumerate(zip(layout, sizes, strict=True))))
    est = plan_reassignment(topology, Goal(GoalKind.REBALANCE), Policy(), NOW).estimates
    assert (est.replicas_moved, est.bytes_moved) == (2, 50)  # was (2, 1491)
    assert est.replicas_lower_bound == 2
