"""Rules of ``opskit.core.offset_reset``, one test per tool fact, plus properties."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.core.models import (
    GroupDescription,
    GroupState,
    Member,
    PartitionOffsets,
    TopicPartition,
)
from opskit.core.offset_reset.backup import OffsetsBackup, plan_restore
from opskit.core.offset_reset.offsets_csv import export_csv, offsets_for_group, parse_offsets_csv
from opskit.core.offset_reset.plan import ResetPlan, ResetRow
from opskit.core.offset_reset.planner import (
    check_unchanged,
    partitions_in_scope,
    plan_offset_reset,
    timestamp_lookups_needed,
    topics_to_describe,
)
from opskit.core.offset_reset.request import ResetKind, ResetRequest, ResetScope, ResetStrategy
from opskit.core.offset_reset.time_text import (
    format_ms,
    parse_datetime,
    parse_duration,
    parse_duration_nanos,
)
from opskit.core.offset_reset.topics import TopicSelection, parse_topic_scope
from opskit.errors import (
    InconsistentStateError,
    InvalidInputError,
    NotFoundError,
    RefusedError,
    UsageError,
)

TP = TopicPartition
NOW = 1_717_243_200_000  # 2024-06-01T12:00:00Z


def logs(spec: dict[str, list[tuple[int, int]]]) -> dict[TopicPartition, PartitionOffsets]:
    return {
        TP(topic, p): PartitionOffsets(TP(topic, p), start, end)
        for topic, ranges in spec.items()
        for p, (start, end) in enumerate(ranges)
    }


def group(state: GroupState = GroupState.EMPTY, gid: str = "g", **kw: object) -> GroupDescription:
    return GroupDescription(gid, state, **kw)  # type: ignore[arg-type]


def plan(
    strategy: ResetStrategy,
    scope: ResetScope | None,
    committed: dict[TopicPartition, int],
    log_offsets: dict[TopicPartition, PartitionOffsets],
    times: dict[TopicPartition, int | None] | None = None,
    state: GroupState = GroupState.EMPTY,
) -> ResetPlan:
    request = ResetRequest("g", strategy, scope)
    return plan_offset_reset(request, group(state), committed, log_offsets, times or {}, NOW)


LOGS = logs({"t": [(10, 100), (10, 100), (0, 0)]})
ALL_T = ResetScope.of_topics(["t"])


def targets(p: ResetPlan) -> dict[str, int]:
    return {str(r.tp): r.target for r in p.rows}


# ------------------------------------------------------------------ scope parsing


class TestTopicScope:
    def test_whole_topic(self) -> None:
        assert parse_topic_scope("orders") == TopicSelection("orders", None)

    def test_partitions_sorted_and_deduplicated(self) -> None:
        assert parse_topic_scope("orders:2,0,2,1") == TopicSelection("orders", (0, 1, 2))

    def test_trailing_comma_accepted_like_java_split(self) -> None:
        assert parse_topic_scope("orders:0,1,") == TopicSelection("orders", (0, 1))

    @pytest.mark.parametrize(
        "arg",
        [
            "orders:",
            "orders:0:1",
            ":0",
            "orders:a",
            "orders:0,,1",
            "orders:-1",
            "orders: 1",
            "orders:+1",
            "bad topic",
            "",
            "orders:99999999999",
            "t/x:0",
        ],
    )
    def test_malformed(self, arg: str) -> None:
        with pytest.raises(InvalidInputError):
            parse_topic_scope(arg)

    def test_scope_needs_exactly_one_kind(self) -> None:
        with pytest.raises(UsageError):
            ResetScope()
        with pytest.raises(UsageError):
            ResetScope(all_topics=True, topics=(TopicSelection("t"),))

    def test_request_needs_scope_unless_from_file(self) -> None:
        with pytest.raises(UsageError):
            ResetRequest("g", ResetStrategy.to_earliest(), None)
        ResetRequest("g", ResetStrategy.from_file({TP("t", 0): 1}), None)

    def test_all_topics_is_committed_partitions_only(self) -> None:
        committed = {TP("t", 1): 50}
        p = plan(ResetStrategy.to_earliest(), ResetScope.of_all_topics(), committed, LOGS)
        assert [r.tp for r in p.rows] == [TP("t", 1)]

    def test_all_topics_skips_deleted_partitions_with_warning(self) -> None:
        committed = {TP("t", 1): 50, TP("gone", 0): 5}
        p = plan(ResetStrategy.to_earliest(), ResetScope.of_all_topics(), committed, LOGS)
        assert [r.tp for r in p.rows] == [TP("t", 1)]
        assert any("gone:0" in w and "no longer exists" in w for w in p.warnings)

    def test_whole_topic_means_every_partition(self) -> None:
        p = plan(ResetStrategy.to_latest(), ALL_T, {}, LOGS)
        assert [r.tp.partition for r in p.rows] == [0, 1, 2]

    def test_selected_partitions_merge_across_args(self) -> None:
        scope = ResetScope.of_topics(["t:0", "t:2"])
        assert partitions_in_scope(
            ResetRequest("g", ResetStrategy.to_latest(), scope), {}, LOGS
        ) == (TP("t", 0), TP("t", 2))

    def test_unknown_topic_and_partition(self) -> None:
        with pytest.raises(NotFoundError, match="topic 'u' does not exist"):
            plan(ResetStrategy.to_latest(), ResetScope.of_topics(["u"]), {}, LOGS)
        with pytest.raises(NotFoundError, match="t:7 does not exist"):
            plan(ResetStrategy.to_latest(), ResetScope.of_topics(["t:0,7"]), {}, LOGS)

    def test_topics_to_describe(self) -> None:
        committed = {TP("a", 0): 1, TP("b", 3): 2}
        req = ResetRequest("g", ResetStrategy.to_latest(), ResetScope.of_all_topics())
        assert topics_to_describe(req, committed) == ("a", "b")
        req = ResetRequest("g", ResetStrategy.to_latest(), ResetScope.of_topics(["z:1", "y"]))
        assert topics_to_describe(req, committed) == ("y", "z")
        req = ResetRequest("g", ResetStrategy.from_file({TP("f", 0): 1}))
        assert topics_to_describe(req, committed) == ("f",)


# ------------------------------------------------------------------ strategies


COMMITTED = {TP("t", 0): 50, TP("t", 1): 95}


class TestStrategies:
    committed = COMMITTED

    def test_to_earliest_and_latest_are_log_bounds(self) -> None:
        assert targets(plan(ResetStrategy.to_earliest(), ALL_T, self.committed, LOGS)) == {
            "t:0": 10,
            "t:1": 10,
            "t:2": 0,
        }
        assert targets(plan(ResetStrategy.to_latest(), ALL_T, self.committed, LOGS)) == {
            "t:0": 100,
            "t:1": 100,
            "t:2": 0,
        }

    def test_to_current_keeps_commit_and_uses_log_end_without_one(self) -> None:
        p = plan(ResetStrategy.to_current(), ALL_T, self.committed, LOGS)
        assert targets(p) == {"t:0": 50, "t:1": 95, "t:2": 0}
        assert p.rows[2].warning is not None and "no committed offset" in p.rows[2].warning

    def test_to_current_keeps_out_of_range_commit_unclamped(self) -> None:
        p = plan(ResetStrategy.to_current(), ResetScope.of_topics(["t:0"]), {TP("t", 0): 3}, LOGS)
        assert p.rows[0].target == 3 and not p.rows[0].clamped and p.is_noop

    def test_to_offset_clamps_both_ways_with_warning(self) -> None:
        p = plan(ResetStrategy.to_offset(5), ResetScope.of_topics(["t:0"]), {}, LOGS)
        assert (p.rows[0].target, p.rows[0].clamped) == (10, True)
        assert "below the log start" in (p.rows[0].warning or "")
        p = plan(ResetStrategy.to_offset(500), ResetScope.of_topics(["t:0"]), {}, LOGS)
        assert (p.rows[0].target, p.rows[0].clamped) == (100, True)
        assert p.warnings and p.warnings[0].startswith(
            "t:0: requested offset 500 is past the log end"
        )
        p = plan(ResetStrategy.to_offset(42), ResetScope.of_topics(["t:0"]), {}, LOGS)
        assert (p.rows[0].target, p.rows[0].clamped, p.rows[0].warning) == (42, False, None)

    def test_negative_to_offset_is_a_usage_error(self) -> None:
        with pytest.raises(UsageError):
            ResetStrategy.to_offset(-1)

    def test_shift_by_relative_and_clamped(self) -> None:
        scope = ResetScope.of_topics(["t:0,1"])
        assert targets(plan(ResetStrategy.shift_by(-45), scope, self.committed, LOGS)) == {
            "t:0": 10,
            "t:1": 50,
        }
        assert targets(plan(ResetStrategy.shift_by(10), scope, self.committed, LOGS)) == {
            "t:0": 60,
            "t:1": 100,
        }

    def test_shift_by_without_commit_fails_naming_partition(self) -> None:
        with pytest.raises(UsageError, match="t:2"):
            plan(ResetStrategy.shift_by(1), ALL_T, self.committed, LOGS)

    def test_to_datetime_uses_broker_answer(self) -> None:
        ts = parse_datetime("2024-06-01T10:00:00.000Z", UTC)
        req = ResetRequest("g", ResetStrategy.to_datetime(ts), ResetScope.of_topics(["t:0,1"]))
        assert timestamp_lookups_needed(req, NOW) == ts
        times: dict[TopicPartition, int | None] = {TP("t", 0): 40, TP("t", 1): None}
        p = plan_offset_reset(req, group(), self.committed, LOGS, times, NOW)
        assert targets(p) == {"t:0": 40, "t:1": 100}
        assert p.target_timestamp_ms == ts
        assert "no record at or after 2024-06-01T10:00:00.000Z" in (p.rows[1].warning or "")
        assert not p.rows[1].clamped

    def test_to_datetime_requires_an_answer_per_partition(self) -> None:
        req = ResetRequest("g", ResetStrategy.to_datetime(0), ResetScope.of_topics(["t:0"]))
        with pytest.raises(ValueError):
            plan_offset_reset(req, group(), {}, LOGS, {}, NOW)

    def test_by_duration_looks_up_now_minus_duration(self) -> None:
        req = ResetRequest("g", ResetStrategy.by_duration("PT1H30M"), ResetScope.of_topics(["t:0"]))
        assert timestamp_lookups_needed(req, NOW) == NOW - 5_400_000
        # Instant.minus(...).toEpochMilli() floors: 0.5 ms back is 1 ms earlier
        req = ResetRequest(
            "g", ResetStrategy.by_duration("PT0.0005S"), ResetScope.of_topics(["t:0"])
        )
        assert timestamp_lookups_needed(req, NOW) == NOW - 1
        p = plan_offset_reset(req, group(), {}, LOGS, {TP("t", 0): 70}, NOW)
        assert p.rows[0].target == 70

    def test_by_duration_before_1970_looks_up_zero(self) -> None:
        req = ResetRequest("g", ResetStrategy.by_duration("P30000D"), ResetScope.of_topics(["t:0"]))
        assert timestamp_lookups_needed(req, NOW) == 0
        p = plan_offset_reset(req, group(), {}, LOGS, {TP("t", 0): 10}, NOW)
        assert any("before 1970" in w for w in p.warnings)

    def test_negative_duration_is_refused(self) -> None:
        with pytest.raises(UsageError, match="future"):
            ResetStrategy.by_duration("-PT1H")
        with pytest.raises(InvalidInputError):
            ResetStrategy.by_duration("1 hour")

    def test_other_strategies_need_no_lookup(self) -> None:
        req = ResetRequest("g", ResetStrategy.to_latest(), ALL_T)
        assert timestamp_lookups_needed(req, NOW) is None

    def test_from_file_ignores_missing_scope_and_clamps(self) -> None:
        offsets = {TP("t", 0): 5, TP("t", 1): 60}
        p = plan(ResetStrategy.from_file(offsets), None, self.committed, LOGS)
        assert targets(p) == {"t:0": 10, "t:1": 60}
        assert p.rows[0].clamped

    def test_from_file_scope_filters_rows(self) -> None:
        offsets = {TP("t", 0): 20, TP("t", 1): 60}
        p = plan(
            ResetStrategy.from_file(offsets), ResetScope.of_topics(["t:1"]), self.committed, LOGS
        )
        assert targets(p) == {"t:1": 60}
        assert any("outside the scope" in w for w in p.warnings)

    def test_from_file_unknown_partition(self) -> None:
        with pytest.raises(InvalidInputError, match="do not exist: t:9"):
            plan(ResetStrategy.from_file({TP("t", 9): 1}), None, {}, LOGS)

    def test_impossible_log_answer(self) -> None:
        bad = {TP("t", 0): PartitionOffsets(TP("t", 0), 50, 10)}
        with pytest.raises(InconsistentStateError):
            plan(ResetStrategy.to_latest(), ALL_T, {}, bad)

    def test_group_mismatch_is_a_bug(self) -> None:
        req = ResetRequest("other", ResetStrategy.to_latest(), ALL_T)
        with pytest.raises(ValueError):
            plan_offset_reset(req, group(), {}, LOGS, {}, NOW)


# ------------------------------------------------------------------ plan properties


class TestPlan:
    @pytest.mark.parametrize(
        "state",
        [
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.ASSIGNING,
            GroupState.RECONCILING,
            GroupState.UNKNOWN,
        ],
    )
    def test_active_group_is_refused(self, state: GroupState) -> None:
        p = plan(ResetStrategy.to_latest(), ALL_T, {}, LOGS, state=state)
        assert p.is_refused and state.value in (p.refusal or "")
        assert p.rows  # still previewed
        with pytest.raises(RefusedError):
            p.raise_if_refused()

    @pytest.mark.parametrize("state", [GroupState.EMPTY, GroupState.DEAD])
    def test_inactive_group_is_allowed(self, state: GroupState) -> None:
        p = plan(ResetStrategy.to_latest(), ALL_T, {}, LOGS, state=state)
        assert p.refusal is None
        p.raise_if_refused()

    def test_streams_group_is_refused(self) -> None:
        req = ResetRequest("g", ResetStrategy.to_latest(), ALL_T)
        p = plan_offset_reset(req, group(protocol_type="streams"), {}, LOGS, {}, NOW)
        assert p.is_refused

    def test_noop(self) -> None:
        committed = {TP("t", 0): 100, TP("t", 1): 100, TP("t", 2): 0}
        p = plan(ResetStrategy.to_latest(), ALL_T, committed, LOGS)
        assert p.is_noop and not p.changed_rows
        p = plan(ResetStrategy.to_latest(), ALL_T, {TP("t", 0): 100, TP("t", 1): 100}, LOGS)
        assert not p.is_noop  # t:2 gets its first commit

    def test_skipped_and_replayed(self) -> None:
        committed = {TP("t", 0): 50, TP("t", 1): 5}
        p = plan(ResetStrategy.to_offset(80), ResetScope.of_topics(["t:0,1"]), committed, LOGS)
        assert [(r.delta, r.records_skipped, r.records_replayed) for r in p.rows] == [
            (30, 30, 0),
            (75, 70, 0),
        ]  # t:1: offsets 5..9 were already deleted
        p = plan(ResetStrategy.to_earliest(), ResetScope.of_topics(["t:0"]), committed, LOGS)
        assert (p.rows[0].records_replayed, p.records_replayed, p.records_skipped) == (40, 40, 0)
        p = plan(ResetStrategy.to_earliest(), ResetScope.of_topics(["t:2"]), {}, LOGS)
        assert p.rows[0].records_skipped is None and p.rows[0].delta is None

    def test_offsets_to_commit_has_every_row(self) -> None:
        committed = {TP("t", 0): 100}
        p = plan(ResetStrategy.to_latest(), ALL_T, committed, LOGS)
        assert p.offsets_to_commit() == {TP("t", 0): 100, TP("t", 1): 100, TP("t", 2): 0}

    def test_empty_scope_warns(self) -> None:
        p = plan(
            ResetStrategy.to_latest(), ResetScope.of_all_topics(), {}, LOGS, state=GroupState.DEAD
        )
        assert p.rows == () and p.is_noop and any("nothing to reset" in w for w in p.warnings)

    def test_json_round_trip(self) -> None:
        ts = parse_datetime("2024-06-01T00:00:00.000Z", UTC)
        req = ResetRequest("g", ResetStrategy.to_datetime(ts), ResetScope.of_topics(["t:0,1"]))
        p = plan_offset_reset(
            req,
            group(GroupState.STABLE),
            {TP("t", 0): 50},
            LOGS,
            {TP("t", 0): 20, TP("t", 1): None},
            NOW,
        )
        assert ResetPlan.from_dict(json.loads(json.dumps(p.to_dict()))) == p

    @pytest.mark.parametrize(
        "mutate, message",
        [
            (lambda d: d.pop("rows"), "plan.rows is missing"),
            (lambda d: d.update(format="x"), "format"),
            (lambda d: d.update(version=2), "version"),
            (lambda d: d.update(group_state="Sleepy"), "plan.group_state"),
            (lambda d: d["rows"][0].update(target_offset="7"), r"plan.rows\[0\].target_offset"),
            (lambda d: d["rows"][0].update(partition=-1), r"plan.rows\[0\].partition"),
            (lambda d: d["rows"][0].update(clamped=1), r"plan.rows\[0\].clamped"),
            (lambda d: d["rows"].append(dict(d["rows"][0])), "twice"),
            (lambda d: d["strategy"].update(kind="to-nowhere"), "plan.strategy.kind"),
            (lambda d: d["strategy"].update(extra=1), "unknown field"),
            (lambda d: d["scope"].update(all_topics=True), "plan.scope"),
            (lambda d: d.update(planned_at_ms=True), "plan.planned_at_ms"),
            (lambda d: d.update(scope=None), "plan.scope is required for to-offset"),
        ],
    )
    def test_from_dict_is_strict(self, mutate: object, message: str) -> None:
        d = plan(ResetStrategy.to_offset(20), ALL_T, {}, LOGS).to_dict()
        mutate(d)  # type: ignore[operator]
        with pytest.raises(InvalidInputError, match=message):
            ResetPlan.from_dict(d)


# ------------------------------------------------------------------ export CSV


class TestExport:
    def test_single_group_format(self) -> None:
        p = plan(ResetStrategy.to_offset(20), ALL_T, {}, LOGS)
        assert p.to_csv() == "t,0,20\nt,1,20\nt,2,0\n"

    def test_multi_group_format(self) -> None:
        p = plan(ResetStrategy.to_offset(20), ResetScope.of_topics(["t:0"]), {}, LOGS)
        assert p.to_csv(with_group=True) == "g,t,0,20\n"

    def test_jackson_quoting_rules(self) -> None:
        long_topic = "a" * 25
        log_offsets = logs({long_topic: [(0, 9)], "a" * 24: [(0, 9)]})
        req = ResetRequest(
            "my group,1", ResetStrategy.to_latest(), ResetScope.of_topics([long_topic, "a" * 24])
        )
        p = plan_offset_reset(req, group(gid="my group,1"), {}, log_offsets, {}, NOW)
        assert p.to_csv(with_group=True) == (
            f'"my group,1",{"a" * 24},0,9\n"my group,1","{long_topic}",0,9\n'
        )
        p2 = plan_offset_reset(
            ResetRequest('q"x', ResetStrategy.to_latest(), ResetScope.of_topics(["a" * 24])),
            group(gid='q"x'),
            {},
            log_offsets,
            {},
            NOW,
        )
        assert export_csv([p2], with_group=True) == f'"q""x",{"a" * 24},0,9\n'

    def test_export_reads_back(self) -> None:
        p = plan(ResetStrategy.to_offset(20), ALL_T, {}, LOGS)
        assert parse_offsets_csv(p.to_csv()) == {None: p.offsets_to_commit()}
        assert parse_offsets_csv(p.to_csv(with_group=True)) == {"g": p.offsets_to_commit()}


# ------------------------------------------------------------------ from-file CSV


class TestOffsetsCsv:
    def test_three_columns(self) -> None:
        assert parse_offsets_csv("t,0,5\nt,1,7\n") == {None: {TP("t", 0): 5, TP("t", 1): 7}}

    def test_four_columns_several_groups(self) -> None:
        text = 'g1,t,0,5\n"g,2",t,0,6\n'
        assert parse_offsets_csv(text) == {"g1": {TP("t", 0): 5}, "g,2": {TP("t", 0): 6}}

    def test_tool_export_with_println_newline_crlf_bom_header_blank_lines(self) -> None:
        text = "\ufefftopic,partition,offset\r\n\r\nt, 0 ,5\r\n\n"
        assert parse_offsets_csv(text) == {None: {TP("t", 0): 5}}
        assert parse_offsets_csv("group,topic,partition,offset\ng,t,0,1\n") == {
            "g": {TP("t", 0): 1}
        }

    @pytest.mark.parametrize(
        "text, line, fragment",
        [
            ("t,0,5\nt,1\n", 2, "expected 3 columns like line 1, found 2"),
            ("t,0\n", 1, "expected 3 columns"),
            ("t,0,5\ng,t,1,5\n", 2, "expected 3 columns"),
            ("t,0,5\n\nt,x,5\n", 3, "partition 'x'"),
            ("t,0,-5\n", 1, "negative"),
            ("t,0,5.5\n", 1, "offset '5.5'"),
            ("t,0,99999999999999999999\n", 1, "offset"),
            ("t,3000000000,1\n", 1, "partition"),
            ("bad topic,0,5\n", 1, "characters"),
            ("t,0,5\nt,0,6\n", 2, "already given on line 1"),
            ("g,t,0,5\ng,t,0,6\n", 2, "of group 'g' is already given on line 1"),
            (",t,0,5\n", 1, "group is empty"),
            ('t,0,5\n"t,0,5\n', 2, "malformed CSV"),
            ("topic,partition,offset\ngroup,topic,partition,offset\n", 2, "expected 3 columns"),
        ],
    )
    def test_malformed_names_the_line(self, text: str, line: int, fragment: str) -> None:
        with pytest.raises(InvalidInputError) as err:
            parse_offsets_csv(text)
        message = str(err.value)
        assert message.startswith(f"offsets file line {line}: ")
        assert fragment in message
        assert "\n" not in message

    def test_empty(self) -> None:
        with pytest.raises(InvalidInputError, match="no rows"):
            parse_offsets_csv("\n\n")

    def test_offsets_for_group(self) -> None:
        no_group = parse_offsets_csv("t,0,5\n")
        assert offsets_for_group(no_group, "g", single_group=True) == {TP("t", 0): 5}
        with pytest.raises(UsageError):
            offsets_for_group(no_group, "g", single_group=False)
        grouped = parse_offsets_csv("a,t,0,5\nb,t,0,6\n")
        assert offsets_for_group(grouped, "b", single_group=False) == {TP("t", 0): 6}
        assert offsets_for_group(grouped, "a", single_group=True) == {TP("t", 0): 5}
        with pytest.raises(InvalidInputError, match="no rows for group 'c'"):
            offsets_for_group(grouped, "c", single_group=False)


# ------------------------------------------------------------------ duration


# (text, Duration.parse(text).toMillis()) -- worked by hand from java.time.Duration.parse
DURATIONS = [
    ("PT20.345S", 20_345),
    ("PT15M", 900_000),
    ("PT10H", 36_000_000),
    ("P2D", 172_800_000),
    ("P2DT3H4M", 183_840_000),
    ("PT-6H3M", -21_420_000),
    ("-PT6H3M", -21_780_000),
    ("-PT-6H+3M", 21_420_000),
    ("+PT1H", 3_600_000),
    ("P-1D", -86_400_000),
    ("pt1h", 3_600_000),
    ("p1dt1h1m1s", 90_061_000),
    ("PT1,5S", 1_500),
    ("PT1.S", 1_000),
    ("PT0.000999999S", 0),
    ("PT-0.5S", -500),
    ("PT-0.0015S", -1),
    ("PT0S", 0),
    ("P0D", 0),
    ("PT1.123456789S", 1_123),
    ("PT9223372036854775S", 9_223_372_036_854_775_000),
    ("P1DT-24H", 0),
    ("PT0000000000000000000001S", 1_000),
]

BAD_DURATIONS = [
    "",
    "P",
    "PT",
    "P1DT",
    "1H",
    "PT1H ",
    " PT1H",
    "P1W",
    "P1M",
    "P1Y",
    "PT1.5M",
    "PT1.1234567890S",
    "PT1HS",
    "PT1H1H",
    "PT--1S",
    "P1D1H",
    "PT\u0661H",
    "PT1\u017f",
    "T1H",
    "PTS",
    "PT.5S",
    "PT9223372036854775808S",
    "P106751991167301D",
]


class TestDuration:
    @pytest.mark.parametrize("text, millis", DURATIONS)
    def test_java_duration_table(self, text: str, millis: int) -> None:
        assert parse_duration(text) == millis

    @pytest.mark.parametrize("text", BAD_DURATIONS)
    def test_rejected_like_java(self, text: str) -> None:
        with pytest.raises(InvalidInputError):
            parse_duration_nanos(text)

    def test_exact_nanos_and_millis_overflow(self) -> None:
        assert parse_duration_nanos("PT0.000000001S") == 1
        assert parse_duration_nanos("PT9223372036854775807S") == 9223372036854775807 * 10**9
        with pytest.raises(InvalidInputError, match="milliseconds"):
            parse_duration("PT9223372036854775807S")

    @given(
        st.booleans(),
        st.integers(-(10**6), 10**6),
        st.integers(-(10**6), 10**6),
        st.integers(-(10**6), 10**6),
        st.integers(-(10**9), 10**9),
        st.integers(0, 999_999_999),
    )
    def test_components_add_up(
        self, negate: bool, d: int, h: int, m: int, s: int, nanos: int
    ) -> None:
        text = f"{'-' if negate else ''}P{d}DT{h}H{m}M{s}.{nanos:09d}S"
        sign = -1 if str(s).startswith("-") else 1
        expected = ((d * 86400 + h * 3600 + m * 60 + s) * 10**9 + sign * nanos) * (
            -1 if negate else 1
        )
        assert parse_duration_nanos(text) == expected
        millis = parse_duration(text)
        assert abs(millis) == abs(expected) // 10**6 and (
            millis == 0 or (millis < 0) == (expected < 0)
        )


# ------------------------------------------------------------------ datetime


class TestDatetime:
    def test_no_zone_uses_the_default_zone(self) -> None:
        assert parse_datetime("2024-06-01T12:00:00.000", UTC) == NOW
        assert parse_datetime("2024-06-01T14:00:00.000", ZoneInfo("Europe/Paris")) == NOW

    @pytest.mark.parametrize(
        "text",
        [
            "2024-06-01T12:00:00.000Z",
            "2024-06-01T14:00:00.000+02:00",
            "2024-06-01T14:00:00.000+02",
            "2024-06-01T14:00:00.000+0200",
            "2024-06-01T08:30:00.000-03:30",
            " 2024-06-01T12:00:00.000Z ",
        ],
    )
    def test_zone_forms_the_tool_accepts(self, text: str) -> None:
        assert parse_datetime(text, ZoneInfo("Asia/Tokyo")) == NOW

    def test_millis(self) -> None:
        assert parse_datetime("2024-06-01T12:00:00.007Z", UTC) == NOW + 7

    @pytest.mark.parametrize(
        "text, fragment",
        [
            ("2024-06-01T17:30:00.000+0530", "+05:30"),
            ("2024-06-01T12:00:00.5Z", "three millisecond digits"),
            ("2024-06-01T12:00:00.5000Z", "three millisecond digits"),
            ("2024-06-01T12:00:00Z", "three millisecond digits"),
            ("2024-06-01 12:00:00.000Z", "expected YYYY-MM-DDTHH:mm:SS.sss"),
            ("2024-06-01T12:00:00.000z", "expected"),
            ("2024-02-30T12:00:00.000Z", "day is out of range"),
            ("2024-06-01T24:00:00.000Z", "hour"),
            ("2024-06-01T12:00:00.000+24:00", "out of range"),
            ("1969-12-31T23:59:59.999Z", "before 1970"),
            ("2024-6-1T12:00:00.000Z", "expected"),
        ],
    )
    def test_rejected(self, text: str, fragment: str) -> None:
        with pytest.raises(InvalidInputError, match=re.escape(fragment)):
            parse_datetime(text, UTC)

    def test_dst_gap_and_overlap_refused(self) -> None:
        paris = ZoneInfo("Europe/Paris")
        with pytest.raises(InvalidInputError, match="does not exist"):
            parse_datetime("2024-03-31T02:30:00.000", paris)
        with pytest.raises(InvalidInputError, match="ambiguous"):
            parse_datetime("2024-10-27T02:30:00.000", paris)
        assert parse_datetime("2024-10-27T02:30:00.000+01:00", paris) == parse_datetime(
            "2024-10-27T01:30:00.000Z", UTC
        )

    @given(st.integers(0, 253_402_300_799_999))
    def test_format_round_trip(self, millis: int) -> None:
        assert parse_datetime(format_ms(millis), ZoneInfo("America/New_York")) == millis


# ------------------------------------------------------------------ backup, restore, CAS


def sample_backup() -> OffsetsBackup:
    return OffsetsBackup(
        group_id="g",
        taken_at_ms=NOW,
        offsets={TP("t", 1): 60, TP("t", 0): 5},
        reason="before replay",
        cluster_id="abc",
        bootstrap="localhost:9092",
        uncommitted=(TP("t", 2),),
    )


class TestBackup:
    def test_round_trip(self) -> None:
        b = sample_backup()
        assert OffsetsBackup.from_dict(json.loads(json.dumps(b.to_dict()))) == b
        assert list(b.offsets) == [TP("t", 0), TP("t", 1)]

    def test_of_plan(self) -> None:
        p = plan(ResetStrategy.to_latest(), ALL_T, {TP("t", 0): 50, TP("t", 1): 60}, LOGS)
        b = OffsetsBackup.of_plan(p, taken_at_ms=NOW, reason="r", cluster_id="c")
        assert dict(b.offsets) == {TP("t", 0): 50, TP("t", 1): 60}
        assert b.uncommitted == (TP("t", 2),)

    @pytest.mark.parametrize(
        "mutate, message",
        [
            (lambda d: "not a dict", "backup must be a mapping"),
            (lambda d: d | {"format": "other"}, "format"),
            (lambda d: d | {"version": "1"}, "version"),
            (lambda d: {k: v for k, v in d.items() if k != "group"}, "backup.group is missing"),
            (lambda d: d | {"group": ""}, "backup.group"),
            (lambda d: d | {"taken_at_ms": -1}, "backup.taken_at_ms"),
            (lambda d: d | {"taken_at_ms": 1.5}, "backup.taken_at_ms"),
            (lambda d: d | {"cluster_id": 7}, "backup.cluster_id"),
            (lambda d: d | {"offsets": {}}, "backup.offsets must be a list"),
            (
                lambda d: d | {"offsets": [{"topic": "t", "partition": 0}]},
                r"backup.offsets\[0\].offset is missing",
            ),
            (
                lambda d: d | {"offsets": [{"topic": "t", "partition": 0, "offset": -3}]},
                r"offsets\[0\].offset",
            ),
            (
                lambda d: d | {"offsets": [{"topic": "t t", "partition": 0, "offset": 3}]},
                r"offsets\[0\].topic",
            ),
            (
                lambda d: d | {"offsets": [{"topic": "t", "partition": True, "offset": 3}]},
                "partition",
            ),
            (lambda d: d | {"offsets": d["offsets"] + d["offsets"][:1]}, "twice"),
            (lambda d: d | {"uncommitted": [{"topic": "t", "partition": 0}]}, "twice"),
            (lambda d: d | {"surprise": 1}, "unknown field 'surprise'"),
        ],
    )
    def test_from_dict_is_strict(self, mutate: object, message: str) -> None:
        data = mutate(sample_backup().to_dict())  # type: ignore[operator]
        with pytest.raises(InvalidInputError, match=message):
            OffsetsBackup.from_dict(data)

    def test_restore(self) -> None:
        log_offsets = logs({"t": [(10, 100), (70, 100), (0, 0)]})
        committed = {TP("t", 0): 90, TP("t", 1): 90, TP("t", 2): 0}
        p = plan_restore(sample_backup(), group(), committed, log_offsets, NOW)
        assert p.strategy.kind is ResetKind.RESTORE
        assert targets(p) == {"t:0": 10, "t:1": 70}  # both clamped: retention moved on
        assert all(r.clamped for r in p.rows)
        assert any(w.startswith("t:2: had no committed offset") for w in p.warnings)

    def test_restore_skips_deleted_topic_only_when_asked(self) -> None:
        b = OffsetsBackup("g", NOW, {TP("gone", 0): 3, TP("t", 0): 20}, "r")
        with pytest.raises(NotFoundError, match="no longer exist.*gone:0.*--skip-missing"):
            plan_restore(b, group(), {}, LOGS)
        p = plan_restore(b, group(), {}, LOGS, skip_missing=True)
        assert targets(p) == {"t:0": 20}
        assert any("gone:0" in w for w in p.warnings)

    def test_restore_checks_group(self) -> None:
        with pytest.raises(InvalidInputError, match="for group 'g', not 'h'"):
            plan_restore(sample_backup(), group(gid="h"), {}, LOGS)
        p = plan_restore(sample_backup(), group(GroupState.STABLE), {}, LOGS)
        assert p.is_refused


CAS_COMMITTED = {TP("t", 0): 50, TP("t", 1): 60}


class TestCompareAndSet:
    committed = CAS_COMMITTED

    def make(self) -> ResetPlan:
        return plan(ResetStrategy.to_latest(), ALL_T, self.committed, LOGS)

    def test_unchanged_passes(self) -> None:
        check_unchanged(self.make(), group(), dict(self.committed))

    def test_group_became_active(self) -> None:
        member = Member("m1", "c1", "/10.0.0.1", (TP("t", 0),))
        with pytest.raises(RefusedError, match="Stable with 1 member;"):
            check_unchanged(
                self.make(), group(GroupState.STABLE, members=(member,)), self.committed
            )

    def test_offset_moved_or_appeared(self) -> None:
        with pytest.raises(RefusedError, match=r"t:1: 60 -> 61"):
            check_unchanged(self.make(), group(), {TP("t", 0): 50, TP("t", 1): 61})
        with pytest.raises(RefusedError, match=r"t:2: none -> 3"):
            check_unchanged(self.make(), group(), {**self.committed, TP("t", 2): 3})

    def test_offsets_outside_scope_may_move(self) -> None:
        check_unchanged(self.make(), group(), {**self.committed, TP("other", 0): 1})

    def test_refused_plan(self) -> None:
        p = plan(ResetStrategy.to_latest(), ALL_T, self.committed, LOGS, state=GroupState.STABLE)
        with pytest.raises(RefusedError):
            check_unchanged(p, group(), self.committed)


# ------------------------------------------------------------------ properties


topic_names = st.from_regex(r"[a-z][a-z0-9._-]{0,29}", fullmatch=True)


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[
    ResetRequest,
    dict[TopicPartition, int],
    dict[TopicPartition, PartitionOffsets],
    dict[TopicPartition, int | None],
]:
    topics = draw(st.lists(topic_names, min_size=1, max_size=3, unique=True))
    log_offsets: dict[TopicPartition, PartitionOffsets] = {}
    for topic in topics:
        for p in range(draw(st.integers(1, 4))):
            start = draw(st.integers(0, 1000))
            end = start + draw(st.integers(0, 1000))
            log_offsets[TP(topic, p)] = PartitionOffsets(TP(topic, p), start, end)
    tps = sorted(log_offsets)
    committed = {tp: draw(st.integers(0, 2500)) for tp in tps if draw(st.booleans())}
    kind = draw(st.sampled_from(list(ResetKind)))
    offsets = {tp: draw(st.integers(0, 2500)) for tp in tps if draw(st.booleans())} or {tps[0]: 7}
    strategy = {
        ResetKind.TO_EARLIEST: ResetStrategy.to_earliest(),
        ResetKind.TO_LATEST: ResetStrategy.to_latest(),
        ResetKind.TO_CURRENT: ResetStrategy.to_current(),
        ResetKind.TO_OFFSET: ResetStrategy.to_offset(draw(st.integers(0, 2500))),
        ResetKind.SHIFT_BY: ResetStrategy.shift_by(draw(st.integers(-3000, 3000))),
        ResetKind.TO_DATETIME: ResetStrategy.to_datetime(draw(st.integers(0, NOW))),
        ResetKind.BY_DURATION: ResetStrategy.by_duration(f"PT{draw(st.integers(0, 10**6))}S"),
        ResetKind.FROM_FILE: ResetStrategy.from_file(offsets),
        ResetKind.RESTORE: ResetStrategy.restore(offsets),
    }[kind]
    if kind is ResetKind.SHIFT_BY:
        committed.update({tp: draw(st.integers(0, 2500)) for tp in tps if tp not in committed})
    scope: ResetScope | None
    if kind in (ResetKind.FROM_FILE, ResetKind.RESTORE) and draw(st.booleans()):
        scope = None
    elif draw(st.booleans()):
        scope = ResetScope.of_all_topics()
    else:
        scope = ResetScope.of_topics(
            draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
        )
    # answers a broker could give: an offset in the log, or none
    times = {
        tp: draw(st.one_of(st.none(), st.integers(lo.log_start, lo.log_end)))
        for tp, lo in log_offsets.items()
    }
    return ResetRequest("g", strategy, scope), committed, log_offsets, times


@settings(max_examples=300)
@given(scenarios(), st.sampled_from(list(GroupState)))
def test_targets_within_log_and_inputs_untouched(
    scenario: tuple[
        ResetRequest,
        dict[TopicPartition, int],
        dict[TopicPartition, PartitionOffsets],
        dict[TopicPartition, int | None],
    ],
    state: GroupState,
) -> None:
    request, committed, log_offsets, times = scenario
    description = group(state)
    before = copy.deepcopy((request, committed, log_offsets, times, description))
    p = plan_offset_reset(request, description, committed, log_offsets, times, NOW)
    assert (request, committed, log_offsets, times, description) == before
    assert p.is_refused == (not state.is_inactive)
    for row in p.rows:
        log = log_offsets[row.tp]
        if request.strategy.kind is ResetKind.TO_CURRENT:
            assert row.target == committed.get(row.tp, log.log_end)
        else:
            assert log.log_start <= row.target <= log.log_end
        assert row.current == committed.get(row.tp)
        assert (row.records_skipped or 0) >= 0 and (row.records_replayed or 0) >= 0
    assert [r.tp for r in p.rows] == sorted(r.tp for r in p.rows)
    assert ResetPlan.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    if p.rows:
        assert parse_offsets_csv(p.to_csv()) == {None: p.offsets_to_commit()}


group_ids = st.text(
    st.characters(exclude_characters="\n\r\x00", exclude_categories=["Cs"]),
    min_size=1,
    max_size=40,
)


@given(
    st.dictionaries(
        group_ids,
        st.dictionaries(
            st.tuples(topic_names, st.integers(0, 2**31 - 1)),
            st.integers(0, 2**63 - 1),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=4,
    )
)
def test_multi_group_csv_round_trip(data: dict[str, dict[tuple[str, int], int]]) -> None:
    plans = []
    for gid, rows in data.items():
        row_objs = tuple(
            ResetRow(TP(t, p), None, off, 0, off) for (t, p), off in sorted(rows.items())
        )
        plans.append(ResetPlan(gid, GroupState.EMPTY, ResetStrategy.to_latest(), None, row_objs))
    text = export_csv(plans, with_group=True)
    expected = {gid: {TP(t, p): off for (t, p), off in rows.items()} for gid, rows in data.items()}
    assert parse_offsets_csv(text) == expected


@given(
    st.integers(1, 6),
    st.integers(0, 5),
    st.sampled_from(["t,0", "t,x,1", "t,0,-1", "a b,0,1", "t,0,1,2,3"]),
)
def test_bad_line_reported_by_number(good_lines: int, position: int, bad: str) -> None:
    lines = [f"t,{i},{i}" for i in range(good_lines)]
    position = min(position, len(lines))
    lines.insert(position, bad)
    with pytest.raises(InvalidInputError, match=rf"^offsets file line {position + 1}: "):
        parse_offsets_csv("\n".join(lines))


@given(
    st.builds(
        OffsetsBackup,
        group_id=group_ids,
        taken_at_ms=st.integers(0, 2**63 - 1),
        offsets=st.dictionaries(
            st.builds(TP, topic_names, st.integers(0, 100)), st.integers(0, 2**63 - 1)
        ),
        reason=st.text(),
        cluster_id=st.none() | st.text(min_size=1),
        bootstrap=st.none() | st.text(min_size=1),
    )
)
def test_backup_json_round_trip(backup: OffsetsBackup) -> None:
    assert OffsetsBackup.from_dict(json.loads(json.dumps(backup.to_dict()))) == backup
