"""Partition reassignment: the cluster topology a plan is made from, the goal, and the plan
file that ``opskit reassign plan`` writes and ``opskit reassign execute|verify`` read.

The plan file is kafka-reassign-partitions' JSON format::

    {"version": 1,
     "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1], "log_dirs": ["any", "any"]}],
     "opskit": {...}}

so ``kafka-reassign-partitions.sh --execute --reassignment-json-file`` runs an opskit plan as
it is (Kafka's parser reads only ``version`` and ``partitions`` and ignores other top-level
keys), and opskit reads a file the tool wrote (``parse_assignments``). The ``"opskit"`` key
holds what Kafka's format lacks:

- ``base``: each moved partition's replicas when the plan was made (compare-and-set: the
  executor refuses when the cluster no longer has them) and its size in bytes;
- ``goal``, ``created`` (ISO 8601, UTC), ``brokers`` (the ids registered then);
- ``estimates``: replicas and bytes moved, their lower bounds, leaders changed, the bytes
  each broker receives and sends, and the duration under the throttle the plan was made for.

Pure: no I/O, no clock. Malformed input raises :class:`InvalidInputError` with one line
saying where (``partitions[3].replicas: ...``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from opskit.core.models import TopicPartition
from opskit.core.reassign.bytes import ByteReport
from opskit.core.reassign.leader_weights import LeaderLoad, Rates
from opskit.core.reassign.plan_fields import (
    _INT32_MAX,
    _bool,
    _broker_bytes,
    _field,
    _id_list,
    _int,
    _list,
    _no_constant,
    _no_duplicates,
    _obj,
    _optional_count,
    _str_item,
)
from opskit.core.strict_read import PLAN_FILE
from opskit.errors import InvalidInputError, UsageError

PLAN_FORMAT = "opskit/reassign-plan"
FORMAT_VERSION = 1
KAFKA_JSON_VERSION = 1
ANY_LOG_DIR = "any"
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


# --------------------------------------------------------------------------- topology


@dataclass(frozen=True)
class Broker:
    id: int
    rack: str | None = None


@dataclass(frozen=True)
class PartitionState:
    """One partition as the cluster has it: replicas in order (the first is the preferred
    leader), the in-sync replicas, the leader (None when offline) and its size in bytes
    (the largest replica's, from DescribeLogDirs; 0 when unknown). ``offline``: the
    cluster reports no leader for it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...] = ()
    leader: int | None = None
    size_bytes: int = 0
    offline: bool = False

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class Topology:
    """What a reassignment plan is made from. ``min_insync`` maps a topic to its
    ``min.insync.replicas``, None when it could not be read (unknown: no partition of
    it may move); a topic missing from it counts as 1 (the adapters name every topic)."""

    brokers: tuple[Broker, ...]
    partitions: tuple[PartitionState, ...]
    min_insync: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def broker_ids(self) -> tuple[int, ...]:
        return tuple(sorted(b.id for b in self.brokers))

    def min_isr(self, topic: str) -> int | None:
        return self.min_insync.get(topic, 1)

    def racks(self) -> dict[int, str | None]:
        return {b.id: b.rack for b in self.brokers}


# --------------------------------------------------------------------------- goal


class GoalKind(str, Enum):
    ADD_BROKERS = "add-brokers"
    REMOVE_BROKERS = "remove-brokers"
    REPLICATION_FACTOR = "replication-factor"
    REBALANCE = "rebalance"
    FROM_JSON = "from-json"


