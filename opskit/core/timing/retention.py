"""How close retention is to deleting records a group has not read."""

from __future__ import annotations

import math
from enum import Enum
from typing import Any, NamedTuple

from opskit.core.timing.lag_time import Confidence


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


SEGMENT_NOTE = (
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
    notes.append(SEGMENT_NOTE)
    return RetentionRisk(lost, best[0], best[1], best[2], best[3], headroom, tuple(notes))
