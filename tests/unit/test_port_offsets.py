"""Offset resets read Kafka only through the reader port (issue #26).

A fake reader (no sockets: the admin points at a closed port and every read of its own
fails loudly) serves a cluster: the plans, the refusals and the failures must be built
from its answers, exactly as strict as from the admin's own reads."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from opskit.adapters.kafka.admin.client import (
    BrokerMeta,
    ClusterMeta,
    KafkaAdmin,
    OffsetsResult,
    PartitionMeta,
)
from opskit.adapters.kafka.capabilities import Capabilities
from opskit.adapters.kafka.log_dirs import PartitionSizes
from opskit.adapters.kafka.reader import (
    ClusterReader,
    CommitsRead,
    GroupsRead,
    Prefetch,
    TopicConfigs,
)
from opskit.adapters.kafka.record_times import Position, RecordTime, RecordTimeReader
from opskit.adapters.offsets import reads as offsets_reads
from opskit.adapters.offsets.admin import OffsetsAdmin
from opskit.adapters.offsets.reads import (
    GroupOffsetsState,
    plan_reset,
    read_group_state,
    read_log_offsets_of_topics,
)
from opskit.cli import exits
from opskit.cli.main import main
from opskit.core.connection import ConnectionConfig
from opskit.core.health import QuorumInfo, Reassignment
from opskit.core.log_end import LogEndSource, LogEndVerdict
from opskit.core.models import (
    GroupDescription,
    GroupState,
    Member,
    PartitionOffsets,
    TopicPartition,
)
from opskit.core.offset_reset.request import ResetRequest, ResetScope, ResetStrategy
from opskit.errors import (
    InconsistentStateError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotAuthorisedError,
    RefusedError,
)

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
NOWHERE = ConnectionConfig(bootstrap="127.0.0.1:1")  # nothing listens: a read would fail
NOW_MS = 1_700_000_100_000
#: every record of the fake's log: offset -> timestamp (ms), the same on both partitions
TS = {o: 1_700_000_000_000 + 1000 * o for o in range(100)}
LOG_END = {T0: 100, T1: 60}


@dataclass
class FakeReader:
    """One broker, topic ``orders`` (2 partitions, records at 0..log end), group
    ``billing`` committed 40 on partition 0 and 10 on partition 1."""

    state: GroupState = GroupState.EMPTY
    members: tuple[Member, ...] = ()
    blind: str | None = None
    #: group -> partition -> commit, as the port hands it on (a negative one below -1 too)
    commits: dict[TopicPartition, int] = field(default_factory=lambda: {T0: 40, T1: 10})
    unauthorised: bool = False
    log_errors: dict[TopicPartition, str] = field(default_factory=dict)
    contradicted: bool = False
    #: what offsets_for_times answers (None: the offset a real broker would)
    time_answers: dict[TopicPartition, int | None] | None = None
    #: read_groups raises this many times the coordinator-loading error first
    loading: int = 0
    #: partitions whose commit the broker answered with an error instead
    unreadable: dict[TopicPartition, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    closed: int = 0

    bootstrap = "fake:9092"
    principal = "User:ops"
    timeout = 5.0
    round_trips = 3

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        self.calls.append("metadata")
        ps = tuple(PartitionMeta(p, 1, (1,), (1,)) for p in (0, 1))
        return ClusterMeta("fake-cluster", 1, (BrokerMeta(1, "fake", 9092),), {"orders": ps})

    def topic_denied(self, topic: str) -> bool:
        return False

    def group_ids(self, md: ClusterMeta) -> list[str]:
        self.calls.append("group_ids")
        return ["billing"]

    def group_ids_everywhere(self, md: ClusterMeta) -> list[str]:
        return ["billing"]

    def unavailable(self, operation: str) -> list[str]:
        return []

    def groups_blind(self) -> str | None:
        return self.blind

    def read_groups(self, ids: Sequence[str], md: ClusterMeta) -> GroupsRead:
        self.calls.append("read_groups")
        if self.loading:
            self.loading -= 1
            raise KafkaUnavailableError("describing group billing: COORDINATOR_LOAD_IN_PROGRESS")
        if self.unauthorised:
            raise NotAuthorisedError("describing group billing: GROUP_AUTHORIZATION_FAILED")
        d = GroupDescription("billing", self.state, self.members)
        return GroupsRead({"billing": d}, {"billing": dict(self.commits)},
                          {"billing": dict(self.unreadable)})

    def committed_offsets(self, ids: Sequence[str], partitions: Sequence[TopicPartition]
                          ) -> CommitsRead:
        self.calls.append("committed_offsets")
        if self.unauthorised:
            return CommitsRead(unauthorised=frozenset(ids))
        return CommitsRead({"billing": {tp: o for tp, o in self.commits.items()
                                        if tp in partitions}}, {"billing": {}})

    def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
        self.calls.append("log_offsets")
        res = OffsetsResult({tp: PartitionOffsets(tp, 0, LOG_END[tp]) for tp in tps
                             if tp not in self.log_errors})
        res.errors.update(self.log_errors)
        return res

    def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                        suspects: Iterable[TopicPartition], md: ClusterMeta
                        ) -> dict[TopicPartition, LogEndVerdict]:
        self.calls.append("settle_log_ends")
        if not self.contradicted:
            return {}
        return {T1: LogEndVerdict(None, LogEndSource.INCONSISTENT,
                                  "ListOffsets 60, Fetch high watermark 70")}

    def send_prefetch(self, prefetch: Prefetch,
                      committed: Mapping[str, Mapping[TopicPartition, int]],
                      topics: Sequence[str] | None, md: ClusterMeta) -> bool:
        return False

    def topic_configs(self, topics: Iterable[str], keys: list[str] | None = None
                      ) -> TopicConfigs:
        return {}

    def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
        return {}

    def broker_configs(self, brokers: Iterable[int]) -> dict[int, dict[str, tuple[str | None, bool]]]:
        return {}

    def partition_sizes(self, topics: Iterable[str],
                        leaders: Mapping[TopicPartition, int] | None = None) -> PartitionSizes:
        return PartitionSizes({}, None)

    def read_quorum(self) -> QuorumInfo:
        raise AssertionError("a reset does not read the quorum")

    def read_reassignments(self) -> tuple[Reassignment, ...]:
        raise AssertionError("a reset does not read reassignments")

    def cached_record_time(self, position: Position) -> RecordTime | None:
        return None

    def cached_record_times(self, positions: Iterable[Position]) -> dict[Position, RecordTime]:
        return {}

    def read_record_times(self, positions: Iterable[Position]
                          ) -> dict[Position, RecordTime | None]:
        self.calls.append("read_record_times")
        return {(tp, o): RecordTime(o, TS[o], "create") if o < LOG_END[tp] else None
                for tp, o in positions}

    def close(self) -> None:
        self.closed += 1

    def offsets_for_times(self, tps: Iterable[TopicPartition], ts_ms: int, md: ClusterMeta
                          ) -> dict[TopicPartition, int | None]:
        self.calls.append("offsets_for_times")
        if self.time_answers is not None:
            return {tp: self.time_answers.get(tp) for tp in tps}
        return {tp: next((o for o in range(LOG_END[tp]) if TS[o] >= ts_ms), None) for tp in tps}


@pytest.fixture(autouse=True)
def no_kafka_but_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every way around the port fails loudly: the admin's reads (and its peek at record
    timestamps), the record-time reader. The admin's capabilities (probed by its first
    read, cached per bootstrap) name the broker in messages: a fixed answer here."""
    def boom(*_a: object, **_k: object) -> None:
        raise AssertionError("Kafka read outside the reader port")
    for name in ("metadata", "list_groups", "describe_groups", "committed_offsets",
                 "log_offsets", "offsets_for_times", "topic_configs", "broker_configs"):
        monkeypatch.setattr(KafkaAdmin, name, boom)
    for name in ("describe_groups_settled", "record_timestamps"):
        monkeypatch.setattr(OffsetsAdmin, name, boom)
    for name in ("__init__", "read", "cached"):
        monkeypatch.setattr(RecordTimeReader, name, boom)
    monkeypatch.setattr(KafkaAdmin, "capabilities",
                        property(lambda _s: Capabilities("fake:9092", "fake:9092", known=True)))


