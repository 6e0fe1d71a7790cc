"""Drain by cordon (KIP-1066): the pure rules and the execution state machine with crashes.

The simulated cluster of ``test_reassign_exec_machine`` gains ``cordoned.log.dirs`` per
broker. A drain killed anywhere (every state saved before its actions, any action lost
or done twice) and resumed: nothing is submitted before the drained brokers are cordoned,
the finished drain keeps the cordon, throttles come back. Cancelled at any point
(``reassign cancel --execute`` journaled, so seen at the next start or observation): no
move submitted after it, the cordon values found before come back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.core.models import TopicPartition
from opskit.core.reassign.cordon import (
    MIN_METADATA_LEVEL,
    Cordon,
    CordonStatus,
    CordonSupport,
    cordon_support,
    plan_cordon,
    unprotected_line,
)
from opskit.core.reassign.machine import (
    Action,
    Begin,
    CordonRead,
    CordonRestored,
    CordonSet,
    Event,
    ExecState,
    Move,
    MoveStatus,
    Observed,
    Phase,
    ReadCordon,
    RestoreCordon,
    SetCordon,
    Submit,
    initial_state,
    transition,
)
from tests.unit.test_reassign_exec_machine import RATE_KEYS, FakeCluster, _cycle, _finishes

# --------------------------------------------------------------------------- pure rules


def test_support_needs_the_key_on_every_drained_broker_and_metadata_version_4_3() -> None:
    assert cordon_support(MIN_METADATA_LEVEL, {2: True, 5: True}) == CordonSupport(True)
    assert cordon_support(31, {2: True}).supported
    no_key = cordon_support(19, {2: False, 5: True})  # Kafka 3.7: no such key
    assert not no_key.supported and "broker(s) 2" in no_key.reason and "4.3" in no_key.reason
    old_mv = cordon_support(MIN_METADATA_LEVEL - 1, {2: True})  # 4.3 brokers, MV not finalized
    assert not old_mv.supported and "4.3-IV0" in old_mv.reason
    assert not cordon_support(None, {2: True}).supported


def test_plan_cordons_only_registered_drained_brokers() -> None:
    ok = CordonSupport(True)
    assert plan_cordon((), {0, 1}, ok) is None
    c = plan_cordon((2, 1), {0, 1, 2}, ok)
    assert c == Cordon((1, 2))
    away = plan_cordon((2, 3), {0, 1, 2}, ok)
    assert away is not None and away.brokers == (2,) and "3 not registered" in (away.note or "")
    none = plan_cordon((3,), {0, 1, 2}, ok)
    assert none is not None and none.status is CordonStatus.UNSUPPORTED
    no = plan_cordon((2,), {0, 1, 2}, CordonSupport(False, "why"))
    assert no == Cordon((2,), CordonStatus.UNSUPPORTED, note="why")


def test_unprotected_line_is_one_line_naming_the_brokers_and_the_risk() -> None:
    line = unprotected_line((5, 2), cordon_support(19, {2: False, 5: False}).reason)
    assert "\n" not in line and line.startswith("broker(s) 2,5 not cordoned")
    assert "created meanwhile can still get replicas there" in line


def test_cordon_and_state_round_trip() -> None:
    c = Cordon((2, 4), CordonStatus.APPLIED, ((2, None), (4, "/data/a")), "n")
    assert Cordon.from_dict(c.to_dict()) == c
    s = initial_state("p", (Move(TopicPartition("t", 0), (2,), (1,)),), 10, None, cordon=c)
    assert ExecState.from_dict(s.to_dict()) == s
    old = s.to_dict()
    del old["cordon"], old["cancelled"]  # a journal written before cordons existed
    assert ExecState.from_dict(old).cordon is None


def test_a_drain_starts_by_reading_then_setting_the_cordon() -> None:
    s = initial_state("p", (Move(TopicPartition("t", 0), (2,), (1,)),), 10, None,
                      cordon=Cordon((2,)))
    assert s.phase is Phase.CORDON
    s, acts = transition(s, Begin())
    assert acts == [ReadCordon((2,))]
    s, acts = transition(s, CordonRead(((2, "/d1"),)))
    assert s.cordon is not None and s.cordon.status is CordonStatus.READ
    assert acts == [SetCordon((2,))]
    s, acts = transition(s, Begin())  # killed after the SET left: set again (idempotent)
    assert acts == [SetCordon((2,))]
    unsupported = initial_state("p", s.moves, 10, None,
                                cordon=Cordon((2,), CordonStatus.UNSUPPORTED, note="x"))
    assert unsupported.phase is Phase.BASELINE


# --------------------------------------------------------------------------- machine

KEY = "cordoned.log.dirs"
BROKERS = [0, 1, 2, 3]


@dataclass
class CordonCluster(FakeCluster):
    cordons: dict[int, str] = field(default_factory=dict)
    drained: tuple[int, ...] = ()
    #: submissions seen while a drained broker was not cordoned
    unprotected: int = 0
    #: the run is cancelled before this many observations (None: never)
    cancel_after: int | None = None
    observations: int = 0
    submitted_after_cancel: int = 0

    @property
    def cancelled(self) -> bool:
        return self.cancel_after is not None and self.observations >= self.cancel_after

    def perform(self, action: Action, finish: list[bool]) -> Event | None:
        if isinstance(action, ReadCordon):
            return CordonRead(tuple((b, self.cordons.get(b)) for b in action.brokers))
        if isinstance(action, SetCordon):
            for b in action.brokers:
                self.cordons[b] = "*"
            return CordonSet()
        if isinstance(action, RestoreCordon):
            for b, v in action.prior:
                if v is None:
                    self.cordons.pop(b, None)
                else:
                    self.cordons[b] = v
            return CordonRestored()
        if isinstance(action, Submit):
            if any(self.cordons.get(b) != "*" for b in self.drained):
                self.unprotected += 1
            if self.cancelled:
                self.submitted_after_cancel += 1
        ev = super().perform(action, finish)
        if isinstance(ev, Observed):
            self.observations += 1
            ev = Observed(replace_cancelled(ev, self.cancelled))
        return ev


def replace_cancelled(ev: Observed, cancelled: bool):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(ev.observation, cancelled=cancelled)


def drive(cluster: CordonCluster, saved: ExecState, crashes: Iterator[bool],
          finishes: Iterator[list[bool]], max_steps: int = 5000) -> ExecState:
    """As test_reassign_exec_machine.drive, with the runner's Begin(cancelled=...)."""
    for _ in range(max_steps):
        saved, queue = transition(saved, Begin(cancelled=cluster.cancelled))
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


