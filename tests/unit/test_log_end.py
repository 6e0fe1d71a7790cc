"""Cross-checking the log end (core.log_end) and how a disputed log end shows in a lag report."""

from __future__ import annotations

from opskit.core.lag import compute_group_lag, worst
from opskit.core.log_end import LogEndEvidence, LogEndSource, judge_log_end
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupState,
    LagThresholds,
    PartitionOffsets,
    Severity,
    TopicPartition,
)

TP = TopicPartition("t", 0)


def test_agreeing_or_unanswered_fetch_keeps_list_offsets() -> None:
    for hw in (10, None, -1):
        v = judge_log_end(LogEndEvidence(10, hw))
        assert (v.log_end, v.source, v.detail) == (10, LogEndSource.LIST_OFFSETS, "")


def test_tansu_shape_uses_the_fetch_high_watermark() -> None:
    # ListOffsets says 1 (newest batch's base offset + 1) twice; the Fetch at 1 returned
    # a batch ending at offset 9 and a high watermark of 10
    v = judge_log_end(LogEndEvidence(1, 10, last_fetched_offset=9, relisted=1))
    assert (v.log_end, v.source) == (10, LogEndSource.FETCH_HIGH_WATERMARK)
    assert "offset 9" in v.detail and "10" in v.detail


def test_records_arriving_between_reads_is_not_a_contradiction() -> None:
    v = judge_log_end(LogEndEvidence(100, 105, last_fetched_offset=104, relisted=110))
    assert (v.log_end, v.source) == (110, LogEndSource.LIST_OFFSETS)
    v = judge_log_end(LogEndEvidence(100, 105, last_fetched_offset=104, relisted=105))
    assert (v.log_end, v.source) == (105, LogEndSource.LIST_OFFSETS)


def test_truncation_between_reads_follows_the_newer_answers() -> None:
    v = judge_log_end(LogEndEvidence(100, 80, relisted=80))
    assert (v.log_end, v.source) == (80, LogEndSource.LIST_OFFSETS)


def test_contradiction_without_a_record_is_unknown() -> None:
    for ev in (LogEndEvidence(1, 10, last_fetched_offset=None, relisted=1),
               LogEndEvidence(1, 10, last_fetched_offset=0, relisted=1),  # record below the end
               LogEndEvidence(1, 10, last_fetched_offset=12, relisted=1),  # record past the HW
               LogEndEvidence(100, 80, relisted=100)):
        v = judge_log_end(ev)
        assert v.log_end is None and v.source is LogEndSource.INCONSISTENT, ev
        assert "no record settles" in v.detail


def _group() -> GroupDescription:
    return GroupDescription("g", GroupState.EMPTY)


def test_inconsistent_partition_makes_the_group_unknown_never_ok() -> None:
    tp1 = TopicPartition("t", 1)
    offs = {TP: PartitionOffsets(TP, 0, 1), tp1: PartitionOffsets(tp1, 0, 10)}
    g = compute_group_lag(_group(), {TP: 4, tp1: 7}, offs, {"t": 2}, LagThresholds(),
                          disputed={TP: Anomaly.LOG_END_INCONSISTENT})
    row = {p.tp: p for p in g.partitions}
    assert row[TP].lag is None and row[TP].log_end is None
    assert row[TP].anomalies == (Anomaly.LOG_END_INCONSISTENT,)
    assert row[tp1].lag == 3 and g.total_lag == 3
    assert g.severity is Severity.UNKNOWN and g.severity.nagios_code == 3
    # a known lag above critical stays CRITICAL
    g2 = compute_group_lag(_group(), {TP: 4, tp1: 7}, offs, {"t": 2}, LagThresholds(1, 2),
                           disputed={TP: Anomaly.LOG_END_INCONSISTENT})
    assert g2.severity is Severity.CRITICAL


def test_log_end_from_fetch_is_noted_and_counted() -> None:
    offs = {TP: PartitionOffsets(TP, 0, 10)}  # already the Fetch's log end
    g = compute_group_lag(_group(), {TP: 4}, offs, {"t": 1}, LagThresholds(),
                          disputed={TP: Anomaly.LOG_END_FROM_FETCH})
    [p] = g.partitions
    assert (p.lag, p.anomalies) == (6, (Anomaly.LOG_END_FROM_FETCH,))
    assert g.severity is Severity.OK


def test_worst_orders_unknown_between_warning_and_critical() -> None:
    assert worst([Severity.OK, Severity.UNKNOWN]) is Severity.UNKNOWN
    assert worst([Severity.WARNING, Severity.UNKNOWN]) is Severity.UNKNOWN
    assert worst([Severity.CRITICAL, Severity.UNKNOWN]) is Severity.CRITICAL
    assert worst([]) is Severity.OK
