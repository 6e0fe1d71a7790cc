"""Cross-checking a broker's log end: ListOffsets (latest) against the Fetch high watermark.

A Kafka broker gives the log end of a partition in two answers: ListOffsets with
timestamp -1 (what ``kafka-consumer-groups.sh`` shows) and the high watermark of
every Fetch. On Apache Kafka both are the same number. Some Kafka-compatible
brokers disagree with themselves: Tansu 0.6 answers ListOffsets (latest) with
the newest batch's base offset + 1, while its Fetch high watermark is right, so
a group committed inside the newest batch looks "committed beyond the log end"
with lag 0.

The adapter fetches at the listed log end, then asks ListOffsets again for the
partitions whose Fetch disagreed (a later answer: on a live Apache cluster the
log end only grows, so a producer racing the two reads is told apart from a
broker that contradicts itself). :func:`judge_log_end` decides, from those
answers alone, which log end to use, or that it cannot be known.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class LogEndSource(str, Enum):
    #: ListOffsets (latest), checked or agreeing with the Fetch high watermark
    LIST_OFFSETS = "list_offsets"
    #: the Fetch high watermark, confirmed by records fetched at or past the listed end
    FETCH_HIGH_WATERMARK = "fetch_high_watermark"
    #: the answers contradict each other and nothing settles it: log end unknown
    INCONSISTENT = "inconsistent"
    #: ListOffsets and the Fetch high watermark agree, but the Fetch at that log end
    #: returned records: the broker lost its log end (e.g. restarted): log end unknown
    RECORDS_PAST_END = "records_past_end"


@dataclass(frozen=True)
class LogEndEvidence:
    """What the broker said about one partition's log end."""

    #: ListOffsets (latest) of the report
    listed: int
    #: high watermark of a Fetch sent after that answer; None when it did not answer
    fetch_high_watermark: int | None
    #: offset of the last record that Fetch returned (fetching at ``listed``); None: none
    last_fetched_offset: int | None = None
    #: ListOffsets (latest) asked again after the Fetch answered; None when not asked
    relisted: int | None = None


@dataclass(frozen=True)
class LogEndVerdict:
    #: the log end to use; None when it cannot be known
    log_end: int | None
    source: LogEndSource
    #: one sentence for the user when the answers disagreed ("" when they agreed)
    detail: str = ""


def judge_log_end(e: LogEndEvidence) -> LogEndVerdict:
    """The log end to report, from the evidence.

    * The Fetch high watermark agrees with ListOffsets, yet the Fetch at that end returned
      records (Kafka never returns a record at or past the high watermark): the broker
      lost its log end (a restart of a broker that keeps it in memory): unknown.
    * The Fetch agrees with ListOffsets, or did not answer: ListOffsets.
    * They disagree, and ListOffsets asked again now agrees with the Fetch (or is
      newer than it): the log moved between the reads (records produced, or a
      truncation); the newest ListOffsets answer is used.
    * ListOffsets asked again still says less than the Fetch high watermark, and the
      Fetch returned records at or past the listed end: those records exist, so the
      listed end is wrong; the Fetch high watermark (at least one past them) is used.
    * Anything else (still contradicting, with no record to settle it): unknown.
    """
    hw, listed = e.fetch_high_watermark, e.listed
    last = e.last_fetched_offset
    if hw is not None and hw >= 0 and hw <= listed and last is not None and last >= listed:
        # Kafka never returns a record at or past the high watermark to a consumer: the
        # records are there, the broker's idea of where its log ends is not
        return LogEndVerdict(None, LogEndSource.RECORDS_PAST_END,
                             f"ListOffsets (latest) says {listed} and the Fetch high watermark "
                             f"{hw}, but a Fetch at {listed} returned records up to offset "
                             f"{last}: the broker lost its log end (e.g. it restarted and keeps "
                             "high watermarks in memory only); log end and lag unknown")
    if hw is None or hw < 0 or hw == listed:
        return LogEndVerdict(listed, LogEndSource.LIST_OFFSETS)
    now = e.relisted
    if now is not None and (now == hw or (hw < now and hw >= listed)):
        return LogEndVerdict(now, LogEndSource.LIST_OFFSETS,
                             f"the log end moved from {listed} to {now} between reads")
    said = f"ListOffsets (latest) says {listed if now is None else now}, Fetch high watermark {hw}"
    if (hw > listed and (now is None or now < hw) and last is not None
            and last >= max(listed, now if now is not None else listed) and last < hw):
        return LogEndVerdict(hw, LogEndSource.FETCH_HIGH_WATERMARK,
                             f"{said}; a record at offset {last} exists, so the log end is "
                             f"the Fetch high watermark {hw}")
    return LogEndVerdict(None, LogEndSource.INCONSISTENT,
                         f"{said}; no record settles which is right")
