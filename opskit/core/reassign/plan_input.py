"""The plan file an execution runs, read from text (pure).

The file is kafka-reassign-partitions' JSON format::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                                   "log_dirs": ["any", "any"]}]}

plus an optional top-level ``"opskit"`` object written by ``opskit reassign plan``
(:mod:`opskit.core.reassign.model`) whose ``"base"`` lists the replicas each partition
had when the plan was made, for compare-and-set. A plan
written by Kafka's own tool has no such key: the execution then compares against
the assignment it reads when it starts (and says so).

Everything malformed raises :class:`InvalidInputError` (exit 2) with one line
naming the first problem: the file is never half-used.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from opskit.core.models import TopicPartition
from opskit.core.reassign.model import GoalKind, Plan, load_json, parse_assignments, refuse_log_dirs
from opskit.errors import InvalidInputError, UsageError

__all__ = ["ExecPlan", "PlannedMove", "parse_plan", "parse_rate", "plan_id"]


@dataclass(frozen=True)
class PlannedMove:
    """One partition of the plan: the replicas it must end with (order = preference)."""

    tp: TopicPartition
    target: tuple[int, ...]


@dataclass(frozen=True)
class ExecPlan:
    moves: tuple[PlannedMove, ...]
    #: replicas per partition when the plan was made (None: a plan without opskit's key)
    base: Mapping[TopicPartition, tuple[int, ...]] | None
    #: the brokers an opskit ``--remove-brokers`` plan drains (cordoned first where the
    #: cluster can); empty for every other plan
    drain: tuple[int, ...] = ()

    @property
    def topics(self) -> list[str]:
        return sorted({m.tp.topic for m in self.moves})


def parse_plan(text: str, source: str = "plan") -> ExecPlan:
    """Parse a plan file's text with the plan model's strict reader
    (:mod:`opskit.core.reassign.model`). Raises InvalidInputError, or UsageError for
    log directories other than ``any``."""
    try:
        data = load_json(text)
        assignments = parse_assignments(data)
        base = None
        drain: tuple[int, ...] = ()
        if isinstance(data, dict) and "opskit" in data:
            plan = Plan.from_dict(data)
            base = {b.tp: b.replicas for b in plan.base}
            if plan.goal.kind is GoalKind.REMOVE_BROKERS:
                drain = tuple(sorted(plan.goal.brokers))
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}") from None
    refuse_log_dirs(assignments, source)
    if not assignments:
        raise InvalidInputError(f"{source}: the plan has no partitions")
    return ExecPlan(tuple(PlannedMove(a.tp, a.replicas) for a in assignments), base, drain)


def plan_id(plan: ExecPlan) -> str:
    """A stable short id of the plan's targets (the journal's name)."""
    canon = ";".join(f"{m.tp.topic}:{m.tp.partition}={','.join(map(str, m.target))}"
                     for m in sorted(plan.moves, key=lambda m: m.tp))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3,
          "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}


def parse_rate(text: str) -> int:
    """A throttle in bytes/s: ``10485760``, ``10MB``, ``10MiB``, ``10MB/s`` (decimal and
    binary units). UsageError when malformed or not positive."""
    raw = text.strip().upper().removesuffix("/S").replace(" ", "")
    num = raw.rstrip("KMGIB")
    unit = raw[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not value > 0 or value * _UNITS[unit] > 2**62:
        raise UsageError(f"--throttle: {text!r} is not a rate like 10MB, 50MiB or 1048576 "
                         "(bytes per second, > 0)")
    return max(1, int(value * _UNITS[unit]))