@dataclass(frozen=True)
class Assignment:
    """One entry of kafka-reassign-partitions' ``partitions`` list. ``log_dirs`` None (the
    entry had none) becomes ``any`` for every replica, as Kafka's tool reads it."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.log_dirs is None:
            object.__setattr__(self, "log_dirs", (ANY_LOG_DIR,) * len(self.replicas))

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "replicas": list(self.replicas), "log_dirs": list(self.log_dirs or ())}


@dataclass(frozen=True)
class Goal:
    """What the plan is for. ``brokers`` for add/remove; ``replication_factor`` with
    ``topics`` (None = all topics) and ``include_internal`` for RF changes; ``target`` for
    from-json (the wanted assignment) and ``source`` (the file it came from, for the record)."""

    kind: GoalKind
    brokers: tuple[int, ...] = ()
    replication_factor: int | None = None
    topics: tuple[str, ...] | None = None
    include_internal: bool = False
    target: tuple[Assignment, ...] = ()
    source: str | None = None

    def describe(self) -> str:
        if self.kind in (GoalKind.ADD_BROKERS, GoalKind.REMOVE_BROKERS):
            return f"{self.kind.value} {','.join(str(b) for b in self.brokers)}"
        if self.kind is GoalKind.REPLICATION_FACTOR:
            scope = "all topics" if self.topics is None else ",".join(self.topics)
            internal = " (with internal topics)" if self.include_internal else ""
            return f"replication-factor {self.replication_factor} for {scope}{internal}"
        if self.kind is GoalKind.FROM_JSON:
            return f"from-json {self.source or ''}".rstrip()
        return str(self.kind.value)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.kind in (GoalKind.ADD_BROKERS, GoalKind.REMOVE_BROKERS):
            out["brokers"] = list(self.brokers)
        if self.kind is GoalKind.REPLICATION_FACTOR:
            out["replication_factor"] = self.replication_factor
            out["topics"] = None if self.topics is None else list(self.topics)
            out["include_internal"] = self.include_internal
        if self.kind is GoalKind.FROM_JSON:
            out["source"] = self.source
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "opskit.goal") -> Goal:
        d = _obj(data, where)
        kind_name = PLAN_FILE.str_field(d, "kind", where)
        try:
            kind = GoalKind(kind_name)
        except ValueError:
            raise InvalidInputError(f"{where}.kind: unknown goal {kind_name!r}") from None
        brokers: tuple[int, ...] = ()
        rf: int | None = None
        topics: tuple[str, ...] | None = None
        internal = False
        source: str | None = None
        if kind in (GoalKind.ADD_BROKERS, GoalKind.REMOVE_BROKERS):
            brokers = _id_list(_field(d, "brokers", where), f"{where}.brokers", allow_empty=False)
        if kind is GoalKind.REPLICATION_FACTOR:
            rf = _int(d, "replication_factor", where, lo=1)
            raw = _field(d, "topics", where)
            if raw is not None:
                topics = tuple(_str_item(t, f"{where}.topics[{i}]") for i, t in enumerate(_list(raw, f"{where}.topics")))
            internal = _bool(d, "include_internal", where)
        if kind is GoalKind.FROM_JSON:
            raw_src = d.get("source")
            if raw_src is not None and not isinstance(raw_src, str):
                raise InvalidInputError(f"{where}.source: expected a string or null")
            source = raw_src
        return cls(kind, brokers, rf, topics, internal, (), source)


@dataclass(frozen=True)
class Policy:
    """How to plan. ``respect_racks``: keep each partition's replicas spread over racks
    (at most ceil(RF / racks) in one rack) when every broker has a rack.
    ``throttle_bytes_per_s``: the replication throttle the duration estimate assumes
    (None: no estimate). ``byte_tolerance_pct``: also balance bytes per broker within
    this percentage of the mean (``opskit.core.reassign.bytes``; None: counts only).
    ``capacity``: bytes each broker may hold (a plan leaving one above it and above what
    it holds now is refused), ``capacity_source`` says where it came from."""

    respect_racks: bool = True
    throttle_bytes_per_s: int | None = None
    balance_leaders: bool = True
    byte_tolerance_pct: float | None = None
    capacity: Mapping[int, int] = field(default_factory=dict)
    capacity_source: str | None = None
    leader_rates: Rates | None = None  # bytes-in to weigh preferred leaders by (leader_weights.py)


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class PartitionBase:
    """A moved partition as it was when the plan was made."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    size_bytes: int = 0

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition,
                "replicas": list(self.replicas), "size_bytes": self.size_bytes}


