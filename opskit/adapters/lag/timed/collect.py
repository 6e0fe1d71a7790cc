"""Collecting a lag report with time: :func:`collect_timed_lag` reads the lag, the
records at the committed offsets and the topics' retention configs, all through the
reader port, fetching records and configs while the lag is computed where it can."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.protocol import cluster as cluster_wire
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.client import (
    API_FETCH,
    Call,
    InFlight,
    WireClient,
    WireUnsupported,
)
from opskit.adapters.kafka.reader import PREFETCH_LANE, ClusterReader, open_reader
from opskit.adapters.kafka.record_times import Position, RecordTime
from opskit.adapters.lag.source import collect_lag
from opskit.adapters.lag.timed.report import (
    RETENTION_KEYS,
    RetentionConfig,
    TimedLagReport,
    add_lag_times,
)
from opskit.core.lag import oldest_unconsumed_offset
from opskit.core.log_end import LogEndSource
from opskit.core.models import (
    LagThresholds,
    Severity,
    TopicPartition,
)
from opskit.errors import KafkaUnavailableError, NotAuthorisedError

log = logging.getLogger("opskit.adapters.lag.sampler")  # the name it had before the split

Clock = Callable[[], float]
"""Epoch seconds (``time.time``)."""
Sleep = Callable[[float], None]


class _TimePrefetch:
    """The record at each committed offset and the topics' retention configs, fetched
    while the lag is computed (a :class:`~opskit.adapters.lag.source.Prefetch`): a
    lag report with lag in time then waits for no round of its own for them.

    The committed offset is the record lag in time needs unless retention deleted it
    (then the log start's, read afterwards through the session) or the group is caught
    up (the fetch then finds nothing, cheaply). Anything this does not answer is read
    afterwards through the session, as without it; records the session already read
    are not fetched again."""

    def __init__(self, cluster: ClusterReader, cache: dict[str, RetentionConfig]) -> None:
        self.cluster = cluster
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
        want = _uncached(self.cluster, committed)
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
    admin: KafkaAdmin | None,
    with_time: bool,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None = None,
    thresholds: Callable[[str], LagThresholds] | None = None,
    clock: Clock = time.time,
    retention_cache: dict[str, RetentionConfig] | None = None,
    cluster: ClusterReader | None = None,
) -> TimedLagReport:
    """Lag report, then (``with_time``) the record timestamps and topic retention.

    At the protocol level the records at the committed offsets and the retention
    configs are fetched while the lag is computed (:class:`_TimePrefetch`); the
    session then reads only what that did not answer.
    ``now_ms`` is taken after the records are read, so a lag in seconds is
    never younger than the truth by the time the reads took.
    ``retention_cache`` (topic -> config) saves the DescribeConfigs call in
    repeated collections. Kafka, record timestamps included, is read through
    ``cluster`` (else a session opened on ``admin`` and closed here). Repeated
    collections hand sessions opened on the same kept clients
    (:class:`~opskit.adapters.kafka.reader.KeptClients`), whose record-time cache and
    log-end suspects outlive each session.
    """
    owned = cluster is None
    if cluster is None:
        if admin is None:
            raise TypeError("collect_timed_lag needs an admin or a reader")
        cluster = open_reader(admin)
    try:
        return _collect_timed(cluster, with_time, groups, topics, thresholds, clock,
                              retention_cache)
    finally:
        if owned:
            cluster.close()


def _collect_timed(
    cluster: ClusterReader,
    with_time: bool,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None,
    thresholds: Callable[[str], LagThresholds] | None,
    clock: Clock,
    retention_cache: dict[str, RetentionConfig] | None,
) -> TimedLagReport:
    cache = retention_cache if retention_cache is not None else {}
    if not with_time:
        return TimedLagReport(collect_lag(None, groups, topics, thresholds, reader=cluster),
                              int(clock() * 1000))
    prefetch = _TimePrefetch(cluster, cache)
    report = collect_lag(None, groups, topics, thresholds, prefetch=prefetch,
                         recheck=cluster.log_end_suspects(), reader=cluster)
    cluster.add_log_end_suspects(tp for tp, v in report.log_end_checks.items()
                                 if v.source is not LogEndSource.LIST_OFFSETS)
    found = prefetch.found
    cluster.remember_record_times(found)  # for the next collection (watch mode)
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
        records.update(cluster.read_record_times_with_leaders(missing, report.leaders,
                                                              report.brokers))
    notes: list[str] = []
    # retention applies to every topic the report covers, also to one the group has not
    # committed on yet (a live member owns it): the same configs whichever groups were
    # asked for (lag -g G read them only for topics some group of the report committed on)
    covered = {p.tp.topic for g in report.groups for p in g.partitions if p.log_end is not None}
    wanted = (read_topics | covered) - set(cache)
    if wanted and prefetch.configs_unanswered:
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
    denied = cluster.record_read_denied() & read_topics
    if denied:
        timed.read_denied = denied
        notes.insert(0, f"lag in time omitted for {_names(denied)}: {cluster.principal} has "
                        "no Read ACL on it (a monitor does not read events); lag in messages "
                        "is exact")
    timed.notes = notes
    return timed


def _uncached(cluster: ClusterReader, offsets: Mapping[TopicPartition, list[int]]
              ) -> dict[TopicPartition, list[int]]:
    """Of partition -> offsets, those whose record the session has not read yet."""
    out: dict[TopicPartition, list[int]] = {}
    for tp, offs in offsets.items():
        left = [o for o in offs if cluster.cached_record_time((tp, o)) is None]
        if left:
            out[tp] = left
    return out


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