def _admin() -> OffsetsAdmin:
    return OffsetsAdmin(NOWHERE, timeout=1.0)


def _plan(fake: FakeReader, strategy: ResetStrategy, admin: OffsetsAdmin | None = None):  # type: ignore[no-untyped-def]
    state = read_group_state(fake, "billing")
    request = ResetRequest("billing", strategy, ResetScope.of_topics(["orders"]))
    return plan_reset(fake, admin or _admin(), request, state, NOW_MS)


def test_the_fake_is_a_cluster_reader() -> None:
    reader: ClusterReader = FakeReader()  # mypy checks the protocol here
    assert reader.bootstrap == "fake:9092"


def test_a_reset_plan_is_built_from_the_port_reads() -> None:
    fake = FakeReader()
    plan, cluster_id = _plan(fake, ResetStrategy.to_earliest())
    assert cluster_id == "fake-cluster"
    assert {r.tp: (r.current, r.target, r.log_end) for r in plan.rows} == {
        T0: (40, 0, 100), T1: (10, 0, 60)}
    assert plan.records_replayed == 50 and not plan.is_refused
    # group state and commits, then the log offsets, cross-checked
    assert fake.calls == ["metadata", "read_groups", "metadata", "log_offsets",
                          "settle_log_ends"]


def test_a_time_lookup_goes_through_the_port_and_is_checked_against_records() -> None:
    fake = FakeReader()
    plan, _ = _plan(fake, ResetStrategy.by_duration("PT70S"))  # now - 70 s: offset 30
    assert {r.tp: r.target for r in plan.rows} == {T0: 30, T1: 30}
    assert fake.calls[-2:] == ["offsets_for_times", "read_record_times"]


