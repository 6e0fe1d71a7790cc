"""The reassignment plan file: round trip and strict validation of malformed JSON."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from opskit.cli.exits import exit_code_for
from opskit.core.reassign.model import (
    Assignment,
    Estimates,
    Goal,
    GoalKind,
    PartitionBase,
    Plan,
    assignments_from_json,
    plan_from_json,
)
from opskit.errors import InvalidInputError


def _plan() -> Plan:
    return Plan(
        partitions=(Assignment("events", 0, (3, 1), ("any", "any")), Assignment("billing", 2, (4, 0, 1))),
        base=(PartitionBase("events", 0, (0, 1), 1024), PartitionBase("billing", 2, (0, 1, 2), 7)),
        goal=Goal(GoalKind.ADD_BROKERS, brokers=(3, 4)),
        created="2026-11-24T08:00:00Z",
        estimates=Estimates(2, 2, 1031, 1031, 1, {3: 1024, 4: 7}, {0: 1031}, 1000, 1.024),
        brokers=(0, 1, 2, 3, 4),
    )


def test_round_trip() -> None:
    plan = _plan()
    text = plan.to_json()
    again = plan_from_json(text)
    assert again == plan
    assert again.to_json() == text
    d = json.loads(text)
    # Kafka's part: version and partitions with log_dirs always written
    assert d["version"] == 1
    assert d["partitions"][1] == {"topic": "billing", "partition": 2, "replicas": [4, 0, 1],
                                  "log_dirs": ["any", "any", "any"]}
    assert d["opskit"]["base"][0] == {"topic": "events", "partition": 0, "replicas": [0, 1],
                                      "size_bytes": 1024}


def test_rack_estimates_round_trip_and_are_absent_without_racks() -> None:
    plan = _plan()
    assert "unspread_before" not in plan.to_dict()["opskit"]["estimates"]
    racked = Plan(plan.partitions, plan.base, plan.goal, plan.created,
                  Estimates(2, 2, 1031, 1031, rack_replicas_lower_bound=1, unspread_before=1,
                            unspread_after=0), plan.brokers)
    d = racked.to_dict()["opskit"]["estimates"]
    assert (d["rack_replicas_lower_bound"], d["unspread_before"], d["unspread_after"]) == (1, 1, 0)
    assert plan_from_json(racked.to_json()) == racked


def test_goals_round_trip() -> None:
    for goal in (Goal(GoalKind.REMOVE_BROKERS, brokers=(2,)),
                 Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3, topics=("a", "b")),
                 Goal(GoalKind.REPLICATION_FACTOR, replication_factor=3, include_internal=True),
                 Goal(GoalKind.REBALANCE),
                 Goal(GoalKind.FROM_JSON, source="x.json")):
        assert Goal.from_dict(json.loads(json.dumps(goal.to_dict()))) == goal


def test_kafka_tool_file_without_opskit_key() -> None:
    text = ('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],'
            '"log_dirs":["any","any"]},{"topic":"t","partition":1,"replicas":[2]}]}')
    got = assignments_from_json(text)
    assert got == (Assignment("t", 0, (1, 2), ("any", "any")), Assignment("t", 1, (2,), ("any",)))
    with pytest.raises(InvalidInputError, match="no 'opskit' section"):
        plan_from_json(text)


def _mutated(path: list[Any], value: Any, delete: bool = False) -> str:
    d = _plan().to_dict()
    node: Any = d
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = copy.deepcopy(value)
    return json.dumps(d)


@pytest.mark.parametrize(("path", "value", "message"), [
    (["partitions", 0, "replicas"], [1, 1], "partitions\\[0\\].replicas: broker 1 is listed twice"),
    (["partitions", 0, "replicas"], [-1, 2], "partitions\\[0\\].replicas\\[0\\]: -1 is below 0"),
    (["partitions", 0, "replicas"], [], "partitions\\[0\\].replicas: is empty"),
    (["partitions", 0, "replicas"], ["1"], "replicas\\[0\\]: expected an integer, got a string"),
    (["partitions", 0, "replicas"], [True], "expected an integer, got a boolean"),
    (["partitions", 0, "replicas"], [1.5], "expected an integer, got the number 1.5"),
    (["partitions", 0, "replicas"], [2**31], "is above"),
    (["partitions", 0, "replicas"], "1,2", "replicas: expected a list, got a string"),
    (["partitions", 0, "partition"], -3, "partitions\\[0\\].partition: -3 is below 0"),
    (["partitions", 0, "partition"], None, "partition: expected an integer, got null"),
    (["partitions", 0, "topic"], "", "partitions\\[0\\].topic: is empty"),
    (["partitions", 0, "topic"], 5, "topic: expected a string"),
    (["partitions", 0, "log_dirs"], ["any"], "log_dirs: 1 entries for 2 replicas"),
    (["partitions", 1], {"topic": "events", "partition": 0, "replicas": [1]}, "listed twice"),
    (["partitions"], {"a": 1}, "partitions: expected a list, got an object"),
    (["version"], 2, "plan.version: expected 1, got 2"),
    (["version"], True, "plan.version: expected 1, got True"),
    (["opskit", "base", 0, "replicas"], [0, 0], "opskit.base\\[0\\].replicas: broker 0 is listed twice"),
    (["opskit", "base"], [], "opskit.base: must list the same partitions"),
    (["opskit", "format"], "other", "opskit.format"),
    (["opskit", "format_version"], 99, "newer than this opskit reads"),
    (["opskit", "goal", "kind"], "shuffle", "unknown goal 'shuffle'"),
    (["opskit", "goal", "brokers"], [], "opskit.goal.brokers: is empty"),
    (["opskit", "estimates", "bytes_moved"], -1, "bytes_moved: -1 is below 0"),
    (["opskit", "estimates", "duration_s"], "soon", "duration_s: expected a number"),
    (["opskit", "estimates", "unspread_after"], -1, "unspread_after: -1 is below 0"),
    (["opskit", "estimates", "rack_replicas_lower_bound"], "2", "rack_replicas_lower_bound: expected an integer"),
    (["opskit", "created"], 0, "opskit.created: expected a string"),
])
def test_malformed_is_one_line_invalid_input(path: list[Any], value: Any, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as info:
        plan_from_json(_mutated(path, value))
    assert "\n" not in str(info.value)
    assert exit_code_for(info.value) == 2


@pytest.mark.parametrize(("path", "message"), [
    (["version"], "missing field 'version'"),
    (["partitions"], "missing field 'partitions'"),
    (["partitions", 0, "replicas"], "partitions\\[0\\]: missing field 'replicas'"),
    (["partitions", 0, "topic"], "missing field 'topic'"),
    (["opskit", "base"], "opskit: missing field 'base'"),
    (["opskit", "goal"], "missing field 'goal'"),
    (["opskit", "estimates", "replicas_moved"], "missing field 'replicas_moved'"),
])
def test_missing_fields(path: list[Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        plan_from_json(_mutated(path, None, delete=True))


@pytest.mark.parametrize(("text", "message"), [
    ("", "not valid JSON"),
    ("{", "not valid JSON"),
    ("[]", "plan: expected an object, got a list"),
    ('{"version": 1, "version": 1, "partitions": []}', "key 'version' appears twice"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": NaN, "replicas": [1]}]}',
     "NaN is not a number"),
    ("[" * 100000, "not valid JSON"),
    ('{"version": 1, "partitions": [{"topic": "t", "partition": ' + "1" * 5000 + "}]}",
     "not valid JSON: a number has too many digits to read"),
])
def test_not_json(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        assignments_from_json(text)
