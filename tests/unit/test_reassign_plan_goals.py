"""The planner on small hand-made clusters: each goal, each refusal, estimates."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from opskit.cli.exits import exit_code_for
from opskit.core.reassign.model import (
    Assignment,
    Broker,
    Goal,
    GoalKind,
    PartitionState,
    Policy,
    Topology,
    plan_from_json,
)
from opskit.core.reassign.plan import plan_reassignment
from opskit.errors import NotFoundError, OpskitError, RefusedError

NOW = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
MB = 1_000_000


def _cluster(brokers: int = 3, rf: int = 1, partitions: int = 6, racks: bool = False,
             topic: str = "events", min_isr: int = 1) -> Topology:
    parts = tuple(PartitionState(topic, p, tuple((p + j) % brokers for j in range(rf)),
                                 leader=p % brokers, size_bytes=(p + 1) * MB)
                  for p in range(partitions))
    return Topology(tuple(Broker(b, f"r{b}" if racks else None) for b in range(brokers)),
                    parts, {topic: min_isr})


def _grow(t: Topology, *ids: int, rack: str | None = None) -> Topology:
    return Topology(t.brokers + tuple(Broker(i, rack) for i in ids), t.partitions, t.min_insync)


def test_add_brokers_moves_onto_the_new_brokers_only_what_balance_needs() -> None:
    base = _grow(_cluster(3, rf=2, partitions=6), 3, 4, 5)
    plan = plan_reassignment(base, Goal(GoalKind.ADD_BROKERS, brokers=(3, 4, 5)),
                             Policy(throttle_bytes_per_s=MB), NOW)
    est = plan.estimates
    # 12 replicas, 4 per old broker, 2 per broker after: 6 moves, all onto 3, 4, 5
    assert est.replicas_moved == est.replicas_lower_bound == 6
    assert sorted(est.broker_bytes_in) == [3, 4, 5]
    # each old broker sheds its two smallest partitions: the bytes bound is reached
    assert est.bytes_moved == est.bytes_lower_bound
    busiest = max([*est.broker_bytes_in.values(), *est.broker_bytes_out.values()])
    assert est.duration_s == busiest / MB
    assert plan.created == "2026-11-24T08:00:00Z"
    for before, after in plan.moves():
        assert len(set(before.replicas) - set(after.replicas)) <= 2
    assert plan_from_json(plan.to_json()) == plan


def test_balanced_cluster_moves_nothing() -> None:
    plan = plan_reassignment(_cluster(3, rf=3, partitions=9), Goal(GoalKind.REBALANCE), Policy(), NOW)
    assert plan.is_empty
    assert plan.estimates.replicas_moved == plan.estimates.replicas_lower_bound == 0


def test_rebalance_fixes_leaders_by_reordering_only() -> None:
    parts = tuple(PartitionState("t", p, (0, 1, 2), leader=0) for p in range(3))
    plan = plan_reassignment(Topology(tuple(Broker(b) for b in range(3)), parts),
                             Goal(GoalKind.REBALANCE), Policy(), NOW)
    assert plan.estimates.replicas_moved == 0
    assert plan.estimates.leaders_changed == 2
    assert sorted(a.replicas[0] for a in plan.partitions) == [1, 2]
    assert all(sorted(a.replicas) == [0, 1, 2] for a in plan.partitions)


def test_remove_brokers_drains() -> None:
    plan = plan_reassignment(_cluster(4, rf=2, partitions=8), Goal(GoalKind.REMOVE_BROKERS, brokers=(3,)),
                             Policy(), NOW)
    assert all(3 not in a.replicas for a in plan.partitions)
    assert plan.estimates.replicas_moved == plan.estimates.replicas_lower_bound == 4


def test_raise_rf_keeps_the_current_leader_first_and_includes_internal_only_when_asked() -> None:
    t = _cluster(3, rf=1, partitions=3)
    offsets = tuple(PartitionState("__consumer_offsets", p, (p % 3,), leader=p % 3) for p in range(3))
    # the leader is not the first replica of events:0 (after an unclean election, say)
    events = (PartitionState("events", 0, (0,), leader=0),)
    t = Topology(t.brokers, events + t.partitions[1:] + offsets, t.min_insync)
    plan = plan_reassignment(t, Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3), Policy(), NOW)
    assert {a.topic for a in plan.partitions} == {"events"}
    assert plan.estimates.replicas_moved == plan.estimates.replicas_lower_bound == 6
    for before, after in plan.moves():
        assert after.replicas[0] == before.replicas[0]
        assert sorted(after.replicas) == [0, 1, 2]
    plan = plan_reassignment(t, Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3,
                                     topics=("events",), include_internal=True), Policy(), NOW)
    assert {a.topic for a in plan.partitions} == {"events", "__consumer_offsets"}
    assert plan.estimates.leaders_changed == 0


def test_raise_rf_puts_the_actual_leader_first() -> None:
    t = Topology(tuple(Broker(b) for b in range(3)), (PartitionState("t", 0, (0, 1), leader=1),))
    plan = plan_reassignment(t, Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3), Policy(), NOW)
    assert plan.partitions[0].replicas == (1, 0, 2)


def test_racks_spread_is_kept() -> None:
    t = _cluster(3, rf=1, partitions=6, racks=True)
    plan = plan_reassignment(t, Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3), Policy(), NOW)
    for a in plan.partitions:
        assert len({f"r{b}" for b in a.replicas}) == 3


def test_partial_racks_are_refused_unless_ignored() -> None:
    t = _grow(_cluster(3, racks=True), 3)
    with pytest.raises(RefusedError, match="brokers 3 have no rack"):
        plan_reassignment(t, Goal(GoalKind.ADD_BROKERS, brokers=(3,)), Policy(), NOW)
    plan = plan_reassignment(t, Goal(GoalKind.ADD_BROKERS, brokers=(3,)), Policy(respect_racks=False), NOW)
    assert plan.estimates.replicas_moved == plan.estimates.replicas_lower_bound


def test_from_json_target() -> None:
    t = _cluster(3, rf=1, partitions=3)
    target = (Assignment("events", 0, (1, 2), ("any", "/data/b")), Assignment("events", 1, (1,)))
    plan = plan_reassignment(t, Goal(GoalKind.FROM_JSON, target=target, source="x.json"), Policy(), NOW)
    # events:1 is already on broker 1: not a move
    assert [a.tp for a in plan.partitions] == [target[0].tp]
    assert plan.partitions[0].log_dirs == ("any", "/data/b")
    assert plan.estimates.replicas_moved == 2 == plan.estimates.replicas_lower_bound


@pytest.mark.parametrize(("topology", "goal", "error", "message"), [
    (_cluster(3), Goal(GoalKind.ADD_BROKERS, brokers=(7,)), RefusedError, "broker 7 is not registered"),
    (_cluster(3), Goal(GoalKind.REMOVE_BROKERS, brokers=(9,)), RefusedError,
     "broker 9 is not registered and holds no replicas"),
    (_cluster(3, rf=3), Goal(GoalKind.REMOVE_BROKERS, brokers=(2,)), RefusedError,
     "replication factor 3, above the 2 brokers"),
    (_cluster(3), Goal(GoalKind.REPLICATION_FACTOR, replication_factor=4), RefusedError,
     "replication factor 4 is above the 3 registered brokers"),
    (_cluster(3), Goal(GoalKind.REPLICATION_FACTOR, replication_factor=2, topics=("nope",)),
     NotFoundError, "topic 'nope' does not exist"),
    (_cluster(3), Goal(GoalKind.FROM_JSON, target=(Assignment("events", 0, (1, 5)),)), RefusedError,
     "broker 5 is not registered"),
    (_cluster(3), Goal(GoalKind.FROM_JSON, target=(Assignment("events", 99, (1,)),)), NotFoundError,
     "partition events:99 does not exist"),
    (_cluster(3), Goal(GoalKind.FROM_JSON, target=(Assignment("other", 0, (1,)),)), NotFoundError,
     "topic 'other' does not exist"),
    (_cluster(3, rf=2, min_isr=2), Goal(GoalKind.FROM_JSON, target=(Assignment("events", 0, (1,)),)),
     RefusedError, "events:0 would have 1 replicas, under its min.insync.replicas=2"),
])
def test_refusals(topology: Topology, goal: Goal, error: type[OpskitError], message: str) -> None:
    with pytest.raises(error, match=message) as info:
        plan_reassignment(topology, goal, Policy(), NOW)
    assert "\n" not in str(info.value)
    assert exit_code_for(info.value) == (5 if error is RefusedError else 4)


def test_offline_partition_is_refused() -> None:
    t = _cluster(3, rf=1, partitions=3)
    dead = PartitionState("events", 0, (0,), leader=None, offline=True)
    t = Topology(t.brokers, (dead, *t.partitions[1:]), t.min_insync)
    with pytest.raises(RefusedError, match="events:0 has no leader"):
        plan_reassignment(t, Goal(GoalKind.REPLICATION_FACTOR, replication_factor=2), Policy(), NOW)


def _racked(racks: str, partitions: tuple[tuple[int, ...], ...]) -> Topology:
    """Brokers 0.. in the racks given one letter each ("aab": 0 and 1 in a, 2 in b)."""
    return Topology(tuple(Broker(b, r) for b, r in enumerate(racks)),
                    tuple(PartitionState("t", p, rs, rs, rs[0], (p + 1) * MB)
                          for p, rs in enumerate(partitions)))


def test_adding_racks_spreads_every_partition_over_them() -> None:
    # three brokers in one rack, RF 3; two brokers join in racks b and c. The old planner
    # kept replicas in their rack and moved nothing; every partition now needs one
    # replica on 3 (rack b) and one on 4 (rack c): 2 moves per partition, all forced.
    t = _racked("aaabc", tuple((p % 3, (p + 1) % 3, (p + 2) % 3) for p in range(6)))
    plan = plan_reassignment(t, Goal(GoalKind.ADD_BROKERS, brokers=(3, 4)), Policy(), NOW)
    est = plan.estimates
    for a in plan.partitions:
        assert sorted("aaabc"[b] for b in a.replicas) == ["a", "b", "c"]
    assert len(plan.partitions) == 6
    assert est.replicas_moved == est.replicas_lower_bound == est.rack_replicas_lower_bound == 12
    assert (est.unspread_before, est.unspread_after) == (6, 0)
    # rack a keeps one replica of each partition: 2 per broker there, balance impossible
    # (3 and 4 hold all 6), so the bound is the rack bound
    assert est.bytes_moved == est.bytes_lower_bound == 2 * sum(range(1, 7)) * MB
    assert plan_from_json(plan.to_json()) == plan


def test_rf_above_racks_spreads_as_evenly_as_the_limit_allows() -> None:
    # RF 4 over 2 racks of 3: at most 2 per rack. Partition 0 has 3 in rack a.
    t = _racked("aaabbb", ((0, 1, 2, 3), (3, 4, 0, 1), (4, 5, 1, 2)))
    plan = plan_reassignment(t, Goal(GoalKind.REBALANCE), Policy(), NOW)
    est = plan.estimates
    after = {a.partition: a.replicas for a in plan.partitions}
    spread = Counter("aaabbb"[b] for b in after.get(0, (0, 1, 2, 3)))
    assert spread == Counter({"a": 2, "b": 2})
    assert est.rack_replicas_lower_bound == 1
    assert est.replicas_lower_bound <= est.replicas_moved
    assert est.unspread_after == 0


def test_ignore_racks_keeps_the_rack_blind_plan() -> None:
    t = _racked("aaabc", tuple((p % 3, (p + 1) % 3, (p + 2) % 3) for p in range(6)))
    plan = plan_reassignment(t, Goal(GoalKind.ADD_BROKERS, brokers=(3, 4)), Policy(respect_racks=False), NOW)
    est = plan.estimates
    # 18 replicas on 5 brokers: 3 or 4 each, 6 moves, and no rack report
    assert est.replicas_moved == est.replicas_lower_bound == 6
    assert est.rack_replicas_lower_bound is None
    assert "rack_replicas_lower_bound" not in plan.to_dict()["opskit"]["estimates"]


def test_drain_keeps_the_spread_across_racks() -> None:
    # 2 racks of 2; draining 3 leaves rack b with broker 2 alone: every RF-2 partition
    # keeps one replica there
    t = _racked("aabb", ((0, 2), (1, 3), (0, 3), (1, 2)))
    plan = plan_reassignment(t, Goal(GoalKind.REMOVE_BROKERS, brokers=(3,)), Policy(), NOW)
    est = plan.estimates
    after = {p.partition: p.replicas for p in t.partitions} | {a.partition: a.replicas for a in plan.partitions}
    assert all(sorted("aabb"[b] for b in rs) == ["a", "b"] for rs in after.values())
    assert est.replicas_moved == est.replicas_lower_bound == est.rack_replicas_lower_bound == 2


def test_a_drain_forced_onto_a_floor_broker_keeps_it_there_instead_of_a_second_move() -> None:
    """Found by hypothesis: p0 on broker 2, p1 on 0 and 1; draining 0 must put p1's
    replica on 2 (1 holds p1). Ties gave broker 1 the ceil count of 2, so broker 2 then
    shed p0 to broker 1: 2 moves where 1 suffices (2 and 1 are balanced as they are)."""
    parts = (PartitionState("t", 0, (2,), leader=2, size_bytes=MB),
             PartitionState("t", 1, (0, 1), leader=0, size_bytes=MB))
    topo = Topology(tuple(Broker(b, None) for b in range(3)), parts, {"t": 1})
    plan = plan_reassignment(topo, Goal(GoalKind.REMOVE_BROKERS, brokers=(0,)), Policy(), NOW)
    assert plan.estimates.replicas_moved == plan.estimates.replicas_lower_bound == 1
    after = {(a.topic, a.partition): a.replicas for _b, a in plan.moves()}
    assert list(after) == [("t", 1)] and sorted(after[("t", 1)]) == [1, 2]
