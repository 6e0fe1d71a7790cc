from hypothesis import given
from hypothesis import strategies as st

from opskit.core.lag import (
    compute_group_lag,
    partition_lag,
    partitions_of_interest,
    severity_for,
    worst,
)
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupState,
    LagThresholds,
    Member,
    PartitionOffsets,
    Severity,
    TopicPartition,
)

TP = TopicPartition("t", 0)


def po(start: int, end: int, tp: TopicPartition = TP) -> PartitionOffsets:
    return PartitionOffsets(tp, start, end)


def test_normal_lag_is_end_minus_committed():
    r = partition_lag(TP, 40, po(0, 100))
    assert r.lag == 60 and r.anomalies == () and r.records_lost == 0


def test_committed_beyond_log_end_is_clamped_and_flagged():
    r = partition_lag(TP, 150, po(0, 100))
    assert r.lag == 0
    assert r.anomalies == (Anomaly.COMMITTED_BEYOND_LOG_END,)


def test_committed_below_log_start_counts_lost_records():
    r = partition_lag(TP, 10, po(25, 100))
    assert r.lag == 90  # as Kafka's tool reports it
    assert r.records_lost == 15
    assert Anomaly.COMMITTED_BELOW_LOG_START in r.anomalies


def test_log_start_beyond_end_is_an_impossible_answer():
    r = partition_lag(TP, 50, po(120, 100))
    assert Anomaly.LOG_START_BEYOND_LOG_END in r.anomalies
    assert r.lag is not None and r.lag >= 0


def test_no_commit_has_unknown_lag():
    r = partition_lag(TP, None, po(0, 100))
    assert r.lag is None and r.anomalies == (Anomaly.NO_COMMITTED_OFFSET,)


def test_missing_vs_unavailable_partition():
    assert partition_lag(TP, 5, None, exists=False).anomalies == (Anomaly.PARTITION_MISSING,)
    assert partition_lag(TP, 5, None, exists=True).anomalies == (Anomaly.OFFSETS_UNAVAILABLE,)


@given(st.one_of(st.none(), st.integers(0, 10**12)), st.integers(0, 10**12), st.integers(0, 10**12))
def test_lag_is_never_negative(committed, start, end):
    r = partition_lag(TP, committed, po(start, end))
    assert r.lag is None or r.lag >= 0
    assert r.records_lost >= 0


def test_partitions_of_interest_adds_uncommitted_siblings_and_assignments():
    g = GroupDescription("g", GroupState.STABLE, (
        Member("m1", "c1", "h", (TopicPartition("b", 1),)),))
    tps = partitions_of_interest(g, {TopicPartition("a", 0): 5}, {"a": 3, "b": 2, "c": 4})
    assert tps == [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2),
                   TopicPartition("b", 0), TopicPartition("b", 1)]
    assert partitions_of_interest(g, {TopicPartition("a", 0): 5}, {"a": 3, "b": 2}, ["b"]) == [
        TopicPartition("b", 0), TopicPartition("b", 1)]


def test_group_totals_and_severity():
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    g = GroupDescription("g", GroupState.EMPTY)
    res = compute_group_lag(g, {a0: 0, a1: 50}, {a0: po(0, 150_000, a0), a1: po(0, 100, a1)},
                            {"a": 2}, LagThresholds(100_000, 1_000_000))
    assert res.total_lag == 150_050
    assert res.severity is Severity.WARNING
    assert res.topics[0].lag == 150_050 and res.topics[0].partitions == 2
    d = res.to_dict()
    assert d["partitions"][1]["lag"] == 50 and d["severity"] == "WARNING"


def test_severity_thresholds_are_strictly_greater():
    th = LagThresholds(100, 1000)
    assert severity_for(100, th) is Severity.OK
    assert severity_for(101, th) is Severity.WARNING
    assert severity_for(1000, th) is Severity.WARNING
    assert severity_for(1001, th) is Severity.CRITICAL
    assert worst([Severity.OK, Severity.CRITICAL, Severity.WARNING]) is Severity.CRITICAL


def test_thresholds_validate():
    import pytest

    with pytest.raises(ValueError):
        LagThresholds(10, 5)


def test_negative_commit_is_not_an_offset_and_makes_the_group_unknown():
    r = partition_lag(TP, -5, po(0, 100))
    assert r.committed is None and r.lag is None and r.log_end == 100
    assert r.anomalies == (Anomaly.COMMITTED_INVALID,)
    assert partition_lag(TP, -5, None, exists=True).anomalies == (
        Anomaly.OFFSETS_UNAVAILABLE, Anomaly.COMMITTED_INVALID)
    g = compute_group_lag(
        GroupDescription("g", GroupState.EMPTY, (), "consumer"),
        {TP: -5, TopicPartition("t", 1): 90}, {TP: po(0, 100), TopicPartition("t", 1): po(0, 100)},
        {"t": 2}, LagThresholds())
    assert g.total_lag == 10  # the known partition
    assert g.severity is Severity.UNKNOWN  # never OK with a partition whose lag is not known


def test_a_topic_with_an_unknown_partition_lag_counts_it_apart():
    """Its known lag is a floor (the table says "at least"); the -5 is not "no commit"."""
    g = compute_group_lag(
        GroupDescription("g", GroupState.EMPTY, (), "consumer"),
        {TP: -5, TopicPartition("t", 1): 100, TopicPartition("t", 2): None},
        {TP: po(0, 100), TopicPartition("t", 1): po(0, 100), TopicPartition("t", 2): po(0, 7)},
        {"t": 3}, LagThresholds())
    (tl,) = g.topics
    assert (tl.lag, tl.partitions, tl.partitions_lag_unknown) == (0, 3, 1)
    assert tl.partitions_without_commit == 1  # partition 2 only
