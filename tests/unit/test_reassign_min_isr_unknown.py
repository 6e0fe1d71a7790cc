"""A topic whose min.insync.replicas could not be read (the broker's DescribeConfigs answer
lacks it, as Tansu 0.6's does, or holds no number) is unknown, never 1: the planner and the
execution's checks refuse to move its partitions (exit 5, one line naming the topic), since
some value would refuse each such move; a plan that leaves the topic alone is unchanged.
A DescribeConfigs that fails stays an error."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.cli.exits import exit_code_for
from opskit.core.models import TopicPartition
from opskit.core.reassign.checks import ClusterView, build_moves
from opskit.core.reassign.model import (
    Assignment,
    Broker,
    Goal,
    GoalKind,
    PartitionState,
    Policy,
    Topology,
)
from opskit.core.reassign.plan import plan_reassignment
from opskit.core.reassign.plan_input import parse_plan
from opskit.errors import KafkaOperationError, RefusedError

NOW = datetime(2026, 11, 28, 14, 0, tzinfo=UTC)
UNREAD = "min.insync.replicas of topic 'events' could not be read"


def _topology(min_isr: int | None, brokers: int = 4, rf: int = 2) -> Topology:
    """``events`` (its min ISR ``min_isr``) and ``known`` (min ISR 1), 4 partitions each at
    RF ``rf``, all on brokers 0 and 1 (``brokers`` registered)."""
    parts = tuple(PartitionState(t, p, tuple(range(rf)), leader=0, size_bytes=1000)
                  for t in ("events", "known") for p in range(4))
    return Topology(tuple(Broker(b) for b in range(brokers)), parts,
                    {"events": min_isr, "known": 1})


GOALS = {
    "raise RF": Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3),
    "lower RF (from json)": Goal(GoalKind.FROM_JSON, target=(Assignment("events", 0, (0,)),)),
    "same RF (from json)": Goal(GoalKind.FROM_JSON, target=(Assignment("events", 0, (2, 3)),)),
    "rebalance": Goal(GoalKind.REBALANCE),
    "add brokers": Goal(GoalKind.ADD_BROKERS, brokers=(2, 3)),
    "remove brokers": Goal(GoalKind.REMOVE_BROKERS, brokers=(1,)),
}


@pytest.mark.parametrize("name", sorted(GOALS))
def test_planner_refuses_to_move_a_topic_whose_min_isr_is_unknown(name: str) -> None:
    goal = GOALS[name]
    # read as 1 the same goal is planned and moves a partition of events...
    plan = plan_reassignment(_topology(1), goal, Policy(), NOW)
    assert any(a.topic == "events" for a in plan.partitions)
    # ... unknown, it is refused: one line, exit 5, naming the topic
    with pytest.raises(RefusedError, match=UNREAD) as info:
        plan_reassignment(_topology(None), goal, Policy(), NOW)
    assert "\n" not in str(info.value) and exit_code_for(info.value) == 5


def test_a_value_above_the_target_refuses_the_rf_raise_too() -> None:
    """Why "unknown" cannot pass an RF raise: a value read above the new RF refuses it."""
    with pytest.raises(RefusedError, match="under its min.insync.replicas=4"):
        plan_reassignment(_topology(4), GOALS["raise RF"], Policy(), NOW)


def test_a_plan_that_leaves_the_unknown_topic_alone_is_unchanged() -> None:
    only_known = Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3, topics=("known",))
    unknown = plan_reassignment(_topology(None), only_known, Policy(), NOW)
    read = plan_reassignment(_topology(1), only_known, Policy(), NOW)
    assert unknown.to_json() == read.to_json()
    assert {a.topic for a in unknown.partitions} == {"known"}
    # nothing to move at all: no refusal either
    at_rf = Goal(GoalKind.REPLICATION_FACTOR, replication_factor=2)
    assert plan_reassignment(_topology(None), at_rf, Policy(), NOW).partitions == ()


T0 = TopicPartition("events", 0)


def _exec_plan(replicas: list[int], topic: str = "events") -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]})


def _view(min_isr: int | None) -> ClusterView:
    return ClusterView({T0: (0, 1), TopicPartition("known", 0): (0, 1)}, frozenset({0, 1, 2, 3}),
                       {}, {"events": min_isr, "known": 1})


@pytest.mark.parametrize("target", [[0], [2, 3], [0, 1, 2], [0, 1]])
def test_execution_refuses_a_move_of_a_topic_whose_min_isr_is_unknown(target: list[int]) -> None:
    assert build_moves(parse_plan(_exec_plan(target)), _view(1))  # read as 1: accepted
    with pytest.raises(RefusedError, match=f"events:0: {UNREAD}") as info:
        build_moves(parse_plan(_exec_plan(target)), _view(None))
    assert "\n" not in str(info.value) and exit_code_for(info.value) == 5


def test_execution_of_another_topic_is_unchanged() -> None:
    moves = build_moves(parse_plan(_exec_plan([2, 3], topic="known")), _view(None))
    assert [(m.tp, m.target) for m in moves] == [(TopicPartition("known", 0), (2, 3))]


class _Configs:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def topic_configs(self, topics: list[str]) -> dict[str, Any]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return dict(self.answer)


def test_admin_reads_unknown_as_none_and_a_failed_read_is_raised() -> None:
    answer = {"a": {"min.insync.replicas": ("2", False)}, "b": {},  # Tansu: no entries
              "c": {"min.insync.replicas": ("two", False)}, "d": {"min.insync.replicas": (None, True)}}
    ra = SimpleNamespace(admin=_Configs(answer))
    got = ReassignAdmin.min_isr(ra, ["a", "b", "c", "d", "e"])  # type: ignore[arg-type]
    assert got == {"a": 2, "b": None, "c": None, "d": None, "e": None}
    failed = SimpleNamespace(admin=_Configs(KafkaOperationError("describing configs of topic a")))
    with pytest.raises(KafkaOperationError, match="describing configs"):
        ReassignAdmin.min_isr(failed, ["a"])  # type: ignore[arg-type]
