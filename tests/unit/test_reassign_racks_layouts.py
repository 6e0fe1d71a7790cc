"""The layouts of the real-broker rack tests, checked against the exact solver of
``test_reassign_plan_racks.py``: four brokers in racks a,b,c,a (``test_racks_reassign.py``)
and six in a,b,c,a,b,c, with ``__consumer_offsets`` on brokers 0-2 (where Kafka put it
when the cluster had three) and two topics concentrated in rack a. The plan spreads every
partition, moves the exact minimum of replicas, and the printed bounds never exceed the
exact minima. On six brokers the heuristic's own replica bound (19) is below the minimum
(20): true, not tight; the plan moves more than it, so the exact fallback
(``opskit.core.reassign.flow``) computes the minimum and prints that (issue 24 asks for
bounds that are both where cheap)."""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_reassign_plan_racks import exact_minimum

from opskit.core.reassign.model import (
    Broker,
    Goal,
    GoalKind,
    PartitionState,
    Policy,
    Topology,
)
from opskit.core.reassign.plan import plan_reassignment

NOW = datetime(2026, 11, 27, 7, 0, tzinfo=UTC)
PAIRS = [(0, 3), (3, 0), (0, 3), (3, 0)]
TRIPLES = [(0, 3, 1), (3, 0, 2), (1, 0, 3), (2, 3, 0)]


def layout(brokers: int) -> Topology:
    parts = [PartitionState("__consumer_offsets", p, tuple((p + k) % 3 for k in range(3)),
                            size_bytes=1000) for p in range(12)]
    for p in range(4):
        parts.append(PartitionState("rk_pairs", p, PAIRS[p], size_bytes=200_000))
        parts.append(PartitionState("rk_triples", p, TRIPLES[p], size_bytes=300_000))
    return Topology(tuple(Broker(b, "abc"[b % 3]) for b in range(brokers)), tuple(parts))


@pytest.mark.parametrize(("brokers", "printed"), [(4, 8), (6, 20)])
def test_layouts_against_the_exact_solver(brokers: int, printed: int) -> None:
    topo = layout(brokers)
    plan = plan_reassignment(topo, Goal(GoalKind.REBALANCE), Policy(), NOW)
    est = plan.estimates
    target = {a.tp: a.replicas for a in plan.partitions}
    rack = {b.id: b.rack for b in topo.brokers}
    after = [target.get(p.tp, p.replicas) for p in topo.partitions]
    assert all(len({rack[b] for b in reps}) == min(len(reps), 3) for reps in after)
    stay = list(range(brokers))
    counts = Counter(b for reps in after for b in reps)
    balanced = max(counts[b] for b in stay) - min(counts[b] for b in stay) <= 1
    exact = exact_minimum(topo, stay, balanced, lambda p: 1)
    exact_bytes = exact_minimum(topo, stay, balanced, lambda p: p.size_bytes)
    assert exact is not None and exact_bytes is not None
    assert est.replicas_moved == exact                     # the plan moves the minimum
    assert est.replicas_lower_bound == printed <= exact     # the bound is true
    assert est.bytes_lower_bound <= exact_bytes <= est.bytes_moved
    assert balanced is (brokers == 6)  # 4 brokers in a,b,c,a: counts cannot be balanced