@st.composite
def drains(draw: st.DrawFn) -> tuple[dict[TopicPartition, tuple[int, ...]], list[Move]]:
    """Partitions with a replica on broker 2 moved off it (RF 1-3 over brokers 0-3)."""
    n = draw(st.integers(1, 8))
    current: dict[TopicPartition, tuple[int, ...]] = {}
    moves = []
    for i in range(n):
        tp = TopicPartition(f"t{i % 2}", i)
        others = draw(st.permutations([0, 1, 3]))
        rf = draw(st.integers(1, 3))
        base = tuple(draw(st.permutations([2, *others[: rf - 1]])))
        target = tuple(b if b != 2 else others[rf - 1] for b in base)
        current[tp] = base
        moves.append(Move(tp, base, target))
    return current, moves


PRIORS = st.sampled_from([None, "/data/d1", "*"])


@settings(max_examples=150, deadline=None)
@given(scn=drains(), crashes=st.lists(st.booleans(), max_size=60),
       finishes=st.lists(st.lists(st.booleans(), max_size=8), max_size=30), prior=PRIORS)
def test_a_drain_killed_anywhere_cordons_before_any_move_and_keeps_it(
        scn: tuple[dict[TopicPartition, tuple[int, ...]], list[Move]], crashes: list[bool],
        finishes: list[list[bool]], prior: str | None) -> None:
    current, moves = scn
    cluster = CordonCluster(dict(current), set(BROKERS), None, drained=(2,),
                            cordons={} if prior is None else {2: prior})
    state = initial_state("p", tuple(moves), 1000, None, cordon=Cordon((2,)))
    end = drive(cluster, state, _cycle(crashes, False), _finishes(finishes))
    assert end.phase is Phase.DONE and all(m.status is MoveStatus.DONE for m in end.moves)
    assert cluster.unprotected == 0  # nothing submitted before broker 2 was cordoned
    assert cluster.cordons == {2: "*"}  # kept: the drained broker stays cordoned
    assert end.cordon is not None and end.cordon.status is CordonStatus.KEPT
    assert end.cordon.prior == ((2, prior),)
    assert not any(k[1] in RATE_KEYS for k in cluster.configs)  # throttles gone
    assert all(2 not in cluster.replicas[m.tp] for m in moves)


