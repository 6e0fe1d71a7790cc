"""Executing a reassignment plan: a pure state machine.

``transition(state, event) -> (state, actions)``. A runner (``opskit.cli.reassign_exec``
with ``opskit.adapters.reassign_admin``) performs the actions, turns their outcome
into the next event, and persists the state *before* performing the actions it
returned (``opskit.adapters.reassign_journal``). So after a ``kill -9`` at any point
the saved state tells what may have happened, and the first observation after a
restart settles it:

* a move is marked ``SUBMITTING`` before AlterPartitionReassignments is sent. On
  resume it is ``IN_FLIGHT`` when ListPartitionReassignments lists it, ``DONE`` when
  the partition has the target replicas, and ``PENDING`` again only when the
  partition still has its base replicas and nothing is in flight: the request never
  took effect, so sending it is not sending it twice. Anything else is waited on.
* nothing is ever cancelled: what is in flight is adopted and waited for.
* the throttle values that existed before are read and saved before the first
  throttle is set; cleanup restores exactly those (idempotent, so it is redone
  after a crash during cleanup).

Phases: BASELINE (read prior throttles) -> THROTTLE (set them) -> MOVING (submit
in batches of at most ``max_moves_per_broker`` moves per broker, observe) ->
ELECT (preferred leaders) -> CLEANUP (restore throttles) -> DONE. A plan that
moves no data (pure reorders, or everything already in place) skips the throttle
phases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from opskit.core.models import TopicPartition

__all__ = [
    "Action", "BaselineRead", "Begin", "ConfigBaseline", "ElectLeaders", "Elected", "Event",
    "ExecState", "Finish", "InFlight", "Move", "MoveStatus", "Observation", "Observe",
    "Observed", "Phase", "ReadBaseline", "RemoveThrottles", "SetThrottles", "Stop", "Submit",
    "Submitted", "ThrottlesRemoved", "ThrottlesSet", "initial_state", "merge_replica_lists",
    "throttle_brokers", "throttle_topics", "transition",
]


class MoveStatus(str, Enum):
    PENDING = "pending"
    SUBMITTING = "submitting"  # journaled intent; the request may or may not have arrived
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"  # rejected by the broker, or reverted by someone else: never retried


class Phase(str, Enum):
    BASELINE = "baseline"
    THROTTLE = "throttle"
    MOVING = "moving"
    ELECT = "elect"
    CLEANUP = "cleanup"
    DONE = "done"


@dataclass(frozen=True)
class Move:
    tp: TopicPartition
    base: tuple[int, ...]
    target: tuple[int, ...]
    status: MoveStatus = MoveStatus.PENDING
    adopted: bool = False
    error: str | None = None

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(b for b in self.target if b not in self.base)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(b for b in self.base if b not in self.target)

    @property
    def moves_data(self) -> bool:
        return bool(self.adding)

    @property
    def brokers(self) -> frozenset[int]:
        """Brokers whose move slots this move takes: new and leaving replicas, and the
        current leader (its data source) when data is copied."""
        involved = set(self.adding) | set(self.removing)
        if self.adding and self.base:
            involved.add(self.base[0])
        return frozenset(involved)

    @property
    def open(self) -> bool:
        return self.status in (MoveStatus.SUBMITTING, MoveStatus.IN_FLIGHT)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "base": list(self.base),
                "target": list(self.target), "status": self.status.value,
                "adopted": self.adopted, "error": self.error}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Move:
        return cls(TopicPartition(str(d["topic"]), int(d["partition"])),
                   tuple(int(b) for b in d["base"]), tuple(int(b) for b in d["target"]),
                   MoveStatus(d["status"]), bool(d.get("adopted", False)), d.get("error"))


@dataclass(frozen=True)
class ConfigBaseline:
    """Throttle config values as they were before the run: (resource, key) -> the
    dynamic value set on that resource, or None when it had none. Resources are
    ``broker:<id>`` and ``topic:<name>``; static and cluster-default values are never
    touched, so they need no saving."""

    values: tuple[tuple[str, str, str | None], ...]

    def get(self, resource: str, key: str) -> str | None:
        for r, k, v in self.values:
            if r == resource and k == key:
                return v
        return None

    def to_dict(self) -> list[list[str | None]]:
        return [[r, k, v] for r, k, v in self.values]

    @classmethod
    def from_dict(cls, d: list[list[str | None]]) -> ConfigBaseline:
        return cls(tuple((str(r), str(k), v) for r, k, v in d))


@dataclass(frozen=True)
class ExecState:
    plan_id: str
    moves: tuple[Move, ...]
    rate: int  # bytes/s, per broker and direction
    max_moves_per_broker: int | None
    phase: Phase = Phase.BASELINE
    baseline: ConfigBaseline | None = None
    #: what the run waits for (a stopped broker ...), None when it makes progress
    waiting: str | None = None
    #: (time, moves done, bytes remaining) of the last observed progress
    progress: tuple[float, int, int] | None = None
    failed_reason: str | None = None
    #: seconds without progress (a move finishing, bytes remaining falling) before stopping
    stall_after: float = 300.0

    @property
    def moves_data(self) -> bool:
        return any(m.moves_data for m in self.moves)

    def counts(self) -> dict[str, int]:
        c = Counter(m.status.value for m in self.moves)
        return {s.value: c.get(s.value, 0) for s in MoveStatus}

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id, "rate": self.rate,
            "max_moves_per_broker": self.max_moves_per_broker, "phase": self.phase.value,
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "waiting": self.waiting,
            "progress": None if self.progress is None else list(self.progress),
            "failed_reason": self.failed_reason, "stall_after": self.stall_after,
            "moves": [m.to_dict() for m in self.moves],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExecState:
        prog = d.get("progress")
        return cls(
            plan_id=str(d["plan_id"]), rate=int(d["rate"]),
            max_moves_per_broker=(None if d.get("max_moves_per_broker") is None
                                  else int(d["max_moves_per_broker"])),
            phase=Phase(d["phase"]),
            baseline=None if d.get("baseline") is None else ConfigBaseline.from_dict(d["baseline"]),
            waiting=d.get("waiting"),
            progress=None if prog is None else (float(prog[0]), int(prog[1]), int(prog[2])),
            failed_reason=d.get("failed_reason"),
            stall_after=float(d.get("stall_after", 300.0)),
            moves=tuple(Move.from_dict(m) for m in d["moves"]),
        )


def initial_state(plan_id: str, moves: tuple[Move, ...], rate: int,
                  max_moves_per_broker: int | None, stall_after: float = 300.0) -> ExecState:
    """A new execution. Moves already at their target start DONE."""
    ms = tuple(replace(m, status=MoveStatus.DONE) if m.base == m.target else m for m in moves)
    return ExecState(plan_id, ms, rate, max_moves_per_broker, stall_after=stall_after)


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class InFlight:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class Observation:
    """What the cluster says now, about the plan's partitions."""

    now: float
    replicas: Mapping[TopicPartition, tuple[int, ...]]
    in_flight: Mapping[TopicPartition, InFlight]
    live_brokers: frozenset[int]
    bytes_remaining: int = 0


