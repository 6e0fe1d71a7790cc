"""Executing a reassignment plan: a pure state machine.

``transition(state, event) -> (state, actions)``. A runner (``opskit.cli.reassign.execute``
with ``opskit.adapters.reassign.admin``) performs the actions, turns their outcome
into the next event, and persists the state *before* performing the actions it
returned (``opskit.adapters.reassign.journal``). So after a ``kill -9`` at any point
the saved state tells what may have happened, and the first observation after a
restart settles it:

* a move is marked ``SUBMITTING`` before AlterPartitionReassignments is sent. On
  resume it is ``IN_FLIGHT`` when ListPartitionReassignments lists it, ``DONE`` when
  the partition has the target replicas, and ``PENDING`` again only when the
  partition still has its base replicas and nothing is in flight: the request never
  took effect, so sending it is not sending it twice. Anything else is waited on.
* a move is ``DONE`` only when two observations in a row find the target replicas and
  nothing in flight (one could be a cancelled move read from lagging metadata).
* nothing is ever cancelled: what is in flight is adopted and waited for.
* the throttle values that existed before are read and saved before the first
  throttle is set; cleanup restores exactly those (idempotent, so it is redone
  after a crash during cleanup).
* a drain (:mod:`opskit.core.reassign.cordon`) first reads the drained brokers'
  ``cordoned.log.dirs`` values and saves them, then cordons them; only then does
  anything move. A finished drain keeps the cordon; a cancelled one (``reassign cancel
  --execute``, journaled: ``Begin.cancelled`` / ``Observation.cancelled``) submits
  nothing more and gets the saved values back (UNCORDON).

Phases: [CORDON ->] BASELINE (read prior throttles) -> THROTTLE (set them) -> MOVING (submit
in batches of at most ``max_moves_per_broker`` moves per broker, observe) ->
ELECT (preferred leaders) -> CLEANUP (restore throttles) [-> UNCORDON] -> DONE. A plan that
moves no data (pure reorders, or everything already in place) skips the throttle
phases.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from opskit.core.reassign.cordon import CordonStatus
from opskit.core.reassign.machine_model import (
    Action,
    BaselineRead,
    Begin,
    ConfigBaseline,
    CordonRead,
    CordonRestored,
    CordonSet,
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
    ReadCordon,
    RemoveThrottles,
    RestoreCordon,
    SetCordon,
    SetThrottles,
    Stop,
    Submit,
    Submitted,
    ThrottlesRemoved,
    ThrottlesSet,
    initial_state,
)

__all__ = [
    "POLL_S",
    "Action",
    "BaselineRead",
    "Begin",
    "ConfigBaseline",
    "CordonRead",
    "CordonRestored",
    "CordonSet",
    "ElectLeaders",
    "Elected",
    "Event",
    "ExecState",
    "Finish",
    "InFlight",
    "Move",
    "MoveStatus",
    "Observation",
    "Observe",
    "Observed",
    "Phase",
    "ReadBaseline",
    "ReadCordon",
    "RemoveThrottles",
    "RestoreCordon",
    "SetCordon",
    "SetThrottles",
    "Stop",
    "Submit",
    "Submitted",
    "ThrottlesRemoved",
    "ThrottlesSet",
    "initial_state",
    "merge_replica_lists",
    "throttle_brokers",
    "throttle_topics",
    "transition",
]

#: seconds between observations while moves are in flight
POLL_S = 0.5


# --------------------------------------------------------------------------- throttles


def throttle_brokers(moves: tuple[Move, ...]) -> tuple[int, ...]:
    """Every broker that sends or receives data for a data-moving move."""
    out: set[int] = set()
    for m in moves:
        if m.moves_data:
            out |= set(m.base) | set(m.adding)
    return tuple(sorted(out))


def throttle_topics(moves: tuple[Move, ...]) -> dict[str, tuple[str, str]]:
    """topic -> (leader list: existing replicas, follower list: new replicas) of the moves
    that copy data, as Kafka's ``*.replication.throttled.replicas`` values."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for m in sorted(moves, key=lambda m: m.tp):
        if not m.moves_data:
            continue
        p = m.tp.partition
        leader.setdefault(m.tp.topic, []).extend(f"{p}:{b}" for b in m.base)
        follower.setdefault(m.tp.topic, []).extend(f"{p}:{b}" for b in m.adding)
    return {t: (",".join(leader[t]), ",".join(follower[t])) for t in sorted(leader)}


