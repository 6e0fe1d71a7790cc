"""Preferred leaders weighted by bytes-in (``reassign plan --leader-weights``,
opskit/core/reassign/leader_weights.py): on generated topologies the replica moves are those
of the plan without weights, every topic's leader spread (and the cluster's) stays within
what the unweighted plan reached (1 where it reached 1), and the leader bytes-in spread is
never worse than the unweighted plan's; the rates file is read strictly."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opskit.core.models import TopicPartition
from opskit.core.reassign.leader_weights import Rates, leader_load, parse_rates
from opskit.core.reassign.model import Goal, GoalKind, Plan, Policy, Topology, plan_from_json
from opskit.core.reassign.plan import plan_reassignment
from opskit.errors import InvalidInputError, OpskitError
from tests.unit.test_reassign_plan_props import FAST, NOW, clusters


def _after(topology: Topology, plan: Plan) -> list[tuple[int, ...]]:
    target = {a.tp: a.replicas for a in plan.partitions}
    return [target.get(p.tp, p.replicas) for p in topology.partitions]


def _spreads(topology: Topology, reps: list[tuple[int, ...]], stay: list[int]) -> tuple[dict[str, int], int]:
    per: dict[str, Counter[int]] = {}
    cluster: Counter[int] = Counter()
    for p, rs in zip(topology.partitions, reps, strict=True):
        if rs[0] in stay:
            per.setdefault(p.topic, Counter())[rs[0]] += 1
            cluster[rs[0]] += 1

    def spread(c: Counter[int]) -> int:
        return max(c[b] for b in stay) - min(c[b] for b in stay)

    return {t: spread(c) for t, c in per.items()}, spread(cluster)


def _moved_sets(topology: Topology, reps: list[tuple[int, ...]]) -> list[frozenset[int]]:
    return [frozenset(rs) for rs in reps]


@FAST
@given(cluster=clusters(min_brokers=2), extra=st.integers(0, 2), seed=st.integers(0, 2**32),
       kind=st.sampled_from(["add", "remove", "rebalance"]),
       skew=st.sampled_from(["even", "heavy-tail", "one-hot", "sparse"]))
def test_weights_reorder_only_keep_topic_spread_and_never_worsen_bytes(
        cluster: tuple[Topology, int, str], extra: int, seed: int, kind: str, skew: str) -> None:
    topology, _racks, _shape = cluster
    ids = list(topology.broker_ids)
    if kind == "add" and extra:
        from opskit.core.reassign.model import Broker
        rack = {b.id: b.rack for b in topology.brokers}
        racked = any(rack.values())
        new = [max(ids) + 1 + k for k in range(extra)]
        names = sorted({r for r in rack.values() if r})
        topology = Topology(topology.brokers + tuple(
            Broker(b, names[b % len(names)] if racked else None) for b in new), topology.partitions)
        goal = Goal(GoalKind.ADD_BROKERS, brokers=tuple(new))
    elif kind == "remove" and len(ids) > max(len(p.replicas) for p in topology.partitions):
        goal = Goal(GoalKind.REMOVE_BROKERS, brokers=(ids[-1],))
    else:
        goal = Goal(GoalKind.REBALANCE)
    rnd = random.Random(seed)
    rates: dict[TopicPartition, float] = {}
    for p in topology.partitions:
        if skew == "even":
            rates[p.tp] = 1000.0
        elif skew == "heavy-tail":
            rates[p.tp] = rnd.paretovariate(1.2) * 100
        elif skew == "one-hot":
            rates[p.tp] = 1e6 if p.partition == 0 else rnd.random() * 10
        elif rnd.random() < 0.5:
            rates[p.tp] = rnd.randrange(0, 50_000)
    try:
        plain = plan_reassignment(topology, goal, Policy(), NOW)
    except OpskitError as e:  # a refusal (racks, RF): the weighted plan must refuse alike
        with pytest.raises(type(e)):
            plan_reassignment(topology, goal, Policy(leader_rates=Rates(rates, {}, "t")), NOW)
        return
    weighted = plan_reassignment(topology, goal, Policy(leader_rates=Rates(rates, {}, "t")), NOW)
    a, b = _after(topology, plain), _after(topology, weighted)
    # the same replicas on the same brokers: only the order (the preferred leader) differs
    assert _moved_sets(topology, a) == _moved_sets(topology, b)
    assert weighted.estimates.replicas_moved == plain.estimates.replicas_moved
    assert weighted.estimates.bytes_moved == plain.estimates.bytes_moved
    assert weighted.estimates.replicas_lower_bound == plain.estimates.replicas_lower_bound
    load = weighted.estimates.leader_bytes_in
    assert load is not None
    stay = list(load.brokers)
    topics_a, cluster_a = _spreads(topology, a, stay)
    topics_b, cluster_b = _spreads(topology, b, stay)
    assert cluster_b <= max(1, cluster_a)
    for t, s in topics_a.items():
        assert topics_b[t] <= max(1, s), t
    w, _ = Rates(rates, {}, "t").weights([p.tp for p in topology.partitions])
    assert load.after == leader_load(b, w, stay)
    assert load.before == leader_load([p.replicas for p in topology.partitions], w, stay)
    assert load.spread(load.after) <= load.spread(leader_load(a, w, stay))
    if skew == "even":  # equal rates: the count balance is already the best; nothing changes
        assert a == b


def test_no_weights_no_report_and_the_same_plan() -> None:
    from tests.unit.reassign_shapes import plan_digest, shape
    topology, goal = shape("grow1", 200)
    plain = plan_reassignment(topology, goal, Policy(), NOW)
    assert plain.estimates.leader_bytes_in is None
    assert "leader_bytes_in" not in plain.to_dict()["opskit"]["estimates"]
    zero = plan_reassignment(topology, goal, Policy(leader_rates=Rates({}, {}, "t")), NOW)
    assert [a.replicas for a in zero.partitions] == [a.replicas for a in plain.partitions]
    assert plan_digest(plain) != plan_digest(zero)  # the report is there, all 0
    assert set(zero.estimates.leader_bytes_in.after.values()) == {0}  # type: ignore[union-attr]


def test_weights_even_a_skewed_shape_and_round_trip_the_plan_file() -> None:
    from tests.unit.reassign_shapes import shape
    topology, goal = shape("grow1", 1000)
    rnd = random.Random(5)
    rates = Rates({p.tp: rnd.choice([10, 100, 50_000]) for p in topology.partitions}, {}, "t")
    plain = plan_reassignment(topology, goal, Policy(), NOW)
    weighted = plan_reassignment(topology, goal, Policy(leader_rates=rates), NOW)
    load = weighted.estimates.leader_bytes_in
    assert load is not None
    w, _ = rates.weights([p.tp for p in topology.partitions])
    unweighted = load.spread(leader_load(_after(topology, plain), w, list(load.brokers)))
    # on this shape 399,750 -> 195,550 B/s; before the byte-minimal placement (issue #24,
    # byteflow.py) 308,710 -> 27,357: with the smallest partitions moved whole, fewer
    # partitions span the old and the new brokers, so reordering has less room
    assert load.spread(load.after) * 2 < unweighted
    again = plan_from_json(weighted.to_json())
    assert again.estimates.leader_bytes_in == load


def test_weights_go_with_the_balancing_goals_only() -> None:
    from tests.unit.reassign_shapes import shape
    topology, _ = shape("grow1", 100)
    goal = Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3)
    with pytest.raises(InvalidInputError, match="leader weights go with"):
        plan_reassignment(topology, goal, Policy(leader_rates=Rates({}, {}, "t")), NOW)


def test_rates_file_per_partition_and_throughputs_json() -> None:
    r = parse_rates(json.dumps({"version": 1, "partitions": [
        {"topic": "a", "partition": 0, "bytes_in_per_second": 1500.4},
        {"topic": "a", "partition": 1, "bytes_in_per_second": 0}]}), "f")
    tps = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
    w, notes = r.weights(tps)
    assert w == [1500, 0, 0]
    assert notes == ["1 partition(s) have no rate in the leader weights: they weigh 0"]
    t = parse_rates(json.dumps({"interval_seconds": 10.0, "groups": [], "topics": [
        {"topic": "a", "partitions": 2, "bytes_per_second": 3000.0},
        {"topic": "b", "partitions": 1, "bytes_per_second": None},
        {"topic": "gone", "partitions": 1, "bytes_per_second": 5.0}]}), "f")
    w, notes = t.weights(tps)
    assert w == [1500, 1500, 0]
    assert any("not in the cluster (e.g. gone)" in n for n in notes)
    assert any("per topic" in n for n in notes)


@pytest.mark.parametrize(("text", "message"), [
    ("{", "not valid JSON"),
    ('{"partitions": [{"topic": "a", "partition": 0, "bytes_in_per_second": -1}]}', ">= 0"),
    ('{"partitions": [{"topic": "a", "partition": 0, "bytes_in_per_second": NaN}]}', "NaN"),
    ('{"partitions": [{"topic": "a", "partition": -1, "bytes_in_per_second": 1}]}', "partition"),
    (('{"partitions": [{"topic": "a", "partition": 0, "bytes_in_per_second": 1},'
      ' {"topic": "a", "partition": 0, "bytes_in_per_second": 2}]}'), "listed twice"),
    ('{"rates": {}}', "expected"),
    ("[]", "expected"),
])
def test_bad_rates_files_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as e:
        parse_rates(text, "--leader-weights f.json")
    assert "\n" not in str(e.value)


def test_what_opskit_throughput_prints_is_accepted() -> None:
    """The JSON ``opskit throughput -o json`` prints (its ``measure`` over two readings,
    through ``emit``'s json.dumps) is a rates file: per topic, split over its partitions."""
    from opskit.adapters.kafka.log_dirs import PartitionSizes
    from opskit.cli.throughput import Reading, measure

    tps = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
    first = Reading(100.0, dict.fromkeys(tps, 0), {}, PartitionSizes(dict.fromkeys(tps, 0)))
    second = Reading(110.0, dict.fromkeys(tps, 50),
                     {}, PartitionSizes({tps[0]: 30_000, tps[1]: 10_000, tps[2]: 5_000}))
    printed = json.dumps(measure(first, second, ["a", "b"]))
    rates = parse_rates(printed, "--leader-weights t.json")
    assert rates.topics == {"a": 4000.0, "b": 500.0}
    w, notes = rates.weights(tps)
    assert w == [2000, 2000, 500]
    assert any("per topic" in n for n in notes)
