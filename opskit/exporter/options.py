"""The exporter's settings and its cardinality filters (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from opskit.errors import UsageError


class Granularity(str, Enum):
    PARTITION = "partition"
    TOPIC = "topic"


def _compile(patterns: tuple[str, ...], flag: str) -> tuple[re.Pattern[str], ...]:
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise UsageError(f"{flag} {p!r} is not a valid regular expression: {e}") from e
    return tuple(out)


_OPERATORS = set("*+?[](){}|^$")


def literal_name(pattern: str) -> str | None:
    """The one name a pattern spells out (no regex operator but '.' and backslash
    escapes), or None. On a broker that cannot list groups these are the groups read."""
    name = re.sub(r"\\(.)", r"\1", pattern)
    if not name or any(c in _OPERATORS for c in re.sub(r"\\.", "", pattern)):
        return None
    return name if re.fullmatch(pattern, name) else None


@dataclass(frozen=True)
class NameFilter:
    """A name is kept when it fully matches some allow pattern (or there are none)
    and fully matches no deny pattern."""

    allow: tuple[re.Pattern[str], ...] = ()
    deny: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def of(cls, allow: list[str] | tuple[str, ...] | None, deny: list[str] | tuple[str, ...] | None,
           what: str) -> NameFilter:
        return cls(_compile(tuple(allow or ()), f"--{what}-allow"),
                   _compile(tuple(deny or ()), f"--{what}-deny"))

    @property
    def active(self) -> bool:
        return bool(self.allow or self.deny)

    def keep(self, name: str) -> bool:
        if self.allow and not any(p.fullmatch(name) for p in self.allow):
            return False
        return not any(p.fullmatch(name) for p in self.deny)


@dataclass(frozen=True)
class ExporterOptions:
    interval_s: float = 15.0
    #: a cycle running longer than this counts as a timeout and marks Kafka down
    collection_timeout_s: float = 60.0
    #: per-request Kafka timeout
    kafka_timeout_s: float = 10.0
    groups: NameFilter = field(default_factory=NameFilter)
    topics: NameFilter = field(default_factory=NameFilter)
    granularity: Granularity = Granularity.PARTITION
    #: record reads (lag in seconds) of uncached positions per cycle
    lag_time_budget: int = 2000
    lag_time: bool = True
    #: serve the last good snapshot this long after collection starts failing
    stale_after_s: float = 60.0
    #: Burrow-style status window and the samples kept per partition in it
    status_window_s: float = 600.0
    status_samples: int = 10
    #: window of the per-topic produce rate
    rate_window_s: float = 300.0
    expected_brokers: int | None = None
    #: re-read topic configs (retention, min ISR) every this many cycles
    config_refresh_cycles: int = 20
    #: read partition sizes (DescribeLogDirs) for bytes/s and topic size
    log_dirs: bool = True
    #: ask DescribeQuorum / ListPartitionReassignments (kafka-python)
    kafka_python: bool = True
    #: start each cycle so that it ends just before the next expected scrape, when the
    #: scrapes are regular (see opskit.exporter.schedule); otherwise every interval
    align_to_scrapes: bool = True

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise UsageError("--interval must be positive")
        if self.collection_timeout_s <= 0:
            raise UsageError("--collection-timeout must be positive")
        if self.lag_time_budget < 0:
            raise UsageError("--lag-time-budget must be >= 0")
        if self.status_samples < 3:
            raise UsageError("--status-samples must be at least 3")
