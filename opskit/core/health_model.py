"""Cluster health's plain data (pure): the snapshot :mod:`opskit.core.health` evaluates
(brokers, partitions, the KRaft quorum, reassignments), the policy, and the report it
returns (findings, counts, the quorum summary). The rules are in that module."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opskit.core.models import Severity
from opskit.core.status.rank import worst_severity

#: Kafka's own default (leader.imbalance.per.broker.percentage)
DEFAULT_IMBALANCE_WARN_PCT = 10.0
#: metadata log records a quorum replica may trail the leader by before WARNING
DEFAULT_QUORUM_LAG_WARN = 1000

#: the checks that need each topic's min.insync.replicas
MIN_ISR_CHECKS = ("under_min_isr", "min_isr_above_rf", "at_min_isr")

CHECKS = (
    "brokers",
    "controller",
    "quorum",
    "offline_partitions",
    "under_min_isr",
    "min_isr_above_rf",
    "under_replicated",
    "at_min_isr",
    "preferred_leader_imbalance",
    "reassignments",
)


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1: no leader (offline)
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}:{self.partition}"


@dataclass(frozen=True)
class QuorumReplica:
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int | None = None  # epoch ms, None when unknown (-1 on the wire)
    last_caught_up_timestamp: int | None = None


@dataclass(frozen=True)
class QuorumInfo:
    leader_id: int  # -1: no leader
    leader_epoch: int
    high_watermark: int
    voters: tuple[QuorumReplica, ...]
    observers: tuple[QuorumReplica, ...] = ()


@dataclass(frozen=True)
class Reassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.topic}:{self.partition}"


@dataclass(frozen=True)
class ClusterHealthInput:
    """Everything the checks look at, as plain data."""

    brokers: tuple[int, ...]
    controller_id: int  # -1: none
    partitions: tuple[PartitionState, ...]
    min_isr: Mapping[str, int] = field(default_factory=dict)
    expected_brokers: int | None = None
    quorum: QuorumInfo | None = None
    #: why ``quorum`` is None (unsupported API, not KRaft, error); None when it was not asked
    quorum_error: str | None = None
    reassignments: tuple[Reassignment, ...] | None = None
    reassignments_error: str | None = None
    #: why topics' min.insync.replicas could not be read (they count as the default)
    min_isr_unknown: str | None = None
    #: no topic is visible and the principal may lack Describe on them: the message
    topics_invisible: str | None = None


@dataclass(frozen=True)
class HealthPolicy:
    imbalance_warn_pct: float = DEFAULT_IMBALANCE_WARN_PCT
    quorum_lag_warn: int = DEFAULT_QUORUM_LAG_WARN
    #: min.insync.replicas for a topic whose config is unknown (Kafka's default)
    default_min_isr: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.imbalance_warn_pct <= 100:
            raise ValueError(f"imbalance warning percentage {self.imbalance_warn_pct} is not in 0..100")
        if self.quorum_lag_warn < 0:
            raise ValueError("quorum lag threshold must be non-negative")
        if self.default_min_isr < 1:
            raise ValueError("default min.insync.replicas must be at least 1")


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class AffectedPartition:
    """A partition a finding is about, linked to its leader broker."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    #: the leader broker (or, offline, the preferred replica) is not registered
    leader_down: bool
    #: replicas whose broker is not registered
    down_replicas: tuple[int, ...] = ()
    min_isr: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "leader": self.leader,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "min_isr": self.min_isr,
            "leader_down": self.leader_down,
            "down_replicas": list(self.down_replicas),
        }


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    message: str
    partitions: tuple[AffectedPartition, ...] = ()
    brokers: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity.value,
            "message": self.message,
            "brokers": list(self.brokers),
            "partitions": [p.to_dict() for p in self.partitions],
        }


@dataclass(frozen=True)
class HealthCounts:
    brokers_registered: int = 0
    brokers_expected: int = 0
    partitions: int = 0
    urp: int = 0
    #: None (as at_min_isr) when some partition could not be judged (min ISR unreadable)
    under_min_isr: int | None = 0
    at_min_isr: int | None = 0
    offline: int = 0
    preferred_leader_imbalance: int = 0
    reassignments: int | None = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokers_registered": self.brokers_registered,
            "brokers_expected": self.brokers_expected,
            "partitions": self.partitions,
            "urp": self.urp,
            "under_min_isr": self.under_min_isr,
            "at_min_isr": self.at_min_isr,
            "offline": self.offline,
            "preferred_leader_imbalance": self.preferred_leader_imbalance,
            "reassignments": self.reassignments,
        }


@dataclass(frozen=True)
class QuorumSummary:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[int, ...]
    observers: tuple[int, ...]
    #: replica id -> records behind the leader's log end offset
    lag: Mapping[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "leader": self.leader_id,
            "leader_epoch": self.leader_epoch,
            "high_watermark": self.high_watermark,
            "voters": list(self.voters),
            "observers": list(self.observers),
            "lag": {str(k): v for k, v in sorted(self.lag.items())},
        }


@dataclass(frozen=True)
class HealthReport:
    findings: tuple[Finding, ...]
    counts: HealthCounts
    quorum: QuorumSummary | None = None
    brokers: tuple[int, ...] = ()
    controller_id: int = -1

    @property
    def severity(self) -> Severity:
        return worst_severity(f.severity for f in self.findings)

    def finding(self, check: str) -> Finding:
        return next(f for f in self.findings if f.check == check)

    @property
    def summary(self) -> str:
        """One line, Nagios style: ``CRITICAL: 1 offline, ...``."""
        bad = [f for f in self.findings if f.severity is not Severity.OK]
        if not bad:
            c = self.counts
            return (f"{self.severity.value}: {c.brokers_registered}/{c.brokers_expected} brokers, "
                    f"{c.partitions} partitions healthy")
        worst_first = sorted(bad, key=lambda f: -_rank(f.severity))
        return f"{self.severity.value}: " + "; ".join(f.message for f in worst_first)

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity.value,
            "summary": self.summary,
            "brokers": list(self.brokers),
            "controller_id": self.controller_id,
            "quorum": self.quorum.to_dict() if self.quorum is not None else None,
            "counts": self.counts.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
        }


def _rank(s: Severity) -> int:
    return {Severity.OK: 0, Severity.UNKNOWN: 1, Severity.WARNING: 2, Severity.CRITICAL: 3}[s]
