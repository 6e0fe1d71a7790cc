"""A reset plan: one row per partition, saved as JSON and exported as CSV."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opskit.core.models import GroupState, TopicPartition
from opskit.core.offset_reset.document import (
    FORMAT_VERSION,
    as_dict,
    as_enum,
    as_list,
    as_str,
    int_field,
    need,
    only_keys,
    optional_int_field,
    optional_str_field,
    read_document,
    str_field,
    topic_partition,
)
from opskit.core.offset_reset.offsets_csv import export_csv
from opskit.core.offset_reset.request import ResetKind, ResetScope, ResetStrategy
from opskit.errors import InvalidInputError, RefusedError

PLAN_FORMAT = "opskit/offset-reset-plan"


@dataclass(frozen=True)
class ResetRow:
    """One partition of a plan. Counts are offset distances: an upper bound on
    records, since compaction and transaction markers leave gaps in offsets."""

    tp: TopicPartition
    #: committed offset when planned; None when the group had none
    current: int | None
    target: int
    log_start: int
    log_end: int
    #: the requested offset was outside [log_start, log_end] and was moved to the nearest end
    clamped: bool = False
    warning: str | None = None

    @property
    def changed(self) -> bool:
        return self.current != self.target

    @property
    def delta(self) -> int | None:
        return None if self.current is None else self.target - self.current

    @property
    def records_skipped(self) -> int | None:
        """Existing offsets between the current and a later target: never consumed."""
        if self.current is None:
            return None
        return max(0, self.target - max(self.current, self.log_start))

    @property
    def records_replayed(self) -> int | None:
        """Existing offsets between an earlier target and the current: consumed again."""
        if self.current is None:
            return None
        return max(0, min(self.current, self.log_end) - max(self.target, self.log_start))

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "current_offset": self.current,
            "target_offset": self.target,
            "log_start_offset": self.log_start,
            "log_end_offset": self.log_end,
            "clamped": self.clamped,
            "warning": self.warning,
            # derived, for readers of the JSON; ignored by from_dict
            "delta": self.delta,
            "records_skipped": self.records_skipped,
            "records_replayed": self.records_replayed,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "row") -> ResetRow:
        d = as_dict(data, where)
        derived = {"delta", "records_skipped", "records_replayed"}
        only_keys(
            d,
            {
                "topic",
                "partition",
                "current_offset",
                "target_offset",
                "log_start_offset",
                "log_end_offset",
                "clamped",
                "warning",
            }
            | derived,
            where,
        )
        need(d, "current_offset", where)
        clamped = need(d, "clamped", where)
        need(d, "warning", where)
        if not isinstance(clamped, bool):
            raise InvalidInputError(f"{where}.clamped must be true or false")
        row = cls(
            topic_partition(d, where),
            optional_int_field(d, "current_offset", where),
            int_field(d, "target_offset", where),
            int_field(d, "log_start_offset", where),
            int_field(d, "log_end_offset", where),
            clamped,
            optional_str_field(d, "warning", where, allow_empty=True),
        )
        if row.log_start > row.log_end:
            raise InvalidInputError(
                f"{where}: log start {row.log_start} is past log end {row.log_end}"
            )
        return row


@dataclass(frozen=True)
class ResetPlan:
    group_id: str
    group_state: GroupState
    strategy: ResetStrategy
    scope: ResetScope | None
    rows: tuple[ResetRow, ...]
    #: every warning of the plan, row warnings included, prefixed by partition
    warnings: tuple[str, ...] = ()
    #: why the plan must not be applied (active group); None when it may be
    refusal: str | None = None
    planned_at_ms: int | None = None
    #: the timestamp looked up for --to-datetime / --by-duration
    target_timestamp_ms: int | None = None

    @property
    def is_refused(self) -> bool:
        return self.refusal is not None

    @property
    def is_noop(self) -> bool:
        """True when applying would change no committed offset (nor create one)."""
        return not any(row.changed for row in self.rows)

    @property
    def changed_rows(self) -> tuple[ResetRow, ...]:
        return tuple(row for row in self.rows if row.changed)

    @property
    def records_skipped(self) -> int:
        return sum(row.records_skipped or 0 for row in self.rows)

    @property
    def records_replayed(self) -> int:
        return sum(row.records_replayed or 0 for row in self.rows)

    def raise_if_refused(self) -> None:
        if self.refusal is not None:
            raise RefusedError(self.refusal)

    def offsets_to_commit(self) -> dict[TopicPartition, int]:
        """Every row's target, unchanged ones included, as the tool commits them
        (3.7 ``resetOffsets`` passes all prepared offsets to AlterConsumerGroupOffsets)."""
        return {row.tp: row.target for row in self.rows}

    def to_csv(self, with_group: bool = False) -> str:
        """This plan in the tool's ``--export`` format (see ``export_csv``)."""
        return export_csv([self], with_group=with_group)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": FORMAT_VERSION,
            "group": self.group_id,
            "group_state": self.group_state.value,
            "strategy": self.strategy.to_dict(),
            "scope": None if self.scope is None else self.scope.to_dict(),
            "planned_at_ms": self.planned_at_ms,
            "target_timestamp_ms": self.target_timestamp_ms,
            "refusal": self.refusal,
            "warnings": list(self.warnings),
            "rows": [row.to_dict() for row in self.rows],
            # derived, for readers of the JSON; ignored by from_dict
            "is_noop": self.is_noop,
            "records_skipped": self.records_skipped,
            "records_replayed": self.records_replayed,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ResetPlan:
        """Strict: raises ``InvalidInputError`` naming the first bad field."""
        where = "plan"
        d = read_document(
            data,
            PLAN_FORMAT,
            where,
            {
                "format",
                "version",
                "group",
                "group_state",
                "strategy",
                "scope",
                "planned_at_ms",
                "target_timestamp_ms",
                "refusal",
                "warnings",
                "rows",
                "is_noop",
                "records_skipped",
                "records_replayed",
            },
        )
        scope_raw = need(d, "scope", where)
        for key in ("refusal", "planned_at_ms", "target_timestamp_ms"):
            need(d, key, where)  # present before anything is read; typed below
        rows = tuple(
            ResetRow.from_dict(r, f"{where}.rows[{i}]")
            for i, r in enumerate(as_list(need(d, "rows", where), f"{where}.rows"))
        )
        if len({r.tp for r in rows}) != len(rows):
            raise InvalidInputError(f"{where}.rows lists a partition twice")
        strategy = ResetStrategy.from_dict(need(d, "strategy", where), f"{where}.strategy")
        if scope_raw is None and strategy.kind not in (ResetKind.FROM_FILE, ResetKind.RESTORE):
            raise InvalidInputError(f"{where}.scope is required for {strategy.kind.value}")
        return cls(
            str_field(d, "group", where),
            as_enum(GroupState, need(d, "group_state", where), f"{where}.group_state"),
            strategy,
            None if scope_raw is None else ResetScope.from_dict(scope_raw, f"{where}.scope"),
            rows,
            tuple(
                as_str(w, f"{where}.warnings[{i}]", allow_empty=True)
                for i, w in enumerate(as_list(need(d, "warnings", where), f"{where}.warnings"))
            ),
            optional_str_field(d, "refusal", where),
            optional_int_field(d, "planned_at_ms", where),
            optional_int_field(d, "target_timestamp_ms", where),
        )
