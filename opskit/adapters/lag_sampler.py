"""Lag with time, and lag sampled over a window for Burrow-style status.

:func:`collect_timed_lag` adds to a :class:`~opskit.adapters.lag_source.LagReport`
the age of the oldest unconsumed record of each partition
(:func:`opskit.core.timing.partition_lag_time`, from record timestamps read by
:class:`~opskit.adapters.record_times.RecordTimeReader`) and the retention
headroom (:func:`opskit.core.timing.retention_risk`, from the topics'
``retention.ms`` / ``retention.bytes`` / ``cleanup.policy``).

:func:`sample_lag` calls a collector every ``interval`` for a ``window`` (or
a number of rounds), feeding each round into a
:class:`~opskit.core.status.GroupWindow` per group; :func:`judge_groups` turns
the windows into statuses with rates and catch-up ETA. The clock and sleep are
parameters, so the loop is tested without waiting.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from opskit.adapters.kafka_admin import KafkaAdmin
from opskit.adapters.lag_source import LagReport, collect_lag
from opskit.adapters.protocol import cluster as cluster_wire
from opskit.adapters.protocol import offsets as offsets_wire
from opskit.adapters.protocol.client import API_FETCH, Call, InFlight, WireClient, WireUnsupported
from opskit.adapters.reader import PREFETCH_LANE, ClusterReader, open_reader
from opskit.adapters.record_times import Position, RecordTime, RecordTimeReader
from opskit.core.lag import oldest_unconsumed_offset
from opskit.core.log_end import LogEndSource
from opskit.core.models import (
    Anomaly,
    GroupLag,
    LagThresholds,
    PartitionLag,
    Severity,
    TopicPartition,
)
from opskit.core.status.evaluate import evaluate_group
from opskit.core.status.result import GroupStatus
from opskit.core.status.window import DEFAULT_MIN_SPAN_MS, GroupWindow, OffsetSample, StatusPolicy
from opskit.core.timing.group_partition import USUAL_FIELDS, group_partition_time, usual_time
from opskit.core.timing.lag_time import LagTime
from opskit.core.timing.rates import CatchUp, catch_up_eta, consume_rate, produce_rate
from opskit.core.timing.retention import RetentionRisk
from opskit.errors import KafkaUnavailableError, NotAuthorisedError

log = logging.getLogger(__name__)

#: lag_time_basis of a partition whose records the principal may not read
READ_DENIED = "read_denied"

Clock = Callable[[], float]
"""Epoch seconds (``time.time``)."""
Sleep = Callable[[float], None]


# --------------------------------------------------------------------------- lag with time


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


class _TimePrefetch:
    """The record at each committed offset and the topics' retention configs, fetched
    while the lag is computed (a :class:`~opskit.adapters.lag_source.Prefetch`): a
    lag report with lag in time then waits for no round of its own for them.

    The committed offset is the record lag in time needs unless retention deleted it
    (then the log start's, read afterwards by the reader) or the group is caught up
    (the fetch then finds nothing, cheaply). Anything this does not answer is read
    afterwards by the reader, as without it."""

    def __init__(self, reader: RecordTimeReader, cache: dict[str, RetentionConfig]) -> None:
        self.reader = reader
        self.cache = cache
        self.found: dict[Position, RecordTime] = {}
        self._hws: dict[TopicPartition, int] = {}
        self._want: dict[TopicPartition, list[int]] = {}
        self._fetches = 0
        self._configs = False
        #: the prefetch asked for configs and got no answer within the timeout (a broker
        #: that never answers DescribeConfigs): not asked again in this collection
        self.configs_unanswered = False
        self._inflight: InFlight | None = None

    def send(self, client: WireClient, committed: Mapping[TopicPartition, list[int]],
             leaders: Mapping[TopicPartition, int], deadline: float) -> bool:
        calls: list[Call] = []
        want = self.reader.uncached_offsets(committed)
        try:
            if want:
                v = client.version(API_FETCH, 4, 11, deadline)
                self._want = want
                calls, _no_leader = offsets_wire.fetch_calls(v, want, leaders)
            self._fetches = len(calls)
            topics = sorted({tp.topic for tp in committed} - set(self.cache))
            if topics:
                calls.append(cluster_wire.topic_configs_call(client, topics, list(RETENTION_KEYS),
                                                             deadline))
                self._configs = True
            if not calls:
                return False
            per_node: dict[int, int] = {}
            for node, _req in calls:
                per_node[node] = per_node.get(node, 0) + 1
            # each heavy request on a connection of its own (the broker works on them in
            # parallel), after the lanes the report's own rounds use
            self._inflight = client.send(calls, deadline, lanes=max(per_node.values()),
                                         first_lane=PREFETCH_LANE)
        except (WireUnsupported, KafkaUnavailableError) as e:
            log.debug("no prefetch of record times and configs (%s)", e)
            return False
        return True

    @property
    def high_watermarks(self) -> Mapping[TopicPartition, int]:
        return self._hws

    def finish(self, deadline: float) -> None:
        if self._inflight is None:
            return
        try:
            answers = self._inflight.receive(deadline)
        except (WireUnsupported, KafkaUnavailableError) as e:
            log.debug("prefetch of record times and configs failed (%s)", e)
            self.configs_unanswered = self._configs and isinstance(e, KafkaUnavailableError)
            return
        found: offsets_wire.Found = {}
        offsets_wire.take_fetch(answers[:self._fetches], self._want, found, set(), self._hws)
        self.found = {pos: RecordTime(*rec) for pos, rec in found.items()}
        if self._configs:
            try:
                for t, cfg in cluster_wire.topic_configs_answer(answers[-1]).items():
                    self.cache[t] = RetentionConfig.from_topic_config(cfg)
            except WireUnsupported as e:
                log.debug("retention configs in the prefetch: %s", e)


def collect_timed_lag(
    admin: KafkaAdmin,
    reader: RecordTimeReader | None,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None = None,
    thresholds: Callable[[str], LagThresholds] | None = None,
    clock: Clock = time.time,
    retention_cache: dict[str, RetentionConfig] | None = None,
    cluster: ClusterReader | None = None,
) -> TimedLagReport:
    """Lag report, then (with a reader) the record timestamps and topic retention.

    At the protocol level the records at the committed offsets and the retention
    configs are fetched while the lag is computed (:class:`_TimePrefetch`); the
    reader then reads only what that did not answer.
    ``now_ms`` is taken after the records are read, so a lag in seconds is
    never younger than the truth by the time the reads took.
    ``retention_cache`` (topic -> config) saves the DescribeConfigs call in
    repeated collections. Kafka is read through ``cluster`` (else a session opened
    on ``admin`` and closed here); ``reader`` reads the records.
    """
    owned = cluster is None
    if cluster is None:
        cluster = open_reader(admin)
    try:
        return _collect_timed(cluster, reader, groups, topics, thresholds, clock,
                              retention_cache)
    finally:
        if owned:
            cluster.close()


def _collect_timed(
    cluster: ClusterReader,
    reader: RecordTimeReader | None,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None,
    thresholds: Callable[[str], LagThresholds] | None,
    clock: Clock,
    retention_cache: dict[str, RetentionConfig] | None,
) -> TimedLagReport:
    cache = retention_cache if retention_cache is not None else {}
    prefetch = _TimePrefetch(reader, cache) if reader is not None else None
    report = collect_lag(None, groups, topics, thresholds, prefetch=prefetch,
                         recheck=reader.log_end_suspects if reader is not None else (),
                         reader=cluster)
    if reader is None:
        return TimedLagReport(report, int(clock() * 1000))
    reader.log_end_suspects.update(tp for tp, v in report.log_end_checks.items()
                                   if v.source is not LogEndSource.LIST_OFFSETS)
    found = prefetch.found if prefetch is not None else {}
    reader.remember(found)  # for the next collection (watch mode)
    # the record at each group partition's oldest unconsumed offset: those the
    # prefetch did not answer are read now
    read_topics: set[str] = set()
    missing: set[Position] = set()
    for g in report.groups:
        for p in g.partitions:
            off = oldest_unconsumed_offset(p)
            if off is not None:
                read_topics.add(p.tp.topic)
                if (pos := (p.tp, off)) not in found:
                    missing.add(pos)
    records: dict[Position, RecordTime | None] = dict(found)
    if missing:
        records.update(reader.read(missing, report.leaders, report.brokers))
    notes: list[str] = []
    # retention applies to every topic the report covers, also to one the group has not
    # committed on yet (a live member owns it): the same configs whichever groups were
    # asked for (lag -g G read them only for topics some group of the report committed on)
    covered = {p.tp.topic for g in report.groups for p in g.partitions if p.log_end is not None}
    wanted = (read_topics | covered) - set(cache)
    if wanted and prefetch is not None and prefetch.configs_unanswered:
        log.warning("topic retention configs unknown: the broker did not answer DescribeConfigs "
                    "within %gs", cluster.timeout)
    elif wanted:
        try:
            for t, cfg in cluster.topic_configs(wanted, list(RETENTION_KEYS)).items():
                cache[t] = RetentionConfig.from_topic_config(cfg)
        except NotAuthorisedError:
            notes.append(f"retention headroom omitted: {cluster.principal} has no "
                         f"DescribeConfigs ACL on {_names(wanted)}")
        except Exception as e:  # noqa: BLE001 - retention is extra information
            log.warning("could not read topic retention configs: %s", e)
    # sizes only where retention.bytes applies (default -1: no DescribeLogDirs call at all)
    by_bytes = sorted(t for t in read_topics | covered
                      if (rc := cache.get(t)) is not None and rc.retention_bytes >= 0)
    sizes: dict[TopicPartition, int] = {}
    unavailable: str | None = None
    if by_bytes:
        ps = cluster.partition_sizes(by_bytes)
        sizes, unavailable = ps.sizes, ps.unavailable
        if unavailable:
            log.warning("retention.bytes headroom unknown: %s", unavailable)
    timed = add_lag_times(report, records, cache, int(clock() * 1000), sizes)
    timed.sizes_unavailable = unavailable
    denied = frozenset(reader.denied_topics & read_topics)
    if denied:
        timed.read_denied = denied
        notes.insert(0, f"lag in time omitted for {_names(denied)}: {cluster.principal} has "
                        "no Read ACL on it (a monitor does not read events); lag in messages "
                        "is exact")
    timed.notes = notes
    return timed


def judge_invisible_groups(timed: TimedLagReport, principal: str, limited: Callable[[], bool],
                           all_groups: bool = False, hidden_groups: Iterable[str] = ()) -> None:
    """A group with no partition at all is UNKNOWN (never ``lag=0 OK``) when the principal
    is held back by ACLs (``limited()``, asked only then): Kafka silently leaves out the
    committed offsets of topics it may not describe."""
    hidden = sorted(hidden_groups)
    if hidden:
        timed.notes.append(f"left out {len(hidden)} group(s) {principal} may not describe (no "
                           f"Describe ACL): {_names(hidden)}")
    if not timed.report.groups:
        if all_groups and limited():
            timed.notes.append(f"UNKNOWN: no consumer group is visible to {principal}: there is "
                               "none, or the principal lacks the Describe ACL on groups")
            timed.unknown = True
        return
    blind = [i for i, g in enumerate(timed.report.groups) if not g.partitions]
    if not blind or not limited():
        return
    for i in blind:
        g = timed.report.groups[i]
        timed.report.groups[i] = replace(g, severity=Severity.UNKNOWN)
    names = _names(timed.report.groups[i].group_id for i in blind)
    timed.notes.append(f"UNKNOWN: no partition of {names} is visible to {principal}: the group "
                       "has no committed offsets, or the principal lacks the Describe ACL on "
                       "the topics it reads (Kafka hides their offsets)")


def _names(topics: Iterable[str], most: int = 5) -> str:
    ts = sorted(topics)
    more = f" and {len(ts) - most} more" if len(ts) > most else ""
    return ", ".join(ts[:most]) + more


# --------------------------------------------------------------------------- sampling


def samples_of(group: GroupLag, timestamp_ms: int) -> dict[TopicPartition, OffsetSample]:
    """One :class:`OffsetSample` per partition whose log offsets were read."""
    out: dict[TopicPartition, OffsetSample] = {}
    for p in group.partitions:
        if p.log_end is None:
            continue
        out[p.tp] = OffsetSample(timestamp_ms, p.committed, p.log_end, p.log_start)
    return out


@dataclass
class Sampling:
    """The state of a sampling run: one window per group, and the last round."""

    policy: StatusPolicy
    windows: dict[str, GroupWindow] = field(default_factory=dict)
    last: TimedLagReport | None = None
    rounds: int = 0
    started_ms: int | None = None
    last_ms: int | None = None

    def observe(self, timestamp_ms: int, report: TimedLagReport) -> None:
        if self.started_ms is None:
            self.started_ms = timestamp_ms
        for g in report.groups:
            w = self.windows.get(g.group_id, GroupWindow(g.group_id))
            self.windows[g.group_id] = w.observe(timestamp_ms, samples_of(g, timestamp_ms), self.policy)
        self.last = report
        self.last_ms = timestamp_ms
        self.rounds += 1


def policy_for_window(
    window_ms: int, thresholds: LagThresholds | None = None, allowed_lag: int = 0
) -> StatusPolicy:
    """A status policy for a sampling window: trend rules need half the window
    (at most the default 5 minutes) of history."""
    return StatusPolicy(
        window_ms=window_ms,
        min_span_ms=min(DEFAULT_MIN_SPAN_MS, window_ms // 2),
        allowed_lag=allowed_lag,
        thresholds=thresholds or LagThresholds(),
    )


def sample_lag(
    collect: Callable[[], TimedLagReport],
    policy: StatusPolicy,
    *,
    interval_s: float,
    window_s: float | None = None,
    max_rounds: int | None = None,
    clock: Clock = time.time,
    sleep: Sleep = time.sleep,
    on_round: Callable[[Sampling], None] | None = None,
) -> Sampling:
    """Collect every ``interval_s`` seconds, from now until ``window_s`` has passed
    (rounds at 0, interval, 2*interval, ... <= window) or ``max_rounds`` rounds.

    With neither limit it runs until interrupted (KeyboardInterrupt propagates;
    the :class:`Sampling` so far is lost only then). Rounds keep their schedule:
    a slow collection shortens the next sleep, never shifts later rounds.
    """
    if interval_s <= 0:
        raise ValueError("interval must be positive")
    st = Sampling(policy)
    start = clock()
    k = 0
    while True:
        ts_ms = int(clock() * 1000)
        if st.last_ms is not None and ts_ms <= st.last_ms:
            ts_ms = st.last_ms + 1  # a clock step back must not drop the round
        st.observe(ts_ms, collect())
        if on_round is not None:
            on_round(st)
        k += 1
        if max_rounds is not None and k >= max_rounds:
            break
        next_at = start + k * interval_s
        if window_s is not None and next_at > start + window_s + 1e-9:
            break
        delay = next_at - clock()
        if delay > 0:
            sleep(delay)
    return st


@dataclass(frozen=True)
class GroupJudgement:
    """Status of a group over the window, with its rates and catch-up ETA."""

    status: GroupStatus
    #: messages/s written to the group's partitions (sum of log end rates)
    produce_rate: float | None
    #: messages/s the group commits (sum of committed offset rates)
    consume_rate: float | None
    catch_up: CatchUp

    def to_dict(self) -> dict[str, Any]:
        d = self.status.to_dict()
        d["produce_rate"] = self.produce_rate
        d["consume_rate"] = self.consume_rate
        d["catch_up"] = self.catch_up.to_dict()
        return d


def _sum_rates(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _unknown_if_contradicted(status: GroupStatus, gl: GroupLag | None) -> GroupStatus:
    """A group with partitions whose log end the broker contradicted itself about (their
    samples are left out of the window) is UNKNOWN, never OK, unless already CRITICAL."""
    bad = [str(p.tp) for p in (gl.partitions if gl is not None else ())
           if Anomaly.LOG_END_INCONSISTENT in p.anomalies]
    lost = [str(p.tp) for p in (gl.partitions if gl is not None else ())
            if Anomaly.LOG_END_LOST in p.anomalies]
    if not (bad or lost) or status.severity is Severity.CRITICAL:
        return status
    if not bad:
        why = (f"log end unknown on {', '.join(lost[:3])}{' ...' if len(lost) > 3 else ''}: "
               "records exist past the log end the broker reports (it lost its log end, "
               "e.g. after a restart)")
        return replace(status, severity=Severity.UNKNOWN, reasons=(why, *status.reasons))
    why = (f"log end unknown on {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}: "
           "the broker's ListOffsets and Fetch answers contradict each other")
    return replace(status, severity=Severity.UNKNOWN, reasons=(why, *status.reasons))


def judge_groups(sampling: Sampling) -> list[GroupJudgement]:
    """Evaluate every group's window at the last round."""
    if sampling.last is None or sampling.last_ms is None:
        return []
    now = sampling.last_ms
    last = {g.group_id: g for g in sampling.last.groups}
    out: list[GroupJudgement] = []
    for gid, w in sorted(sampling.windows.items()):
        gl = last.get(gid)
        status = _unknown_if_contradicted(evaluate_group(
            w, sampling.policy, now, group_lag=gl, lag_seconds=sampling.last.lag_seconds(gid)
        ), gl)
        prod = _sum_rates(produce_rate(pw.samples).per_second for pw in w.partitions)
        cons = _sum_rates(consume_rate(pw.samples).per_second for pw in w.partitions)
        eta = catch_up_eta(status.total_lag, cons, prod)
        out.append(GroupJudgement(status, prod, cons, eta))
    return out