@dataclass(frozen=True)
class Estimates:
    """What the plan moves and how long it takes.

    ``replicas_moved``: replicas created on a broker that did not have one of that
    partition; ``bytes_moved``: the sizes of those partitions, once per new replica.
    ``*_lower_bound``: no plan reaching the same goal can move less (see
    ``opskit.core.reassign.plan``). ``leaders_changed``: partitions whose first replica (the
    preferred leader) changes. ``broker_bytes_in``/``out``: per broker, bytes it receives as
    a new replica / sends as the current leader of a partition that gains replicas.
    ``duration_s``: the busiest broker's bytes / the throttle (Kafka's own model: the
    throttle caps each broker's replication in and out), None without a throttle; a
    lower estimate: writes arriving meanwhile must be copied too.

    With racks (None without): ``rack_replicas_lower_bound``, the replicas that must move
    for the rack spread alone (each partition's replicas above its rack limit, and those
    on drained brokers; part of ``replicas_lower_bound``); ``unspread_before``/``after``:
    partitions above the limit in some rack before and after the plan.

    ``bytes_per_broker``: bytes per broker before/after, capacity, and the byte goal's
    outcome and bounds (``opskit.core.reassign.bytes.ByteReport``; None in plan files
    written before it existed)."""

    replicas_moved: int
    replicas_lower_bound: int
    bytes_moved: int
    bytes_lower_bound: int
    leaders_changed: int = 0
    broker_bytes_in: Mapping[int, int] = field(default_factory=dict)
    broker_bytes_out: Mapping[int, int] = field(default_factory=dict)
    throttle_bytes_per_s: int | None = None
    duration_s: float | None = None
    rack_replicas_lower_bound: int | None = None
    unspread_before: int | None = None
    unspread_after: int | None = None
    bytes_per_broker: ByteReport | None = None
    leader_bytes_in: LeaderLoad | None = None  # with leader rates (None without)

    def to_dict(self) -> dict[str, Any]:
        per_broker = {} if self.bytes_per_broker is None else {
            "bytes_per_broker": self.bytes_per_broker.to_dict()}
        if self.leader_bytes_in is not None:
            per_broker["leader_bytes_in"] = self.leader_bytes_in.to_dict()
        racks = {} if self.rack_replicas_lower_bound is None else {
            "rack_replicas_lower_bound": self.rack_replicas_lower_bound,
            "unspread_before": self.unspread_before,
            "unspread_after": self.unspread_after,
        }
        return {
            "replicas_moved": self.replicas_moved,
            "replicas_lower_bound": self.replicas_lower_bound,
            "bytes_moved": self.bytes_moved,
            "bytes_lower_bound": self.bytes_lower_bound,
            "leaders_changed": self.leaders_changed,
            "broker_bytes_in": {str(k): v for k, v in sorted(self.broker_bytes_in.items())},
            "broker_bytes_out": {str(k): v for k, v in sorted(self.broker_bytes_out.items())},
            "throttle_bytes_per_s": self.throttle_bytes_per_s,
            "duration_s": self.duration_s,
            **racks,
            **per_broker,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "opskit.estimates") -> Estimates:
        d = _obj(data, where)
        throttle = d.get("throttle_bytes_per_s")
        if throttle is not None:
            throttle = _int(d, "throttle_bytes_per_s", where, lo=1)
        duration = d.get("duration_s")
        if duration is not None:
            if isinstance(duration, bool) or not isinstance(duration, int | float) \
                    or not math.isfinite(duration) or duration < 0:
                raise InvalidInputError(f"{where}.duration_s: expected a number >= 0 or null")
            duration = float(duration)
        return cls(
            replicas_moved=_int(d, "replicas_moved", where, lo=0),
            replicas_lower_bound=_int(d, "replicas_lower_bound", where, lo=0),
            bytes_moved=_int(d, "bytes_moved", where, lo=0),
            bytes_lower_bound=_int(d, "bytes_lower_bound", where, lo=0),
            leaders_changed=_int(d, "leaders_changed", where, lo=0) if "leaders_changed" in d else 0,
            broker_bytes_in=_broker_bytes(d.get("broker_bytes_in", {}), f"{where}.broker_bytes_in"),
            broker_bytes_out=_broker_bytes(d.get("broker_bytes_out", {}), f"{where}.broker_bytes_out"),
            throttle_bytes_per_s=throttle,
            duration_s=duration,
            rack_replicas_lower_bound=_optional_count(d, "rack_replicas_lower_bound", where),
            unspread_before=_optional_count(d, "unspread_before", where),
            unspread_after=_optional_count(d, "unspread_after", where),
            bytes_per_broker=None if d.get("bytes_per_broker") is None
            else ByteReport.from_dict(d["bytes_per_broker"], f"{where}.bytes_per_broker"),
            leader_bytes_in=None if d.get("leader_bytes_in") is None
            else LeaderLoad.from_dict(d["leader_bytes_in"], f"{where}.leader_bytes_in"),
        )


