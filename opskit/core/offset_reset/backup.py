"""Offsets saved before a reset, and the plan that puts them back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opskit.core.models import GroupDescription, PartitionOffsets, TopicPartition
from opskit.core.offset_reset.document import (
    FORMAT_VERSION,
    as_dict,
    as_list,
    int_field,
    need,
    offsets_from_list,
    offsets_to_list,
    only_keys,
    optional_str_field,
    read_document,
    str_field,
    topic_partition,
)
from opskit.core.offset_reset.plan import ResetPlan
from opskit.core.offset_reset.planner import offset_text, plan_offset_reset
from opskit.core.offset_reset.request import FrozenOffsets, ResetRequest, ResetStrategy
from opskit.errors import InvalidInputError, NotFoundError

BACKUP_FORMAT = "opskit/offsets-backup"


@dataclass(frozen=True)
class OffsetsBackup:
    """Committed offsets saved before a reset, so it can be undone (``plan_restore``)."""

    group_id: str
    taken_at_ms: int
    offsets: Mapping[TopicPartition, int]
    reason: str
    cluster_id: str | None = None
    bootstrap: str | None = None
    #: partitions in the reset's scope that had no committed offset before it
    uncommitted: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        if any(off < 0 for off in self.offsets.values()):
            raise InvalidInputError("backup offsets must not be negative")
        object.__setattr__(self, "offsets", FrozenOffsets(self.offsets))
        object.__setattr__(self, "uncommitted", tuple(sorted(set(self.uncommitted))))

    @classmethod
    def of_plan(
        cls,
        plan: ResetPlan,
        *,
        taken_at_ms: int,
        reason: str,
        cluster_id: str | None = None,
        bootstrap: str | None = None,
    ) -> OffsetsBackup:
        """The offsets the plan will overwrite (valid once ``check_unchanged`` passed)."""
        return cls(
            group_id=plan.group_id,
            taken_at_ms=taken_at_ms,
            offsets={row.tp: row.current for row in plan.rows if row.current is not None},
            reason=reason,
            cluster_id=cluster_id,
            bootstrap=bootstrap,
            uncommitted=tuple(row.tp for row in plan.rows if row.current is None),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": BACKUP_FORMAT,
            "version": FORMAT_VERSION,
            "group": self.group_id,
            "taken_at_ms": self.taken_at_ms,
            "cluster_id": self.cluster_id,
            "bootstrap": self.bootstrap,
            "reason": self.reason,
            "offsets": offsets_to_list(self.offsets),
            "uncommitted": [
                {"topic": tp.topic, "partition": tp.partition} for tp in self.uncommitted
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> OffsetsBackup:
        """Strict: raises ``InvalidInputError`` naming the first bad field."""
        where = "backup"
        d = read_document(
            data,
            BACKUP_FORMAT,
            where,
            {
                "format",
                "version",
                "group",
                "taken_at_ms",
                "cluster_id",
                "bootstrap",
                "reason",
                "offsets",
                "uncommitted",
            },
        )
        cluster_id = optional_str_field(d, "cluster_id", where)
        bootstrap = optional_str_field(d, "bootstrap", where)
        offsets = offsets_from_list(need(d, "offsets", where), f"{where}.offsets")
        uncommitted: list[TopicPartition] = []
        for i, item in enumerate(as_list(need(d, "uncommitted", where), f"{where}.uncommitted")):
            at = f"{where}.uncommitted[{i}]"
            u = as_dict(item, at)
            only_keys(u, {"topic", "partition"}, at)
            tp = topic_partition(u, at)
            if tp in offsets or tp in uncommitted:
                raise InvalidInputError(f"{at}: {tp} is listed twice")
            uncommitted.append(tp)
        return cls(
            group_id=str_field(d, "group", where),
            taken_at_ms=int_field(d, "taken_at_ms", where),
            offsets=offsets,
            reason=str_field(d, "reason", where, allow_empty=True),
            cluster_id=cluster_id,
            bootstrap=bootstrap,
            uncommitted=tuple(uncommitted),
        )


def plan_restore(
    backup: OffsetsBackup,
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
    now_ms: int | None = None,
    skip_missing: bool = False,
) -> ResetPlan:
    """Plan putting back the offsets of ``backup``: clamped to the log like
    ``--from-file`` (retention may have deleted them since). Partitions that no longer
    exist refuse the restore (NotFoundError) unless ``skip_missing``: then they are
    skipped with a warning. Offsets cannot be un-committed: a
    partition that had none before the reset gets a warning (delete its offset
    with DeleteConsumerGroupOffsets if that matters)."""
    if backup.group_id != group.group_id:
        raise InvalidInputError(
            f"the backup is for group {backup.group_id!r}, not {group.group_id!r}"
        )
    if not backup.offsets and not backup.uncommitted:
        raise InvalidInputError("the backup holds no offsets")
    missing = sorted(tp for tp in backup.offsets if tp not in log_offsets)
    if missing and not skip_missing:
        raise NotFoundError(
            f"{len(missing)} partition(s) of the backup no longer exist (first: {missing[0]}); "
            "nothing restored: pass --skip-missing to restore the others")
    request = ResetRequest(group.group_id, ResetStrategy.restore(backup.offsets))
    plan = plan_offset_reset(request, group, committed, log_offsets, {}, now_ms or 0)
    extra = tuple(
        f"{tp}: had no committed offset before the reset; restore leaves it at "
        f"{offset_text(committed.get(tp))}"
        for tp in backup.uncommitted
    )
    return ResetPlan(
        group_id=plan.group_id,
        group_state=plan.group_state,
        strategy=plan.strategy,
        scope=None,
        rows=plan.rows,
        warnings=plan.warnings + extra,
        refusal=plan.refusal,
        planned_at_ms=now_ms,
        target_timestamp_ms=None,
    )


# --------------------------------------------------------------------------- helpers
