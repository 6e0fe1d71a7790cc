"""Group status over a window of samples (opskit.core.status), rule by rule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.core.lag import compute_group_lag
from opskit.core.models import (
    GroupDescription,
    GroupState,
    LagThresholds,
    PartitionOffsets,
    Severity,
    TopicPartition,
)
from opskit.core.status.evaluate import evaluate_group, evaluate_partition
from opskit.core.status.rank import Status, status_severity, worst_severity, worst_status
from opskit.core.status.window import GroupWindow, OffsetSample, PartitionWindow, StatusPolicy
from opskit.errors import InvalidInputError

TP = TopicPartition("events_plugin_ingestion", 0)
TP1 = TopicPartition("events_plugin_ingestion", 1)
MIN = 60_000
POLICY = StatusPolicy()  # 10m window, trends need 2 samples over >= 5m, allowed lag 0


def sample(
    minute: float, committed: int | None, log_end: int, log_start: int | None = None
) -> OffsetSample:
    return OffsetSample(int(minute * MIN), committed, log_end, log_start)


def window(
    rows: list[tuple[float, int | None, int]], since_ms: int | None = None
) -> PartitionWindow:
    return PartitionWindow(TP, tuple(sample(*r) for r in rows), since_ms)


def fed(
    rows: list[tuple[float, int | None, int]], policy: StatusPolicy = POLICY
) -> PartitionWindow:
    """A window built the way the collector builds it, with memory across evictions."""
    w = PartitionWindow(TP)
    for r in rows:
        w = w.add(sample(*r), policy)
    return w


def now_of(w: PartitionWindow) -> int:
    assert w.latest is not None
    return w.latest.timestamp_ms


def status_of(w: PartitionWindow, policy: StatusPolicy = POLICY) -> Status:
    return evaluate_partition(w, policy, now_of(w)).status


# ------------------------------------------------------------------ severity mapping


def test_status_severity_mapping_and_nagios_codes() -> None:
    expected = {
        Status.OK: (Severity.OK, 0),
        Status.WARN: (Severity.WARNING, 1),
        Status.REWIND: (Severity.WARNING, 1),
        Status.STOP: (Severity.WARNING, 1),
        Status.STALL: (Severity.CRITICAL, 2),
        Status.ERR: (Severity.CRITICAL, 2),
        Status.UNKNOWN: (Severity.UNKNOWN, 3),
    }
    for status, (sev, code) in expected.items():
        assert status_severity(status) is sev
        assert status.severity.nagios_code == code


def test_worst_status_and_severity_orders() -> None:
    assert worst_status([Status.OK, Status.STOP, Status.WARN]) is Status.STOP
    assert worst_status([Status.STALL, Status.ERR, Status.REWIND]) is Status.ERR
    assert worst_status([Status.OK, Status.UNKNOWN]) is Status.UNKNOWN
    assert worst_status([]) is Status.OK
    assert worst_severity([Severity.OK, Severity.UNKNOWN]) is Severity.UNKNOWN
    assert worst_severity([Severity.UNKNOWN, Severity.WARNING]) is Severity.WARNING
    assert worst_severity([Severity.CRITICAL, Severity.WARNING]) is Severity.CRITICAL


# ------------------------------------------------------------------ UNKNOWN


def test_unknown_without_samples() -> None:
    st_ = evaluate_partition(PartitionWindow(TP), POLICY, 10 * MIN)
    assert st_.status is Status.UNKNOWN
    assert "no samples" in st_.explanation


def test_samples_older_than_window_are_ignored_but_not_those_at_the_edge() -> None:
    w = window([(0, 10, 10)])
    assert evaluate_partition(w, POLICY, 10 * MIN + 1).status is Status.UNKNOWN
    assert evaluate_partition(w, POLICY, 10 * MIN).status is Status.OK


def test_unknown_without_committed_offset_when_records_are_readable() -> None:
    w = PartitionWindow(TP, (sample(0, None, 500, 100),))
    result = evaluate_partition(w, POLICY, 0)
    assert result.status is Status.UNKNOWN
    assert "no committed offset" in result.explanation and "400 records" in result.explanation


def test_no_committed_offset_on_an_empty_partition_is_ok() -> None:
    w = PartitionWindow(TP, (sample(0, None, 100, 100),))
    assert evaluate_partition(w, POLICY, 0).status is Status.OK


# ------------------------------------------------------------------ ERR: records lost


def test_err_when_committed_below_log_start() -> None:
    w = PartitionWindow(TP, (sample(0, 100, 1_000, 400),))
    result = evaluate_partition(w, POLICY, 0)
    assert result.status is Status.ERR
    assert result.records_lost == 300
    assert "300 records" in result.explanation and "retention" in result.explanation


def test_err_when_records_were_lost_earlier_in_the_window() -> None:
    w = PartitionWindow(TP, (sample(0, 100, 1_000, 400), sample(1, 400, 1_000, 400)))
    result = evaluate_partition(w, POLICY, MIN)
    assert result.status is Status.ERR
    assert result.records_lost == 300
    assert "before the latest sample" in result.explanation


def test_committed_at_log_start_is_not_a_loss() -> None:
    w = PartitionWindow(TP, (sample(0, 400, 400, 400),))
    result = evaluate_partition(w, POLICY, 0)
    assert result.status is Status.OK
    assert result.records_lost == 0


# ------------------------------------------------------------------ OK: allowed lag


GROWING_LAG = [(m, 100 * m, 100 * m + 50 + 5 * m) for m in range(11)]  # lag 50, 55, ..., 100


def test_ok_when_latest_lag_within_allowed_even_if_it_grew() -> None:
    result = evaluate_partition(window(GROWING_LAG), StatusPolicy(allowed_lag=100), 10 * MIN)
    assert result.status is Status.OK
    assert result.lag == 100
    assert "within allowed 100" in result.explanation


def test_near_miss_allowed_lag_just_below_is_warn() -> None:
    assert status_of(window(GROWING_LAG), StatusPolicy(allowed_lag=99)) is Status.OK  # once <= 99
    assert status_of(window(GROWING_LAG), StatusPolicy(allowed_lag=49)) is Status.WARN


def test_committed_beyond_log_end_is_unknown_with_lag_zero() -> None:
    # a position past the log end is never OK: the broker may have lost its log end (a
    # restart of a broker that keeps it in memory), the log may have been truncated
    w = window([(0, 600, 500)])
    result = evaluate_partition(w, POLICY, 0)
    assert result.status is Status.UNKNOWN and result.severity is Severity.UNKNOWN
    assert result.lag == 0
    assert "past log end" in result.explanation and "lost its log end" in result.explanation


# ------------------------------------------------------------------ REWIND


def test_rewind_when_committed_goes_backwards() -> None:
    rows = [(0, 5_000, 6_000), (1, 5_500, 6_100), (2, 1_000, 6_200), (3, 1_200, 6_300)]
    result = evaluate_partition(window(rows), POLICY, 3 * MIN)
    assert result.status is Status.REWIND
    assert "went back from 5,500 to 1,000" in result.explanation
    assert "4,500 records to re-read" in result.explanation


def test_near_miss_equal_commits_are_not_a_rewind() -> None:
    rows = [(0, 5_000, 6_000), (1, 5_000, 6_000), (2, 5_000, 6_000)]
    assert status_of(window(rows)) is not Status.REWIND


def test_rewind_that_caught_up_is_ok_with_a_note() -> None:
    rows = [(0, 5_000, 6_000), (1, 1_000, 6_000), (2, 6_000, 6_000)]
    result = evaluate_partition(window(rows), POLICY, 2 * MIN)
    assert result.status is Status.OK
    assert "went back" in result.explanation


# ------------------------------------------------------------------ not enough history


def test_single_sample_with_lag_is_ok_but_incomplete() -> None:
    result = evaluate_partition(window([(0, 0, 5_000_000)]), POLICY, 0)
    assert result.status is Status.OK
    assert result.complete is False
    assert "trend unknown" in result.explanation


def test_stall_pattern_over_too_short_a_span_is_not_stall() -> None:
    rows = [(m, 100, 200 + 100 * m) for m in range(5)]  # 4 minutes < 5m min span
    result = evaluate_partition(window(rows), POLICY, 4 * MIN)
    assert result.status is Status.OK
    assert result.complete is False


# ------------------------------------------------------------------ STALL


STALL_ROWS = [(m, 100, 200 + 100 * m) for m in range(11)]  # commits stuck, log end grows


def test_stall_when_commits_stuck_and_log_end_grows() -> None:
    result = evaluate_partition(window(STALL_ROWS), POLICY, 10 * MIN)
    assert result.status is Status.STALL
    assert result.complete is True
    assert result.explanation == (
        "committed offset stuck at 100 for 10m while log end grew from 200 to 1,200; "
        "lag grew from 100 to 1,100"
    )


def test_stall_also_with_window_memory() -> None:
    assert status_of(fed(STALL_ROWS)) is Status.STALL


def test_near_miss_no_stall_when_lag_was_zero_in_window() -> None:
    rows = [(0, 100, 100)] + STALL_ROWS[1:]
    assert status_of(window(rows)) is Status.OK


def test_near_miss_no_stall_when_log_end_does_not_move() -> None:
    rows = [(m, 100, 500) for m in range(11)]
    assert status_of(window(rows)) is Status.OK


# ------------------------------------------------------------------ STOP


STOP_ROWS = [(m, 100, 500) for m in range(12)]  # committed unchanged for 11m, window 10m


def test_stop_when_committed_unchanged_for_longer_than_the_window() -> None:
    w = fed(STOP_ROWS)
    assert w.committed_since_ms == 0
    assert w.samples[0].timestamp_ms == MIN  # minute 0 was evicted, its memory was not
    result = evaluate_partition(w, POLICY, now_of(w))
    assert result.status is Status.STOP
    assert "unchanged for 11m" in result.explanation
    assert "log end 500 not moving" in result.explanation


def test_near_miss_no_stop_without_window_memory() -> None:
    # the same in-window samples, but nothing remembers minute 0
    w = window(STOP_ROWS[1:])
    assert status_of(w) is Status.OK


def test_near_miss_no_stop_when_committed_changed_inside_window() -> None:
    rows = STOP_ROWS[:5] + [(m, 101, 500) for m in range(5, 12)]
    assert status_of(fed(rows)) is Status.OK


def test_near_miss_no_stop_at_the_head() -> None:
    rows = [(m, 500, 500) for m in range(12)]
    assert status_of(fed(rows)) is Status.OK


def test_stop_when_consumer_stopped_at_head_and_data_arrived() -> None:
    # lag was 0 in the window, so not STALL; but nothing moved for > window
    rows = [(m, 500, 500) for m in range(8)] + [(m, 500, 500 + 10 * m) for m in range(8, 12)]
    result = evaluate_partition(fed(rows), POLICY, 11 * MIN)
    assert result.status is Status.STOP
    assert "log end grew" in result.explanation


def test_collection_gap_does_not_look_like_stop() -> None:
    # evaluated long after the latest sample, but still inside the window
    w = window([(m, 100 + m, 500) for m in range(6)])
    assert evaluate_partition(w, POLICY, 14 * MIN).status is Status.OK


# ------------------------------------------------------------------ WARN


WARN_ROWS = [(m, 1_000 * m, 1_000 + 1_200 * m) for m in range(11)]  # lag 1,000 -> 3,000


def test_warn_when_lag_never_decreases_while_commits_advance() -> None:
    result = evaluate_partition(window(WARN_ROWS), POLICY, 10 * MIN)
    assert result.status is Status.WARN
    assert result.explanation == (
        "lag grew from 1,000 to 3,000 over 10m while commits advanced 10,000 "
        "(consumer slower than producers)"
    )


def test_near_miss_one_decrease_in_lag_is_not_warn() -> None:
    rows = list(WARN_ROWS)
    rows[5] = (5, 5_000 + 300, 1_000 + 1_200 * 5)  # consumer briefly ahead: lag dips
    assert status_of(window(rows)) is Status.OK


def test_near_miss_constant_lag_is_not_warn() -> None:
    rows = [(m, 1_000 * m, 1_000 * m + 500) for m in range(11)]
    result = evaluate_partition(window(rows), POLICY, 10 * MIN)
    assert result.status is Status.OK
    assert "commits advanced 10,000" in result.explanation


# ------------------------------------------------------------------ group


def group_window(*windows: PartitionWindow) -> GroupWindow:
    return GroupWindow("analytics-ingest", tuple(windows))


def test_group_status_is_worst_partition_and_severity_follows() -> None:
    ok = PartitionWindow(TP1, tuple(sample(m, 10 * m, 10 * m) for m in range(11)))
    gw = group_window(window(STALL_ROWS), ok)
    result = evaluate_group(gw, POLICY, 10 * MIN)
    assert result.status is Status.STALL
    assert result.severity is Severity.CRITICAL
    assert result.severity.nagios_code == 2
    assert any("STALL" in r for r in result.reasons)
    assert [p.tp for p in result.partitions] == [TP, TP1]


def test_group_severity_from_hip30_thresholds_when_statuses_are_ok() -> None:
    # lag 150k everywhere, constant: every partition OK, total above 100k warn
    rows = [(m, 1_000 * m, 1_000 * m + 150_000) for m in range(11)]
    result = evaluate_group(group_window(window(rows)), POLICY, 10 * MIN)
    assert result.status is Status.OK
    assert result.lag_severity is Severity.WARNING
    assert result.severity is Severity.WARNING
    assert result.reasons[0] == "total lag 150,000 > warning 100,000 messages"


def test_group_severity_from_group_lag_of_compute_group_lag() -> None:
    desc = GroupDescription("billing-agg", GroupState.STABLE)
    gl = compute_group_lag(
        desc,
        {TP: 0},
        {TP: PartitionOffsets(TP, 0, 2_000_000)},
        {TP.topic: 1},
        LagThresholds(),
    )
    rows = [(m, 0, 500) for m in range(11)]
    result = evaluate_group(
        GroupWindow("billing-agg", (window(rows),)), POLICY, 10 * MIN, group_lag=gl
    )
    assert result.total_lag == 2_000_000
    assert result.lag_severity is Severity.CRITICAL
    assert result.severity is Severity.CRITICAL


def test_stop_becomes_err_when_group_lag_is_critical() -> None:
    rows = [(m, 100, 2_000_000) for m in range(12)]
    result = evaluate_group(group_window(fed(rows)), POLICY, 11 * MIN)
    assert result.partitions[0].status is Status.ERR
    assert result.partitions[0].explanation.endswith("the group is critical")
    assert result.status is Status.ERR


def test_near_miss_stop_stays_stop_when_group_is_not_critical() -> None:
    result = evaluate_group(group_window(fed(STOP_ROWS)), POLICY, 11 * MIN)
    assert result.partitions[0].status is Status.STOP
    assert result.severity is Severity.WARNING


def test_stop_becomes_err_when_lag_seconds_objective_is_critical() -> None:
    policy = StatusPolicy(lag_seconds_warn=300, lag_seconds_crit=900)
    gw = group_window(fed(STOP_ROWS, policy))
    result = evaluate_group(gw, policy, 11 * MIN, lag_seconds={TP: 901.0})
    assert result.partitions[0].status is Status.ERR
    assert result.partitions[0].lag_seconds == 901.0
    assert result.lag_seconds_severity is Severity.CRITICAL
    at_limit = evaluate_group(gw, policy, 11 * MIN, lag_seconds={TP: 900.0})
    assert at_limit.partitions[0].status is Status.STOP
    assert at_limit.lag_seconds_severity is Severity.WARNING


def test_lag_seconds_warn_objective() -> None:
    policy = StatusPolicy(lag_seconds_warn=60)
    ok = window([(m, 10 * m, 10 * m) for m in range(11)])
    result = evaluate_group(group_window(ok), policy, 10 * MIN, lag_seconds={TP: 61.0, TP1: None})
    assert result.status is Status.OK
    assert result.severity is Severity.WARNING
    assert result.max_lag_seconds == 61.0
    assert "lag on events_plugin_ingestion:0 is 1m01s > warning 1m" in result.reasons
    nan = evaluate_group(group_window(ok), policy, 10 * MIN, lag_seconds={TP: float("nan")})
    assert nan.max_lag_seconds is None and nan.severity is Severity.OK


def test_unknown_partition_makes_group_unknown_only_when_nothing_is_worse() -> None:
    unknown = PartitionWindow(TP1, (sample(10, None, 500, 0),))
    ok = window([(m, 10 * m, 10 * m) for m in range(11)])
    assert evaluate_group(group_window(ok, unknown), POLICY, 10 * MIN).severity is Severity.UNKNOWN
    warn = window(WARN_ROWS)
    assert (
        evaluate_group(group_window(warn, unknown), POLICY, 10 * MIN).severity is Severity.WARNING
    )


def test_empty_group_window_is_unknown() -> None:
    result = evaluate_group(GroupWindow("audit-archive"), POLICY, 0)
    assert result.status is Status.UNKNOWN
    assert result.severity is Severity.UNKNOWN
    assert result.to_dict()["severity"] == "UNKNOWN"


# ------------------------------------------------------------------ windows


def test_add_drops_samples_older_than_window_and_beyond_max() -> None:
    policy = StatusPolicy(window_ms=10 * MIN, max_samples=5, min_samples=2)
    w = PartitionWindow(TP)
    for m in range(20):
        w = w.add(sample(m, m, m + 1), policy)
    assert [s.timestamp_ms // MIN for s in w.samples] == [15, 16, 17, 18, 19]
    w2 = PartitionWindow(TP)
    for m in (0, 1, 2, 30):
        w2 = w2.add(sample(m, m, m + 1), policy)
    assert [s.timestamp_ms // MIN for s in w2.samples] == [30]


def test_add_ignores_samples_not_newer_than_latest() -> None:
    w = fed([(1, 5, 5)])
    assert w.add(sample(1, 9, 9), POLICY) is w
    assert w.add(sample(0, 9, 9), POLICY) is w


def test_committed_since_tracks_changes_and_resets_on_missing_offset() -> None:
    w = fed([(0, 5, 5), (1, 5, 6), (2, 7, 8), (3, 7, 9)])
    assert w.committed_since_ms == 2 * MIN
    w = w.add(sample(4, None, 9), POLICY)
    assert w.committed_since_ms is None
    w = w.add(sample(5, 7, 9), POLICY)
    assert w.committed_since_ms == 5 * MIN


def test_window_rejects_unordered_samples() -> None:
    with pytest.raises(ValueError):
        PartitionWindow(TP, (sample(1, 0, 0), sample(1, 0, 0)))


def test_group_window_drops_partitions_without_recent_samples() -> None:
    gw = GroupWindow("g").observe(0, {TP: sample(0, 0, 0), TP1: sample(0, 0, 0)}, POLICY)
    assert [w.tp for w in gw.partitions] == [TP, TP1]
    gw = gw.observe(5 * MIN, {TP: sample(5, 1, 1)}, POLICY)
    assert [w.tp for w in gw.partitions] == [TP, TP1]
    gw = gw.observe(11 * MIN, {TP: sample(11, 2, 2)}, POLICY)
    assert [w.tp for w in gw.partitions] == [TP]
    assert gw.window_for(TP1) is None


def test_round_trips() -> None:
    gw = GroupWindow("g").observe(0, {TP: sample(0, 3, 9, 1), TP1: sample(0, None, 4)}, POLICY)
    assert GroupWindow.from_dict(gw.to_dict()) == gw
    policy = StatusPolicy(allowed_lag=5, thresholds=LagThresholds(10, 20), lag_seconds_crit=60)
    assert StatusPolicy.from_dict(policy.to_dict()) == policy
    assert StatusPolicy.from_dict({}) == StatusPolicy()


@pytest.mark.parametrize(
    "bad",
    [
        {"group": "g", "partitions": [{"topic": "t", "partition": "0", "samples": []}]},
        {"group": "g", "partitions": [{"topic": "t", "partition": 0, "samples": [{"log_end": 1}]}]},
        {
            "group": "g",
            "partitions": [
                {
                    "topic": "t",
                    "partition": 0,
                    "samples": [
                        {"timestamp_ms": 2, "committed": 0, "log_end": 0},
                        {"timestamp_ms": 1, "committed": 0, "log_end": 0},
                    ],
                }
            ],
        },
        {"partitions": []},
    ],
)
def test_from_dict_rejects_bad_state(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        GroupWindow.from_dict(bad)


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        StatusPolicy(min_span_ms=20 * MIN)
    with pytest.raises(ValueError):
        StatusPolicy(lag_seconds_warn=100, lag_seconds_crit=10)
    with pytest.raises(ValueError):
        StatusPolicy(max_samples=1)
    with pytest.raises(InvalidInputError):
        StatusPolicy.from_dict({"allowed_lag": -1})


# ------------------------------------------------------------------ properties

offsets = st.integers(min_value=0, max_value=10**12)
raw_samples = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=120_000),  # gap to previous sample, ms
        st.one_of(st.none(), offsets),
        offsets,
        st.one_of(st.none(), offsets),
    ),
    max_size=40,
)


def build(
    rows: list[tuple[int, int | None, int, int | None]], policy: StatusPolicy
) -> PartitionWindow:
    w, t = PartitionWindow(TP), 0
    for gap, committed, log_end, log_start in rows:
        t += gap
        w = w.add(OffsetSample(t, committed, log_end, log_start), policy)
    return w


policies = st.builds(
    StatusPolicy,
    window_ms=st.just(10 * MIN),
    max_samples=st.integers(min_value=2, max_value=30),
    allowed_lag=st.integers(min_value=0, max_value=1_000),
    min_samples=st.just(2),
    min_span_ms=st.integers(min_value=0, max_value=10 * MIN),
)


@settings(max_examples=300)
@given(rows=raw_samples, policy=policies, extra=st.integers(min_value=0, max_value=20 * MIN))
def test_property_window_is_bounded_and_evaluation_is_total(
    rows: list[tuple[int, int | None, int, int | None]], policy: StatusPolicy, extra: int
) -> None:
    w = build(rows, policy)
    assert len(w.samples) <= policy.max_samples
    if w.latest is not None:
        assert all(w.latest.timestamp_ms - s.timestamp_ms <= policy.window_ms for s in w.samples)
        now = w.latest.timestamp_ms + extra
    else:
        now = extra
    result = evaluate_partition(w, policy, now)
    assert result.lag is None or result.lag >= 0
    assert result.records_lost >= 0
    assert result.samples <= len(w.samples)
    if result.status in (Status.STALL, Status.STOP, Status.WARN):
        assert result.complete
    latest = w.latest
    if (
        latest is not None
        and now - latest.timestamp_ms <= policy.window_ms
        and latest.lag is not None
        and latest.lag <= policy.allowed_lag
        and latest.committed is not None and latest.committed <= latest.log_end
        and all(s.records_lost == 0 for s in w.samples if s.timestamp_ms >= now - policy.window_ms)
    ):
        assert result.status is Status.OK


@settings(max_examples=100)
@given(
    rounds=st.lists(
        st.dictionaries(st.integers(min_value=0, max_value=7), offsets, max_size=8), max_size=40
    ),
    step=st.integers(min_value=1, max_value=5 * MIN),
)
def test_property_group_window_memory_is_bounded(rounds: list[dict[int, int]], step: int) -> None:
    policy = StatusPolicy(max_samples=4, min_samples=2)
    gw, now = GroupWindow("g"), 0
    for r in rounds:
        now += step
        gw = gw.observe(
            now, {TopicPartition("t", p): OffsetSample(now, o, o) for p, o in r.items()}, policy
        )
        assert len(gw.partitions) <= 8
        assert all(1 <= len(w.samples) <= policy.max_samples for w in gw.partitions)
        assert all(
            now - s.timestamp_ms <= policy.window_ms for w in gw.partitions for s in w.samples
        )
    result = evaluate_group(gw, policy, now)
    assert result.total_lag >= 0