@dataclass(frozen=True)
class Plan:
    """A reassignment: the target of every partition that changes (``partitions``), and
    what each of them was (``base``, same order)."""

    partitions: tuple[Assignment, ...]
    base: tuple[PartitionBase, ...]
    goal: Goal
    created: str
    estimates: Estimates
    brokers: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if [a.tp for a in self.partitions] != [b.tp for b in self.base]:
            raise InvalidInputError("opskit.base: must list the plan's partitions in the same order")

    @property
    def is_empty(self) -> bool:
        return not self.partitions

    def moves(self) -> Iterable[tuple[PartitionBase, Assignment]]:
        """(before, after) per partition."""
        return zip(self.base, self.partitions, strict=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": KAFKA_JSON_VERSION,
            "partitions": [a.to_dict() for a in self.partitions],
            "opskit": {
                "format": PLAN_FORMAT,
                "format_version": FORMAT_VERSION,
                "created": self.created,
                "goal": self.goal.to_dict(),
                "brokers": list(self.brokers),
                "base": [b.to_dict() for b in self.base],
                "estimates": self.estimates.to_dict(),
            },
        }

    def to_json(self) -> str:
        text: str = json.dumps(self.to_dict(), indent=2)
        return text + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        d = _obj(data, "plan")
        partitions = parse_assignments(d)
        if "opskit" not in d:
            raise InvalidInputError("plan: no 'opskit' section (a plain kafka-reassign-partitions "
                                    "file has no base to compare against)")
        o = _obj(d["opskit"], "opskit")
        fmt = o.get("format")
        if fmt != PLAN_FORMAT:
            raise InvalidInputError(f"opskit.format: expected {PLAN_FORMAT!r}, got {fmt!r}")
        ver = _int(o, "format_version", "opskit", lo=1)
        if ver > FORMAT_VERSION:
            raise InvalidInputError(f"opskit.format_version: {ver} is newer than this opskit "
                                    f"reads ({FORMAT_VERSION})")
        base = tuple(_base(item, f"opskit.base[{i}]")
                     for i, item in enumerate(_list(_field(o, "base", "opskit"), "opskit.base")))
        if [b.tp for b in base] != [a.tp for a in partitions]:
            raise InvalidInputError("opskit.base: must list the same partitions as 'partitions', "
                                    "in the same order")
        return cls(
            partitions=partitions,
            base=base,
            goal=Goal.from_dict(_field(o, "goal", "opskit")),
            created=PLAN_FILE.str_field(o, "created", "opskit"),
            estimates=Estimates.from_dict(_field(o, "estimates", "opskit")),
            brokers=_id_list(o.get("brokers", []), "opskit.brokers", allow_empty=True),
        )


