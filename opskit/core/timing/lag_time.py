"""Lag in time (:func:`partition_lag_time`) is the age of the oldest unconsumed
record, i.e. of the record at the committed offset, ``now - its timestamp``.
Fallbacks, in order:

1. no committed offset: UNKNOWN.
2. committed >= log end: no lag, ``seconds`` is None (basis NO_LAG).
3. committed < log start (records lost): the oldest record still there is
   the one at log start; its age (read, or else from the timeline) is a
   LOWER_BOUND of the true lag. With nothing left in the log: NO_LAG.
4. timestamp of the record at the committed offset known: EXACT.
5. an :class:`OffsetTimeline` of (log end, time) points: ESTIMATE, see
   :meth:`OffsetTimeline.append_time` for the interpolation and why it stays
   sane after idle periods; a committed offset older than the whole timeline
   gives a LOWER_BOUND (the timeline's age), never an extrapolation.
6. otherwise UNKNOWN.

Ages are never negative: a record timestamp in the future (producer clock
ahead, CreateTime set by hand) gives age 0 and ``clock_skew_ms > 0``. Record
timestamps are the producer's CreateTime unless the topic uses
LogAppendTime; a producer with a wrong clock makes any time-based figure
wrong, which the skew flag only catches in one direction.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, NamedTuple

from opskit.core.timing.timeline import OffsetTimeline


class Confidence(str, Enum):
    EXACT = "exact"
    LOWER_BOUND = "lower_bound"
    ESTIMATE = "estimate"
    UNKNOWN = "unknown"


class LagTimeBasis(str, Enum):
    #: consumer at the head: nothing unconsumed
    NO_LAG = "no_lag"
    #: timestamp of the record at the committed offset
    COMMITTED_RECORD = "committed_record"
    #: committed below log start: timestamp of the record at log start (lower bound)
    LOG_START_RECORD = "log_start_record"
    #: interpolated from the (log end, time) history
    INTERPOLATED = "interpolated"
    #: committed offset older than the whole history: at least the history's age
    HISTORY_START = "history_start"
    UNKNOWN = "unknown"


class LagTime(NamedTuple):
    """Age of the oldest unconsumed record of one partition (immutable; a named
    tuple because a report builds one per group partition)."""

    #: never negative; None when there is no lag or no basis
    seconds: float | None
    basis: LagTimeBasis
    confidence: Confidence
    #: the record timestamp used (read, or estimated)
    record_timestamp_ms: int | None = None
    #: bounds of the true value when known (EXACT: both equal ``seconds``)
    min_seconds: float | None = None
    max_seconds: float | None = None
    #: how far the record timestamp was ahead of ``now_ms`` (age clamped to 0)
    clock_skew_ms: int = 0

    @property
    def clock_skew(self) -> bool:
        return self.clock_skew_ms > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "basis": self.basis.value,
            "confidence": self.confidence.value,
            "record_timestamp_ms": self.record_timestamp_ms,
            "min_seconds": self.min_seconds,
            "max_seconds": self.max_seconds,
            "clock_skew_ms": self.clock_skew_ms,
        }


_UNKNOWN_LAG = LagTime(None, LagTimeBasis.UNKNOWN, Confidence.UNKNOWN)


def _age(now_ms: int, ts_ms: int) -> tuple[float, int]:
    """(age in seconds clamped at 0, clock skew in ms)."""
    diff = now_ms - ts_ms
    return (diff / 1000.0, 0) if diff >= 0 else (0.0, -diff)


def lag_seconds(now_ms: int, record_timestamp_ms: int) -> LagTime:
    """Age of the record at the committed offset: EXACT, never negative.

    A future timestamp gives 0 seconds and ``clock_skew_ms``. Timestamps below
    0 (Kafka's "no timestamp", -1) are refused: use :func:`partition_lag_time`,
    which falls back.
    """
    if record_timestamp_ms < 0:
        raise ValueError(f"record timestamp {record_timestamp_ms} is not a timestamp")
    age, skew = _age(now_ms, record_timestamp_ms)
    return LagTime(
        age, LagTimeBasis.COMMITTED_RECORD, Confidence.EXACT, record_timestamp_ms, age, age, skew
    )


def partition_lag_time(
    now_ms: int,
    *,
    committed: int | None,
    log_start: int,
    log_end: int,
    committed_record_ts_ms: int | None = None,
    log_start_record_ts_ms: int | None = None,
    timeline: OffsetTimeline | None = None,
) -> LagTime:
    """Age of the oldest unconsumed record, with the fallbacks of the module docstring.

    ``committed_record_ts_ms`` is the timestamp of the first record at or after
    the committed offset (offsets may have gaps: compaction, transaction
    markers); ``log_start_record_ts_ms`` the timestamp of the first record at
    or after log start. A negative timestamp (Kafka's -1, "none") counts as
    unknown. ``timeline`` is interpolated with ``(log_end, now_ms)`` as an
    extra last point when it is ahead of the timeline, so a timeline that
    missed the latest sample still bounds the answer.
    """
    if committed is None:
        return _UNKNOWN_LAG
    if committed >= log_end:
        return LagTime(None, LagTimeBasis.NO_LAG, Confidence.EXACT)
    if committed < log_start:
        if log_start_record_ts_ms is not None and log_start_record_ts_ms >= 0:
            age, skew = _age(now_ms, log_start_record_ts_ms)
            return LagTime(
                age, LagTimeBasis.LOG_START_RECORD, Confidence.LOWER_BOUND,
                log_start_record_ts_ms, age, None, skew,
            )  # fmt: skip
        if log_start >= log_end:
            # everything unconsumed was deleted: no record left to be late
            return LagTime(None, LagTimeBasis.NO_LAG, Confidence.EXACT)
        # the oldest surviving record is at log start; the lost ones were older
        est = _from_timeline(now_ms, log_start, log_end, timeline)
        if est.seconds is None:
            return est
        return LagTime(
            est.seconds, est.basis, Confidence.LOWER_BOUND,
            est.record_timestamp_ms, est.min_seconds, None, est.clock_skew_ms,
        )  # fmt: skip
    if committed_record_ts_ms is not None and committed_record_ts_ms >= 0:
        return lag_seconds(now_ms, committed_record_ts_ms)
    estimate = _from_timeline(now_ms, committed, log_end, timeline)
    if (
        estimate.basis is LagTimeBasis.HISTORY_START
        and log_start_record_ts_ms is not None
        and log_start_record_ts_ms >= 0
    ):
        # the record at log start is at least as old as ours: an upper bound
        upper, _ = _age(now_ms, log_start_record_ts_ms)
        if estimate.min_seconds is not None and upper >= estimate.min_seconds:
            return LagTime(
                estimate.seconds, estimate.basis, estimate.confidence,
                estimate.record_timestamp_ms, estimate.min_seconds, upper, estimate.clock_skew_ms,
            )  # fmt: skip
    return estimate


def _from_timeline(
    now_ms: int, committed: int, log_end: int, timeline: OffsetTimeline | None
) -> LagTime:
    if timeline is None or not timeline.points:
        return _UNKNOWN_LAG
    tl = timeline
    if log_end > tl.points[-1].offset:
        tl = OffsetTimeline(tl.points, tl.max_points + 1).add(log_end, now_ms)
    at = tl.append_time(committed)
    if at is None:
        return _UNKNOWN_LAG
    age, skew = _age(now_ms, at.estimate_ms)
    youngest, _ = _age(now_ms, at.at_or_before_ms)
    if at.after_ms is None:
        return LagTime(
            youngest, LagTimeBasis.HISTORY_START, Confidence.LOWER_BOUND,
            at.at_or_before_ms, youngest, None, skew,
        )  # fmt: skip
    oldest, _ = _age(now_ms, at.after_ms)
    return LagTime(
        age, LagTimeBasis.INTERPOLATED, Confidence.ESTIMATE, at.estimate_ms, youngest, oldest, skew
    )
