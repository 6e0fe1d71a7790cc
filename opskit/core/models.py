"""Domain types shared by the whole code base: frozen, plain, serialisable."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    """A partition of a topic. A named tuple, not a dataclass: reports key dicts and
    sets by it hundreds of thousands of times, and a tuple hashes and compares in C
    (about ten times faster). Ordered by topic, then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


class PartitionOffsets(NamedTuple):
    """Log state of one partition as read from its leader.

    ``log_end`` is the high watermark (what consumers can read up to), the same
    value Kafka's ``kafka-consumer-groups.sh`` calls LOG-END-OFFSET.
    """

    tp: TopicPartition
    log_start: int
    log_end: int


class GroupState(str, Enum):
    """Consumer group states, spelled as Kafka's tools print them."""

    STABLE = "Stable"
    EMPTY = "Empty"
    DEAD = "Dead"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    UNKNOWN = "Unknown"

    @property
    def is_inactive(self) -> bool:
        """True when no member consumes: the only states where offsets may be changed."""
        return self in (GroupState.EMPTY, GroupState.DEAD)

    @classmethod
    def parse(cls, name: str | None) -> GroupState:
        """The state a broker names (DescribeGroups, ListGroups v4+); UNKNOWN for None
        or a name opskit does not know."""
        return _GROUP_STATES.get(name or "", cls.UNKNOWN)


_GROUP_STATES = {s.value: s for s in GroupState}


@dataclass(frozen=True)
class Member:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: GroupState
    members: tuple[Member, ...] = ()
    protocol_type: str = "consumer"
    coordinator: int | None = None

    def member_for(self, tp: TopicPartition) -> Member | None:
        for m in self.members:
            if tp in m.assignment:
                return m
        return None


class Anomaly(str, Enum):
    """Broker answers that are impossible or mean something went wrong."""

    #: committed offset is past the high watermark: the log was truncated
    #: (unclean leader election, topic recreated) or offsets were set by hand.
    COMMITTED_BEYOND_LOG_END = "committed_beyond_log_end"
    #: committed offset is below the log start: records were deleted by retention
    #: (or DeleteRecords) before the group read them; they are lost to it.
    COMMITTED_BELOW_LOG_START = "committed_below_log_start"
    #: log start past log end: a broker answer that cannot be true.
    LOG_START_BEYOND_LOG_END = "log_start_beyond_log_end"
    #: the group has no committed offset for this partition.
    NO_COMMITTED_OFFSET = "no_committed_offset"
    #: the group has offsets for a topic or partition that no longer exists.
    PARTITION_MISSING = "partition_missing"
    #: the partition exists but its log offsets could not be read (no leader: offline).
    OFFSETS_UNAVAILABLE = "offsets_unavailable"
    #: the broker's ListOffsets (latest) and Fetch high watermark disagreed; records
    #: fetched past the listed end settle it: log end and lag use the Fetch answer.
    LOG_END_FROM_FETCH = "log_end_from_fetch"
    #: the broker's ListOffsets and Fetch answers contradict each other and nothing
    #: settles which is right: log end and lag unknown (the group is UNKNOWN).
    LOG_END_INCONSISTENT = "log_end_inconsistent"
    #: records exist at and past the log end the broker reports (a Fetch at that end
    #: returned them): the broker lost its log end, e.g. a broker that keeps high
    #: watermarks in memory only restarted; log end and lag unknown (the group is UNKNOWN).
    LOG_END_LOST = "log_end_lost"
    #: the committed offset is negative (below Kafka's -1 for "none"): a client committed
    #: something that is not an offset; lag unknown (the group is UNKNOWN).
    COMMITTED_INVALID = "committed_invalid"
    #: the committed offset could not be read: OffsetFetch answered an error for the
    #: partition (TOPIC_AUTHORIZATION_FAILED: no Describe ACL on its topic); lag unknown
    #: (the group is UNKNOWN).
    COMMITTED_UNREADABLE = "committed_unreadable"


