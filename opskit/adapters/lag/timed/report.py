"""A lag report with time: the age of the oldest unconsumed record of each partition
(:func:`opskit.core.timing.partition_lag_time`, from record timestamps) and the
retention headroom (:func:`opskit.core.timing.retention_risk`, from the topics'
``retention.ms`` / ``retention.bytes`` / ``cleanup.policy``), computed when used."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from opskit.adapters.kafka.record_times import Position, RecordTime
from opskit.adapters.lag.source import LagReport
from opskit.core.lag import oldest_unconsumed_offset
from opskit.core.models import (
    GroupLag,
    PartitionLag,
    Severity,
    TopicPartition,
)
from opskit.core.timing.group_partition import USUAL_FIELDS, group_partition_time, usual_time
from opskit.core.timing.lag_time import LagTime
from opskit.core.timing.retention import RetentionRisk

#: lag_time_basis of a partition whose records the principal may not read
READ_DENIED = "read_denied"


class PartitionTime(NamedTuple):
    lag_time: LagTime
    retention: RetentionRisk | None


@dataclass
class TimedLagReport:
    """A lag report, the instant it describes, and per-partition lag in time.

    Lag in time is kept as what it is computed from (the records read, each topic's
    retention, partition sizes); :attr:`times` computes the per-partition objects on
    first use, and :meth:`to_dict` builds the usual partitions' fields directly
    without them (a report has tens of thousands of group partitions)."""

    report: LagReport
    now_ms: int
    time_read: bool = False
    #: partition sizes (DescribeLogDirs), read only for topics with retention.bytes set
    sizes: dict[TopicPartition, int] = field(default_factory=dict)
    #: why sizes were needed but could not be read (None: read, or not needed)
    sizes_unavailable: str | None = None
    #: the record read at each read position (None: unknown)
    records: Mapping[Position, RecordTime | None] = field(default_factory=dict, repr=False)
    #: topic -> retention config (absent: unknown)
    retention: Mapping[str, RetentionConfig] = field(default_factory=dict, repr=False)
    #: topics whose records the principal may not read (no Read ACL): their lag in time is
    #: omitted with the basis ``read_denied``, never given as 0
    read_denied: frozenset[str] = frozenset()
    #: what the report leaves out and why (a missing ACL, ...), one line each
    notes: list[str] = field(default_factory=list)
    #: the whole answer is UNKNOWN (nothing visible that was asked for), whatever the groups
    unknown: bool = False

    @property
    def severity(self) -> Severity:
        return Severity.UNKNOWN if self.unknown else self.report.severity
    _times: dict[str, dict[TopicPartition, PartitionTime]] | None = field(
        default=None, init=False, repr=False)

    @property
    def groups(self) -> list[GroupLag]:
        return self.report.groups

    @property
    def times(self) -> dict[str, dict[TopicPartition, PartitionTime]]:
        """group -> partition -> times; empty when time was not read (--no-time)."""
        if self._times is None:
            self._times = {}
            if self.time_read:
                timer = self._timer()
                for g in self.report.groups:
                    self._times[g.group_id] = {
                        p.tp: PartitionTime._make(timer(p)) for p in g.partitions
                        if p.log_start is not None and p.log_end is not None}
        return self._times

    def partition_time(self, group_id: str, tp: TopicPartition) -> PartitionTime | None:
        return self.times.get(group_id, {}).get(tp)

    def lag_seconds(self, group_id: str) -> dict[TopicPartition, float | None]:
        return {tp: pt.lag_time.seconds for tp, pt in self.times.get(group_id, {}).items()}

    def max_lag_seconds(self, group_id: str) -> float | None:
        known = [
            s for s in self.lag_seconds(group_id).values() if s is not None and math.isfinite(s)
        ]
        return max(known) if known else None

    def _retention_of(self) -> Callable[[str], tuple[int, int] | None]:
        """topic -> (retention.ms, retention.bytes) or None, looked up once per topic."""
        by_topic: dict[str, tuple[int, int] | None] = {}
        retention = self.retention

        def of(topic: str) -> tuple[int, int] | None:
            if topic in by_topic:
                return by_topic[topic]
            rc = retention.get(topic)
            ret = by_topic[topic] = None if rc is None else (rc.retention_ms, rc.retention_bytes)
            return ret

        return of

    def _record_ts(self, p: PartitionLag) -> int | None:
        """Timestamp of the record at the partition's read position, when read."""
        off = oldest_unconsumed_offset(p)
        if off is None:
            return None
        rt = self.records.get((p.tp, off))
        return rt.timestamp_ms if rt is not None and rt.offset >= off else None

    def _timer(self) -> Callable[[PartitionLag], tuple[LagTime, RetentionRisk | None]]:
        """Lag in time and retention risk of a group partition (log start and end known)."""
        now, sizes, retention_of, record_ts = self.now_ms, self.sizes, self._retention_of(), \
            self._record_ts

        def timer(p: PartitionLag) -> tuple[LagTime, RetentionRisk | None]:
            return group_partition_time(now, p, record_ts_ms=record_ts(p),
                                        retention=retention_of(p.tp.topic),
                                        partition_size_bytes=sizes.get(p.tp))

        return timer

    def to_dict(self) -> dict[str, Any]:
        """The lag report's dict, each partition and group with time fields added.

        Until :attr:`times` is used, a usual partition's fields (see
        :func:`opskit.core.timing.usual_time`) are computed directly from its record
        timestamp; any other partition goes through the general rules. Both give the
        same values as the objects in :attr:`times` (tests/unit/test_lag_sampler.py)."""
        d = self.report.to_dict()
        d["severity"] = self.severity.value
        d["time_read"] = self.time_read
        d["notes"] = list(self.notes)
        denied = self.read_denied
        d["sizes_unavailable"] = self.sizes_unavailable
        sizes, now = self.sizes, self.now_ms
        direct = self._times is None and self.time_read
        timer, retention_of, record_ts = self._timer(), self._retention_of(), self._record_ts
        basis, confidence, by_time, notes = USUAL_FIELDS
        for g, gd in zip(self.report.groups, d["groups"], strict=True):
            times = {} if direct else self.times.get(g.group_id, {})
            most: float | None = None
            for p, pd in zip(g.partitions, gd["partitions"], strict=True):
                lt: LagTime | None = None
                rr: RetentionRisk | None = None
                usual: tuple[float, int, int] | None = None
                lag: tuple[float | None, str | None, str | None, int | None]
                ret: tuple[float | None, str | None, bool | None, int | None, list[str]]
                if direct:
                    if p.log_start is not None and p.log_end is not None:
                        ts = record_ts(p)
                        usual = usual_time(now, p, ts, retention_of(p.tp.topic))
                        if usual is None:
                            lt, rr = timer(p)
                elif (pt := times.get(p.tp)) is not None:
                    lt, rr = pt
                # (lag seconds, basis, confidence, record timestamp) and (retention time
                # left, basis, eligible now, bytes headroom, notes); enum ._value_: the
                # same string as .value, read faster
                if usual is not None:
                    age, _skew, left_ms = usual
                    lag = (age, basis, confidence, ts)
                    ret = (left_ms / 1000.0, by_time, left_ms == 0, None, list(notes))
                else:
                    lag = ((lt.seconds, lt.basis._value_, lt.confidence._value_,
                            lt.record_timestamp_ms) if lt is not None else (None, None, None, None))
                    ret = ((rr.time_left_seconds, rr.basis._value_, rr.eligible_now,
                            rr.bytes_headroom, list(rr.notes)) if rr is not None
                           else (None, None, None, None, []))
                secs = lag[0]
                if secs is not None and math.isfinite(secs) and (most is None or secs > most):
                    most = secs
                if denied and lag[0] is None and lag[1] == "unknown" and p.tp.topic in denied:
                    lag = (None, READ_DENIED, lag[2], None)
                (pd["lag_seconds"], pd["lag_time_basis"], pd["lag_time_confidence"],
                 pd["oldest_unconsumed_timestamp_ms"]) = lag
                (pd["retention_time_left_seconds"], pd["retention_basis"],
                 pd["retention_eligible_now"]) = ret[:3]
                pd["partition_size_bytes"] = sizes.get(p.tp)
                # retention.bytes minus the (estimated) unconsumed bytes: how much newer data
                # can still arrive before the oldest unconsumed record's segment may be deleted
                pd["retention_bytes_headroom"], pd["retention_notes"] = ret[3:]
            gd["max_lag_seconds"] = most
        return d


