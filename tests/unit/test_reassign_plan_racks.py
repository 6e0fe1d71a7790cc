"""The rack goal against an exact solver on tiny topologies (3-6 brokers in 2-3 racks,
4-9 partitions, RF 1-3, placements that ignore racks): the plan leaves no partition above
its rack limit, is balanced whenever some rack-spread result is, and the printed bounds
never exceed the exact minimum moves (replicas and bytes) of any plan reaching the same
goal. The exact minimum is a dynamic program over
partitions whose state is the replica count per broker; it tries every rack-spread
replica set of every partition."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from itertools import combinations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opskit.core.reassign.balance import RackRule
from opskit.core.reassign.model import (
    Broker,
    Goal,
    GoalKind,
    PartitionState,
    Plan,
    Policy,
    Topology,
)
from opskit.core.reassign.plan import plan_reassignment
from opskit.core.reassign.racks import spread_over_racks

NOW = datetime(2026, 11, 27, 4, 0, tzinfo=UTC)
EXACT = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def rack_limit(rf: int, rack_sizes: Counter[str]) -> int:
    """The least L with sum over racks of min(L, brokers in the rack) >= rf."""
    return next(lim for lim in range(1, rf + 1) if sum(min(lim, n) for n in rack_sizes.values()) >= rf)


def tiny_case(rnd: random.Random) -> tuple[Topology, Goal, list[int], list[int]]:
    """A topology, a goal (rebalance, add or remove) and the brokers that stay / drain."""
    n = rnd.randint(3, 5)
    racks = rnd.randint(2, min(3, n))
    rack_of = [f"r{b % racks}" for b in range(n)]
    rnd.shuffle(rack_of)
    kind = rnd.choice([GoalKind.REBALANCE, GoalKind.ADD_BROKERS, GoalKind.REMOVE_BROKERS])
    old = list(range(n))
    if kind is GoalKind.ADD_BROKERS:  # a new broker, often in a new rack
        rack_of.append(rnd.choice([*sorted(set(rack_of)), "new"]))
    drained = [rnd.randrange(n)] if kind is GoalKind.REMOVE_BROKERS else []
    stay = [b for b in range(len(rack_of)) if b not in drained]
    top_rf = min(3, len(stay))
    # placements as a rack-blind tool or an old single-rack layout leaves them
    same_rack = rnd.random() < 0.3
    parts = []
    for p in range(rnd.randint(4, 9)):
        rf = rnd.randint(1, top_rf)
        pool = [b for b in old if rack_of[b] == rack_of[0]] if same_rack else old
        reps = rnd.sample(pool, rf) if len(pool) >= rf else rnd.sample(old, rf)
        parts.append(PartitionState("t", p, tuple(reps), tuple(reps), reps[0], rnd.randint(1, 1000)))
    goal = {GoalKind.REBALANCE: Goal(GoalKind.REBALANCE),
            GoalKind.ADD_BROKERS: Goal(GoalKind.ADD_BROKERS, brokers=(n,)),
            GoalKind.REMOVE_BROKERS: Goal(GoalKind.REMOVE_BROKERS, brokers=tuple(drained))}[kind]
    brokers = tuple(Broker(b, r) for b, r in enumerate(rack_of))
    return Topology(brokers, tuple(parts)), goal, stay, drained


def _choices(topology: Topology, stay: list[int]) -> list[list[tuple[frozenset[int], int]]]:
    """Per partition: every rack-spread replica set on the staying brokers, and the
    number of replicas it adds."""
    rack_of = {b.id: str(b.rack) for b in topology.brokers}
    sizes = Counter(rack_of[b] for b in stay)
    out = []
    for p in topology.partitions:
        lim = rack_limit(len(p.replicas), sizes)
        out.append([(frozenset(s), len(set(s) - set(p.replicas)))
                    for s in combinations(stay, len(p.replicas))
                    if max(Counter(rack_of[b] for b in s).values()) <= lim])
    return out


def exact_minimum(topology: Topology, stay: list[int], balanced: bool,
                  weight: Callable[[PartitionState], int]) -> int | None:
    """The least sum of weight x added replicas over all rack-spread results on ``stay``
    (``balanced``: every broker at floor or ceil of the replicas per broker); None when
    no result is balanced."""
    choices = _choices(topology, stay)
    if not balanced:
        return sum(min(c for _, c in opts) * weight(p)
                   for p, opts in zip(topology.partitions, choices, strict=True))
    total = sum(len(p.replicas) for p in topology.partitions)
    lo, hi = total // len(stay), -(-total // len(stay))
    index = {b: i for i, b in enumerate(stay)}
    states: dict[tuple[int, ...], int] = {(0,) * len(stay): 0}
    for p, opts in zip(topology.partitions, choices, strict=True):
        nxt: dict[tuple[int, ...], int] = {}
        for counts, cost in states.items():
            for s, added in opts:
                new = list(counts)
                for b in s:
                    new[index[b]] += 1
                if max(new) > hi:
                    continue
                key = tuple(new)
                c = cost + added * weight(p)
                if c < nxt.get(key, c + 1):
                    nxt[key] = c
        states = nxt
    ends = [c for counts, c in states.items() if min(counts) >= lo]
    return min(ends) if ends else None


def _after(topology: Topology, plan: Plan) -> list[tuple[int, ...]]:
    target = {a.tp: a.replicas for a in plan.partitions}
    return [target.get(p.tp, p.replicas) for p in topology.partitions]


def _is_balanced(reps: Sequence[Sequence[int]], stay: list[int]) -> bool:
    counts = Counter({b: 0 for b in stay})
    counts.update(b for rs in reps for b in rs)
    return max(counts[b] for b in stay) - min(counts[b] for b in stay) <= 1


def check_case(topology: Topology, goal: Goal, stay: list[int], drained: list[int]) -> dict[str, bool]:
    """The assertions for one case; returns what it saw (feasible: some rack-spread
    result is balanced; balanced: the plan's is; optimal: it moves the exact minimum)."""
    plan = plan_reassignment(topology, goal, Policy(), NOW)
    est = plan.estimates
    after = _after(topology, plan)
    rack_of = {b.id: str(b.rack) for b in topology.brokers}
    sizes = Counter(rack_of[b] for b in stay)
    for rs in after:
        assert not set(rs) & set(drained)
        assert max(Counter(rack_of[b] for b in rs).values()) <= rack_limit(len(rs), sizes), rs
    assert est.unspread_after == 0
    by_count: Callable[[PartitionState], int] = lambda p: 1
    by_size: Callable[[PartitionState], int] = lambda p: p.size_bytes
    rack_exact = exact_minimum(topology, stay, False, by_count)
    assert est.rack_replicas_lower_bound == rack_exact  # the rack bound is exact
    full = exact_minimum(topology, stay, True, by_count)
    balanced = _is_balanced(after, stay)
    if full is not None:
        assert balanced  # some rack-spread result is balanced: the plan finds one
    if full is not None and balanced:
        # the plan reaches rack spread and balance: its bounds against that goal's minimum
        assert est.replicas_lower_bound <= full <= est.replicas_moved
        full_bytes = exact_minimum(topology, stay, True, by_size)
        assert full_bytes is not None
        assert est.bytes_lower_bound <= full_bytes <= est.bytes_moved
    else:
        # balance out of reach: the plan reports the rack goal's bounds
        assert est.replicas_lower_bound == rack_exact <= est.replicas_moved
        rack_bytes = exact_minimum(topology, stay, False, by_size)
        assert rack_bytes is not None and est.bytes_lower_bound <= rack_bytes <= est.bytes_moved
    return {"feasible": full is not None, "balanced": balanced,
            "optimal": full is not None and balanced and est.replicas_moved == full,
            "bound_tight": est.replicas_lower_bound == (full if full is not None else rack_exact)}


@EXACT
@given(st.randoms(use_true_random=False))
def test_bounds_never_exceed_the_exact_minimum(rnd: random.Random) -> None:
    check_case(*tiny_case(rnd))


@EXACT
@given(st.randoms(use_true_random=False))
def test_rack_spreading_alone_moves_exactly_the_rack_bound(rnd: random.Random) -> None:
    topology, _goal, stay, _drained = tiny_case(rnd)
    stay = sorted(b.id for b in topology.brokers)
    rule = RackRule({b.id: str(b.rack) for b in topology.brokers})
    reps = [list(p.replicas) for p in topology.partitions]
    moves = spread_over_racks(reps, stay, [], rule)
    assert moves == exact_minimum(topology, stay, False, lambda p: 1)
    moved = sum(len(set(rs) - set(p.replicas)) for rs, p in zip(reps, topology.partitions, strict=True))
    assert moved == moves
    rack_sizes = Counter(rule.rack_of.values())
    for rs in reps:
        assert len(set(rs)) == len(rs)
        assert max(Counter(rule.rack_of[b] for b in rs).values()) <= rack_limit(len(rs), rack_sizes)
