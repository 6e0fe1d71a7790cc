"""Status of a partition and of a group, as evaluated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opskit.core.models import Severity, TopicPartition
from opskit.core.status.rank import Status


@dataclass(frozen=True)
class PartitionStatus:
    tp: TopicPartition
    status: Status
    #: one line for on-call: what the offsets did and why that is the status
    explanation: str
    #: latest lag in messages; None without a committed offset or samples
    lag: int | None = None
    committed: int | None = None
    log_end: int | None = None
    records_lost: int = 0
    samples: int = 0
    span_ms: int = 0
    #: True when there was enough history for the trend rules
    complete: bool = False
    #: age of the oldest unconsumed record, when the caller gave it
    lag_seconds: float | None = None

    @property
    def severity(self) -> Severity:
        return self.status.severity

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "status": self.status.value,
            "severity": self.severity.value,
            "explanation": self.explanation,
            "lag": self.lag,
            "lag_seconds": self.lag_seconds,
            "committed_offset": self.committed,
            "log_end_offset": self.log_end,
            "records_lost": self.records_lost,
            "samples": self.samples,
            "span_ms": self.span_ms,
            "complete": self.complete,
        }


@dataclass(frozen=True)
class GroupStatus:
    group_id: str
    #: worst partition status (Burrow's view)
    status: Status
    #: what pages: worst of partition severities, HIP-30 lag, lag-seconds objectives
    severity: Severity
    partitions: tuple[PartitionStatus, ...]
    total_lag: int
    #: HIP-30 message-threshold severity of ``total_lag``
    lag_severity: Severity
    max_lag_seconds: float | None
    lag_seconds_severity: Severity
    #: why ``severity`` is what it is, one line each, worst first
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group_id,
            "status": self.status.value,
            "severity": self.severity.value,
            "total_lag": self.total_lag,
            "lag_severity": self.lag_severity.value,
            "max_lag_seconds": self.max_lag_seconds,
            "lag_seconds_severity": self.lag_seconds_severity.value,
            "reasons": list(self.reasons),
            "partitions": [p.to_dict() for p in self.partitions],
        }
