"""Pure planning of ``opskit replay``: ranges, policies, clamping, manifest, verification."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opskit.core.models import (
    GroupDescription,
    GroupState,
    Member,
    PartitionOffsets,
    TopicPartition,
)
from opskit.core.offset_reset.planner import check_unchanged
from opskit.core.replay_plan import (
    EndKind,
    JobResult,
    NoCommitPolicy,
    PartitionResult,
    Pipeline,
    ReplayManifest,
    ReplayRequest,
    ReplayStatus,
    StartKind,
    commit_plan,
    job_spec,
    plan_replay,
    verify_result,
)
from opskit.errors import InvalidInputError, NotFoundError, RefusedError, UsageError

T = "events_plugin_ingestion"
EMPTY = GroupDescription("analytics-ingest", GroupState.EMPTY)


def tp(p: int, topic: str = T) -> TopicPartition:
    return TopicPartition(topic, p)


def logs(*spans: tuple[int, int], topic: str = T) -> dict[TopicPartition, PartitionOffsets]:
    return {tp(i, topic): PartitionOffsets(tp(i, topic), a, b) for i, (a, b) in enumerate(spans)}


def req(**kw: object) -> ReplayRequest:
    base: dict[str, object] = {"group_id": "analytics-ingest", "topics": (T,),
                               "pipeline": Pipeline.EVENTS}
    base.update(kw)
    return ReplayRequest(**base)  # type: ignore[arg-type]


def test_committed_start_and_log_end_end() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 10, tp(1): 0}, logs((0, 100), (0, 50)), {}, {}, 1000)
    assert [(r.start, r.end) for r in m.ranges] == [(10, 100), (0, 50)]
    assert m.expected_records == 140
    assert m.ends() == {tp(0): 100, tp(1): 50}
    assert m.status is ReplayStatus.PLANNED


@pytest.mark.parametrize("policy,expected", [
    (NoCommitPolicy.EARLIEST, (5, 40)),
    (NoCommitPolicy.LATEST, (40, 40)),
])
def test_no_commit_policy(policy: NoCommitPolicy, expected: tuple[int, int]) -> None:
    m = plan_replay(req(no_commit=policy), EMPTY, {tp(0): 3}, logs((0, 9), (5, 40)), {}, {}, 0)
    r = m.ranges[1]
    assert (r.start, r.end) == expected
    assert r.committed is None and "no committed offset" in (r.note or "")


def test_no_commit_skip_and_fail() -> None:
    m = plan_replay(req(no_commit=NoCommitPolicy.SKIP), EMPTY, {tp(0): 3}, logs((0, 9), (0, 4)),
                    {}, {}, 0)
    assert [r.tp for r in m.ranges] == [tp(0)] and m.skipped == (tp(1),)
    assert tp(1) not in commit_plan(m).offsets_to_commit()
    with pytest.raises(InvalidInputError, match="no committed offset"):
        plan_replay(req(no_commit=NoCommitPolicy.FAIL), EMPTY, {tp(0): 3}, logs((0, 9), (0, 4)),
                    {}, {}, 0)


def test_start_below_log_start_is_clamped_and_lost_counted() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 10}, logs((250, 400)), {}, {}, 0)
    r = m.ranges[0]
    assert (r.start, r.end, r.lost) == (250, 400, 240)
    assert m.lost_records == 240
    assert any("deleted by retention" in w for w in m.warnings)


def test_start_beyond_log_end_gives_empty_range() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 900}, logs((0, 400)), {}, {}, 0)
    assert (m.ranges[0].start, m.ranges[0].end) == (400, 400)
    assert m.is_empty


def test_timestamps_for_start_and_end() -> None:
    r = req(start=StartKind.TIMESTAMP, start_timestamp_ms=1000, end=EndKind.TIMESTAMP,
            end_timestamp_ms=2000)
    m = plan_replay(r, EMPTY, {}, logs((0, 100), (0, 100)), {tp(0): 20, tp(1): None},
                    {tp(0): 70, tp(1): None}, 0)
    # no record after the start time: empty range at the log end
    assert [(x.start, x.end) for x in m.ranges] == [(20, 70), (100, 100)]


def test_explicit_offsets_cover_only_given_partitions() -> None:
    r = req(start=StartKind.OFFSETS, start_offsets={tp(1): 7})
    m = plan_replay(r, EMPTY, {tp(0): 1, tp(1): 2}, logs((0, 10), (0, 10)), {}, {}, 0)
    assert [(x.tp, x.start, x.end, x.committed) for x in m.ranges] == [(tp(1), 7, 10, 2)]
    with pytest.raises(InvalidInputError, match="not in the replay"):
        plan_replay(req(start=StartKind.OFFSETS, start_offsets={tp(5): 1}), EMPTY, {},
                    logs((0, 10)), {}, {}, 0)


def test_bad_requests() -> None:
    with pytest.raises(UsageError):
        req(start=StartKind.TIMESTAMP)
    with pytest.raises(UsageError):
        req(start=StartKind.TIMESTAMP, start_timestamp_ms=5, end=EndKind.TIMESTAMP,
            end_timestamp_ms=1)
    with pytest.raises(NotFoundError, match="does not exist"):
        plan_replay(req(topics=("nope",)), EMPTY, {}, logs((0, 1)), {}, {}, 0)


def test_replay_id_is_deterministic_and_depends_on_ranges() -> None:
    a = plan_replay(req(), EMPTY, {tp(0): 1}, logs((0, 10)), {}, {}, 1, cluster_id="c")
    b = plan_replay(req(), EMPTY, {tp(0): 1}, logs((0, 10)), {}, {}, 999, cluster_id="c")
    c = plan_replay(req(), EMPTY, {tp(0): 2}, logs((0, 10)), {}, {}, 1, cluster_id="c")
    assert a.replay_id == b.replay_id != c.replay_id
    assert a.replay_id.startswith("rp-")


def test_manifest_round_trip_with_result_and_events() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 1}, logs((0, 10)), {}, {}, 5, cluster_id="c",
                    bootstrap="b:1")
    res = JobResult(m.replay_id, (PartitionResult(tp(0), 9, 1, 9, 8, 1),), 9, {"events": "/x"})
    m2 = m.with_status(ReplayStatus.WRITTEN, {"event": "written"}, result=res)
    back = ReplayManifest.from_json(m2.to_json())
    assert back == m2
    with pytest.raises(InvalidInputError):
        ReplayManifest.from_json('{"format": "something-else"}')
    with pytest.raises(InvalidInputError):
        ReplayManifest.from_json("not json")


def _result(m: ReplayManifest, *parts: PartitionResult, verified: int | None = None) -> JobResult:
    return JobResult(m.replay_id, parts, sum(p.records for p in parts)
                     if verified is None else verified)


def test_verify_result_accepts_gaps_and_rejects_bad_writes() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 10}, logs((0, 20)), {}, {}, 0)
    # fewer records than offsets (transaction markers): fine
    assert verify_result(m, _result(m, PartitionResult(tp(0), 8, 10, 19, 7, 1))) == []
    assert verify_result(m, _result(m, PartitionResult(tp(0), 11, 10, 19, 11, 0)))  # too many
    assert verify_result(m, _result(m, PartitionResult(tp(0), 5, 9, 19, 5, 0)))  # below start
    assert verify_result(m, _result(m, PartitionResult(tp(0), 5, 10, 20, 5, 0)))  # at end
    assert verify_result(m, _result(m, PartitionResult(tp(0), 5, 10, 19, 4, 0)))  # lost a row
    assert verify_result(m, _result(m, PartitionResult(tp(0), 5, 10, 19, 5, 0), verified=4))
    assert verify_result(m, _result(m, PartitionResult(tp(1), 1, 0, 0, 1, 0)))  # unplanned
    other = JobResult("rp-other", (), 0)
    assert verify_result(m, other)


def test_commit_plan_compare_and_set_uses_offsets_at_planning() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 10, tp(1): 3}, logs((0, 20), (0, 30)), {}, {}, 0)
    plan = commit_plan(m)
    assert plan.offsets_to_commit() == {tp(0): 20, tp(1): 30}
    check_unchanged(plan, EMPTY, {tp(0): 10, tp(1): 3})
    with pytest.raises(RefusedError, match="changed since planning"):
        check_unchanged(plan, EMPTY, {tp(0): 15, tp(1): 3})
    active = GroupDescription("analytics-ingest", GroupState.STABLE,
                              (Member("m", "c", "h", (tp(0),)),))
    with pytest.raises(RefusedError, match="Stable"):
        check_unchanged(plan, active, {tp(0): 10, tp(1): 3})


def test_job_spec_leaves_out_empty_ranges() -> None:
    m = plan_replay(req(), EMPTY, {tp(0): 20, tp(1): 3}, logs((0, 20), (0, 30)), {}, {}, 0)
    assert job_spec(m)["ranges"] == [[T, 1, 3, 30]]


@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000),
                          st.one_of(st.none(), st.integers(0, 3000))), min_size=1, max_size=8),
       st.sampled_from([NoCommitPolicy.EARLIEST, NoCommitPolicy.LATEST]))
def test_ranges_always_inside_the_log(parts: list[tuple[int, int, int | None]],
                                      policy: NoCommitPolicy) -> None:
    spans = [(min(a, b), max(a, b)) for a, b, _ in parts]
    committed = {tp(i): c for i, (_, _, c) in enumerate(parts) if c is not None}
    m = plan_replay(req(no_commit=policy), EMPTY, committed, logs(*spans), {}, {}, 0)
    for r, (lo, hi) in zip(m.ranges, spans):
        assert lo <= r.start <= r.end <= hi
        assert r.end == hi
        c = committed.get(r.tp)
        assert r.lost == (max(0, lo - c) if c is not None else 0)
