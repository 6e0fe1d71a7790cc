"""An answer opskit could not get or could not verify is never OK (pure rules).

Committed beyond the log end, a log end the broker lost (records past it), and a health
check whose min.insync.replicas is unknown: each is UNKNOWN, never OK; a known critical
lag stays CRITICAL.
"""

from __future__ import annotations

from opskit.core.health import ClusterHealthInput, PartitionState, evaluate_health
from opskit.core.lag import compute_group_lag
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

A0, A1 = TopicPartition("a", 0), TopicPartition("a", 1)
GROUP = GroupDescription("g", GroupState.EMPTY)


def _lag(committed: dict[TopicPartition, int], ends: dict[TopicPartition, int],
         th: LagThresholds | None = None,
         disputed: dict[TopicPartition, Anomaly] | None = None):  # type: ignore[no-untyped-def]
    offs = {tp: PartitionOffsets(tp, 0, e) for tp, e in ends.items()}
    return compute_group_lag(GROUP, committed, offs, {"a": 2}, th, disputed=disputed)


def test_committed_beyond_log_end_makes_the_group_unknown() -> None:
    g = _lag({A0: 30, A1: 5}, {A0: 0, A1: 5})  # A0: a broker that lost its log end
    [p0, _p1] = g.partitions
    assert p0.lag == 0 and Anomaly.COMMITTED_BEYOND_LOG_END in p0.anomalies
    assert g.total_lag == 0
    assert g.severity is Severity.UNKNOWN  # was OK: lag 0 over a position it cannot judge


def test_committed_beyond_log_end_keeps_a_known_critical_lag_critical() -> None:
    g = _lag({A0: 30, A1: 0}, {A0: 0, A1: 50}, LagThresholds(warn=10, crit=20))
    assert g.severity is Severity.CRITICAL


def test_unreadable_log_offsets_make_the_group_unknown() -> None:
    offs = {A1: PartitionOffsets(A1, 0, 5)}  # A0's log offsets could not be read
    g = compute_group_lag(GROUP, {A0: 3, A1: 5}, offs, {"a": 2})
    assert Anomaly.OFFSETS_UNAVAILABLE in g.partitions[0].anomalies
    assert g.severity is Severity.UNKNOWN  # was OK: lag 0 over offsets nobody read


def test_within_the_log_the_severity_is_unchanged() -> None:
    assert _lag({A0: 5, A1: 5}, {A0: 5, A1: 5}).severity is Severity.OK


def test_records_past_the_reported_log_end_mean_the_log_end_was_lost() -> None:
    # Heraclitus after a restart on file storage: ListOffsets and the high watermark say
    # 0, a Fetch at 0 returns the 40 records that survived
    v = judge_log_end(LogEndEvidence(listed=0, fetch_high_watermark=0, last_fetched_offset=39))
    assert v.log_end is None and v.source is LogEndSource.RECORDS_PAST_END
    assert "lost its log end" in v.detail and "offset 39" in v.detail
    g = _lag({A0: 30}, {A0: 0}, disputed={A0: Anomaly.LOG_END_LOST})
    [p0, _] = g.partitions
    assert p0.log_end is None and p0.lag is None and p0.anomalies[0] is Anomaly.LOG_END_LOST
    assert g.severity is Severity.UNKNOWN


def test_apache_log_end_with_nothing_past_it_is_trusted() -> None:
    # Kafka never returns a record at or past the high watermark: no record, no doubt
    v = judge_log_end(LogEndEvidence(listed=40, fetch_high_watermark=40))
    assert v.log_end == 40 and v.source is LogEndSource.LIST_OFFSETS and not v.detail


def _health(isr: tuple[int, ...], why: str | None):  # type: ignore[no-untyped-def]
    p = PartitionState("t", 0, 1, (1, 2, 3), isr)
    return evaluate_health(ClusterHealthInput(
        brokers=(1, 2, 3), controller_id=1, partitions=(p,), min_isr={},
        quorum=None, quorum_error="n/a", reassignments=(), reassignments_error=None,
        min_isr_unknown=why))


def test_health_with_min_isr_unknown_is_unknown_for_a_shrunk_isr() -> None:
    why = "min.insync.replicas not readable: the broker closed the connection on DescribeConfigs"
    f = {x.check: x for x in _health((1, 2), why).findings}
    assert f["under_min_isr"].severity is Severity.UNKNOWN
    assert "t:0" in f["under_min_isr"].message and "DescribeConfigs" in f["under_min_isr"].message
    # read: a shrunk ISR above min.insync.replicas (1) is a WARNING (under-replicated) only
    f = {x.check: x for x in _health((1, 2), None).findings}
    assert f["under_min_isr"].severity is Severity.OK