ANOMALY_MEANING: dict[Anomaly, str] = {
    Anomaly.COMMITTED_BEYOND_LOG_END: (
        "committed offset is past the log end the broker reports: the broker lost its log end "
        "(e.g. a broker that keeps it in memory restarted), the log was truncated (unclean "
        "leader election, topic deleted and recreated) or the offset was set by hand; lag shown "
        "as 0 but not known: the group is UNKNOWN, not OK"
    ),
    Anomaly.COMMITTED_BELOW_LOG_START: (
        "committed offset is below the log start: retention deleted records the group "
        "never read; they are lost to it"
    ),
    Anomaly.LOG_START_BEYOND_LOG_END: "broker reported log start beyond log end (impossible answer)",
    Anomaly.NO_COMMITTED_OFFSET: "the group has never committed an offset for this partition",
    Anomaly.COMMITTED_INVALID: (
        "the committed offset is negative, not an offset (a client committed it; Kafka keeps "
        "it and its own tool shows '-'): where the group would resume is not known, so its "
        "lag is not known: the group is UNKNOWN, not OK"
    ),
    Anomaly.COMMITTED_UNREADABLE: (
        "the committed offset could not be read: the broker answered an error for this "
        "partition (TOPIC_AUTHORIZATION_FAILED: the principal lacks the Describe ACL on the "
        "topic, which also hides the topic itself); its lag is not known: the group is "
        "UNKNOWN, not OK"
    ),
    Anomaly.PARTITION_MISSING: "the group has an offset for a partition that does not exist",
    Anomaly.OFFSETS_UNAVAILABLE: (
        "log offsets could not be read (partition leader unavailable: offline partition?)"
    ),
    Anomaly.LOG_END_FROM_FETCH: (
        "the broker's ListOffsets (latest) disagreed with its own Fetch high watermark, and "
        "records exist past the listed end: log end and lag are taken from the Fetch high "
        "watermark (the broker misreports ListOffsets)"
    ),
    Anomaly.LOG_END_INCONSISTENT: (
        "the broker's ListOffsets and Fetch answers contradict each other and no record settles "
        "which is right: log end and lag are unknown (UNKNOWN, not OK)"
    ),
    Anomaly.LOG_END_LOST: (
        "records exist at and past the log end the broker reports (a Fetch there returned "
        "them): the broker lost its log end (e.g. a broker that keeps high watermarks in memory "
        "restarted); log end and lag are unknown (UNKNOWN, not OK)"
    ),
}


class PartitionLag(NamedTuple):
    """Lag of one group partition. Immutable; a named tuple rather than a frozen
    dataclass because a report builds one per group partition (tens of thousands)
    and a tuple is built about three times faster."""

    tp: TopicPartition
    committed: int | None
    log_start: int | None
    log_end: int | None
    #: never negative; None when unknown (no commit, or partition missing)
    lag: int | None
    member: Member | None = None
    anomalies: tuple[Anomaly, ...] = ()
    #: records deleted before the group read them (committed below log start)
    records_lost: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "committed_offset": self.committed,
            "log_start_offset": self.log_start,
            "log_end_offset": self.log_end,
            "lag": self.lag,
            "records_lost": self.records_lost,
            "consumer_id": self.member.member_id if self.member else None,
            "client_id": self.member.client_id if self.member else None,
            "host": self.member.host if self.member else None,
            "anomalies": [a._value_ for a in self.anomalies] if self.anomalies else [],
        }


@dataclass(frozen=True)
class TopicLag:
    topic: str
    #: the known lag: a floor when partitions_lag_unknown > 0
    lag: int
    partitions: int
    partitions_without_commit: int
    #: partitions whose lag could not be known (an anomaly of ``core.lag.UNKNOWN_LAG``)
    partitions_lag_unknown: int = 0


class Severity(str, Enum):
    OK = "OK"
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"
    UNKNOWN = "UNKNOWN"

    @property
    def nagios_code(self) -> int:
        return {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}[self.value]


@dataclass(frozen=True)
class LagThresholds:
    """Per-group lag thresholds in messages (HIP-30: 100K warn, 1M critical)."""

    warn: int = 100_000
    crit: int = 1_000_000

    def __post_init__(self) -> None:
        if self.warn < 0 or self.crit < 0:
            raise ValueError("lag thresholds must be non-negative")
        if self.warn > self.crit:
            raise ValueError(f"warn threshold {self.warn} is above critical {self.crit}")


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    state: GroupState
    partitions: tuple[PartitionLag, ...]
    members: int
    total_lag: int
    topics: tuple[TopicLag, ...]
    severity: Severity = Severity.OK
    thresholds: LagThresholds = field(default_factory=LagThresholds)

    @property
    def anomalies(self) -> tuple[tuple[TopicPartition, Anomaly], ...]:
        return tuple((p.tp, a) for p in self.partitions for a in p.anomalies)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group_id,
            "state": self.state.value,
            "members": self.members,
            "total_lag": self.total_lag,
            "severity": self.severity.value,
            "thresholds": {"warn": self.thresholds.warn, "crit": self.thresholds.crit},
            "topics": [
                {
                    "topic": t.topic,
                    "lag": t.lag,
                    "partitions": t.partitions,
                    "partitions_without_commit": t.partitions_without_commit,
                }
                for t in self.topics
            ],
            "partitions": [p.to_dict() for p in self.partitions],
        }