def merge_replica_lists(ours: str, prior: str | None) -> str:
    """Our throttled-replica list joined with one that existed before (``*`` wins)."""
    if prior is None or not prior.strip():
        return ours
    if prior.strip() == "*":
        return "*"
    items = [i.strip() for i in prior.split(",") if i.strip()]
    items += [i for i in ours.split(",") if i and i not in items]
    return ",".join(items)


# --------------------------------------------------------------------------- transition


def transition(state: ExecState, event: Event) -> tuple[ExecState, list[Action]]:
    """The next state and what to do, for one event. Pure: inputs are never changed."""
    if isinstance(event, Begin):
        st = _cancel(state) if event.cancelled and not state.cancelled else state
        return st, _resume_actions(st)
    if isinstance(event, CordonRead):
        if state.phase is not Phase.CORDON or state.cordon is None or \
                state.cordon.status is not CordonStatus.PLANNED:
            return state, _resume_actions(state)
        st = replace(state, cordon=state.cordon.with_prior(event.prior))
        return st, _resume_actions(st)
    if isinstance(event, CordonSet):
        if state.phase is not Phase.CORDON or state.cordon is None:
            return state, _resume_actions(state)
        st = replace(state, phase=Phase.BASELINE,
                     cordon=replace(state.cordon, status=CordonStatus.APPLIED))
        return st, _resume_actions(st)
    if isinstance(event, CordonRestored):
        if state.phase is not Phase.UNCORDON or state.cordon is None:
            return state, _resume_actions(state)
        st = replace(state, phase=Phase.DONE,
                     cordon=replace(state.cordon, status=CordonStatus.RELEASED))
        return st, [Finish()]
    if isinstance(event, BaselineRead):
        if state.phase is not Phase.BASELINE:
            return state, _resume_actions(state)
        st = replace(state, baseline=event.baseline, phase=Phase.THROTTLE)
        return st, _resume_actions(st)
    if isinstance(event, ThrottlesSet):
        st = replace(state, phase=Phase.MOVING) if state.phase is Phase.THROTTLE else state
        return st, [Observe()]
    if isinstance(event, Observed):
        return _observed(state, event.observation)
    if isinstance(event, Submitted):
        return _submitted(state, event), [Observe(POLL_S)]
    if isinstance(event, Elected):
        if state.phase is not Phase.ELECT:
            return state, _resume_actions(state)
        st = replace(state, phase=Phase.CLEANUP) if state.baseline is not None else _final(state)
        return st, _resume_actions(st)
    if isinstance(event, ThrottlesRemoved):
        st = _final(state) if state.phase is Phase.CLEANUP else state
        return st, _resume_actions(st)
    raise TypeError(f"unknown event {event!r}")


def _final(state: ExecState) -> ExecState:
    """The phase after the moves and the throttles: UNCORDON for a cancelled drain that may
    hold its cordon, else DONE (a finished drain keeps its cordon: KEPT)."""
    c = state.cordon
    if c is not None and c.holds and state.cancelled:
        return replace(state, phase=Phase.UNCORDON)
    if c is not None and c.status is CordonStatus.APPLIED:
        return replace(state, phase=Phase.DONE, cordon=replace(c, status=CordonStatus.KEPT))
    return replace(state, phase=Phase.DONE)


