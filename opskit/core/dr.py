"""Disaster-recovery snapshots: what a cluster's topics and groups look like, and
the plan to recreate them on another cluster. Pure: no client, no clock.

A snapshot records, per group partition, the committed offset **and the
timestamp of the record at that offset** (the next record the group would read).
Offsets differ between clusters (mirroring, retention); timestamps do not. On
the target, the group resumes at the first record whose timestamp is >= that
timestamp (ListOffsets by time); with no such record, or when the group was at
the log end, at the target's log end. Records sharing the timestamp may be
read again: at-least-once, never skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opskit.core.acls import AclEntry
from opskit.core.models import GroupState, TopicPartition
from opskit.errors import InvalidInputError

SNAPSHOT_FORMAT = "opskit/dr-snapshot"
SNAPSHOT_VERSION = 1


def is_internal_topic(name: str) -> bool:
    return name.startswith(("__", "_confluent"))


@dataclass(frozen=True)
class TopicSnapshot:
    name: str
    partitions: int
    replication_factor: int
    #: topic-level overrides only (not broker or built-in defaults)
    configs: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "partitions": self.partitions,
                "replication_factor": self.replication_factor, "configs": dict(self.configs)}


@dataclass(frozen=True)
class GroupPosition:
    tp: TopicPartition
    offset: int
    #: timestamp of the record at ``offset``; None when the group was at the log end
    record_timestamp_ms: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "offset": self.offset,
                "record_timestamp_ms": self.record_timestamp_ms}


@dataclass(frozen=True)
class Snapshot:
    taken_at_ms: int
    cluster_id: str | None
    topics: tuple[TopicSnapshot, ...]
    groups: Mapping[str, tuple[GroupPosition, ...]]
    #: ACL bindings as dicts; None when they could not be read (see ``acls_note``)
    acls: tuple[Mapping[str, Any], ...] | None = None
    acls_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SNAPSHOT_FORMAT,
            "version": SNAPSHOT_VERSION,
            "taken_at_ms": self.taken_at_ms,
            "cluster_id": self.cluster_id,
            "topics": [t.to_dict() for t in self.topics],
            "acls": None if self.acls is None else [dict(a) for a in self.acls],
            "acls_note": self.acls_note,
            "groups": {g: [p.to_dict() for p in ps] for g, ps in sorted(self.groups.items())},
        }

    @classmethod
    def from_dict(cls, data: Any) -> Snapshot:
        """Strict: raises ``InvalidInputError`` naming what is wrong."""
        try:
            if not isinstance(data, dict) or data.get("format") != SNAPSHOT_FORMAT:
                raise InvalidInputError("not an opskit DR snapshot (format field)")
            if data.get("version") != SNAPSHOT_VERSION:
                raise InvalidInputError(f"unsupported snapshot version {data.get('version')!r}")
            topics = tuple(
                TopicSnapshot(_text(t["name"], "topic name"),
                              _count(t["partitions"], f"topic {t['name']!r}: partitions", 1),
                              _count(t["replication_factor"],
                                     f"topic {t['name']!r}: replication_factor", 1, 32767),
                              {str(k): str(v) for k, v in dict(t["configs"]).items()})
                for t in data["topics"]
            )
            groups = {
                _text(g, "group id"): tuple(
                    GroupPosition(TopicPartition(_text(p["topic"], "topic name"),
                                                 _count(p["partition"], "partition", 0)),
                                  _count(p["offset"], f"group {g!r}: offset", 0, _MAX_I64),
                                  None if p["record_timestamp_ms"] is None
                                  else _count(p["record_timestamp_ms"], "record_timestamp_ms",
                                              -1, _MAX_I64))
                    for p in ps
                )
                for g, ps in dict(data["groups"]).items()
            }
            acls = data.get("acls")
            return cls(_count(data["taken_at_ms"], "taken_at_ms", 0, _MAX_I64),
                       data.get("cluster_id"), topics, groups,
                       None if acls is None else tuple(dict(a) for a in acls),
                       data.get("acls_note"))
        except InvalidInputError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"malformed DR snapshot ({e!r})") from None


_MAX_I64 = 2**63 - 1


def _count(value: Any, what: str, minimum: int, maximum: int = 2**31 - 1) -> int:
    """An integer of the snapshot within Kafka's range (a negative partition count, a
    fraction or text is a broken file, not something to act on)."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise InvalidInputError(f"{what} must be an integer from {minimum} to {maximum}, "
                                f"not {value!r}")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInputError(f"{what} {value!r} is not a name")
    return value


@dataclass(frozen=True)
class TargetTopic:
    partitions: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class GroupChange:
    group: str
    #: new offsets; None for partitions whose topic does not exist yet on the target
    offsets: Mapping[TopicPartition, int | None]
    refusal: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "refusal": self.refusal,
                "offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": off}
                            for tp, off in sorted(self.offsets.items())]}