@dataclass(frozen=True)
class Begin:
    """The runner starts (a new run or a resume)."""


@dataclass(frozen=True)
class BaselineRead:
    baseline: ConfigBaseline


@dataclass(frozen=True)
class ThrottlesSet:
    pass


@dataclass(frozen=True)
class Observed:
    observation: Observation


@dataclass(frozen=True)
class Submitted:
    """The broker's answer to a Submit: accepted partitions, and rejected ones with why."""

    accepted: tuple[TopicPartition, ...]
    rejected: Mapping[TopicPartition, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Elected:
    errors: Mapping[TopicPartition, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ThrottlesRemoved:
    pass


Event = Begin | BaselineRead | ThrottlesSet | Observed | Submitted | Elected | ThrottlesRemoved

# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class ReadBaseline:
    brokers: tuple[int, ...]
    topics: tuple[str, ...]


@dataclass(frozen=True)
class SetThrottles:
    rate: int
    brokers: tuple[int, ...]
    #: topic -> (leader throttled replicas, follower throttled replicas), "p:b,..." lists
    topics: Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class Observe:
    #: seconds to wait before observing (0: at once)
    after: float = 0.0


@dataclass(frozen=True)
class Submit:
    moves: tuple[Move, ...]


@dataclass(frozen=True)
class ElectLeaders:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class RemoveThrottles:
    baseline: ConfigBaseline
    brokers: tuple[int, ...]
    topics: tuple[str, ...]


@dataclass(frozen=True)
class Stop:
    """Give up for now (the journal stays; ``--resume`` continues)."""

    reason: str


@dataclass(frozen=True)
class Finish:
    pass


Action = ReadBaseline | SetThrottles | Observe | Submit | ElectLeaders | RemoveThrottles | Stop | Finish

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
        return state, _resume_actions(state)
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
        st = replace(state, phase=_after_elect(state)) if state.phase is Phase.ELECT else state
        return st, _resume_actions(st)
    if isinstance(event, ThrottlesRemoved):
        st = replace(state, phase=Phase.DONE) if state.phase is Phase.CLEANUP else state
        return st, [Finish()]
    raise TypeError(f"unknown event {event!r}")


def _after_elect(state: ExecState) -> Phase:
    return Phase.CLEANUP if state.baseline is not None else Phase.DONE


def _resume_actions(state: ExecState) -> list[Action]:
    """What to do next in ``state``'s phase (also after a restart)."""
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
    at_target = flight is None and now is not None and set(now) == set(m.target)
    if at_target:
        return replace(m, status=MoveStatus.DONE)
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
        if m.status is not MoveStatus.PENDING or m.tp in obs.in_flight:
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
    if state.phase is Phase.BASELINE and not state.moves_data:
        state = replace(state, phase=Phase.MOVING)
    if state.phase is not Phase.MOVING:
        return state, _resume_actions(state)
    moves = [_reconcile(m, obs) for m in state.moves]
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