def _cancel(state: ExecState) -> ExecState:
    """``reassign cancel --execute`` was journaled: moves not submitted yet never will be;
    a drain still cordoning goes straight to putting the old values back."""
    if state.phase is Phase.DONE:
        return replace(state, cancelled=True)
    moves = tuple(replace(m, status=MoveStatus.FAILED,
                          error="not submitted: the execution was cancelled")
                  if m.status is MoveStatus.PENDING else m for m in state.moves)
    st = replace(state, cancelled=True, moves=moves)
    if st.phase is Phase.CORDON:
        st = _final(st)
    return st


def _resume_actions(state: ExecState) -> list[Action]:
    """What to do next in ``state``'s phase (also after a restart)."""
    if state.phase is Phase.CORDON:
        assert state.cordon is not None
        if state.cordon.status is CordonStatus.PLANNED:
            return [ReadCordon(state.cordon.brokers)]
        return [SetCordon(state.cordon.brokers)]
    if state.phase is Phase.UNCORDON:
        assert state.cordon is not None and state.cordon.prior is not None
        return [RestoreCordon(state.cordon.prior)]
    if state.phase is Phase.BASELINE:
        if not state.moves_data:
            return [Observe()]  # nothing to throttle: straight to the moves (phase set there)
        return [ReadBaseline(throttle_brokers(state.moves),
                             tuple(sorted(throttle_topics(state.moves))))]
    if state.phase is Phase.THROTTLE:
        assert state.baseline is not None
        topics = {t: (merge_replica_lists(lead, state.baseline.get(f"topic:{t}", _LEADER_KEY)),
                      merge_replica_lists(fol, state.baseline.get(f"topic:{t}", _FOLLOWER_KEY)))
                  for t, (lead, fol) in throttle_topics(state.moves).items()}
        return [SetThrottles(state.rate, throttle_brokers(state.moves), topics)]
    if state.phase is Phase.MOVING:
        return [Observe()]
    if state.phase is Phase.ELECT:
        return [ElectLeaders(tuple(m.tp for m in state.moves if m.status is MoveStatus.DONE))]
    if state.phase is Phase.CLEANUP:
        assert state.baseline is not None
        return [RemoveThrottles(state.baseline, throttle_brokers(state.moves),
                                tuple(sorted(throttle_topics(state.moves))))]
    return [Finish()]


_LEADER_KEY = "leader.replication.throttled.replicas"
_FOLLOWER_KEY = "follower.replication.throttled.replicas"


def _reconcile(m: Move, obs: Observation) -> Move:
    """One move against what the cluster says (see the module docstring)."""
    if m.status in (MoveStatus.DONE, MoveStatus.FAILED):
        return m
    now = obs.replicas.get(m.tp)
    flight = obs.in_flight.get(m.tp)
    # in order: the first replica is the preferred leader, so a pure reorder is a real move
    at_target = flight is None and now is not None and tuple(now) == tuple(m.target)
    if at_target:
        # Done only when a second observation agrees. A move that only adds replicas has
        # the target as its replica list while in flight; cancelled, it reverts. Metadata
        # from a broker a moment behind the controller then shows the in-flight list
        # while ListPartitionReassignments lists nothing: it looks done but is not.
        if m.seen_at_target:
            return replace(m, status=MoveStatus.DONE, seen_at_target=False)
        return replace(m, seen_at_target=True)
    if m.seen_at_target:
        m = replace(m, seen_at_target=False)
    if m.status is MoveStatus.PENDING:
        if flight is not None and set(flight.replicas) == set(m.target) | set(flight.removing):
            return replace(m, status=MoveStatus.IN_FLIGHT, adopted=True)
        return m
    if flight is not None:
        return replace(m, status=MoveStatus.IN_FLIGHT)
    if now is not None and tuple(now) == m.base:
        if m.status is MoveStatus.SUBMITTING:
            return replace(m, status=MoveStatus.PENDING)  # the request never took effect
        return replace(m, status=MoveStatus.FAILED,
                       error="reverted to its base replicas by someone else (cancelled?)")
    if now is not None and set(now) == set(m.base) != set(m.target):
        # a cancelled move (KIP-455) gets its original replicas back, but not always in
        # their order (Kafka 4.3.1: [2, 0] came back as [0, 2]): reverted all the same
        return replace(m, status=MoveStatus.FAILED,
                       error="reverted to its base replicas by someone else (cancelled?)")
    return m  # in between two reads: look again


