"""Lag in time, rates, catch-up ETA and retention risk (opskit.core.timing)."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from opskit.core.status.window import OffsetSample
from opskit.core.timing.lag_time import Confidence, LagTimeBasis, lag_seconds, partition_lag_time
from opskit.core.timing.rates import (
    CatchUpState,
    catch_up_eta,
    consume_rate,
    offset_rate,
    produce_rate,
)
from opskit.core.timing.retention import RetentionBasis, retention_risk
from opskit.core.timing.timeline import OffsetTimeline, TimelinePoint
from opskit.errors import InvalidInputError

S = 1_000
MIN = 60 * S
HOUR = 60 * MIN
DAY = 24 * HOUR
NOW = 1_700_000_000_000


def timeline(*points: tuple[int, int]) -> OffsetTimeline:
    """Points as (timestamp_ms, log_end)."""
    tl = OffsetTimeline()
    for t, o in points:
        tl = tl.add(o, t)
    return tl


# ------------------------------------------------------------------ lag_seconds


def test_lag_seconds_is_age_of_record() -> None:
    lt = lag_seconds(NOW, NOW - 90 * S)
    assert lt.seconds == 90.0
    assert lt.basis is LagTimeBasis.COMMITTED_RECORD
    assert lt.confidence is Confidence.EXACT
    assert (lt.min_seconds, lt.max_seconds) == (90.0, 90.0)
    assert not lt.clock_skew


def test_future_timestamp_is_clamped_and_flagged_as_clock_skew() -> None:
    lt = lag_seconds(NOW, NOW + 5 * S)
    assert lt.seconds == 0.0
    assert lt.clock_skew_ms == 5 * S
    assert lt.clock_skew
    assert lag_seconds(NOW, NOW).clock_skew is False


def test_lag_seconds_refuses_missing_timestamp() -> None:
    with pytest.raises(ValueError):
        lag_seconds(NOW, -1)


# ------------------------------------------------------------------ partition_lag_time


def test_no_commit_is_unknown() -> None:
    lt = partition_lag_time(NOW, committed=None, log_start=0, log_end=10)
    assert lt.seconds is None and lt.basis is LagTimeBasis.UNKNOWN


@pytest.mark.parametrize("committed", [10, 11])
def test_no_lag_gives_none(committed: int) -> None:
    lt = partition_lag_time(
        NOW, committed=committed, log_start=0, log_end=10, committed_record_ts_ms=0
    )
    assert lt.seconds is None
    assert lt.basis is LagTimeBasis.NO_LAG


def test_exact_from_committed_record() -> None:
    lt = partition_lag_time(
        NOW, committed=5, log_start=0, log_end=10, committed_record_ts_ms=NOW - 30 * S
    )
    assert lt.seconds == 30.0 and lt.confidence is Confidence.EXACT


def test_committed_below_log_start_uses_log_start_record_as_lower_bound() -> None:
    lt = partition_lag_time(
        NOW,
        committed=5,
        log_start=100,
        log_end=200,
        committed_record_ts_ms=NOW - HOUR,  # ignored: that record is gone
        log_start_record_ts_ms=NOW - 2 * DAY,
    )
    assert lt.seconds == 2 * DAY / S
    assert lt.basis is LagTimeBasis.LOG_START_RECORD
    assert lt.confidence is Confidence.LOWER_BOUND
    assert lt.max_seconds is None


def test_committed_below_log_start_with_timeline_is_lower_bound() -> None:
    tl = timeline((NOW - 10 * MIN, 100), (NOW - 5 * MIN, 200))
    lt = partition_lag_time(NOW, committed=5, log_start=150, log_end=200, timeline=tl)
    assert lt.confidence is Confidence.LOWER_BOUND
    assert lt.seconds is not None and 5 * 60 <= lt.seconds <= 10 * 60


def test_everything_unconsumed_deleted_leaves_no_lag_in_time() -> None:
    lt = partition_lag_time(NOW, committed=5, log_start=100, log_end=100)
    assert lt.basis is LagTimeBasis.NO_LAG and lt.seconds is None


def test_interpolated_estimate_with_bounds() -> None:
    tl = timeline((NOW - 20 * MIN, 0), (NOW - 10 * MIN, 1_000), (NOW, 2_000))
    lt = partition_lag_time(NOW, committed=499, log_start=0, log_end=2_000, timeline=tl)
    assert lt.basis is LagTimeBasis.INTERPOLATED
    assert lt.confidence is Confidence.ESTIMATE
    # record 499 appended half-way between -20m and -10m
    assert lt.seconds == 15 * 60
    assert (lt.min_seconds, lt.max_seconds) == (10 * 60, 20 * 60)


def test_no_absurd_estimate_after_idle_period() -> None:
    # topic idle at offset 500 for 6 hours, consumer at 500; then a burst of 100
    points = [(NOW - 6 * HOUR + i * 30 * S, 500) for i in range(6 * 120)]
    tl = timeline(*points, (NOW, 600))
    assert len(tl.points) == 3  # the plateau costs two points
    lt = partition_lag_time(NOW, committed=500, log_start=0, log_end=600, timeline=tl)
    assert lt.seconds is not None and lt.seconds <= 30
    assert lt.max_seconds == 30


def test_committed_older_than_history_is_a_lower_bound_not_an_extrapolation() -> None:
    tl = timeline((NOW - 30 * MIN, 10_000), (NOW, 20_000))
    lt = partition_lag_time(
        NOW, committed=0, log_start=0, log_end=20_000, timeline=tl, log_start_record_ts_ms=NOW - DAY
    )
    assert lt.basis is LagTimeBasis.HISTORY_START
    assert lt.confidence is Confidence.LOWER_BOUND
    assert lt.seconds == 30 * 60
    assert lt.max_seconds == DAY / S


def test_timeline_missing_latest_point_uses_log_end_now() -> None:
    tl = timeline((NOW - 2 * MIN, 100), (NOW - MIN, 100))
    lt = partition_lag_time(NOW, committed=100, log_start=0, log_end=101, timeline=tl)
    assert lt.basis is LagTimeBasis.INTERPOLATED
    assert lt.seconds is not None and 0 <= lt.seconds <= 60


def test_missing_record_timestamp_falls_back_to_timeline_or_unknown() -> None:
    tl = timeline((NOW - 10 * MIN, 0), (NOW, 1_000))
    lt = partition_lag_time(
        NOW, committed=0, log_start=0, log_end=1_000, committed_record_ts_ms=-1, timeline=tl
    )
    assert lt.basis is LagTimeBasis.INTERPOLATED
    assert (
        partition_lag_time(NOW, committed=0, log_start=0, log_end=1).basis is LagTimeBasis.UNKNOWN
    )


# ------------------------------------------------------------------ timeline


def test_timeline_rules() -> None:
    tl = timeline((1, 10), (2, 10), (3, 10), (4, 12))
    assert tl.points == (TimelinePoint(1, 10), TimelinePoint(3, 10), TimelinePoint(4, 12))
    assert tl.add(13, 4) is tl  # not newer: ignored
    assert tl.add(5, 5).points == (TimelinePoint(5, 5),)  # truncation: restart
    small = OffsetTimeline(max_points=3)
    for t in range(10):
        small = small.add(t * 10, t)
    assert [p.timestamp_ms for p in small.points] == [7, 8, 9]


def test_append_time_edges() -> None:
    tl = timeline((100, 10), (200, 20))
    assert tl.append_time(20) is None  # not appended yet
    assert OffsetTimeline().append_time(0) is None
    before = tl.append_time(3)
    assert before is not None and before.after_ms is None and before.at_or_before_ms == 100
    at = tl.append_time(10)
    assert at is not None and (at.after_ms, at.at_or_before_ms, at.estimate_ms) == (100, 200, 110)


def test_timeline_round_trip_and_validation() -> None:
    tl = timeline((1, 10), (2, 11))
    assert OffsetTimeline.from_dict(tl.to_dict()) == tl
    with pytest.raises(InvalidInputError):
        OffsetTimeline.from_dict({"points": [[2, 10], [1, 11]]})
    with pytest.raises(InvalidInputError):
        OffsetTimeline.from_dict({"points": [[1, "x"]]})
    with pytest.raises(ValueError):
        OffsetTimeline(max_points=1)


# ------------------------------------------------------------------ rates


def test_offset_rate() -> None:
    r = offset_rate([(0, 0), (10 * S, 500), (20 * S, 1_000)])
    assert r.per_second == 50.0 and r.span_ms == 20 * S and r.points == 3 and not r.reset
    assert offset_rate([(0, 5)]).per_second is None
    assert offset_rate([]).per_second is None


def test_offset_rate_uses_points_after_last_fall() -> None:
    r = offset_rate([(0, 1_000), (10 * S, 2_000), (20 * S, 100), (30 * S, 400)])
    assert r.reset and r.points == 2 and r.per_second == 30.0


def test_produce_and_consume_rates_from_samples() -> None:
    samples = [
        OffsetSample(0, None, 1_000),
        OffsetSample(10 * S, 0, 2_000),
        OffsetSample(20 * S, 300, 3_000),
    ]
    assert produce_rate(samples).per_second == 100.0
    assert consume_rate(samples).per_second == 30.0


# ------------------------------------------------------------------ catch-up


def test_catch_up_eta() -> None:
    c = catch_up_eta(1_000, consume_rate=150.0, produce_rate=50.0)
    assert c.state is CatchUpState.CATCHING_UP and c.eta_seconds == 10.0 and c.net_rate == 100.0


@pytest.mark.parametrize("consume", [50.0, 10.0, 0.0])
def test_falling_behind_when_consume_not_above_produce(consume: float) -> None:
    c = catch_up_eta(1_000, consume_rate=consume, produce_rate=50.0)
    assert c.state is CatchUpState.FALLING_BEHIND and c.eta_seconds is None


def test_caught_up_and_unknown() -> None:
    assert catch_up_eta(0, None, None).eta_seconds == 0.0
    assert catch_up_eta(0, 1.0, 5.0).state is CatchUpState.CAUGHT_UP
    assert catch_up_eta(5, None, 1.0).state is CatchUpState.UNKNOWN
    assert catch_up_eta(5, math.nan, 1.0).state is CatchUpState.UNKNOWN
    with pytest.raises(ValueError):
        catch_up_eta(-1, 1.0, 0.0)
    with pytest.raises(ValueError):
        catch_up_eta(1, -1.0, 0.0)


# ------------------------------------------------------------------ retention


def test_time_left_under_retention_ms_is_a_lower_bound() -> None:
    r = retention_risk(
        NOW,
        retention_ms=7 * DAY,
        retention_bytes=-1,
        committed=100,
        log_start=0,
        log_end=200,
        oldest_unconsumed_ts_ms=NOW - 5 * DAY,
    )
    assert r.basis is RetentionBasis.TIME
    assert r.time_left_seconds == 2 * DAY / S
    assert r.confidence is Confidence.LOWER_BOUND
    assert not r.eligible_now and r.records_lost == 0
    assert any("lower bound" in n and "segments" in n for n in r.notes)


def test_estimated_timestamp_gives_estimate() -> None:
    r = retention_risk(
        NOW, retention_ms=DAY, retention_bytes=-1, committed=1, log_start=0, log_end=2,
        oldest_unconsumed_ts_ms=NOW, timestamp_confidence=Confidence.ESTIMATE,
    )  # fmt: skip
    assert r.confidence is Confidence.ESTIMATE


def test_expired_record_is_eligible_now_with_zero_time_left() -> None:
    r = retention_risk(
        NOW, retention_ms=DAY, retention_bytes=-1, committed=1, log_start=0, log_end=2,
        oldest_unconsumed_ts_ms=NOW - 2 * DAY,
    )  # fmt: skip
    assert r.time_left_seconds == 0.0 and r.eligible_now


def test_records_already_lost() -> None:
    r = retention_risk(
        NOW, retention_ms=DAY, retention_bytes=-1, committed=10, log_start=250, log_end=300,
        oldest_unconsumed_ts_ms=NOW - HOUR,
    )  # fmt: skip
    assert r.records_lost == 240
    assert r.time_left_seconds == 23 * HOUR / S


def test_unlimited_retention_and_no_lag() -> None:
    r = retention_risk(
        NOW, retention_ms=-1, retention_bytes=-1, committed=1, log_start=0, log_end=2,
        oldest_unconsumed_ts_ms=0,
    )  # fmt: skip
    assert r.basis is RetentionBasis.UNLIMITED and r.time_left_seconds is None
    r2 = retention_risk(
        NOW, retention_ms=DAY, retention_bytes=-1, committed=2, log_start=0, log_end=2
    )
    assert r2.basis is RetentionBasis.NO_LAG and r2.time_left_seconds is None


def test_bytes_rule_wins_when_sooner() -> None:
    # 1,000 records of 1 KB; 600 unconsumed = 600 KB; retention.bytes 1 MB; 1 KB/s in
    r = retention_risk(
        NOW, retention_ms=7 * DAY, retention_bytes=1_000_000, committed=400, log_start=0,
        log_end=1_000, oldest_unconsumed_ts_ms=NOW - HOUR, partition_size_bytes=1_000_000,
        produce_bytes_per_second=1_000.0,
    )  # fmt: skip
    assert r.basis is RetentionBasis.BYTES
    assert r.bytes_headroom == 400_000
    assert r.time_left_seconds == 400.0
    assert r.confidence is Confidence.ESTIMATE


def test_bytes_over_limit_is_eligible_now() -> None:
    r = retention_risk(
        NOW, retention_ms=-1, retention_bytes=100, committed=0, log_start=0, log_end=10,
        partition_size_bytes=1_000,
    )  # fmt: skip
    assert r.eligible_now and r.time_left_seconds == 0.0 and r.bytes_headroom == -900


def test_unknown_inputs_are_reported() -> None:
    r = retention_risk(
        NOW, retention_ms=DAY, retention_bytes=-1, committed=0, log_start=0, log_end=1
    )
    assert r.basis is RetentionBasis.UNKNOWN and r.time_left_seconds is None
    assert any("unknown" in n for n in r.notes)
    r2 = retention_risk(
        NOW, retention_ms=-1, retention_bytes=10_000, committed=0, log_start=0, log_end=10,
        partition_size_bytes=1_000,
    )  # fmt: skip
    assert r2.basis is RetentionBasis.UNKNOWN and r2.bytes_headroom == 9_000
    with pytest.raises(ValueError):
        retention_risk(
            NOW, retention_ms=-2, retention_bytes=-1, committed=0, log_start=0, log_end=1
        )


def test_byte_headroom_note_says_what_it_means() -> None:
    # 100 records in 10,000 bytes, 30 unconsumed: 3,000 bytes; retention.bytes 5,000
    r = retention_risk(
        NOW, retention_ms=-1, retention_bytes=5_000, committed=70, log_start=0, log_end=100,
        partition_size_bytes=10_000,
    )  # fmt: skip
    assert r.bytes_headroom == 2_000
    note = next(n for n in r.notes if n.startswith("retention.bytes headroom"))
    assert "2,000 bytes" in note and "segment" in note and "newer data" in note
    assert any("no byte rate" in n for n in r.notes)


def test_byte_headroom_without_size_is_unknown() -> None:
    r = retention_risk(
        NOW, retention_ms=-1, retention_bytes=5_000, committed=70, log_start=0, log_end=100,
    )  # fmt: skip
    assert r.bytes_headroom is None and r.basis is RetentionBasis.UNKNOWN
    assert any("partition size is unknown" in n for n in r.notes)


@given(
    size=st.integers(0, 10**9),
    records=st.integers(1, 10**6),
    consumed_fraction=st.floats(0, 1),
    retention=st.integers(0, 10**9),
)
def test_byte_headroom_never_exceeds_retention_bytes(
    size: int, records: int, consumed_fraction: float, retention: int
) -> None:
    committed = int(records * consumed_fraction)
    r = retention_risk(
        NOW, retention_ms=-1, retention_bytes=retention, committed=committed, log_start=0,
        log_end=records, partition_size_bytes=size,
    )  # fmt: skip
    if committed >= records:
        assert r.bytes_headroom is None  # nothing unconsumed
    else:
        assert r.bytes_headroom is not None and r.bytes_headroom <= retention
        assert r.bytes_headroom >= retention - size
        assert r.eligible_now == (r.bytes_headroom <= 0)


# ------------------------------------------------------------------ properties

times = st.integers(min_value=0, max_value=4_000_000_000_000)
offsets = st.integers(min_value=0, max_value=10**12)


@given(now=times, ts=times)
def test_property_lag_seconds_never_negative(now: int, ts: int) -> None:
    lt = lag_seconds(now, ts)
    assert lt.seconds is not None and lt.seconds >= 0
    assert (lt.clock_skew_ms > 0) == (ts > now)


@settings(max_examples=300)
@given(
    now=times,
    committed=st.one_of(st.none(), offsets),
    log_start=offsets,
    log_end=offsets,
    committed_ts=st.one_of(st.none(), st.integers(min_value=-1, max_value=4_000_000_000_000)),
    start_ts=st.one_of(st.none(), times),
    points=st.lists(st.tuples(times, offsets), max_size=30),
)
def test_property_lag_time_never_negative_and_within_bounds(
    now: int,
    committed: int | None,
    log_start: int,
    log_end: int,
    committed_ts: int | None,
    start_ts: int | None,
    points: list[tuple[int, int]],
) -> None:
    tl = OffsetTimeline(max_points=10)
    for t, o in sorted(points):
        tl = tl.add(o, t)
    assert len(tl.points) <= 10
    lt = partition_lag_time(
        now, committed=committed, log_start=log_start, log_end=log_end,
        committed_record_ts_ms=committed_ts, log_start_record_ts_ms=start_ts, timeline=tl,
    )  # fmt: skip
    for v in (lt.seconds, lt.min_seconds, lt.max_seconds):
        assert v is None or v >= 0
    if lt.seconds is not None and lt.min_seconds is not None:
        assert lt.min_seconds <= lt.seconds
    if lt.seconds is not None and lt.max_seconds is not None:
        assert lt.seconds <= lt.max_seconds
    if committed is None or committed >= log_end:
        assert lt.seconds is None


@given(points=st.lists(st.tuples(times, offsets), min_size=1, max_size=30), target=offsets)
@example(points=[(0, 0), (1, 1_000)], target=0)  # tiny interval, tiny fraction
def test_property_append_time_is_inside_its_interval(
    points: list[tuple[int, int]], target: int
) -> None:
    tl = OffsetTimeline()
    for t, o in sorted(points):
        tl = tl.add(o, t)
    at = tl.append_time(target)
    if at is not None:
        assert at.estimate_ms <= at.at_or_before_ms
        if at.after_ms is not None:
            assert at.after_ms < at.estimate_ms


@given(
    lag=st.integers(min_value=0, max_value=10**12),
    consume=st.one_of(st.none(), st.floats(min_value=0, allow_infinity=True)),
    produce=st.one_of(st.none(), st.floats(min_value=0, allow_infinity=True)),
)
def test_property_eta_never_negative(
    lag: int, consume: float | None, produce: float | None
) -> None:
    c = catch_up_eta(lag, consume, produce)
    assert c.eta_seconds is None or (c.eta_seconds >= 0 and math.isfinite(c.eta_seconds))
    if lag == 0:
        assert c.eta_seconds == 0.0
    if c.state is CatchUpState.CATCHING_UP:
        assert c.net_rate is not None and c.net_rate > 0


@given(points=st.lists(st.tuples(times, offsets), max_size=30))
def test_property_rates_never_negative(points: list[tuple[int, int]]) -> None:
    r = offset_rate(points)
    assert r.per_second is None or r.per_second >= 0


@given(
    now=times,
    retention_ms=st.integers(min_value=-1, max_value=100 * DAY),
    retention_bytes=st.integers(min_value=-1, max_value=10**12),
    committed=st.one_of(st.none(), offsets),
    log_start=offsets,
    extra=st.integers(min_value=0, max_value=10**6),
    ts=st.one_of(st.none(), times),
    size=st.one_of(st.none(), st.integers(min_value=0, max_value=10**13)),
    rate=st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)),
)
def test_property_retention_never_negative(
    now: int, retention_ms: int, retention_bytes: int, committed: int | None, log_start: int,
    extra: int, ts: int | None, size: int | None, rate: float | None,
) -> None:  # fmt: skip
    r = retention_risk(
        now, retention_ms=retention_ms, retention_bytes=retention_bytes, committed=committed,
        log_start=log_start, log_end=log_start + extra, oldest_unconsumed_ts_ms=ts,
        partition_size_bytes=size, produce_bytes_per_second=rate,
    )  # fmt: skip
    assert r.records_lost >= 0
    assert r.time_left_seconds is None or r.time_left_seconds >= 0
    if committed is not None:
        assert r.records_lost == max(0, log_start - committed)


@settings(max_examples=400, deadline=None)
@given(
    now=st.integers(0, 2**41), ts=st.one_of(st.none(), st.integers(-2, 2**41)),
    start=st.integers(0, 1000), span=st.integers(0, 1000), at=st.integers(-5, 2100),
    committed_none=st.booleans(),
    retention=st.one_of(st.none(), st.tuples(st.integers(-1, 10**9),
                                            st.one_of(st.just(-1), st.integers(-1, 10**6)))),
    size=st.one_of(st.none(), st.integers(0, 10**7)),
)
@example(now=10_000, ts=4_000, start=0, span=10, at=3, committed_none=False,
         retention=(604_800_000, -1), size=None)  # the fast path
@example(now=1_000, ts=5_000, start=0, span=10, at=3, committed_none=False,
         retention=(2_000, -1), size=None)  # fast path, clock skew
def test_group_partition_time_fast_path_equals_general_rules(
    now: int, ts: int | None, start: int, span: int, at: int, committed_none: bool,
    retention: tuple[int, int] | None, size: int | None,
) -> None:
    from opskit.core.models import PartitionLag, TopicPartition
    from opskit.core.timing.group_partition import _group_partition_time, group_partition_time

    committed = None if committed_none else at
    p = PartitionLag(TopicPartition("t", 0), committed, start, start + span, None)
    fast = group_partition_time(now, p, record_ts_ms=ts, retention=retention,
                                partition_size_bytes=size)
    general = _group_partition_time(now, p, ts, retention, size, None)
    assert fast == general
    assert type(fast[0]) is type(general[0]) and type(fast[1]) is type(general[1])
