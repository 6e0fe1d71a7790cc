"""Planning a reset: which partitions, which target offsets, whether it may be applied."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from opskit.core.models import GroupDescription, PartitionOffsets, TopicPartition
from opskit.core.offset_reset.plan import ResetPlan, ResetRow
from opskit.core.offset_reset.request import ResetKind, ResetRequest
from opskit.core.offset_reset.time_text import NANOS_PER_MS, format_ms
from opskit.errors import (
    InconsistentStateError,
    InvalidInputError,
    NotFoundError,
    RefusedError,
    UsageError,
)


def timestamp_lookups_needed(request: ResetRequest, now_ms: int) -> int | None:
    """The timestamp the adapter must look up with ListOffsets, or None.

    For it, the adapter asks ``OffsetSpec.forTimestamp(ts)`` for every partition
    of ``partitions_in_scope`` and passes the answers as ``offsets_for_times``
    (None where the broker answers -1: no record with timestamp >= ts).
    ``--by-duration``: ts = now - duration, as 3.7 ``prepareOffsetsToReset`` /
    4.x ``resetByDuration`` compute ``Instant.now().minus(duration).toEpochMilli()``
    (floor to the millisecond). A duration reaching before 1970 gives 0 here:
    the tool would send a negative timestamp, which the broker reads as a
    special value.
    """
    strategy = request.strategy
    if strategy.kind is ResetKind.TO_DATETIME:
        return strategy.timestamp_ms
    if strategy.kind is ResetKind.BY_DURATION:
        duration_ns = strategy.duration_ns or 0
        return max(0, (now_ms * NANOS_PER_MS - duration_ns) // NANOS_PER_MS)
    return None


def topics_to_describe(
    request: ResetRequest, committed: Mapping[TopicPartition, int]
) -> tuple[str, ...]:
    """Topics whose partitions and log offsets the adapter must read for ``request``."""
    strategy, scope = request.strategy, request.scope
    if strategy.offsets is not None:
        topics = {tp.topic for tp in strategy.offsets}
    elif scope is not None and scope.all_topics:
        topics = {tp.topic for tp in committed}
    else:
        topics = {s.topic for s in scope.topics} if scope is not None else set()
    return tuple(sorted(topics))


def partitions_in_scope(
    request: ResetRequest,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
) -> tuple[TopicPartition, ...]:
    """The partitions the plan will have rows for, sorted."""
    return _resolve_partitions(request, committed, log_offsets)[0]


def _resolve_partitions(
    request: ResetRequest,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
) -> tuple[tuple[TopicPartition, ...], list[str]]:
    strategy, scope = request.strategy, request.scope
    warnings: list[str] = []
    if strategy.offsets is not None:
        # Tool fact (prepareOffsetsToReset / resetFromFile): --from-file uses the
        # file's partitions for this group and ignores --topic/--all-topics.
        # opskit applies a given scope as a filter and says what it left out.
        wanted = sorted(strategy.offsets)
        if scope is not None:
            outside = [tp for tp in wanted if not scope.contains(tp, committed)]
            if outside:
                warnings.append(
                    f"{len(outside)} partitions of the file are outside the scope and left "
                    f"unchanged (e.g. {outside[0]})"
                )
            wanted = [tp for tp in wanted if scope.contains(tp, committed)]
        missing = [tp for tp in wanted if tp not in log_offsets]
        if missing and strategy.kind is ResetKind.FROM_FILE:
            raise InvalidInputError(
                f"the offsets file names partitions that do not exist: {_few(missing)}"
            )
        for tp in missing:
            warnings.append(f"{tp}: the partition no longer exists; its offset is not restored")
        return tuple(tp for tp in wanted if tp in log_offsets), warnings
    if scope is None:  # ResetRequest allows it only for FROM_FILE / RESTORE, handled above
        raise ValueError("request has no scope")
    if scope.all_topics:
        # Tool fact (getPartitionsToReset): --all-topics is the set of partitions
        # the group has committed offsets for -- not every partition of those topics.
        # 4.x fails the whole command if one of them no longer exists
        # (checkAllTopicPartitionsValid); opskit skips it with a warning.
        gone = sorted(tp for tp in committed if tp not in log_offsets)
        for tp in gone:
            warnings.append(
                f"{tp}: the group has an offset for it but the partition no longer exists; skipped"
            )
        return tuple(sorted(tp for tp in committed if tp in log_offsets)), warnings
    existing: dict[str, set[int]] = {}
    for tp in log_offsets:
        existing.setdefault(tp.topic, set()).add(tp.partition)
    chosen: set[TopicPartition] = set()
    for selection in scope.topics:
        have = existing.get(selection.topic)
        if not have:
            raise NotFoundError(f"topic {selection.topic!r} does not exist")
        if selection.partitions is None:
            chosen.update(TopicPartition(selection.topic, p) for p in have)
            continue
        unknown = [p for p in selection.partitions if p not in have]
        if unknown:
            # 4.x checkAllTopicPartitionsValid: "The partitions ... do not exist"
            raise NotFoundError(
                f"partition {selection.topic}:{unknown[0]} does not exist "
                f"(topic {selection.topic!r} has partitions {_ranges(sorted(have))})"
            )
        chosen.update(TopicPartition(selection.topic, p) for p in selection.partitions)
    return tuple(sorted(chosen)), warnings


def _refusal(group: GroupDescription) -> str | None:
    # Tool fact (3.7 ConsumerGroupService.resetOffsets; 4.x same): offsets are
    # reset only when the state is "Empty" or "Dead"; otherwise it prints
    # "Assignments can only be reset if the group ... is inactive" and resets
    # nothing -- with exit code 0. 4.x also resets a group the coordinator does
    # not know (GroupIdNotFoundException; the adapter reports it as Dead) and
    # refuses KIP-1071 streams groups.
    if group.protocol_type in ("streams", "share"):
        return (
            f"group {group.group_id!r} is a {group.protocol_type} group; reset it with the "
            f"{group.protocol_type} group tools"
        )
    if not group.state.is_inactive:
        count = len(group.members)
        members = f" with {count} member{'' if count == 1 else 's'}" if count else ""
        return (
            f"group {group.group_id!r} is {group.state.value}{members}; offsets can only be reset "
            "while it is Empty or Dead (stop its consumers first)"
        )
    return None


def _clamp(requested: int, log: PartitionOffsets) -> tuple[int, str | None]:
    # Tool fact (3.7 ConsumerGroupService.checkOffsetsRange; 4.x
    # GroupOffsetsResetter.checkOffsetsRange), used by --to-offset, --shift-by and
    # --from-file: above the log end -> log end; else below the log start ->
    # log start; each with a warning.
    if requested > log.log_end:
        return log.log_end, f"requested offset {requested} is past the log end; using {log.log_end}"
    if requested < log.log_start:
        return log.log_start, (
            f"requested offset {requested} is below the log start (deleted records); "
            f"using {log.log_start}"
        )
    return requested, None


def _check_log_offsets(log_offsets: Mapping[TopicPartition, PartitionOffsets]) -> None:
    for tp, log in log_offsets.items():
        if log.tp != tp:
            raise ValueError(f"log_offsets[{tp}] describes {log.tp}")
        if log.log_start < 0 or log.log_start > log.log_end:
            raise InconsistentStateError(
                f"{tp}: broker reported log start {log.log_start} and log end {log.log_end}"
            )


def plan_offset_reset(
    request: ResetRequest,
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
    offsets_for_times: Mapping[TopicPartition, int | None],
    now_ms: int,
) -> ResetPlan:
    """Decide the new committed offset of every partition in scope. Reads its inputs only."""
    if group.group_id != request.group_id:
        raise ValueError(
            f"request is for group {request.group_id!r}, description for {group.group_id!r}"
        )
    _check_log_offsets(log_offsets)
    partitions, warnings = _resolve_partitions(request, committed, log_offsets)
    strategy = request.strategy
    kind = strategy.kind
    target_ts = timestamp_lookups_needed(request, now_ms)
    if kind is ResetKind.BY_DURATION and target_ts == 0:
        warnings.append("the duration reaches before 1970; looking up timestamp 0 (the earliest)")
    no_commit = [tp for tp in partitions if tp not in committed]
    if kind is ResetKind.SHIFT_BY and no_commit:
        # Tool fact (3.7 prepareOffsetsToReset; 4.x resetByShiftBy):
        # IllegalArgumentException "Cannot shift offset for partition ... since
        # there is no current committed offset" -- the whole command fails.
        raise UsageError(
            f"cannot shift {_few(no_commit)}: the group has no committed offset there "
            "(use --to-earliest, --to-latest or --to-offset for those partitions)"
        )
    rows: list[ResetRow] = []
    for tp in partitions:
        log = log_offsets[tp]
        current = committed.get(tp)
        notes: list[str] = []
        requested: int | None = None
        target = 0
        if kind is ResetKind.TO_EARLIEST:
            target = log.log_start  # resetToEarliest: log start, no range check
        elif kind is ResetKind.TO_LATEST:
            target = log.log_end  # resetToLatest: high watermark, no range check
        elif kind is ResetKind.TO_CURRENT:
            # Tool fact (3.7 prepareOffsetsToReset, 4.x resetToCurrent): keeps the
            # committed offset as is (no range check); a partition with no commit
            # gets the log end.
            if current is None:
                target = log.log_end
                notes.append(f"no committed offset; using the log end {log.log_end}")
            else:
                target = current
                if current < log.log_start or current > log.log_end:
                    notes.append(
                        f"committed offset {current} is outside the log "
                        f"[{log.log_start}, {log.log_end}]; kept as is"
                    )
        elif kind is ResetKind.TO_OFFSET:
            requested = strategy.offset
        elif kind is ResetKind.SHIFT_BY:
            requested = committed[tp] + (strategy.shift or 0)
        elif kind in (ResetKind.TO_DATETIME, ResetKind.BY_DURATION):
            if tp not in offsets_for_times:
                raise ValueError(f"offsets_for_times has no answer for {tp}")
            found = offsets_for_times[tp]
            if found is None:
                # Tool fact (3.7 ConsumerGroupService.getLogTimestampOffsets; 4.x
                # GroupOffsetsResetter.getLogTimestampOffsets): UNKNOWN_OFFSET ->
                # "Partition ... is empty. Falling back to latest known offset."
                # and the log end is used.
                target = log.log_end
                notes.append(
                    f"no record at or after {format_ms(target_ts or 0)}; "
                    f"using the log end {log.log_end}"
                )
            else:
                # The tool does not range-check these; opskit clamps in case the
                # log moved between the two reads.
                requested = found
        else:  # FROM_FILE, RESTORE
            requested = (strategy.offsets or {})[tp]
        clamped = False
        if requested is not None:
            target, note = _clamp(requested, log)
            if note:
                clamped = True
                notes.append(note)
        rows.append(
            ResetRow(
                tp, current, target, log.log_start, log.log_end, clamped, "; ".join(notes) or None
            )
        )
        warnings.extend(f"{tp}: {note}" for note in notes)
    if not rows:
        warnings.append("nothing to reset: no partition is in scope")
    return ResetPlan(
        group_id=group.group_id,
        group_state=group.state,
        strategy=strategy,
        scope=request.scope,
        rows=tuple(rows),
        warnings=tuple(warnings),
        refusal=_refusal(group),
        planned_at_ms=now_ms,
        target_timestamp_ms=target_ts,
    )


def check_unchanged(
    plan: ResetPlan, group_now: GroupDescription, committed_now: Mapping[TopicPartition, int]
) -> None:
    """Compare-and-set guard, right before applying: raise ``RefusedError`` if the
    plan is refused, the group became active, or a committed offset in scope moved
    (or appeared) since planning."""
    if group_now.group_id != plan.group_id:
        raise ValueError(f"plan is for group {plan.group_id!r}, not {group_now.group_id!r}")
    plan.raise_if_refused()
    refusal = _refusal(group_now)
    if refusal is not None:
        raise RefusedError(f"since planning, {refusal}; nothing was changed")
    moved = [row for row in plan.rows if committed_now.get(row.tp) != row.current]
    if moved:
        first = moved[0]
        raise RefusedError(
            f"committed offsets of group {plan.group_id!r} changed since planning on "
            f"{len(moved)} partitions (e.g. {first.tp}: {offset_text(first.current)} -> "
            f"{offset_text(committed_now.get(first.tp))}); nothing was changed, plan again"
        )


# --------------------------------------------------------------------------- backup


def offset_text(offset: int | None) -> str:
    return "none" if offset is None else str(offset)


def _few(tps: Sequence[TopicPartition], limit: int = 5) -> str:
    shown = ", ".join(str(tp) for tp in tps[:limit])
    return shown + (f" and {len(tps) - limit} more" if len(tps) > limit else "")


def _ranges(values: Sequence[int]) -> str:
    if values and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}" if len(values) > 1 else str(values[0])
    return ",".join(str(v) for v in values)
