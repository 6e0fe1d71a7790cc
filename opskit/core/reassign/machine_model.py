"""The reassignment execution's data: state, events and actions (pure, persisted).

Frozen dataclasses and enums; the state has ``to_dict`` / ``from_dict`` (it is the
journal's content). The rules that move from one state to the next are in
:mod:`opskit.core.reassign.machine`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from opskit.core.models import TopicPartition
from opskit.core.reassign.cordon import Cordon, CordonStatus

__all__ = [
    "Action", "BaselineRead", "Begin", "ConfigBaseline", "CordonRead", "CordonRestored",
    "CordonSet", "ElectLeaders", "Elected", "Event", "ExecState", "Finish", "InFlight", "Move",
    "MoveStatus", "Observation", "Observe", "Observed", "Phase", "ReadBaseline", "ReadCordon",
    "RemoveThrottles", "RestoreCordon", "SetCordon", "SetThrottles", "Stop", "Submit",
    "Submitted", "ThrottlesRemoved", "ThrottlesSet", "initial_state",
]


class MoveStatus(str, Enum):
    PENDING = "pending"
    SUBMITTING = "submitting"  # journaled intent; the request may or may not have arrived
    IN_FLIGHT = "in_flight"
    DONE = "done"
    FAILED = "failed"  # rejected by the broker, or reverted by someone else: never retried


class Phase(str, Enum):
    CORDON = "cordon"  # a drain: cordon the drained brokers before anything moves
    BASELINE = "baseline"
    THROTTLE = "throttle"
    MOVING = "moving"
    ELECT = "elect"
    CLEANUP = "cleanup"
    UNCORDON = "uncordon"  # a cancelled drain: the cordon values found before come back
    DONE = "done"


@dataclass(frozen=True)
class Move:
    tp: TopicPartition
    base: tuple[int, ...]
    target: tuple[int, ...]
    status: MoveStatus = MoveStatus.PENDING
    adopted: bool = False
    error: str | None = None
    #: at its target on the last observation, not yet confirmed by a second one
    seen_at_target: bool = False

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
                "adopted": self.adopted, "error": self.error,
                "seen_at_target": self.seen_at_target}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Move:
        return cls(TopicPartition(str(d["topic"]), int(d["partition"])),
                   tuple(int(b) for b in d["base"]), tuple(int(b) for b in d["target"]),
                   MoveStatus(d["status"]), bool(d.get("adopted", False)), d.get("error"),
                   bool(d.get("seen_at_target", False)))


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
    #: a drain's cordon (None: the plan drains no broker)
    cordon: Cordon | None = None
    #: ``reassign cancel --execute`` was journaled: nothing more is submitted
    cancelled: bool = False

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
            "cordon": None if self.cordon is None else self.cordon.to_dict(),
            "cancelled": self.cancelled,
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
            cordon=None if d.get("cordon") is None else Cordon.from_dict(d["cordon"]),
            cancelled=bool(d.get("cancelled", False)),
        )


def initial_state(plan_id: str, moves: tuple[Move, ...], rate: int,
                  max_moves_per_broker: int | None, stall_after: float = 300.0,
                  cordon: Cordon | None = None) -> ExecState:
    """A new execution. Moves already at their target start DONE; a drain whose brokers
    can be cordoned starts in the CORDON phase."""
    ms = tuple(replace(m, status=MoveStatus.DONE) if m.base == m.target else m for m in moves)
    phase = (Phase.CORDON if cordon is not None and cordon.status is CordonStatus.PLANNED
             else Phase.BASELINE)
    return ExecState(plan_id, ms, rate, max_moves_per_broker, phase=phase,
                     stall_after=stall_after, cordon=cordon)


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
    #: ``reassign cancel --execute`` was journaled for this execution
    cancelled: bool = False


@dataclass(frozen=True)
class Begin:
    """The runner starts (a new run or a resume); ``cancelled``: the journal holds a
    ``reassign cancel --execute`` of this execution."""

    cancelled: bool = False


@dataclass(frozen=True)
class CordonRead:
    """Each drained broker's dynamic ``cordoned.log.dirs`` before (None: none set)."""

    prior: tuple[tuple[int, str | None], ...]


@dataclass(frozen=True)
class CordonSet:
    """The drained brokers report every log directory cordoned."""


@dataclass(frozen=True)
class CordonRestored:
    pass


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


Event = (Begin | BaselineRead | ThrottlesSet | Observed | Submitted | Elected | ThrottlesRemoved
         | CordonRead | CordonSet | CordonRestored)

# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class ReadCordon:
    brokers: tuple[int, ...]


@dataclass(frozen=True)
class SetCordon:
    """Cordon every log directory of these brokers, then wait until they report it."""

    brokers: tuple[int, ...]


@dataclass(frozen=True)
class RestoreCordon:
    """Put back each broker's value from before (delete ours where there was none)."""

    prior: tuple[tuple[int, str | None], ...]


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


Action = (ReadBaseline | SetThrottles | Observe | Submit | ElectLeaders | RemoveThrottles | Stop
          | Finish | ReadCordon | SetCordon | RestoreCordon)