def _submittable(state: ExecState, moves: list[Move], obs: Observation
                 ) -> tuple[list[int], set[int]]:
    """Indexes of PENDING moves to submit now, and the dead brokers that hold others back."""
    load: Counter[int] = Counter()
    for m in moves:
        if m.open:
            load.update(m.brokers)
    limit = state.max_moves_per_broker
    chosen: list[int] = []
    blocked: set[int] = set()
    for i, m in enumerate(moves):
        if m.status is not MoveStatus.PENDING or m.tp in obs.in_flight or m.seen_at_target:
            continue  # (a reassignment opskit did not start is never overridden)
        dead = (set(m.target) | set(m.base[:1])) - obs.live_brokers
        if dead:
            blocked |= dead
            continue
        if limit is not None and m.brokers and any(load[b] >= limit for b in m.brokers):
            continue
        chosen.append(i)
        load.update(m.brokers)
    return chosen, blocked


def _observed(state: ExecState, obs: Observation) -> tuple[ExecState, list[Action]]:
    if obs.cancelled and not state.cancelled:
        state = _cancel(state)
    if state.phase is Phase.BASELINE and not state.moves_data:
        state = replace(state, phase=Phase.MOVING)
    if state.phase is not Phase.MOVING:
        return state, _resume_actions(state)
    moves = [_reconcile(m, obs) for m in state.moves]
    if state.cancelled:  # (a move whose submission never took effect is pending again)
        moves = [replace(m, status=MoveStatus.FAILED,
                         error="not submitted: the execution was cancelled")
                 if m.status is MoveStatus.PENDING else m for m in moves]
    chosen, blocked = _submittable(state, moves, obs)
    for i in chosen:
        moves[i] = replace(moves[i], status=MoveStatus.SUBMITTING)
    done = sum(1 for m in moves if m.status in (MoveStatus.DONE, MoveStatus.FAILED))
    stuck_on = sorted({b for m in moves if m.open for b in set(m.target) | set(m.base)}
                      - obs.live_brokers) or sorted(blocked)
    waiting = None
    if stuck_on:
        names = ", ".join(str(b) for b in stuck_on)
        waiting = f"waiting for broker(s) {names} to come back (not registered in the cluster)"
    prev = state.progress
    progressed = prev is None or done > prev[1] or obs.bytes_remaining < prev[2] or chosen
    progress = (obs.now, done, obs.bytes_remaining) if progressed else prev
    st = replace(state, moves=tuple(moves), waiting=waiting, progress=progress)
    if done == len(moves):
        st = replace(st, phase=Phase.ELECT, waiting=None)
        return st, _resume_actions(st)
    if chosen:
        return st, [Submit(tuple(moves[i] for i in chosen))]
    assert progress is not None
    if obs.now - progress[0] > state.stall_after:
        why = waiting or "no move finished and no bytes were copied"
        return st, [Stop(f"no progress for {state.stall_after:g}s: {why}")]
    return st, [Observe(POLL_S)]


def _submitted(state: ExecState, ev: Submitted) -> ExecState:
    accepted = set(ev.accepted)
    moves = []
    for m in state.moves:
        if m.status is MoveStatus.SUBMITTING and m.tp in ev.rejected:
            moves.append(replace(m, status=MoveStatus.FAILED, error=ev.rejected[m.tp]))
        elif m.status is MoveStatus.SUBMITTING and m.tp in accepted:
            moves.append(replace(m, status=MoveStatus.IN_FLIGHT))
        else:
            moves.append(m)  # no answer for it: the next observation settles it
    return replace(state, moves=tuple(moves))
