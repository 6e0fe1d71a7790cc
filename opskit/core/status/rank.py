"""Burrow-style statuses, their severities, and "worst of" for both."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from opskit.core.models import Severity


class Status(str, Enum):
    """Burrow-style partition (and group) status."""

    OK = "OK"
    WARN = "WARN"
    REWIND = "REWIND"
    STOP = "STOP"
    STALL = "STALL"
    ERR = "ERR"
    UNKNOWN = "UNKNOWN"

    @property
    def severity(self) -> Severity:
        return _STATUS_SEVERITY[self]

    @property
    def rank(self) -> int:
        """Position in "worst of" order: higher is worse."""
        return _STATUS_RANK[self]


_STATUS_SEVERITY: dict[Status, Severity] = {
    Status.OK: Severity.OK,
    Status.WARN: Severity.WARNING,
    Status.REWIND: Severity.WARNING,
    Status.STOP: Severity.WARNING,
    Status.STALL: Severity.CRITICAL,
    Status.ERR: Severity.CRITICAL,
    Status.UNKNOWN: Severity.UNKNOWN,
}
_STATUS_RANK: dict[Status, int] = {
    Status.OK: 0,
    Status.UNKNOWN: 1,
    Status.WARN: 2,
    Status.REWIND: 3,
    Status.STOP: 4,
    Status.STALL: 5,
    Status.ERR: 6,
}
SEVERITY_RANK: dict[Severity, int] = {
    Severity.OK: 0,
    Severity.UNKNOWN: 1,
    Severity.WARNING: 2,
    Severity.CRITICAL: 3,
}


def status_severity(status: Status) -> Severity:
    """Severity (and so Nagios exit code) of a status; see the module docstring."""
    return status.severity


def worst_status(statuses: Iterable[Status]) -> Status:
    """Worst of ``statuses`` (OK for none)."""
    return max(statuses, key=lambda s: s.rank, default=Status.OK)


def worst_severity(severities: Iterable[Severity]) -> Severity:
    """Worst of ``severities`` in Nagios order CRITICAL > WARNING > UNKNOWN > OK."""
    return max(severities, key=lambda s: SEVERITY_RANK[s], default=Severity.OK)