@settings(max_examples=150, deadline=None)
@given(scn=drains(), crashes=st.lists(st.booleans(), max_size=60),
       finishes=st.lists(st.lists(st.booleans(), max_size=8), max_size=30), prior=PRIORS,
       cancel_after=st.integers(0, 6))
def test_a_drain_cancelled_anywhere_submits_nothing_more_and_gets_its_values_back(
        scn: tuple[dict[TopicPartition, tuple[int, ...]], list[Move]], crashes: list[bool],
        finishes: list[list[bool]], prior: str | None, cancel_after: int) -> None:
    current, moves = scn
    before = {} if prior is None else {2: prior}
    cluster = CordonCluster(dict(current), set(BROKERS), 1, drained=(2,), cordons=dict(before),
                            cancel_after=cancel_after)
    state = initial_state("p", tuple(moves), 1000, 1, cordon=Cordon((2,)))
    end = drive(cluster, state, _cycle(crashes, False), _finishes(finishes))
    assert end.phase is Phase.DONE
    assert cluster.submitted_after_cancel == 0
    if cluster.cancelled:
        assert end.cancelled
        assert cluster.cordons == before  # the value found before (or none) is back
        assert end.cordon is not None and end.cordon.status in (CordonStatus.RELEASED,
                                                                CordonStatus.PLANNED)
        assert all(m.status in (MoveStatus.DONE, MoveStatus.FAILED, MoveStatus.IN_FLIGHT)
                   or m.base == m.target for m in end.moves)
    else:  # finished before the cancel came: kept
        assert cluster.cordons == {2: "*"}
    assert not any(k[1] in RATE_KEYS for k in cluster.configs)


def test_a_cancelled_move_back_on_its_replicas_in_another_order_is_reverted() -> None:
    """Kafka 4.3.1 reverted a cancelled [2, 0] -> [1, 0] to [0, 2]: the run must see it as
    reverted, not wait for it until its stall limit."""
    from opskit.core.reassign.machine import Observation

    tp = TopicPartition("t", 0)
    s = initial_state("p", (Move(tp, (2, 0), (1, 0)),), 100, None)
    s = ExecState.from_dict({**s.to_dict(), "phase": "moving"})
    s = ExecState.from_dict({**s.to_dict(), "moves": [
        {**s.moves[0].to_dict(), "status": "in_flight"}]})
    s2, _ = transition(s, Observed(Observation(1.0, {tp: (0, 2)}, {}, frozenset({0, 1, 2}))))
    assert s2.moves[0].status is MoveStatus.FAILED and "reverted" in (s2.moves[0].error or "")
    # a pure reorder seen in a third order is not taken for a revert
    r = initial_state("p", (Move(tp, (1, 2, 0), (0, 2, 1)),), 100, None)
    r = ExecState.from_dict({**r.to_dict(), "phase": "moving", "moves": [
        {**r.moves[0].to_dict(), "status": "in_flight"}]})
    r2, _ = transition(r, Observed(Observation(1.0, {tp: (2, 1, 0)}, {}, frozenset({0, 1, 2}))))
    assert r2.moves[0].status is MoveStatus.IN_FLIGHT


def test_new_plans_leave_out_cordoned_brokers_that_hold_nothing() -> None:
    from opskit.core.reassign.cordon import leave_out_cordoned
    from opskit.core.reassign.model import Broker, PartitionState, Topology

    topo = Topology(tuple(Broker(b) for b in (0, 1, 2, 3)),
                    (PartitionState("t", 0, (0, 1)), PartitionState("t", 1, (1, 3))))
    out_topo, out, holding = leave_out_cordoned(topo, {2, 3})
    assert out == (2,) and holding == (3,)  # 3 still holds t:1: kept, said
    assert out_topo.broker_ids == (0, 1, 3) and topo.broker_ids == (0, 1, 2, 3)
    assert leave_out_cordoned(topo, {2}, keep=(2,)) == (topo, (), ())  # --add-brokers 2
    assert leave_out_cordoned(topo, set()) == (topo, (), ())