def plan_from_json(text: str) -> Plan:
    """Read a plan file's text (strict: duplicate keys, wrong types, bad ids are errors)."""
    return Plan.from_dict(load_json(text))


def load_json(text: str) -> Any:
    """``json.loads`` that rejects duplicate keys and NaN/Infinity, with a one-line error."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise InvalidInputError("not valid JSON: nested too deeply") from None
    except ValueError:  # Python's limit on integer digits (JSONDecodeError is caught above)
        raise InvalidInputError("not valid JSON: a number has too many digits to read") from None


def parse_assignments(data: Any) -> tuple[Assignment, ...]:
    """The ``version`` / ``partitions`` of kafka-reassign-partitions' JSON (other top-level
    keys are ignored, as Kafka's tool does). Rules as Kafka's tool applies them, and
    stricter: version 1; each entry has a topic (non-empty string), a partition (int32 >= 0)
    and replicas (non-empty list of distinct int32 >= 0); log_dirs, when present, as many
    strings as replicas; no partition listed twice."""
    d = _obj(data, "plan")
    if "version" not in d:
        raise InvalidInputError("plan: missing field 'version'")
    version = d["version"]
    if isinstance(version, bool) or version != KAFKA_JSON_VERSION:
        raise InvalidInputError(f"plan.version: expected {KAFKA_JSON_VERSION}, got {version!r}")
    items = _list(_field(d, "partitions", "plan"), "partitions")
    out: list[Assignment] = []
    seen: set[TopicPartition] = set()
    for i, item in enumerate(items):
        a = _assignment(item, f"partitions[{i}]")
        if a.tp in seen:
            raise InvalidInputError(f"partitions[{i}]: {a.topic}:{a.partition} is listed twice")
        seen.add(a.tp)
        out.append(a)
    return tuple(out)


def assignments_from_json(text: str) -> tuple[Assignment, ...]:
    return parse_assignments(load_json(text))


def refuse_log_dirs(assignments: Sequence[Assignment], source: str) -> None:
    """Moves to named log directories are not supported (plan and execute alike)."""
    for a in assignments:
        if any(d != ANY_LOG_DIR for d in (a.log_dirs or ())):
            raise UsageError(f"{source}: {a.topic}:{a.partition}: log directories other than "
                             "\"any\" are not supported by opskit reassign")


# --------------------------------------------------------------------------- validation


def _replicas(d: Mapping[str, Any], where: str) -> tuple[int, ...]:
    return _id_list(_field(d, "replicas", where), f"{where}.replicas", allow_empty=False)


def _assignment(item: Any, where: str) -> Assignment:
    d = _obj(item, where)
    topic = PLAN_FILE.str_field(d, "topic", where)
    partition = _int(d, "partition", where, 0, _INT32_MAX)
    replicas = _replicas(d, where)
    log_dirs: tuple[str, ...] | None = None
    if "log_dirs" in d:
        raw = _list(d["log_dirs"], f"{where}.log_dirs")
        log_dirs = tuple(_str_item(x, f"{where}.log_dirs[{j}]") for j, x in enumerate(raw))
        if len(log_dirs) != len(replicas):
            raise InvalidInputError(f"{where}.log_dirs: {len(log_dirs)} entries for "
                                    f"{len(replicas)} replicas")
    return Assignment(topic, partition, replicas, log_dirs)


def _base(item: Any, where: str) -> PartitionBase:
    d = _obj(item, where)
    size = _int(d, "size_bytes", where, lo=0) if "size_bytes" in d else 0
    return PartitionBase(PLAN_FILE.str_field(d, "topic", where), _int(d, "partition", where, 0, _INT32_MAX),
                         _replicas(d, where), size)