def test_a_time_lookup_a_record_disproves_is_refused_and_remembered() -> None:
    admin = _admin()
    fake = FakeReader(time_answers={T0: 0, T1: 0})  # the Hanzo gateway's answer
    with pytest.raises(InconsistentStateError, match="fake:9092 cannot be trusted"):
        _plan(fake, ResetStrategy.by_duration("PT70S"), admin)
    assert admin.quirks.untrusted_time_lookups is not None
    again = FakeReader()
    with pytest.raises(InconsistentStateError, match="cannot be trusted"):
        _plan(again, ResetStrategy.by_duration("PT70S"), admin)
    assert "offsets_for_times" not in again.calls  # refused at once for the rest of the run


def test_an_active_group_is_refused_as_strictly() -> None:
    member = Member("m-1", "c-1", "10.0.0.1", (T0, T1))
    plan, _ = _plan(FakeReader(state=GroupState.STABLE, members=(member,)),
                    ResetStrategy.to_earliest())
    assert plan.is_refused and "is Stable with 1 member" in (plan.refusal or "")
    with pytest.raises(RefusedError):
        plan.raise_if_refused()


def test_a_negative_commit_below_minus_one_is_no_offset() -> None:
    state = read_group_state(FakeReader(commits={T0: 40, T1: -7}), "billing")
    assert state.committed == {T0: 40}


def test_a_loading_coordinator_is_waited_for() -> None:
    fake = FakeReader(loading=2)
    state = read_group_state(fake, "billing")
    assert state.group.state is GroupState.EMPTY and fake.calls.count("read_groups") == 3


def test_refused_commits_are_not_a_group_without_commits() -> None:
    with pytest.raises(NotAuthorisedError):
        read_group_state(FakeReader(unauthorised=True), "billing")
    with pytest.raises(NotAuthorisedError, match="refused to User:ops"):
        read_group_state(FakeReader(unauthorised=True, blind="no DescribeGroups"), "billing")