@dataclass(frozen=True)
class DrPlan:
    create: tuple[TopicSnapshot, ...]
    add_partitions: Mapping[str, int]
    set_configs: Mapping[str, Mapping[str, str]]
    groups: tuple[GroupChange, ...]
    warnings: tuple[str, ...] = ()
    #: the snapshot's ACL bindings the target lacks (created by --execute)
    create_acls: tuple[AclEntry, ...] = ()

    @property
    def refused(self) -> tuple[GroupChange, ...]:
        return tuple(g for g in self.groups if g.refusal)

    def to_dict(self) -> dict[str, Any]:
        return {
            "create_topics": [t.to_dict() for t in self.create],
            "add_partitions": dict(self.add_partitions),
            "set_configs": {t: dict(c) for t, c in self.set_configs.items()},
            "create_acls": [a.to_dict() for a in self.create_acls],
            "groups": [g.to_dict() for g in self.groups],
            "warnings": list(self.warnings),
        }


def snapshot_acls(snapshot: Snapshot) -> tuple[AclEntry, ...]:
    """The snapshot's ACL bindings (either snapshot spelling); InvalidInputError if malformed."""
    out = []
    for a in snapshot.acls or ():
        e = AclEntry.from_dict(a)
        problems = e.problems()
        if problems:
            raise InvalidInputError(f"snapshot ACL {dict(a)!r}: {problems[0]}")
        out.append(e)
    return tuple(sorted(set(out)))


def plan_acl_restore(snapshot: Snapshot, target_acls: Iterable[AclEntry] | None
                     ) -> tuple[tuple[AclEntry, ...], tuple[str, ...]]:
    """The snapshot's ACLs the target lacks, and warnings. ``target_acls`` None: the target
    has no authorizer (it can hold no ACL, and enforces none)."""
    wanted = snapshot_acls(snapshot)
    if not wanted:
        return (), ()
    if target_acls is None:
        why = (f"the target has no authorizer: the snapshot's {len(wanted)} ACL bindings "
               "cannot be created there (and nothing is enforced)")
        return (), (why,)
    have = set(target_acls)
    return tuple(e for e in wanted if e not in have), ()


def timestamp_lookups(snapshot: Snapshot) -> dict[int, tuple[TopicPartition, ...]]:
    """The ListOffsets-by-time lookups the target needs: timestamp -> partitions."""
    out: dict[int, set[TopicPartition]] = {}
    for positions in snapshot.groups.values():
        for p in positions:
            if p.record_timestamp_ms is not None:
                out.setdefault(p.record_timestamp_ms, set()).add(p.tp)
    return {ts: tuple(sorted(tps)) for ts, tps in sorted(out.items())}


def group_partitions(snapshot: Snapshot) -> tuple[TopicPartition, ...]:
    return tuple(sorted({p.tp for ps in snapshot.groups.values() for p in ps}))


def plan_dr_restore(
    snapshot: Snapshot,
    target_topics: Mapping[str, TargetTopic],
    target_brokers: int,
    target_groups: Mapping[str, GroupState],
    offsets_by_time: Mapping[tuple[TopicPartition, int], int | None],
    log_ends: Mapping[TopicPartition, int],
    target_acls: Iterable[AclEntry] | None = (),
) -> DrPlan:
    """Decide what to create on the target and where each group resumes.

    ``offsets_by_time[(tp, ts)]`` is the target's first offset with timestamp >=
    ts (None: no such record); ``log_ends`` the target's log end offsets. Both
    only for topics that already exist on the target. ``target_acls``: the
    target's ACL bindings (None: it has no authorizer).
    """
    create_acls, acl_warnings = plan_acl_restore(snapshot, target_acls)
    warnings: list[str] = list(acl_warnings)
    create: list[TopicSnapshot] = []
    add: dict[str, int] = {}
    configs: dict[str, dict[str, str]] = {}
    for t in snapshot.topics:
        have = target_topics.get(t.name)
        if have is None:
            rf = min(t.replication_factor, max(target_brokers, 1))
            if rf < t.replication_factor:
                warnings.append(f"{t.name}: replication factor {t.replication_factor} lowered "
                                f"to {rf} (the target has {target_brokers} brokers)")
            create.append(TopicSnapshot(t.name, t.partitions, rf, t.configs))
            continue
        if have.partitions < t.partitions:
            add[t.name] = t.partitions
        elif have.partitions > t.partitions:
            warnings.append(f"{t.name}: the target has more partitions ({have.partitions}) than "
                            f"the snapshot ({t.partitions}); left as is")
        diff = {k: v for k, v in t.configs.items() if have.configs.get(k) != v}
        if diff:
            configs[t.name] = diff
    groups: list[GroupChange] = []
    for gid, positions in sorted(snapshot.groups.items()):
        state = target_groups.get(gid, GroupState.DEAD)
        refusal = None
        if not state.is_inactive:
            refusal = (f"group {gid!r} is {state.value} on the target; its offsets can only be "
                       "set while it is Empty or Dead")
        offsets: dict[TopicPartition, int | None] = {}
        for p in positions:
            if p.tp not in log_ends:
                offsets[p.tp] = None
                continue
            found = None
            if p.record_timestamp_ms is not None:
                found = offsets_by_time.get((p.tp, p.record_timestamp_ms))
            offsets[p.tp] = log_ends[p.tp] if found is None else found
        groups.append(GroupChange(gid, offsets, refusal))
    return DrPlan(tuple(create), add, configs, tuple(groups), tuple(warnings), create_acls)
