"""The sampling loop and group judgement with an injected clock: no Kafka, no waiting."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.adapters.kafka.record_times import RecordTime
from opskit.adapters.lag.sampler import Sampling, judge_groups, policy_for_window, sample_lag
from opskit.adapters.lag.source import LagReport
from opskit.adapters.lag.timed.report import RetentionConfig, TimedLagReport, add_lag_times
from opskit.core.lag import compute_group_lag
from opskit.core.models import GroupDescription, GroupState, PartitionOffsets, TopicPartition
from opskit.core.status.rank import Status

TP = TopicPartition("orders", 0)


class FakeClock:
    def __init__(self, start: float = 1_700_000_000.0, cost: float = 0.0) -> None:
        self.t = start
        self.cost = cost
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def report(committed: int | None, log_end: int, log_start: int = 0, gid: str = "g") -> TimedLagReport:
    desc = GroupDescription(gid, GroupState.EMPTY)
    offs = {TP: PartitionOffsets(TP, log_start, log_end)}
    commits = {TP: committed} if committed is not None else {}
    gl = compute_group_lag(desc, commits, offs, {"orders": 1})
    return TimedLagReport(LagReport("b:9092", None, [gl]), 0)


def scripted(clock: FakeClock, rounds: list[tuple[int | None, int]]):  # type: ignore[no-untyped-def]
    it = iter(rounds)

    def collect() -> TimedLagReport:
        clock.t += clock.cost  # collection takes time
        c, e = next(it)
        return report(c, e)

    return collect


def test_rounds_follow_the_schedule_within_the_window():
    clock = FakeClock(cost=0.3)
    collect = scripted(clock, [(0, 10 * i + 10) for i in range(20)])
    st = sample_lag(collect, policy_for_window(10_000), interval_s=2, window_s=10,
                    clock=clock, sleep=clock.sleep)
    assert st.rounds == 6  # at 0, 2, 4, 6, 8, 10 s
    assert all(abs(s - 1.7) < 1e-6 for s in clock.sleeps)  # slow collection shortens sleeps
    w = st.windows["g"].partitions[0]
    assert [s.timestamp_ms - w.samples[0].timestamp_ms for s in w.samples] == [
        0, 2000, 4000, 6000, 8000, 10000]


def test_max_rounds_and_callback():
    clock = FakeClock()
    seen: list[int] = []
    st = sample_lag(scripted(clock, [(0, 5)] * 3), policy_for_window(60_000), interval_s=1,
                    max_rounds=3, clock=clock, sleep=clock.sleep,
                    on_round=lambda s: seen.append(s.rounds))
    assert seen == [1, 2, 3] and st.rounds == 3 and len(clock.sleeps) == 2


def test_clock_step_back_keeps_rounds():
    clock = FakeClock()
    calls = iter([0.0, 0.0, -5.0, -5.0, 0.0])

    def collect() -> TimedLagReport:
        clock.t += next(calls)
        return report(0, 10)

    st = sample_lag(collect, policy_for_window(60_000), interval_s=1, max_rounds=3,
                    clock=clock, sleep=clock.sleep)
    ts = [s.timestamp_ms for s in st.windows["g"].partitions[0].samples]
    assert len(ts) == 3 and ts == sorted(set(ts))


def test_stopped_group_with_growing_log_is_stall():
    clock = FakeClock()
    collect = scripted(clock, [(100, 100 + 50 * i) for i in range(1, 8)])
    st = sample_lag(collect, policy_for_window(6_000), interval_s=1, window_s=6,
                    clock=clock, sleep=clock.sleep)
    [j] = judge_groups(st)
    assert j.status.status is Status.STALL
    assert j.produce_rate == 50.0 and j.consume_rate == 0.0
    assert j.catch_up.state.value == "falling_behind"
    assert "stuck at 100" in j.status.partitions[0].explanation


def test_consumer_that_keeps_up_is_ok_and_catching_up_has_eta():
    clock = FakeClock()
    # 100 behind, consuming 30/s while producers write 20/s: 10/s net
    collect = scripted(clock, [(30 * i, 20 * i + 100) for i in range(7)])
    st = sample_lag(collect, policy_for_window(6_000), interval_s=1, window_s=6,
                    clock=clock, sleep=clock.sleep)
    [j] = judge_groups(st)
    assert j.status.status is Status.OK
    assert j.catch_up.state.value == "catching_up"
    assert j.produce_rate == 20.0 and j.consume_rate == 30.0
    assert j.status.total_lag == 40 and j.catch_up.eta_seconds == 4.0


def test_add_lag_times_lower_bound_and_retention():
    r = report(10, 100, log_start=40).report
    now = 1_700_000_000_000
    recs = {(TP, 40): RecordTime(40, now - 90_000, "create")}
    timed = add_lag_times(r, recs, {"orders": RetentionConfig(3_600_000, -1)}, now)
    pt = timed.partition_time("g", TP)
    assert pt is not None
    assert pt.lag_time.seconds == 90.0 and pt.lag_time.confidence.value == "lower_bound"
    assert pt.retention is not None and pt.retention.records_lost == 30
    assert pt.retention.time_left_seconds == 3600 - 90
    d = timed.to_dict()["groups"][0]
    assert d["max_lag_seconds"] == 90.0 and d["partitions"][0]["lag_time_basis"] == "log_start_record"


def test_compacted_topic_has_unlimited_retention():
    cfg = {"cleanup.policy": ("compact", False), "retention.ms": ("1000", False),
           "retention.bytes": ("-1", True)}
    assert RetentionConfig.from_topic_config(cfg) == RetentionConfig(-1, -1)
    cfg2 = {"cleanup.policy": ("compact,delete", False), "retention.ms": ("1000", False)}
    assert RetentionConfig.from_topic_config(cfg2).retention_ms == 1000


def test_empty_sampling_judges_nothing():
    assert judge_groups(Sampling(policy_for_window(1000))) == []


# one group partition: (committed, log start, log end, record timestamp or None, offset
# of the record read relative to the read position, topic's retention or None, size)
_partition = st.tuples(
    st.one_of(st.none(), st.integers(0, 60), st.integers(0, 60)),
    st.integers(0, 30),
    st.integers(0, 60),
    st.one_of(st.none(), st.integers(-1, 1_700_000_200_000), st.just(1_700_000_000_000),
              st.integers(1_699_990_000_000, 1_700_000_400_000)),
    st.sampled_from([0, 0, 0, 2, -1]),
    st.sampled_from(["t_time", "t_time", "t_time", "t_bytes", "t_none", "t_missing", "t_compact"]),
    st.one_of(st.none(), st.integers(0, 10_000)),
)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(_partition, min_size=1, max_size=12),
       now=st.integers(1_699_999_000_000, 1_700_000_300_000))
def test_to_dict_direct_equals_the_time_objects(rows, now):  # type: ignore[no-untyped-def]
    """TimedLagReport.to_dict builds the usual partitions' time fields without the time
    objects; every partition's fields equal those it gives once the objects exist."""
    topics = {"t_time": 1, "t_bytes": 1, "t_none": 1, "t_missing": 1, "t_compact": 1}
    by_tp: dict[TopicPartition, PartitionOffsets] = {}
    commits: dict[TopicPartition, int] = {}
    records: dict[tuple[TopicPartition, int], RecordTime] = {}
    sizes: dict[TopicPartition, int] = {}
    for i, (c, start, end, ts, shift, topic, size) in enumerate(rows):
        tp = TopicPartition(topic, i)
        topics[topic] = max(topics[topic], i + 1)
        start = min(start, end)
        by_tp[tp] = PartitionOffsets(tp, start, end)
        if c is not None:
            commits[tp] = c
            pos = max(c, start)
            if ts is not None and pos < end:
                records[(tp, pos)] = RecordTime(max(pos + shift, 0), ts, "create")
        if size is not None:
            sizes[tp] = size
    gl = compute_group_lag(GroupDescription("g", GroupState.STABLE), commits, by_tp, topics)
    retention = {"t_time": RetentionConfig(3_600_000, -1), "t_bytes": RetentionConfig(-1, 5_000),
                 "t_none": RetentionConfig(-1, -1), "t_compact": RetentionConfig(-1, -1)}
    rep = LagReport("b:9092", None, [gl])
    direct = add_lag_times(rep, records, retention, now, sizes).to_dict()
    via = add_lag_times(rep, records, retention, now, sizes)
    assert via.times  # the objects, computed first
    assert via.to_dict() == direct
    for a, b in zip(via.to_dict()["groups"][0]["partitions"], direct["groups"][0]["partitions"],
                    strict=True):
        assert list(a) == list(b)  # same keys, same order


def test_usual_partition_fields() -> None:
    """A usual partition (committed record read, retention.ms only) in the JSON."""
    now = 1_700_000_000_000
    tp = TopicPartition("orders", 0)
    gl = compute_group_lag(GroupDescription("g", GroupState.STABLE), {tp: 5},
                           {tp: PartitionOffsets(tp, 0, 9)}, {"orders": 1})
    recs = {(tp, 5): RecordTime(5, now - 4_000, "create")}
    d = add_lag_times(LagReport("b:9092", None, [gl]), recs,
                      {"orders": RetentionConfig(10_000, -1)}, now).to_dict()
    p = d["groups"][0]["partitions"][0]
    assert (p["lag_seconds"], p["lag_time_basis"], p["lag_time_confidence"]) == \
        (4.0, "committed_record", "exact")
    assert (p["retention_time_left_seconds"], p["retention_basis"], p["retention_eligible_now"]) \
        == (6.0, "time", False)
    assert d["groups"][0]["max_lag_seconds"] == 4.0