def test_a_commit_the_broker_would_not_give_refuses_the_reset() -> None:
    """Not "no commit": the plan's current offsets, the backup and the undo would be wrong."""
    fake = FakeReader(commits={T0: 40}, unreadable={T1: "TOPIC_AUTHORIZATION_FAILED"})
    with pytest.raises(NotAuthorisedError, match=r"1 partition\(s\).*orders-1: TOPIC_AUTH"):
        _plan(fake, ResetStrategy.to_earliest())
    fake = FakeReader(commits={T0: 40}, unreadable={T1: "UNSTABLE_OFFSET_COMMIT"})
    with pytest.raises(KafkaOperationError, match="undo"):
        _plan(fake, ResetStrategy.to_earliest())
    # a partition of a topic outside the reset's scope does not stop it
    other = TopicPartition("hidden", 0)
    plan, _ = _plan(FakeReader(unreadable={other: "TOPIC_AUTHORIZATION_FAILED"}),
                    ResetStrategy.to_earliest())
    assert {r.tp for r in plan.rows} == {T0, T1}
    # ... but one of the group's topics does when the reset covers all of them
    state = read_group_state(FakeReader(unreadable={other: "TOPIC_AUTHORIZATION_FAILED"}),
                             "billing")
    request = ResetRequest("billing", ResetStrategy.to_earliest(), ResetScope.of_all_topics())
    with pytest.raises(NotAuthorisedError, match="hidden-0"):
        plan_reset(FakeReader(unreadable={other: "TOPIC_AUTHORIZATION_FAILED"}), _admin(),
                   request, state, NOW_MS)


def test_a_blind_broker_gives_commits_of_named_partitions_and_says_so() -> None:
    fake = FakeReader(blind="group state and members unknown: no DescribeGroups")
    state = read_group_state(fake, "billing")
    assert isinstance(state, GroupOffsetsState) and state.committed == {T0: 40, T1: 10}
    assert state.group.state is GroupState.UNKNOWN
    assert "a reset cannot be checked to be safe" in (state.state_note or "")
    assert "read_groups" not in fake.calls and "committed_offsets" in fake.calls


def test_failed_or_contradicted_log_offsets_fail_the_plan() -> None:
    with pytest.raises(KafkaOperationError, match="cannot read log offsets of 1 partitions"):
        read_log_offsets_of_topics(FakeReader(log_errors={T1: "NOT_LEADER"}), ["orders"])
    with pytest.raises(InconsistentStateError, match="contradict each other"):
        _plan(FakeReader(contradicted=True), ResetStrategy.to_latest())


def test_the_cli_reset_reads_through_one_session(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    sessions: list[FakeReader] = []

    def open_reader(_admin: KafkaAdmin) -> FakeReader:
        sessions.append(FakeReader())
        return sessions[-1]

    monkeypatch.setattr(offsets_reads, "open_reader", open_reader)
    rc = main(["offsets", "reset", "--all-groups", "--topic", "orders", "--shift-by", "-5",
               "--bootstrap-server", NOWHERE.bootstrap, "-o", "json"])
    out = capsys.readouterr()
    assert rc == exits.OK, out.err
    (g,) = json.loads(out.out)["groups"]
    rows = {(r["topic"], r["partition"]): r for r in g["rows"]}
    assert rows[("orders", 0)]["target_offset"] == 35 and rows[("orders", 1)]["target_offset"] == 5
    # the records replayed, read through the port: first and last of each range
    assert rows[("orders", 0)]["first_record_ts_ms"] == TS[35]
    assert rows[("orders", 0)]["last_record_ts_ms"] == TS[39]
    (s,) = sessions
    assert s.closed == 1 and s.calls[:2] == ["metadata", "group_ids"]
    assert "dry run" in out.err


def test_the_cli_export_reads_through_the_port(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeReader()
    monkeypatch.setattr(offsets_reads, "open_reader", lambda _admin: fake)
    rc = main(["offsets", "export", "--group", "billing", "--bootstrap-server",
               NOWHERE.bootstrap])
    assert rc == exits.OK
    assert capsys.readouterr().out.splitlines() == ["orders,0,40", "orders,1,10"]
    assert fake.closed == 1
