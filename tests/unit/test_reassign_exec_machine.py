"""The reassignment execution state machine against a simulated cluster, with crashes.

The simulated cluster (a fake: the core is pure) accepts AlterPartitionReassignments,
finishes moves in an order hypothesis chooses, and keeps throttle configs. A crash is
simulated by throwing away everything but the last persisted state (the runner saves
each state before performing its actions) at random points, before or after an
action took effect; the run is then resumed from that state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.core.models import TopicPartition
from opskit.core.reassign.machine import (
    Action,
    BaselineRead,
    Begin,
    ConfigBaseline,
    Elected,
    ElectLeaders,
    Event,
    ExecState,
    Finish,
    InFlight,
    Move,
    MoveStatus,
    Observation,
    Observe,
    Observed,
    Phase,
    ReadBaseline,
    RemoveThrottles,
    SetThrottles,
    Stop,
    Submit,
    Submitted,
    ThrottlesRemoved,
    ThrottlesSet,
    initial_state,
    merge_replica_lists,
    throttle_topics,
    transition,
)

LEADER = "leader.replication.throttled.replicas"
FOLLOWER = "follower.replication.throttled.replicas"
RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


@dataclass
class FakeCluster:
    replicas: dict[TopicPartition, tuple[int, ...]]
    brokers: set[int]
    limit: int | None
    configs: dict[tuple[str, str], str] = field(default_factory=dict)
    in_flight: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)  # -> target
    submissions: Counter[TopicPartition] = field(default_factory=Counter)
    now: float = 0.0

    def observe(self, finish: list[bool]) -> Observation:
        self.now += 1.0
        for i, tp in enumerate(sorted(self.in_flight)):
            if i < len(finish) and finish[i]:
                self.replicas[tp] = self.in_flight.pop(tp)
        flights = {}
        for tp, target in self.in_flight.items():
            base = self.replicas[tp]
            flights[tp] = InFlight(tuple(dict.fromkeys(target + base)),
                                   tuple(b for b in target if b not in base),
                                   tuple(b for b in base if b not in target))
        now_reps = {tp: (flights[tp].replicas if tp in flights else r)
                    for tp, r in self.replicas.items()}
        return Observation(self.now, now_reps, flights, frozenset(self.brokers))

    def alter(self, moves: tuple[Move, ...]) -> Submitted:
        for m in moves:
            assert m.tp not in self.in_flight, f"{m.tp} submitted while in flight"
            assert self.replicas[m.tp] == m.base, f"{m.tp} submitted but not at its base"
            self.submissions[m.tp] += 1
            self.in_flight[m.tp] = m.target
        if self.limit is not None:
            load: Counter[int] = Counter()
            for tp, target in self.in_flight.items():
                load.update(Move(tp, self.replicas[tp], target).brokers)
            assert max(load.values(), default=0) <= self.limit
        return Submitted(tuple(m.tp for m in moves))

    def perform(self, action: Action, finish: list[bool]) -> Event | None:
        if isinstance(action, ReadBaseline):
            vals = [(f"broker:{b}", k, self.configs.get((f"broker:{b}", k)))
                    for b in action.brokers for k in RATE_KEYS]
            vals += [(f"topic:{t}", k, self.configs.get((f"topic:{t}", k)))
                     for t in action.topics for k in (LEADER, FOLLOWER)]
            return BaselineRead(ConfigBaseline(tuple(vals)))
        if isinstance(action, SetThrottles):
            for b in action.brokers:
                for k in RATE_KEYS:
                    self.configs[(f"broker:{b}", k)] = str(action.rate)
            for t, (lead, fol) in action.topics.items():
                self.configs[(f"topic:{t}", LEADER)] = lead
                self.configs[(f"topic:{t}", FOLLOWER)] = fol
            return ThrottlesSet()
        if isinstance(action, Observe):
            return Observed(self.observe(finish))
        if isinstance(action, Submit):
            return self.alter(action.moves)
        if isinstance(action, ElectLeaders):
            return Elected()
        if isinstance(action, RemoveThrottles):
            for r, k, v in action.baseline.values:
                if v is None:
                    self.configs.pop((r, k), None)
                else:
                    self.configs[(r, k)] = v
            return ThrottlesRemoved()
        if isinstance(action, Stop):
            pytest.fail(f"stopped: {action.reason}")
        assert isinstance(action, Finish)
        return None


def drive(cluster: FakeCluster, saved: ExecState, crashes: Iterator[bool],
          finishes: Iterator[list[bool]], max_steps: int = 5000) -> ExecState:
    """Run to the end, crashing (resuming from the last saved state) when told."""
    for _ in range(max_steps):
        saved, queue = transition(saved, Begin())
        crashed = False
        while queue:
            action = queue.pop(0)
            if next(crashes):
                crashed = True
                break
            ev = cluster.perform(action, next(finishes))
            if ev is None:
                return saved
            if next(crashes):
                crashed = True
                break
            saved, queue = transition(saved, ev)
        if not crashed:
            return saved
    raise AssertionError("did not finish")


def _cycle(xs: list[bool], default: bool) -> Iterator[bool]:
    yield from xs
    while True:
        yield default


def _finishes(xs: list[list[bool]]) -> Iterator[list[bool]]:
    yield from xs
    while True:
        yield [True] * 64


BROKERS = [0, 1, 2, 3, 4]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[TopicPartition, tuple[int, ...]], list[Move]]:
    n = draw(st.integers(1, 12))
    current: dict[TopicPartition, tuple[int, ...]] = {}
    moves: list[Move] = []
    for i in range(n):
        tp = TopicPartition(f"t{i % 3}", i)
        base = tuple(draw(st.permutations(BROKERS))[: draw(st.integers(1, 3))])
        target = tuple(draw(st.permutations(BROKERS))[: draw(st.integers(1, 3))])
        current[tp] = base
        moves.append(Move(tp, base, target))
    return current, moves


@settings(max_examples=150, deadline=None)
@given(scn=scenarios(), limit=st.one_of(st.none(), st.integers(1, 3)),
       crashes=st.lists(st.booleans(), max_size=80),
       finishes=st.lists(st.lists(st.booleans(), max_size=12), max_size=40),
       prior=st.dictionaries(st.sampled_from([("broker:1", RATE_KEYS[0]), ("topic:t0", LEADER),
                                              ("broker:0", RATE_KEYS[1])]),
                             st.sampled_from(["5000", "0:9", "*"]), max_size=3))
def test_any_crash_sequence_ends_at_the_plan_with_throttles_restored(
        scn: tuple[dict[TopicPartition, tuple[int, ...]], list[Move]], limit: int | None,
        crashes: list[bool], finishes: list[list[bool]], prior: dict[tuple[str, str], str]) -> None:
    current, moves = scn
    cluster = FakeCluster(dict(current), set(BROKERS), limit, configs=dict(prior))
    state = initial_state("p", tuple(moves), 1000, limit)
    end = drive(cluster, state, _cycle(crashes, False), _finishes(finishes))
    assert end.phase is Phase.DONE
    assert all(m.status is MoveStatus.DONE for m in end.moves)
    for m in moves:
        assert set(cluster.replicas[m.tp]) == set(m.target)
        assert cluster.submissions[m.tp] <= (0 if m.base == m.target else 1)
    assert cluster.configs == prior  # throttles gone, earlier values back exactly
    assert not cluster.in_flight


def test_state_round_trips_through_dict() -> None:
    m = Move(TopicPartition("a", 1), (1,), (1, 2, 3), MoveStatus.IN_FLIGHT, True, None)
    s = ExecState("id", (m,), 1000, 2, Phase.MOVING,
                  ConfigBaseline((("broker:1", RATE_KEYS[0], "7"), ("topic:a", LEADER, None))),
                  "waiting", (1.0, 2, 3), None, 12.0)
    assert ExecState.from_dict(s.to_dict()) == s


def test_throttles_cover_only_moving_replicas() -> None:
    moves = (Move(TopicPartition("t", 0), (1,), (1, 2, 3)),
             Move(TopicPartition("t", 1), (2, 3), (3, 2)),  # reorder: no data, no throttle
             Move(TopicPartition("u", 4), (1, 2), (2, 3)))
    assert throttle_topics(moves) == {"t": ("0:1", "0:2,0:3"), "u": ("4:1,4:2", "4:3")}


def test_merge_with_prior_list() -> None:
    assert merge_replica_lists("0:1,0:2", None) == "0:1,0:2"
    assert merge_replica_lists("0:1,0:2", "5:5,0:1") == "5:5,0:1,0:2"
    assert merge_replica_lists("0:1", "*") == "*"


def _obs(now: float, replicas: dict[TopicPartition, tuple[int, ...]],
         flights: dict[TopicPartition, InFlight] | None = None,
         live: tuple[int, ...] = (1, 2, 3)) -> Observed:
    return Observed(Observation(now, replicas, flights or {}, frozenset(live)))


def test_submitting_move_seen_in_flight_is_adopted_not_resubmitted() -> None:
    tp = TopicPartition("t", 0)
    s = replace(initial_state("p", (Move(tp, (1,), (1, 2)),), 100, None),
                phase=Phase.MOVING)
    s = replace(s, moves=(replace(s.moves[0], status=MoveStatus.SUBMITTING),))
    s2, actions = transition(s, _obs(1, {tp: (1, 2)}, {tp: InFlight((1, 2), (2,), ())}))
    assert s2.moves[0].status is MoveStatus.IN_FLIGHT
    assert not any(isinstance(a, Submit) for a in actions)


def test_submitting_move_still_at_base_is_submitted_again_once() -> None:
    tp = TopicPartition("t", 0)
    s = replace(initial_state("p", (Move(tp, (1,), (1, 2)),), 100, None), phase=Phase.MOVING)
    s = replace(s, moves=(replace(s.moves[0], status=MoveStatus.SUBMITTING),))
    _s2, actions = transition(s, _obs(1, {tp: (1,)}))
    assert [type(a) for a in actions] == [Submit]


def test_in_flight_move_reverted_by_someone_fails_and_is_not_retried() -> None:
    tp = TopicPartition("t", 0)
    s = replace(initial_state("p", (Move(tp, (1,), (1, 2)),), 100, None), phase=Phase.MOVING)
    s = replace(s, moves=(replace(s.moves[0], status=MoveStatus.IN_FLIGHT),))
    s2, actions = transition(s, _obs(1, {tp: (1,)}))
    assert s2.moves[0].status is MoveStatus.FAILED
    assert not any(isinstance(a, Submit) for a in actions)


def test_foreign_reassignment_on_a_pending_partition_is_never_overridden() -> None:
    tp = TopicPartition("t", 0)
    s = replace(initial_state("p", (Move(tp, (1,), (1, 2)),), 100, None), phase=Phase.MOVING)
    _s2, actions = transition(s, _obs(1, {tp: (1, 3)}, {tp: InFlight((1, 3), (3,), ())}))
    assert not any(isinstance(a, Submit) for a in actions)


def test_stopped_broker_pauses_then_stops_after_the_stall_limit() -> None:
    tp = TopicPartition("t", 0)
    s = replace(initial_state("p", (Move(tp, (1,), (1, 2)),), 100, None, stall_after=30),
                phase=Phase.MOVING)
    s = replace(s, moves=(replace(s.moves[0], status=MoveStatus.IN_FLIGHT),))
    flight = {tp: InFlight((1, 2), (2,), ())}
    s, actions = transition(s, _obs(0, {tp: (1, 2)}, flight, live=(1, 3)))
    assert s.waiting is not None and "broker(s) 2" in s.waiting
    assert isinstance(actions[0], Observe)
    s, actions = transition(s, _obs(31, {tp: (1, 2)}, flight, live=(1, 3)))
    assert isinstance(actions[0], Stop) and "broker(s) 2" in actions[0].reason


@pytest.mark.parametrize("limit", [1, 2])
def test_batches_respect_the_per_broker_limit(limit: int) -> None:
    from opskit.core.reassign.checks import batches

    moves = tuple(Move(TopicPartition("t", i), (0,), (0, 1 + i % 2)) for i in range(6))
    for batch in batches(moves, limit):
        load: Counter[int] = Counter()
        for m in batch:
            load.update(m.brokers)
        assert max(load.values()) <= limit
    assert sum(len(b) for b in batches(moves, limit)) == 6


def _moving(tp: TopicPartition, base: tuple[int, ...], target: tuple[int, ...]) -> ExecState:
    s = replace(initial_state("p", (Move(tp, base, target),), 100, None), phase=Phase.MOVING)
    return replace(s, moves=(replace(s.moves[0], status=MoveStatus.IN_FLIGHT),))


def test_a_cancelled_move_read_from_lagging_metadata_is_not_done() -> None:
    """Seen in CI on Kafka 3.7: a move that only adds replicas has the target as its
    replica list while in flight. Cancelled, it reverts; a broker's metadata a moment
    behind still shows the target while nothing is listed in flight."""
    tp = TopicPartition("t", 0)
    s = _moving(tp, (0,), (0, 2, 1))
    s1, actions = transition(s, _obs(1, {tp: (0, 2, 1)}))  # lagging metadata
    assert s1.moves[0].status is MoveStatus.IN_FLIGHT and s1.phase is Phase.MOVING
    assert not any(isinstance(a, (Submit, ElectLeaders, Finish)) for a in actions)
    s2, _ = transition(s1, _obs(2, {tp: (0,)}))  # the metadata caught up: reverted
    assert s2.moves[0].status is MoveStatus.FAILED
    assert "cancelled" in (s2.moves[0].error or "")


def test_a_move_is_done_when_two_observations_in_a_row_agree() -> None:
    tp = TopicPartition("t", 0)
    s = _moving(tp, (0,), (0, 2, 1))
    s1, _ = transition(s, _obs(1, {tp: (0, 2, 1)}))
    assert s1.moves[0].status is MoveStatus.IN_FLIGHT and s1.moves[0].seen_at_target
    # a look in between that is neither resets the sighting
    s2, _ = transition(s1, _obs(2, {tp: (0, 2)}))
    assert s2.moves[0].status is MoveStatus.IN_FLIGHT and not s2.moves[0].seen_at_target
    s3, _ = transition(s2, _obs(3, {tp: (0, 2, 1)}))
    assert s3.moves[0].status is MoveStatus.IN_FLIGHT
    s4, actions = transition(s3, _obs(4, {tp: (0, 2, 1)}))
    assert s4.moves[0].status is MoveStatus.DONE and s4.phase is Phase.ELECT
    assert any(isinstance(a, ElectLeaders) for a in actions)


def test_a_pending_move_already_at_target_is_never_submitted() -> None:
    tp = TopicPartition("t", 0)
    s = replace(initial_state("p", (Move(tp, (1,), (1, 2)),), 100, None), phase=Phase.MOVING)
    for now in (1, 2):
        s, actions = transition(s, _obs(now, {tp: (1, 2)}))
        assert not any(isinstance(a, Submit) for a in actions)
    assert s.moves[0].status is MoveStatus.DONE


def test_the_sighting_survives_the_journal() -> None:
    m = Move(TopicPartition("t", 0), (0,), (0, 1), MoveStatus.IN_FLIGHT, seen_at_target=True)
    assert Move.from_dict(m.to_dict()) == m
    old = {k: v for k, v in m.to_dict().items() if k != "seen_at_target"}  # older journals
    assert Move.from_dict(old).seen_at_target is False
