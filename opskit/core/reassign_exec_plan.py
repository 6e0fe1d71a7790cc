"""The plan file an execution runs, read from text (pure).

The file is kafka-reassign-partitions' JSON format::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                                   "log_dirs": ["any", "any"]}]}

plus an optional top-level ``"opskit"`` object written by ``opskit reassign plan``
whose ``"base"`` maps ``"topic:partition"`` (or ``"topic-partition"``) to the
replicas the partition had when the plan was made, for compare-and-set. A plan
written by Kafka's own tool has no such key: the execution then compares against
the assignment it reads when it starts (and says so).

Everything malformed raises :class:`InvalidInputError` (exit 2) with one line
naming the first problem: the file is never half-used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opskit.core.models import TopicPartition
from opskit.errors import InvalidInputError, UsageError

__all__ = ["ExecPlan", "PlannedMove", "parse_plan", "plan_id"]


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

    @property
    def topics(self) -> list[str]:
        return sorted({m.tp.topic for m in self.moves})


def _replicas(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise InvalidInputError(f"{where}: 'replicas' must be a non-empty list of broker ids")
    out: list[int] = []
    for b in value:
        if isinstance(b, bool) or not isinstance(b, int) or b < 0:
            raise InvalidInputError(f"{where}: broker id {b!r} is not a non-negative integer")
        if b in out:
            raise InvalidInputError(f"{where}: broker {b} appears twice in replicas {value}")
        out.append(b)
    return tuple(out)


def _tp_key(key: str) -> TopicPartition | None:
    for sep in (":", "-"):
        topic, s, part = key.rpartition(sep)
        if s and topic and part.isdigit():
            return TopicPartition(topic, int(part))
    return None


def _base(raw: Any) -> dict[TopicPartition, tuple[int, ...]] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidInputError("plan: 'opskit' must be an object")
    base = raw.get("base")
    if base is None:
        return None
    if not isinstance(base, dict):
        raise InvalidInputError("plan: 'opskit.base' must map 'topic:partition' to replicas")
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for key, reps in base.items():
        tp = _tp_key(str(key))
        if tp is None:
            raise InvalidInputError(f"plan: 'opskit.base' key {key!r} is not 'topic:partition'")
        out[tp] = _replicas(reps, f"plan: opskit.base {key}")
    return out


def parse_plan(text: str, source: str = "plan") -> ExecPlan:
    """Parse a plan file's text. Raises InvalidInputError (or UsageError for log dirs)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"{source}: not valid JSON ({e.msg} at line {e.lineno} "
                                f"column {e.colno})") from None
    if not isinstance(doc, dict):
        raise InvalidInputError(f"{source}: expected a JSON object with 'version' and 'partitions'")
    if doc.get("version") != 1:
        raise InvalidInputError(f"{source}: 'version' must be 1, not {doc.get('version')!r}")
    parts = doc.get("partitions")
    if not isinstance(parts, list):
        raise InvalidInputError(f"{source}: 'partitions' must be a list")
    moves: list[PlannedMove] = []
    seen: set[TopicPartition] = set()
    for i, p in enumerate(parts):
        where = f"{source}: partitions[{i}]"
        if not isinstance(p, dict):
            raise InvalidInputError(f"{where} is not an object")
        topic, part = p.get("topic"), p.get("partition")
        if not isinstance(topic, str) or not topic:
            raise InvalidInputError(f"{where}: 'topic' must be a non-empty string")
        if isinstance(part, bool) or not isinstance(part, int) or part < 0:
            raise InvalidInputError(f"{where}: 'partition' must be a non-negative integer")
        tp = TopicPartition(topic, part)
        if tp in seen:
            raise InvalidInputError(f"{where}: {topic}:{part} appears twice in the plan")
        seen.add(tp)
        target = _replicas(p.get("replicas"), f"{where} ({topic}:{part})")
        dirs = p.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(target):
                raise InvalidInputError(f"{where}: 'log_dirs' must have one entry per replica")
            if any(d != "any" for d in dirs):
                raise UsageError(f"{where}: log directories other than \"any\" are not supported "
                                 "by opskit reassign execute (use kafka-reassign-partitions.sh)")
        moves.append(PlannedMove(tp, target))
    if not moves:
        raise InvalidInputError(f"{source}: the plan has no partitions")
    return ExecPlan(tuple(moves), _base(doc.get("opskit")))


def plan_id(plan: ExecPlan) -> str:
    """A stable short id of the plan's targets (the journal's name)."""
    canon = ";".join(f"{m.tp.topic}:{m.tp.partition}={','.join(map(str, m.target))}"
                     for m in sorted(plan.moves, key=lambda m: m.tp))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]
