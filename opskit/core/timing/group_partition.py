"""Lag in time and retention risk of one group partition, the usual case computed directly."""

from __future__ import annotations

from opskit.core.models import PartitionLag
from opskit.core.timing.lag_time import Confidence, LagTime, LagTimeBasis, partition_lag_time
from opskit.core.timing.retention import SEGMENT_NOTE, RetentionBasis, RetentionRisk, retention_risk
from opskit.core.timing.timeline import OffsetTimeline


def group_partition_time(
    now_ms: int,
    p: PartitionLag,
    *,
    record_ts_ms: int | None,
    retention: tuple[int, int] | None,
    partition_size_bytes: int | None = None,
    timeline: OffsetTimeline | None = None,
) -> tuple[LagTime, RetentionRisk | None]:
    """Lag in time and retention risk of one group partition whose log start and end
    are known. ``record_ts_ms`` is the timestamp of the record at
    :func:`opskit.core.lag.oldest_unconsumed_offset`: the committed offset's record,
    or the log start's when retention deleted past the committed offset.
    ``retention`` is ``(retention.ms, retention.bytes)``; None skips the risk."""
    if timeline is None and (usual := usual_time(now_ms, p, record_ts_ms, retention)) is not None:
        # The usual case, computed directly (a report has one per group partition):
        # exactly what partition_lag_time and retention_risk give for it, which
        # test_timing.py checks on generated inputs.
        age, skew, left_ms = usual
        assert record_ts_ms is not None
        lt = LagTime(age, _COMMITTED_RECORD, _EXACT, record_ts_ms, age, age, skew)
        return lt, RetentionRisk(0, left_ms / 1000.0, _BY_TIME, _LOWER_BOUND, left_ms == 0, None,
                                 _SEGMENT_NOTES)
    return _group_partition_time(now_ms, p, record_ts_ms, retention, partition_size_bytes,
                                 timeline)


def usual_time(now_ms: int, p: PartitionLag, record_ts_ms: int | None,
               retention: tuple[int, int] | None) -> tuple[float, int, int] | None:
    """(lag seconds, clock skew ms, retention ms left) of the usual group partition,
    which :func:`group_partition_time` computes directly (and
    :meth:`TimedLagReport.to_dict` without objects); None for any other.

    Usual: the committed offset's record is in the log and its timestamp known, the
    topic deletes by ``retention.ms`` only. Its lag time is then exact and based on the
    committed record; its retention risk a lower bound by time, eligible now when no
    time is left, with the segment note (USUAL_FIELDS)."""
    c = p.committed
    if (retention is None or retention[1] != -1 or retention[0] < 0 or c is None
            or record_ts_ms is None or record_ts_ms < 0 or p.log_start is None
            or p.log_end is None or not p.log_start <= c < p.log_end):
        return None
    diff = now_ms - record_ts_ms
    age, skew = (diff / 1000.0, 0) if diff >= 0 else (0.0, -diff)
    # conditional expressions, not max(): this runs once per group partition of a report
    left_ms = retention[0] - (diff if diff > 0 else 0)  # noqa: FURB136
    return age, skew, (left_ms if left_ms > 0 else 0)  # noqa: FURB136


_COMMITTED_RECORD, _EXACT = LagTimeBasis.COMMITTED_RECORD, Confidence.EXACT
_LOWER_BOUND, _BY_TIME = Confidence.LOWER_BOUND, RetentionBasis.TIME
_SEGMENT_NOTES = (SEGMENT_NOTE,)
#: the JSON values of a usual partition's (usual_time) time fields (basis, confidence, retention
#: basis, notes), as LagTime / RetentionRisk give them
USUAL_FIELDS = (_COMMITTED_RECORD.value, _EXACT.value, _BY_TIME.value, _SEGMENT_NOTES)


def _group_partition_time(
    now_ms: int, p: PartitionLag, record_ts_ms: int | None, retention: tuple[int, int] | None,
    partition_size_bytes: int | None, timeline: OffsetTimeline | None,
) -> tuple[LagTime, RetentionRisk | None]:
    """:func:`group_partition_time` by the general rules (every case)."""
    assert p.log_start is not None and p.log_end is not None
    below = p.committed is not None and p.committed < p.log_start
    lt = partition_lag_time(
        now_ms,
        committed=p.committed,
        log_start=p.log_start,
        log_end=p.log_end,
        committed_record_ts_ms=None if below else record_ts_ms,
        log_start_record_ts_ms=record_ts_ms if below else None,
        timeline=timeline,
    )
    if retention is None:
        return lt, None
    rr = retention_risk(
        now_ms,
        retention_ms=retention[0],
        retention_bytes=retention[1],
        committed=p.committed,
        log_start=p.log_start,
        log_end=p.log_end,
        oldest_unconsumed_ts_ms=lt.record_timestamp_ms,
        timestamp_confidence=lt.confidence,
        partition_size_bytes=partition_size_bytes,
    )
    return lt, rr
