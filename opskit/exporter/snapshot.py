"""What one collection cycle saw, as plain frozen data (no I/O, no clock).

A :class:`Snapshot` is built by :func:`opskit.exporter.assemble.assemble_snapshot`
from broker answers and the exporter's bounded history, and turned into metric
families by :func:`opskit.exporter.families.build_families`. Values that are
unknown are ``None`` and become *absent* series, never NaN.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from opskit.core.models import Severity
from opskit.exporter.freshness import FamilyRead


@dataclass(frozen=True)
class BrokerSnap:
    node_id: int
    address: str  # host:port


class PartitionSnap(NamedTuple):
    """One partition of the cycle. A named tuple, not a frozen dataclass (as the other
    snapshot parts): a cycle builds one per partition, twice (tens of thousands), and a
    tuple is built about three times faster and is smaller."""

    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: None when the log offsets could not be read (offline partition, timeout)
    log_start: int | None = None
    log_end: int | None = None


@dataclass(frozen=True)
class TopicSnap:
    topic: str
    messages_in_per_second: float | None = None
    bytes_in_per_second: float | None = None
    size_bytes: int | None = None
    #: None when infinite (-1) or unknown
    retention_ms: int | None = None


class GroupPartitionSnap(NamedTuple):
    """One group partition of the cycle (a named tuple: one per group partition, see
    :class:`PartitionSnap`)."""

    topic: str
    partition: int
    committed: int | None
    #: never negative; None without a commit or log offsets
    lag: int | None
    #: age of the oldest unconsumed record; 0 when caught up; None when unknown
    lag_seconds: float | None = None


@dataclass(frozen=True)
class GroupTopicSnap:
    topic: str
    committed_sum: int | None
    lag_sum: int
    lag_seconds_max: float | None = None
    consume_rate: float | None = None
    catchup_eta_seconds: float | None = None
    falling_behind: bool | None = None
    retention_headroom_seconds: float | None = None
    records_lost: int = 0


@dataclass(frozen=True)
class GroupSnap:
    group_id: str
    state: str
    members: int | None
    severity: Severity
    #: Burrow-style status over the window; None when status is off
    status: str | None
    partitions: tuple[GroupPartitionSnap, ...] = ()
    topics: tuple[GroupTopicSnap, ...] = ()
    anomalies: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class QuorumNodeSnap:
    node: int
    role: str  # "voter" or "observer"
    lag: int


@dataclass(frozen=True)
class HealthSnap:
    brokers_expected: int | None = None
    under_replicated: int = 0
    #: None when min.insync.replicas was not read for a partition that needs it
    under_min_isr: int | None = 0
    at_min_isr: int | None = 0
    offline: int = 0
    preferred_leader_imbalance: int = 0
    #: None when reassignments could not be listed
    reassignments: int | None = None
    quorum_leader: int | None = None
    quorum_voters: int | None = None
    quorum_nodes: tuple[QuorumNodeSnap, ...] = ()


@dataclass(frozen=True)
class BrokerThrottleSnap:
    broker: int
    direction: str  # "leader" or "follower"
    bytes_per_second: int


@dataclass(frozen=True)
class TopicThrottleSnap:
    topic: str
    direction: str  # "leader" or "follower"
    replicas: int


@dataclass(frozen=True)
class Snapshot:
    """Everything served from one successful collection cycle."""

    taken_at_ms: int
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerSnap, ...]
    partitions: tuple[PartitionSnap, ...]
    topics: tuple[TopicSnap, ...]
    groups: tuple[GroupSnap, ...]
    health: HealthSnap = field(default_factory=HealthSnap)
    #: lag-in-seconds reads skipped this cycle because of the per-cycle budget
    lag_time_skipped: int = 0
    #: replication throttles set on brokers, and throttled replicas per topic
    broker_throttles: tuple[BrokerThrottleSnap, ...] = ()
    topic_throttles: tuple[TopicThrottleSnap, ...] = ()
    #: family -> the outcome of its latest read
    families: Mapping[str, FamilyRead] = field(default_factory=dict)
