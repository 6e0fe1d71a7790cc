"""The topic registry (HIP-30) as data, its naming rules, and drift planning (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from opskit.core.acls import SecuritySpec, parse_security
from opskit.errors import InvalidInputError

TOPIC_RE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
GROUP_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
ENV_PREFIX_RE = re.compile(r"^(prod|production|prd|stg|stage|staging|dev|develop|test|qa|uat|sandbox)_")
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_retention(value: Any, where: str) -> int:
    """``7d``, ``36h``, ``604800000`` (ms), or ``-1`` / ``forever`` (no time limit)."""
    if isinstance(value, bool):
        raise InvalidInputError(f"{where}: retention must be a duration like 7d, not {value!r}")
    if isinstance(value, int):
        if value < -1:
            raise InvalidInputError(f"{where}: retention {value} is negative")
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("-1", "forever", "infinite"):
            return -1
        m = re.fullmatch(r"(\d+)\s*(ms|s|m|h|d|w)?", v)
        if m:
            return int(m.group(1)) * _UNITS_MS[m.group(2) or "ms"]
    raise InvalidInputError(f"{where}: retention {value!r} is not a duration like 7d, 12h or 604800000")


def topic_name_problems(name: str) -> list[str]:
    problems = []
    if not TOPIC_RE.match(name):
        problems.append(f"topic {name!r} is not snake_case (HIP-30)")
    if ENV_PREFIX_RE.match(name):
        problems.append(f"topic {name!r} has an environment prefix; HIP-30 isolates environments by cluster")
    return problems


def group_name_problems(name: str) -> list[str]:
    if not GROUP_RE.match(name):
        return [f"group {name!r} is not kebab-case (HIP-30)"]
    return []


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    retention_ms: int
    replication_factor: int = 1
    key: str | None = None
    producers: tuple[str, ...] = ()
    consumers: tuple[str, ...] = ()
    configs: Mapping[str, str] = field(default_factory=dict)

    def desired_configs(self) -> dict[str, str]:
        out = {"retention.ms": str(self.retention_ms)}
        out.update({k: str(v) for k, v in self.configs.items()})
        return out


@dataclass(frozen=True)
class GroupSpec:
    name: str
    topics: tuple[str, ...]
    consumers: int = 1
    processing: str = ""


@dataclass(frozen=True)
class Registry:
    topics: tuple[TopicSpec, ...]
    groups: tuple[GroupSpec, ...] = ()
    #: HIP-30's security section (principals and their ACLs); None when the file has none
    security: SecuritySpec | None = None

    def topic(self, name: str) -> TopicSpec | None:
        return next((t for t in self.topics if t.name == name), None)

    def group(self, name: str) -> GroupSpec | None:
        return next((g for g in self.groups if g.name == name), None)


def _str_list(v: Any, where: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise InvalidInputError(f"{where} must be a list of strings")
    return tuple(v)


def parse_registry(data: Any, source: str = "registry") -> Registry:
    """Validate and build a registry from parsed YAML. One-line errors name the place."""
    if not isinstance(data, dict):
        raise InvalidInputError(f"{source}: top level must be a mapping with a 'topics' list")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InvalidInputError(f"{source}: 'defaults' must be a mapping")
    default_rf = defaults.get("replication_factor", 1)
    raw_topics = data.get("topics")
    if not isinstance(raw_topics, list) or not raw_topics:
        raise InvalidInputError(f"{source}: 'topics' must be a non-empty list")
    topics: list[TopicSpec] = []
    seen: set[str] = set()
    for i, t in enumerate(raw_topics):
        where = f"{source}: topics[{i}]"
        if not isinstance(t, dict):
            raise InvalidInputError(f"{where} must be a mapping")
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"{where} has no 'name'")
        where = f"{source}: topic {name!r}"
        problems = topic_name_problems(name)
        if problems:
            raise InvalidInputError(f"{source}: {problems[0]}")
        if name in seen:
            raise InvalidInputError(f"{where} is listed twice")
        seen.add(name)
        parts = t.get("partitions")
        if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
            raise InvalidInputError(f"{where}: partitions must be a positive integer")
        rf = t.get("replication_factor", default_rf)
        if not isinstance(rf, int) or isinstance(rf, bool) or rf < 1:
            raise InvalidInputError(f"{where}: replication_factor must be a positive integer")
        if "retention" in t and "retention_ms" in t:
            raise InvalidInputError(f"{where}: give retention or retention_ms, not both")
        retention = parse_retention(t.get("retention", t.get("retention_ms", "7d")), where)
        configs = t.get("configs") or {}
        if not isinstance(configs, dict):
            raise InvalidInputError(f"{where}: configs must be a mapping")
        if "retention.ms" in configs:
            raise InvalidInputError(f"{where}: set retention with 'retention', not configs")
        key = t.get("key")
        if key is not None and not isinstance(key, str):
            raise InvalidInputError(f"{where}: key must be a string")
        unknown = set(t) - {"name", "partitions", "replication_factor", "retention", "retention_ms",
                            "configs", "key", "producers", "consumers"}
        if unknown:
            raise InvalidInputError(f"{where}: unknown field {min(unknown)!r}")
        topics.append(TopicSpec(
            name=name, partitions=parts, retention_ms=retention, replication_factor=rf, key=key,
            producers=_str_list(t.get("producers"), f"{where}: producers"),
            consumers=_str_list(t.get("consumers"), f"{where}: consumers"),
            configs={str(k): str(v) for k, v in configs.items()},
        ))
    groups: list[GroupSpec] = []
    raw_groups = data.get("groups") or []
    if not isinstance(raw_groups, list):
        raise InvalidInputError(f"{source}: 'groups' must be a list")
    for i, g in enumerate(raw_groups):
        if not isinstance(g, dict) or not isinstance(g.get("name"), str):
            raise InvalidInputError(f"{source}: groups[{i}] must be a mapping with a 'name'")
        problems = group_name_problems(g["name"])
        if problems:
            raise InvalidInputError(f"{source}: {problems[0]}")
        gt = _str_list(g.get("topics"), f"{source}: group {g['name']!r} topics")
        for t_name in gt:
            if t_name not in seen:
                raise InvalidInputError(f"{source}: group {g['name']!r} reads unregistered topic {t_name!r}")
        consumers = g.get("consumers", 1)
        if not isinstance(consumers, int) or isinstance(consumers, bool) or consumers < 0:
            raise InvalidInputError(f"{source}: group {g['name']!r}: consumers must be an integer")
        groups.append(GroupSpec(g["name"], gt, consumers, str(g.get("processing", ""))))
    security = parse_security(data.get("security"), [t.name for t in topics],
                              [g.name for g in groups], source)
    return Registry(tuple(topics), tuple(groups), security)


@dataclass(frozen=True)
class ActualTopic:
    name: str
    partitions: int
    replication_factor: int
    #: config name -> (value, is_default)
    configs: Mapping[str, tuple[str | None, bool]] = field(default_factory=dict)
    #: False when the configs could not be read (no DescribeConfigs ACL): not compared
    configs_known: bool = True


class ChangeKind(str, Enum):
    CREATE = "create"
    ADD_PARTITIONS = "add_partitions"
    SET_CONFIG = "set_config"
    REFUSED_REDUCE_PARTITIONS = "refused_reduce_partitions"
    REPLICATION_FACTOR = "replication_factor"
    UNREGISTERED = "unregistered"
    NAMING = "naming"

    @property
    def applicable(self) -> bool:
        return self in (ChangeKind.CREATE, ChangeKind.ADD_PARTITIONS, ChangeKind.SET_CONFIG)


@dataclass(frozen=True)
class TopicChange:
    kind: ChangeKind
    topic: str
    detail: str
    current: str | None = None
    desired: str | None = None
    config: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "topic": self.topic, "config": self.config,
                "current": self.current, "desired": self.desired, "detail": self.detail,
                "applied_by_apply": self.kind.applicable}


@dataclass(frozen=True)
class TopicPlan:
    changes: tuple[TopicChange, ...]

    @property
    def in_sync(self) -> bool:
        return not self.changes

    @property
    def applicable(self) -> tuple[TopicChange, ...]:
        return tuple(c for c in self.changes if c.kind.applicable)

    @property
    def refused(self) -> tuple[TopicChange, ...]:
        return tuple(c for c in self.changes if c.kind is ChangeKind.REFUSED_REDUCE_PARTITIONS)


def plan_topic_changes(registry: Registry, actual: Mapping[str, ActualTopic]) -> TopicPlan:
    """What differs between the registry and the cluster, and what apply would do."""
    changes: list[TopicChange] = []
    for spec in registry.topics:
        have = actual.get(spec.name)
        if have is None:
            changes.append(TopicChange(
                ChangeKind.CREATE, spec.name,
                f"missing: create with {spec.partitions} partitions, RF {spec.replication_factor}",
                None, str(spec.partitions)))
            continue
        if have.partitions < spec.partitions:
            changes.append(TopicChange(
                ChangeKind.ADD_PARTITIONS, spec.name,
                f"{have.partitions} partitions, registry says {spec.partitions}: add "
                f"{spec.partitions - have.partitions} (key->partition mapping changes for new records)",
                str(have.partitions), str(spec.partitions)))
        elif have.partitions > spec.partitions:
            changes.append(TopicChange(
                ChangeKind.REFUSED_REDUCE_PARTITIONS, spec.name,
                f"{have.partitions} partitions, registry says {spec.partitions}: Kafka cannot reduce "
                "partitions; update the registry instead (HIP-30: never reduce partition count)",
                str(have.partitions), str(spec.partitions)))
        if have.replication_factor != spec.replication_factor:
            changes.append(TopicChange(
                ChangeKind.REPLICATION_FACTOR, spec.name,
                f"replication factor {have.replication_factor}, registry says "
                f"{spec.replication_factor}: change it with a partition reassignment, not apply",
                str(have.replication_factor), str(spec.replication_factor)))
        for key, want in sorted(spec.desired_configs().items() if have.configs_known else ()):
            cur = have.configs.get(key)
            cur_value = cur[0] if cur else None
            if cur_value != want:
                changes.append(TopicChange(
                    ChangeKind.SET_CONFIG, spec.name, f"{key}={cur_value} -> {want}",
                    cur_value, want, key))
    for name in sorted(actual):
        if name.startswith(("__", "_confluent")) or registry.topic(name):
            continue
        changes.append(TopicChange(
            ChangeKind.UNREGISTERED, name,
            "on the cluster but not in the registry (HIP-30: ad-hoc topics are prohibited); "
            "apply never deletes topics"))
        for p in topic_name_problems(name):
            changes.append(TopicChange(ChangeKind.NAMING, name, p))
    return TopicPlan(tuple(changes))
