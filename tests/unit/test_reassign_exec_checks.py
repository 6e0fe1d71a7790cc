"""Refusals and previews before a reassignment execution (pure)."""

from __future__ import annotations

import json

import pytest

from opskit.core.models import TopicPartition
from opskit.core.reassign.checks import (
    ClusterView,
    build_moves,
    bytes_remaining,
    check_write_rates,
    copy_bytes,
    duration_bound,
)
from opskit.core.reassign.machine import InFlight, Move
from opskit.core.reassign.plan_input import parse_plan, parse_rate, plan_id
from opskit.errors import InvalidInputError, NotFoundError, RefusedError, UsageError

T0 = TopicPartition("t", 0)


def _plan(replicas: list[int], base: list[int] | None = None, topic: str = "t") -> str:
    doc: dict[str, object] = {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas}]}
    if base is not None:
        doc["opskit"] = {
            "format": "opskit/reassign-plan", "format_version": 1,
            "created": "2026-11-24T00:00:00Z",
            "goal": {"kind": "from-json"}, "brokers": [1, 2, 3],
            "base": [{"topic": topic, "partition": 0, "replicas": base, "size_bytes": 0}],
            "estimates": {"replicas_moved": 0, "replicas_lower_bound": 0, "bytes_moved": 0,
                          "bytes_lower_bound": 0},
        }
    return json.dumps(doc)


def _view(replicas: tuple[int, ...] = (1,), brokers: tuple[int, ...] = (1, 2, 3),
          flight: InFlight | None = None, min_isr: int = 1) -> ClusterView:
    return ClusterView({T0: replicas}, frozenset(brokers), {T0: flight} if flight else {},
                       {"t": min_isr})


def test_kafka_tool_plan_compares_against_now() -> None:
    moves = build_moves(parse_plan(_plan([1, 2, 3])), _view((1,)))
    assert moves == (Move(T0, (1,), (1, 2, 3)),)


@pytest.mark.parametrize("text,err", [
    ("{", InvalidInputError),
    ("[]", InvalidInputError),
    (json.dumps({"version": 2, "partitions": []}), InvalidInputError),
    (_plan([1, 1]), InvalidInputError),
    (json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}]}), UsageError),
])
def test_malformed_plans(text: str, err: type[Exception]) -> None:
    with pytest.raises(err):
        parse_plan(text)


def test_unknown_topic_and_partition() -> None:
    with pytest.raises(NotFoundError, match="topic 'x'"):
        build_moves(parse_plan(_plan([1], topic="x")), _view())
    view = ClusterView({TopicPartition("t", 1): (1,)}, frozenset({1}), {}, {})
    with pytest.raises(NotFoundError, match="partition t:0"):
        build_moves(parse_plan(_plan([1])), view)


def test_refusals() -> None:
    with pytest.raises(RefusedError, match="not registered"):
        build_moves(parse_plan(_plan([1, 7])), _view())
    with pytest.raises(RefusedError, match="min.insync.replicas=2"):
        build_moves(parse_plan(_plan([1])), _view((1, 2), min_isr=2))
    with pytest.raises(RefusedError, match="changed since the plan"):
        build_moves(parse_plan(_plan([1, 2, 3], base=[1])), _view((2,)))
    with pytest.raises(RefusedError, match="--adopt"):
        build_moves(parse_plan(_plan([1, 2])), _view((1, 2), flight=InFlight((1, 2), (2,), ())))


def test_rf_above_broker_count() -> None:
    view = ClusterView({T0: (1,)}, frozenset({1, 2}), {}, {})
    with pytest.raises(RefusedError, match="replication factor 3 is above the 2"):
        build_moves(parse_plan(_plan([1, 2, 3])), view)


def test_adopt_takes_a_matching_move_in_flight_and_refuses_another() -> None:
    moves = build_moves(parse_plan(_plan([1, 2])),
                        _view((1, 2), flight=InFlight((1, 2), (2,), ())), adopt=True)
    assert moves == (Move(T0, (1,), (1, 2)),)
    with pytest.raises(RefusedError, match="never overrides"):
        build_moves(parse_plan(_plan([1, 2])),
                    _view((1, 3), flight=InFlight((1, 3), (3,), ())), adopt=True)


def test_already_at_target_passes_even_with_a_stale_base() -> None:
    moves = build_moves(parse_plan(_plan([1, 2], base=[1])), _view((1, 2)))
    assert moves[0].base == (1, 2)
    # the same replicas in another order are not the target: the first one leads
    with pytest.raises(RefusedError, match="changed since the plan"):
        build_moves(parse_plan(_plan([1, 2], base=[1])), _view((2, 1)))


def test_throttle_below_write_rate_refused() -> None:
    moves = (Move(T0, (1,), (1, 2)), Move(TopicPartition("t", 1), (1,), (1, 3)))
    rates = {T0: 600.0, TopicPartition("t", 1): 600.0}
    check_write_rates(moves, rates, 1000, 1)  # one at a time per broker: 600 < 1000
    with pytest.raises(RefusedError, match="broker 1"):
        check_write_rates(moves, rates, 1000, None)  # leader 1 sends 1200


def test_bytes_and_duration() -> None:
    moves = (Move(T0, (1,), (1, 2, 3)),)
    assert copy_bytes(moves, {T0: 100}) == {2: 100, 3: 100}
    assert duration_bound({2: 100, 3: 100}, 10) == 10
    assert bytes_remaining(moves, {T0: 100}, {T0: {1: 100, 2: 40}}) == 160


@pytest.mark.parametrize("text,value", [("1048576", 1048576), ("10MB", 10_000_000),
                                        ("10MiB/s", 10 * 1024**2), ("1.5kb", 1500)])
def test_parse_rate(text: str, value: int) -> None:
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", ["", "0", "-5MB", "ten", "5PB"])
def test_parse_rate_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_rate(text)


def test_plan_id_ignores_order_of_entries() -> None:
    a = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]},
                                      {"topic": "t", "partition": 1, "replicas": [2]}]}
    b = {"version": 1, "partitions": list(reversed(a["partitions"]))}  # type: ignore[call-overload]
    assert plan_id(parse_plan(json.dumps(a))) == plan_id(parse_plan(json.dumps(b)))