#: the topic configs :class:`RetentionConfig` reads
RETENTION_KEYS = ("cleanup.policy", "retention.ms", "retention.bytes")


@dataclass(frozen=True)
class RetentionConfig:
    retention_ms: int = -1
    retention_bytes: int = -1

    @classmethod
    def from_topic_config(cls, cfg: Mapping[str, tuple[str | None, bool]]) -> RetentionConfig:
        policy = (cfg.get("cleanup.policy", ("delete", True))[0] or "delete").lower()
        if "delete" not in policy:  # compact only: retention never deletes
            return cls(-1, -1)
        return cls(_int_cfg(cfg, "retention.ms"), _int_cfg(cfg, "retention.bytes"))


def _int_cfg(cfg: Mapping[str, tuple[str | None, bool]], key: str) -> int:
    raw = cfg.get(key, (None, True))[0]
    try:
        v = int(raw) if raw is not None else -1
    except ValueError:
        return -1
    return max(v, -1)


def add_lag_times(
    report: LagReport,
    records: Mapping[Position, RecordTime | None],
    retention: Mapping[str, RetentionConfig],
    now_ms: int,
    sizes: Mapping[TopicPartition, int] | None = None,
) -> TimedLagReport:
    """Lag in time and retention risk per partition from already-read records and
    partition sizes (no I/O; computed when used). ``sizes`` feeds the retention.bytes
    headroom."""
    return TimedLagReport(report, now_ms, time_read=True, sizes=dict(sizes or {}),
                          records=records, retention=retention)
