"""Lag in time, rates, catch-up ETA and retention risk: pure arithmetic.

Units: every instant is **epoch milliseconds as int** (``*_ms``), as Kafka
record timestamps and ``retention.ms`` are; ``now_ms`` is always a parameter.
Results give durations in **seconds as float** (``*_seconds``) and rates in
messages (or bytes) per second.

Every result says how it was obtained (``basis``) and how far to trust it
(``confidence``): EXACT (read from a record), LOWER_BOUND (the truth is this
or more), ESTIMATE (interpolated), UNKNOWN (no basis; value is None).

Lag in time (:func:`partition_lag_time`) is the age of the oldest unconsumed
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

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, NamedTuple, Protocol

from opskit.core.models import PartitionLag
from opskit.errors import InvalidInputError

DEFAULT_TIMELINE_POINTS = 60


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


# --------------------------------------------------------------------------- timeline


@dataclass(frozen=True, order=True)
class TimelinePoint:
    """The log end offset of a partition as seen at ``timestamp_ms``."""

    timestamp_ms: int
    offset: int


@dataclass(frozen=True)
class AppendTime:
    """When a record was appended, from a timeline: in ``(after_ms, at_or_before_ms]``.

    ``after_ms`` is None when the record predates the timeline (only the upper
    end is known); ``estimate_ms`` is then ``at_or_before_ms``.
    """

    estimate_ms: int
    after_ms: int | None
    at_or_before_ms: int


@dataclass(frozen=True)
class OffsetTimeline:
    """(log end offset, time) points of one partition, oldest first, bounded.

    Rules of :meth:`add` (bounded memory, useful span on quiet topics):
    a point not newer than the last is ignored; a log end below the last one
    (truncation, topic recreated) restarts the timeline; a point equal to the
    last two offsets replaces the last one, so an idle plateau costs two points
    (when it began, and the last time it was seen); beyond ``max_points`` the
    oldest points go.
    """

    points: tuple[TimelinePoint, ...] = ()
    max_points: int = DEFAULT_TIMELINE_POINTS

    def __post_init__(self) -> None:
        if self.max_points < 2:
            raise ValueError("an offset timeline needs at least 2 points")
        for a, b in zip(self.points, self.points[1:]):
            if b.timestamp_ms <= a.timestamp_ms or b.offset < a.offset:
                raise ValueError("timeline points must grow in time and never fall in offset")

    def add(self, log_end: int, timestamp_ms: int) -> OffsetTimeline:
        pts = self.points
        if pts and timestamp_ms <= pts[-1].timestamp_ms:
            return self
        new = TimelinePoint(timestamp_ms, log_end)
        if pts and log_end < pts[-1].offset:
            return OffsetTimeline((new,), self.max_points)
        if len(pts) >= 2 and pts[-1].offset == pts[-2].offset == log_end:
            pts = pts[:-1]
        return OffsetTimeline((pts + (new,))[-self.max_points :], self.max_points)

    def append_time(self, offset: int) -> AppendTime | None:
        """When the record at ``offset`` was appended, from the timeline.

        The record at ``offset`` was appended when the log end went from
        ``<= offset`` to ``> offset``. Take the **last** point whose log end
        was still ``<= offset`` and the first point after it (log end
        ``> offset``): the append happened in between, and the estimate
        interpolates linearly by offset inside that one interval.

        Why this stays sane after idle periods: a quiet topic sits on one log
        end for hours, then a burst arrives. Interpolating from the *first*
        time the log end equalled the committed offset (what kafka-lag-exporter
        did) puts the burst's records hours in the past; the last point of
        the plateau bounds them to the last sampling interval. And a record
        older than the whole timeline is bounded, not extrapolated
        (``after_ms`` None).

        None when the timeline does not show the record yet (every point has
        log end ``<= offset``) or is empty.
        """
        pts = self.points
        if not pts or pts[-1].offset <= offset:
            return None
        if pts[0].offset > offset:
            return AppendTime(pts[0].timestamp_ms, None, pts[0].timestamp_ms)
        i = max(k for k, p in enumerate(pts) if p.offset <= offset)
        lo, hi = pts[i], pts[i + 1]
        # integer ceiling: the estimate stays strictly after lo and at or before hi
        num = (offset + 1 - lo.offset) * (hi.timestamp_ms - lo.timestamp_ms)
        est = lo.timestamp_ms - (-num // (hi.offset - lo.offset))
        return AppendTime(est, lo.timestamp_ms, hi.timestamp_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_points": self.max_points,
            "points": [[p.timestamp_ms, p.offset] for p in self.points],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OffsetTimeline:
        try:
            pts = tuple(TimelinePoint(_int(t), _int(o)) for t, o in d.get("points", ()))
            return cls(pts, _int(d.get("max_points", DEFAULT_TIMELINE_POINTS)))
        except (TypeError, ValueError) as e:
            raise InvalidInputError(f"bad offset timeline: {e}") from e


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


# --------------------------------------------------------------------------- rates


class OffsetObservation(Protocol):
    """Anything with the fields of :class:`opskit.core.status.OffsetSample`."""

    @property
    def timestamp_ms(self) -> int: ...

    @property
    def committed(self) -> int | None: ...

    @property
    def log_end(self) -> int: ...


@dataclass(frozen=True)
class Rate:
    """Average rate of an offset over the points used."""

    #: messages per second, never negative; None with fewer than 2 usable points
    per_second: float | None
    span_ms: int
    points: int
    #: the offset fell somewhere (truncation, rewind): only points after the
    #: last fall were used
    reset: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_second": self.per_second,
            "span_ms": self.span_ms,
            "points": self.points,
            "reset": self.reset,
        }


def offset_rate(points: Iterable[tuple[int, int]]) -> Rate:
    """Rate of an offset from ``(timestamp_ms, offset)`` points.

    Points are sorted by time; for equal times the last one wins. If the
    offset ever falls, only the points from the last fall on are used (a rate
    across a rewind or truncation means nothing). Rate = (last - first offset)
    / (last - first time), so it is never negative.
    """
    by_time: dict[int, int] = {}
    for t, o in points:
        by_time[t] = o
    pts = sorted(by_time.items())
    start, reset = 0, False
    for i in range(1, len(pts)):
        if pts[i][1] < pts[i - 1][1]:
            start, reset = i, True
    used = pts[start:]
    if len(used) < 2:
        return Rate(None, 0, len(used), reset)
    (t0, o0), (t1, o1) = used[0], used[-1]
    span = t1 - t0
    return Rate((o1 - o0) * 1000.0 / span, span, len(used), reset)


def produce_rate(samples: Iterable[OffsetObservation]) -> Rate:
    """Messages/s written to a partition: rate of its log end."""
    return offset_rate((s.timestamp_ms, s.log_end) for s in samples)


def consume_rate(samples: Iterable[OffsetObservation]) -> Rate:
    """Messages/s a group consumes from a partition: rate of its committed offset.

    Samples without a committed offset are skipped. At the head this equals
    the produce rate, not what the consumer could do.
    """
    return offset_rate((s.timestamp_ms, s.committed) for s in samples if s.committed is not None)


# --------------------------------------------------------------------------- catch-up


class CatchUpState(str, Enum):
    #: no lag
    CAUGHT_UP = "caught_up"
    #: consume rate > produce rate: ``eta_seconds`` is set
    CATCHING_UP = "catching_up"
    #: lag > 0 and consume rate <= produce rate: the lag does not shrink
    FALLING_BEHIND = "falling_behind"
    #: a rate is missing or not a finite number
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CatchUp:
    state: CatchUpState
    #: 0 when caught up, lag / (consume - produce) when catching up, else None
    eta_seconds: float | None
    #: consume - produce, messages/s; None when a rate is unknown
    net_rate: float | None
    lag: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "eta_seconds": self.eta_seconds,
            "net_rate": self.net_rate,
            "lag": self.lag,
        }


def catch_up_eta(lag: int, consume_rate: float | None, produce_rate: float | None) -> CatchUp:
    """Time for the consumer to reach the head at current rates.

    ``lag`` in messages (>= 0), rates in messages/s (>= 0). The ETA assumes
    both rates hold; it is never negative.
    """
    if lag < 0:
        raise ValueError(f"lag must be non-negative, got {lag}")
    for name, r in (("consume", consume_rate), ("produce", produce_rate)):
        if r is not None and r < 0:
            raise ValueError(f"{name} rate must be non-negative, got {r}")
    if lag == 0:
        net = _net(consume_rate, produce_rate)
        return CatchUp(CatchUpState.CAUGHT_UP, 0.0, net, 0)
    net = _net(consume_rate, produce_rate)
    if net is None:
        return CatchUp(CatchUpState.UNKNOWN, None, None, lag)
    if net <= 0:
        return CatchUp(CatchUpState.FALLING_BEHIND, None, net, lag)
    eta = lag / net
    if not math.isfinite(eta):
        return CatchUp(CatchUpState.UNKNOWN, None, net, lag)
    return CatchUp(CatchUpState.CATCHING_UP, eta, net, lag)


def _net(consume: float | None, produce: float | None) -> float | None:
    if consume is None or produce is None:
        return None
    if not (math.isfinite(consume) and math.isfinite(produce)):
        return None
    return consume - produce


# --------------------------------------------------------------------------- retention


class RetentionBasis(str, Enum):
    #: nothing unconsumed, nothing at risk
    NO_LAG = "no_lag"
    #: retention.ms and retention.bytes both -1: nothing is ever deleted
    UNLIMITED = "unlimited"
    #: time left set by retention.ms
    TIME = "time"
    #: time left set by retention.bytes (needs size and a byte rate)
    BYTES = "bytes"
    #: a limit applies but the inputs to judge it are missing
    UNKNOWN = "unknown"


class RetentionRisk(NamedTuple):
    """How close retention is to deleting records the group has not read."""

    #: records already deleted unread (log start - committed, when positive)
    records_lost: int
    #: time before the oldest unconsumed record may be deleted, never negative;
    #: None when no limit applies or it cannot be judged
    time_left_seconds: float | None
    basis: RetentionBasis
    confidence: Confidence
    #: the oldest unconsumed record is already eligible for deletion
    eligible_now: bool = False
    #: retention.bytes minus the estimated unconsumed bytes (negative: over)
    bytes_headroom: int | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "records_lost": self.records_lost,
            "time_left_seconds": self.time_left_seconds,
            "basis": self.basis.value,
            "confidence": self.confidence.value,
            "eligible_now": self.eligible_now,
            "bytes_headroom": self.bytes_headroom,
            "notes": list(self.notes),
        }


_SEGMENT_NOTE = (
    "Kafka deletes whole segments once their newest record expires (and the active "
    "segment only after it rolls), so this is a lower bound on the time left"
)


_BYTES_NOTE = (
    "retention.bytes headroom {headroom:,} bytes: newer data that can still arrive before the "
    "segment holding the oldest unconsumed record may be deleted (estimated from the partition "
    "size; whole segments are deleted, so the true headroom is up to one segment.bytes more)"
)


def retention_risk(
    now_ms: int,
    *,
    retention_ms: int,
    retention_bytes: int,
    committed: int | None,
    log_start: int,
    log_end: int,
    oldest_unconsumed_ts_ms: int | None = None,
    timestamp_confidence: Confidence = Confidence.EXACT,
    partition_size_bytes: int | None = None,
    produce_bytes_per_second: float | None = None,
) -> RetentionRisk:
    """Time left before retention may delete the oldest unconsumed record.

    ``oldest_unconsumed_ts_ms``: timestamp of the record at
    ``max(committed, log_start)`` (or a :class:`LagTime`'s
    ``record_timestamp_ms``, with its confidence as ``timestamp_confidence``).

    Time rule (``retention.ms`` >= 0): ``retention.ms - age``, clamped at 0
    (``eligible_now`` when it reaches 0). Kafka deletes whole segments, only
    once the newest record in the segment is older than retention.ms, so the
    true time left is this or more: confidence LOWER_BOUND for an exact
    timestamp, ESTIMATE otherwise.

    Bytes rule (``retention.bytes`` >= 0, per partition): Kafka deletes the
    oldest segment while the log without it still holds at least
    ``retention.bytes``. So the segment holding the oldest unconsumed record
    becomes deletable once the bytes *newer* than that segment reach
    ``retention.bytes``. The byte headroom is how many bytes of new data can
    still arrive before that happens. Unconsumed bytes are estimated as
    ``size * unconsumed records / records in the log`` (uniform record size,
    hence ESTIMATE) and ``bytes_headroom = retention.bytes - unconsumed bytes``.
    Segment granularity makes it approximate: the rest of the oldest
    unconsumed record's segment does not count against the limit, so the true
    headroom is this or up to one ``segment.bytes`` more (and the active
    segment is never deleted). At or below 0 the record is eligible now, else
    the time left is headroom / ``produce_bytes_per_second`` when that rate is > 0.

    The smaller time left wins and names the basis. -1 disables a limit.
    """
    if retention_ms < -1 or retention_bytes < -1:
        raise ValueError("retention.ms and retention.bytes must be -1 or non-negative")
    if committed is None:
        return RetentionRisk(
            0, None, RetentionBasis.UNKNOWN, Confidence.UNKNOWN,
            notes=("the group has no committed offset",),
        )  # fmt: skip
    lost = max(0, log_start - committed)
    notes: list[str] = []
    if lost:
        notes.append(f"{lost:,} records were already deleted before the group read them")
    first_unconsumed = max(committed, log_start)
    if first_unconsumed >= log_end:
        return RetentionRisk(
            lost, None, RetentionBasis.NO_LAG, Confidence.EXACT, notes=tuple(notes)
        )
    if retention_ms == -1 and retention_bytes == -1:
        notes.append("retention.ms and retention.bytes are -1: nothing is deleted")
        return RetentionRisk(
            lost, None, RetentionBasis.UNLIMITED, Confidence.EXACT, notes=tuple(notes)
        )

    candidates: list[tuple[float, RetentionBasis, Confidence, bool]] = []
    headroom: int | None = None
    missing: list[str] = []

    if retention_ms >= 0:
        if oldest_unconsumed_ts_ms is None or oldest_unconsumed_ts_ms < 0:
            missing.append(
                "retention.ms applies but the oldest unconsumed record's time is unknown"
            )
        else:
            age_ms = max(0, now_ms - oldest_unconsumed_ts_ms)
            left_ms = max(0, retention_ms - age_ms)
            conf = (
                Confidence.LOWER_BOUND
                if timestamp_confidence is Confidence.EXACT
                else Confidence.ESTIMATE
            )
            candidates.append((left_ms / 1000.0, RetentionBasis.TIME, conf, left_ms == 0))

    if retention_bytes >= 0:
        records = log_end - log_start
        if partition_size_bytes is None or partition_size_bytes < 0 or records <= 0:
            missing.append("retention.bytes applies but the partition size is unknown")
        else:
            unconsumed = partition_size_bytes * (log_end - first_unconsumed) // records
            headroom = retention_bytes - unconsumed
            notes.append(_BYTES_NOTE.format(headroom=headroom))
            if headroom <= 0:
                candidates.append((0.0, RetentionBasis.BYTES, Confidence.ESTIMATE, True))
            elif (
                produce_bytes_per_second is not None
                and math.isfinite(produce_bytes_per_second)
                and produce_bytes_per_second > 0
            ):
                left = headroom / produce_bytes_per_second
                candidates.append((left, RetentionBasis.BYTES, Confidence.ESTIMATE, False))
            else:
                notes.append("no byte rate to turn the byte headroom into time")

    notes.extend(missing)
    if not candidates:
        return RetentionRisk(
            lost, None, RetentionBasis.UNKNOWN, Confidence.UNKNOWN,
            bytes_headroom=headroom, notes=tuple(notes),
        )  # fmt: skip
    # the smaller time left wins; on a tie the first rule (time) names the basis
    best = candidates[0]
    for c in candidates[1:]:
        if c[0] < best[0]:
            best = c
    notes.append(_SEGMENT_NOTE)
    return RetentionRisk(lost, best[0], best[1], best[2], best[3], headroom, tuple(notes))


# --------------------------------------------------------------------------- helpers


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


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
    left_ms = retention[0] - (diff if diff > 0 else 0)
    return age, skew, (left_ms if left_ms > 0 else 0)


_COMMITTED_RECORD, _EXACT = LagTimeBasis.COMMITTED_RECORD, Confidence.EXACT
_LOWER_BOUND, _BY_TIME = Confidence.LOWER_BOUND, RetentionBasis.TIME
_SEGMENT_NOTES = (_SEGMENT_NOTE,)
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
