"""Is a broker's answer to "which offset is at time T" consistent with its records?

Kafka answers ListOffsets by timestamp with the first offset whose record has a
timestamp at or after T, or "none" (-1) when no record is that new; a planner then
uses the log end. So for an answer ``o`` on a partition whose log is
``[start, end)``:

* ``start <= o <= end`` (no answer is the log end);
* when ``o < end``, the record at ``o`` has a timestamp ``>= T``;
* when ``o > start``, the record just before ``o`` has a timestamp ``< T``
  (for no answer: the last record).

Some Kafka-compatible brokers answer something else whatever T is (the Hanzo
gateway: offset 0; Heraclitus: the log end). :func:`contradiction` says why an
answer cannot be right, given the records read at ``o`` and at ``o - 1``. A record
that could not be read, that carries no timestamp, or that is not at the offset
asked (an offset gap: compaction, a transaction marker) settles nothing: only a
record that disproves the answer counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from opskit.core.models import TopicPartition


@dataclass(frozen=True)
class SeenRecord:
    """The first record read at or after an offset."""

    offset: int
    #: epoch ms; negative when the record carries none
    timestamp_ms: int


def positions_to_read(answer: int | None, log_start: int, log_end: int) -> tuple[int, ...]:
    """The offsets whose first record at or after them :func:`contradiction` needs:
    the answer (unless it is the log end) and the offset before it (unless it is the
    log start)."""
    at = log_end if answer is None else answer
    if not log_start <= at <= log_end:
        return ()
    out: list[int] = []
    if at > log_start:
        out.append(at - 1)
    if at < log_end:
        out.append(at)
    return tuple(out)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def contradiction(tp: TopicPartition, ts_ms: int, answer: int | None, log_start: int,
                  log_end: int, at: SeenRecord | None, before: SeenRecord | None) -> str | None:
    """Why the broker's answer ``answer`` for time ``ts_ms`` on ``tp`` cannot be right
    (None: nothing read disproves it). ``at`` / ``before``: the first records read at
    or after ``answer`` and ``answer - 1`` (None when not read)."""
    shown = "no offset" if answer is None else f"offset {answer}"
    o = log_end if answer is None else answer
    if not log_start <= o <= log_end:
        return (f"it answered {shown} for {tp} at {_iso(ts_ms)}, outside the log "
                f"[{log_start}, {log_end})")
    if o < log_end and at is not None and at.offset == o and 0 <= at.timestamp_ms < ts_ms:
        return (f"it answered {shown} for {tp} at {_iso(ts_ms)}, but the record at offset {o} "
                f"is older ({_iso(at.timestamp_ms)})")
    if (o > log_start and before is not None and before.offset == o - 1
            and before.timestamp_ms >= ts_ms):
        return (f"it answered {shown} for {tp} at {_iso(ts_ms)}, but the record at offset "
                f"{o - 1} before it is already that new ({_iso(before.timestamp_ms)})")
    return None
