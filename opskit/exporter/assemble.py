"""Turn one cycle's broker answers plus the exporter's history into a Snapshot.

Pure: no I/O and no clock (``now_ms`` is a parameter). It updates the
:class:`~opskit.exporter.history.History` it is given -- the exporter's memory --
and returns a new frozen :class:`~opskit.exporter.snapshot.Snapshot`.

Lag in seconds of a group on a partition (:func:`opskit.core.timing.partition_lag_time`):
0 when the group is at the head; else the age of the record at the committed
offset when it was read (exact), else an estimate interpolated in the
partition's log-end timeline; absent when neither is known, and absent when the
committed offset is older than the whole timeline (the timeline's age would only
be a lower bound: 0 on the first cycle). Never NaN, never negative, never 0 for a
lagging partition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from opskit.core.health import (
    ClusterHealthInput,
    HealthReport,
    PartitionState,
    QuorumInfo,
    Reassignment,
    evaluate_health,
)
from opskit.core.lag import oldest_unconsumed_offset
from opskit.core.models import (
    Anomaly,
    GroupLag,
    GroupState,
    PartitionLag,
    PartitionOffsets,
    Severity,
    TopicPartition,
)
from opskit.core.status.rank import Status
from opskit.core.status.window import OffsetSample
from opskit.core.timing.group_partition import group_partition_time, usual_time
from opskit.core.timing.lag_time import LagTimeBasis
from opskit.core.timing.rates import CatchUp, catch_up_eta
from opskit.core.timing.retention import RetentionBasis
from opskit.exporter.freshness import FamilyRead
from opskit.exporter.group_status import group_status
from opskit.exporter.history import History
from opskit.exporter.names import THROTTLE_DIRECTIONS
from opskit.exporter.snapshot import (
    BrokerSnap,
    BrokerThrottleSnap,
    GroupPartitionSnap,
    GroupSnap,
    GroupTopicSnap,
    HealthSnap,
    PartitionSnap,
    QuorumNodeSnap,
    Snapshot,
    TopicSnap,
    TopicThrottleSnap,
)
from opskit.exporter.throttles import count_throttled_replicas
from opskit.exporter.windows import Row

Position = tuple[TopicPartition, int]


@dataclass(frozen=True)
class ClusterExtras:
    """What kafka-python adds: the KRaft quorum and reassignments (or why not)."""

    quorum: QuorumInfo | None = None
    quorum_error: str | None = "not asked"
    reassignments: tuple[Reassignment, ...] | None = None
    reassignments_error: str | None = "not asked"


@dataclass(frozen=True)
class CycleInputs:
    """Plain broker answers of one cycle."""

    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerSnap, ...]
    #: every partition kept by the topic filter, without offsets
    partitions: tuple[PartitionSnap, ...]
    groups: Sequence[GroupLag]
    #: log start/end of every partition that answered
    offsets: Mapping[TopicPartition, PartitionOffsets]
    #: timestamp of the first record at or after each read position (None: not read)
    record_ts: Mapping[Position, int | None] = field(default_factory=dict)
    #: topic -> (retention.ms, retention.bytes), -1 meaning no limit
    retention: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    #: topic -> min.insync.replicas
    min_isr: Mapping[str, int] = field(default_factory=dict)
    #: bytes on disk per partition, None when DescribeLogDirs did not answer
    sizes: Mapping[TopicPartition, int] | None = None
    extras: ClusterExtras = field(default_factory=ClusterExtras)
    expected_brokers: int | None = None
    lag_time_skipped: int = 0
    #: broker id -> {direction: bytes/s} of the replication throttles set on it
    broker_throttles: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    #: topic -> {direction: raw *.replication.throttled.replicas value}
    topic_throttles: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: the outcome of each family's latest read (see opskit.exporter.freshness)
    families: Mapping[str, FamilyRead] = field(default_factory=dict)


def read_position(p: PartitionLag) -> Position | None:
    off = oldest_unconsumed_offset(p)
    return None if off is None else (p.tp, off)


def read_positions(groups: Iterable[GroupLag]) -> dict[Position, int]:
    """Positions whose record timestamp gives lag in seconds, each with the largest
    lag of a group partition reading there (in no particular order)."""
    best: dict[Position, int] = {}
    get = best.get
    for g in groups:
        for p in g.partitions:
            # oldest_unconsumed_offset(p), inline (tens of thousands of rows a cycle)
            c, start, end = p.committed, p.log_start, p.log_end
            if c is None or start is None or end is None or c >= end:
                continue
            off = c if c > start else start  # noqa: FURB136 - not max(): per row
            if off >= end:
                continue
            pos = (p.tp, off)
            lag = p.lag or 0
            prev = get(pos)
            if prev is None:
                best[pos] = lag if lag > 0 else 0  # noqa: FURB136 - max(0, lag), per row
            elif lag > prev:
                best[pos] = lag
    return best


def most_lagging_first(best: Mapping[Position, int], positions: Iterable[Position] | None = None
                       ) -> list[Position]:
    """``positions`` (default: all of ``best``) most lagging first, then by position
    (so a read budget spends itself where lag is largest)."""
    return sorted(best if positions is None else positions, key=lambda pos: (-best[pos], pos))


def lag_time_positions(groups: Iterable[GroupLag]) -> list[Position]:
    """Positions whose record timestamp gives lag in seconds, most lagging first
    (so a read budget spends itself where lag is largest)."""
    return most_lagging_first(read_positions(groups))


def _min_isr_unknown(inp: CycleInputs) -> str | None:
    """Why some topics' min.insync.replicas is not known (their configs not read yet, the
    read failed, the broker left it out), or None: the min-ISR gauges are then left out
    rather than computed from a guessed value."""
    missing = {p.topic for p in inp.partitions} - set(inp.min_isr)
    if not missing:
        return None
    fam = inp.families.get("topic_configs")
    why = f": {fam.message}" if fam is not None and not fam.ok and fam.message else ""
    return f"min.insync.replicas not read for {len(missing)} topic(s){why}"


def _health(inp: CycleInputs) -> HealthReport:
    extra = inp.extras
    return evaluate_health(ClusterHealthInput(
        brokers=tuple(b.node_id for b in inp.brokers),
        controller_id=inp.controller_id,
        partitions=tuple(PartitionState(p.topic, p.partition, p.leader, p.replicas, p.isr)
                         for p in inp.partitions),
        min_isr=inp.min_isr,
        min_isr_unknown=_min_isr_unknown(inp),
        expected_brokers=inp.expected_brokers,
        quorum=extra.quorum,
        quorum_error=extra.quorum_error,
        reassignments=extra.reassignments,
        reassignments_error=extra.reassignments_error,
    ))


def health_snap(report: HealthReport) -> HealthSnap:
    c = report.counts
    q = report.quorum
    nodes: tuple[QuorumNodeSnap, ...] = ()
    if q is not None:
        nodes = tuple(
            QuorumNodeSnap(node, "voter" if node in q.voters else "observer", max(0, lag))
            for node, lag in sorted(q.lag.items())
        )
    return HealthSnap(
        brokers_expected=c.brokers_expected,
        under_replicated=c.urp,
        under_min_isr=c.under_min_isr,
        at_min_isr=c.at_min_isr,
        offline=c.offline,
        preferred_leader_imbalance=c.preferred_leader_imbalance,
        reassignments=c.reassignments,
        quorum_leader=q.leader_id if q is not None and q.leader_id >= 0 else None,
        quorum_voters=len(q.voters) if q is not None else None,
        quorum_nodes=nodes,
    )


def _lag_seconds(p: PartitionLag, inp: CycleInputs, history: History, now_ms: int
                 ) -> tuple[float | None, float | None]:
    """(lag seconds, retention time left) of one group partition.

    The two common cases are computed directly, with what the general rules
    (:func:`group_partition_time`) give for them: a group at the head (0 s, nothing
    at risk), and the usual partition (:func:`usual_time`: its record's timestamp
    read, the topic deleting by time only), whose answer does not depend on the
    timeline. The others go through the general rules with the partition's timeline.
    """
    c, start, end = p.committed, p.log_start, p.log_end
    if p.lag is None or start is None or end is None or c is None:
        return None, None
    tp = p.tp
    retention = inp.retention.get(tp.topic)
    if c >= end and (retention is None or (retention[0] >= -1 and retention[1] >= -1)):
        return 0.0, None  # NO_LAG; retention risk NO_LAG too (never a time left)
    pos = read_position(p)
    ts = inp.record_ts.get(pos) if pos is not None else None
    usual = usual_time(now_ms, p, ts, retention)
    if usual is not None:
        return usual[0], usual[2] / 1000.0
    if ((ts is None or ts < 0) and start <= c < end
            and (retention is None or (retention[1] == -1 and retention[0] >= 0))):
        packed = history.packed_timeline(tp)
        if packed is not None and (est := _timeline_estimate(now_ms, c, end, packed, retention)):
            return est
    lt, rr = group_partition_time(
        now_ms, p, record_ts_ms=ts, retention=retention,
        partition_size_bytes=(inp.sizes or {}).get(tp), timeline=history.timeline(tp),
    )
    if lt.basis is LagTimeBasis.NO_LAG:
        seconds: float | None = 0.0
    elif lt.basis is LagTimeBasis.HISTORY_START:
        # the committed offset is older than the whole history (its record unread: no Read
        # ACL, or beyond the read budget): the history's age is only a lower bound -- 0 on
        # the first cycle -- so the series is left out rather than understate the lag
        seconds = None
    else:
        seconds = lt.seconds
    left: float | None = None
    if rr is not None and rr.basis in (RetentionBasis.TIME, RetentionBasis.BYTES):
        left = rr.time_left_seconds
    return seconds, left


def _timeline_estimate(now_ms: int, c: int, end: int, packed: Sequence[int],
                       retention: tuple[int, int] | None
                       ) -> tuple[float | None, float | None] | None:
    """(lag seconds, retention time left) of a lagging group partition whose record was
    not read, from its packed log-end timeline ``(time, offset)`` pairs: what
    :func:`group_partition_time` gives with that timeline (``partition_lag_time``'s
    timeline estimate, then ``retention_risk`` by time only, ``retention`` being None or
    ``(retention.ms >= 0, -1)``), without building the timeline's objects. The caller
    checked ``log_start <= c < end``. None when the timeline cannot tell (empty, or not
    past ``c``): the general rules answer then.

    * The log end is the timeline's extra last point when it is ahead of it (as
      ``_from_timeline`` adds it);
    * ``c`` before the first point: the record predates the timeline (HISTORY_START):
      lag seconds left out (see :func:`_lag_seconds`), time left from the first point's
      time;
    * else the append time of ``c`` interpolated between the last point at or before it
      and the next (:meth:`OffsetTimeline.append_time`), the age clamped at 0.
    """
    n = len(packed)
    if not n:
        return None
    # the points are packed[k], packed[k + 1] for even k < n, then (now_ms, end) when added
    last_t, last_o = packed[n - 2], packed[n - 1]
    extra = end > last_o and now_ms > last_t
    if (end if extra else last_o) <= c:
        return None
    if packed[1] > c:
        record_ms = packed[0]
        seconds: float | None = None
    else:
        k = n - 2 if extra else n - 4  # the last point but one
        while packed[k + 1] > c:  # offsets never fall: the last point at or before c
            k -= 2
        lo_t, lo_o = packed[k], packed[k + 1]
        if k + 2 < n:
            hi_t, hi_o = packed[k + 2], packed[k + 3]
        else:
            hi_t, hi_o = now_ms, end
        record_ms = lo_t - (-((c + 1 - lo_o) * (hi_t - lo_t)) // (hi_o - lo_o))
        diff = now_ms - record_ms
        seconds = diff / 1000.0 if diff >= 0 else 0.0
    if retention is None:
        return seconds, None
    age_ms = now_ms - record_ms
    left_ms = retention[0] - max(0, age_ms)
    return seconds, max(0, left_ms) / 1000.0


def _sample(now_ms: int, p: PartitionLag, log_end: int) -> Row:
    c, start = p.committed, p.log_start
    if log_end < 0 or (c is not None and c < 0) or (start is not None and start < 0):
        OffsetSample(now_ms, c, log_end, start)  # raises the core's error for such offsets
    return (now_ms, c, log_end, start)


def _topic_snap(topic: str, lag_sum: int,
                ps: list[tuple[PartitionLag, float | None, float | None]],
                consume_rate: float | None, eta: CatchUp | None) -> GroupTopicSnap:
    """A group's row for one topic from its partitions' (partition, lag seconds,
    retention time left), in one pass: the committed offsets summed (None without any),
    the largest lag in seconds (None when a lagging partition's is unknown: a max over
    the others would understate it; else as ``max`` over the known ones), the least
    retention time left (as ``min`` over the known ones), the records lost summed."""
    committed_sum: int | None = None
    secs_max: float | None = None
    unknown = False
    left_min: float | None = None
    lost = 0
    for p, secs, left in ps:
        if p.committed is not None:
            committed_sum = p.committed if committed_sum is None else committed_sum + p.committed
        if secs is None:
            if (p.lag or 0) > 0:
                unknown = True
        elif secs_max is None or secs > secs_max:  # max() keeps the first of equals too
            secs_max = secs
        if left is not None and (left_min is None or left < left_min):
            left_min = left
        lost += p.records_lost
    return GroupTopicSnap(
        topic=topic,
        committed_sum=committed_sum,
        lag_sum=lag_sum,
        lag_seconds_max=None if unknown else secs_max,
        consume_rate=consume_rate,
        catchup_eta_seconds=eta.eta_seconds if eta is not None else None,
        falling_behind=(eta.state.value == "falling_behind") if eta is not None and
        eta.state.value != "unknown" else None,
        retention_headroom_seconds=left_min,
        records_lost=lost,
    )


def group_snap(g: GroupLag, inp: CycleInputs, history: History, now_ms: int,
               with_status: bool = True) -> GroupSnap:
    rows: list[GroupPartitionSnap] = []
    samples: dict[TopicPartition, Row] = {}
    #: topic -> (partition, lag seconds, retention time left) of each of its partitions
    by_topic: dict[str, list[tuple[PartitionLag, float | None, float | None]]] = {}
    kinds: Counter[str] = Counter()
    retention_of = inp.retention.get
    record_ts_of = inp.record_ts.get
    timeline_of = history.packed_timeline
    secs: float | None
    left: float | None
    for p in g.partitions:
        tp = p.tp
        c, start, end = p.committed, p.log_start, p.log_end
        # the common cases of _lag_seconds, decided inline (the same rules and
        # expressions); any other goes through it
        if c is None or end is None or start is None or p.lag is None:
            secs, left = _lag_seconds(p, inp, history, now_ms)
        elif c >= end:
            ret = retention_of(tp.topic)
            if ret is None or (ret[0] >= -1 and ret[1] >= -1):
                secs, left = 0.0, None  # at the head: what _lag_seconds answers first
            else:
                secs, left = _lag_seconds(p, inp, history, now_ms)
        elif start <= c and (ret := retention_of(tp.topic)) is not None and ret[1] == -1 \
                and ret[0] >= 0:
            # lagging, its record in the log (read position (tp, c)), deleting by time
            ts = record_ts_of((tp, c))
            if ts is not None and ts >= 0:  # usual_time
                diff = now_ms - ts
                secs = diff / 1000.0 if diff >= 0 else 0.0
                left_ms = ret[0] - (diff if diff > 0 else 0)  # noqa: FURB136 - per row
                left = (left_ms if left_ms > 0 else 0) / 1000.0  # noqa: FURB136 - per row
            elif ((packed := timeline_of(tp)) is not None
                  and (est := _timeline_estimate(now_ms, c, end, packed, ret))):
                secs, left = est
            else:
                secs, left = _lag_seconds(p, inp, history, now_ms)
        else:
            secs, left = _lag_seconds(p, inp, history, now_ms)
        rows.append(GroupPartitionSnap(tp.topic, tp.partition, c, p.lag, secs))
        if end is not None:
            if end >= 0 and (c is None or c >= 0) and (start is None or start >= 0):
                samples[tp] = (now_ms, c, end, start)
            else:
                samples[tp] = _sample(now_ms, p, end)  # raises the core's error
        in_topic = by_topic.get(tp.topic)
        if in_topic is None:
            by_topic[tp.topic] = [(p, secs, left)]
        else:
            in_topic.append((p, secs, left))
        if p.anomalies:
            kinds.update(a.value for a in p.anomalies)
    status: str | None = None
    cons: dict[str, float | None] = {}
    prod: dict[str, float | None] = {}
    if with_status:
        status, cons, prod = group_status(g, history, now_ms, samples)
        if status == Status.OK.value and g.severity is Severity.UNKNOWN:
            # as evaluate_group: a partition whose lag is unknown has no sample (no log
            # end, an unreadable commit): the others' samples must not make the group OK
            status = Status.UNKNOWN.value
    topics: list[GroupTopicSnap] = []
    for t in g.topics:
        c_rate, pr = cons.get(t.topic), prod.get(t.topic)
        eta = catch_up_eta(t.lag, c_rate, pr) if with_status else None
        topics.append(_topic_snap(t.topic, t.lag, by_topic.get(t.topic, []), c_rate, eta))
    anomalies = {a.value: kinds.get(a.value, 0) for a in Anomaly}
    return GroupSnap(
        group_id=g.group_id, state=g.state.value,
        # a broker that cannot describe groups: members unknown (no series), not zero
        members=None if g.state is GroupState.UNKNOWN and not g.members else g.members,
        severity=g.severity,
        status=status, partitions=tuple(rows), topics=tuple(topics), anomalies=anomalies,
    )


def throttle_snaps(inp: CycleInputs
                   ) -> tuple[tuple[BrokerThrottleSnap, ...], tuple[TopicThrottleSnap, ...]]:
    """Broker throttle rates and throttled-replica counts of the kept topics."""
    brokers = tuple(
        BrokerThrottleSnap(b, d, rate)
        for b, rates in sorted(inp.broker_throttles.items())
        for d in THROTTLE_DIRECTIONS if (rate := rates.get(d)) is not None
    )
    if not inp.topic_throttles:
        return brokers, ()
    replicas: dict[str, list[int]] = {}
    for p in inp.partitions:
        if p.topic in inp.topic_throttles:
            replicas.setdefault(p.topic, []).append(len(p.replicas))
    topics: list[TopicThrottleSnap] = []
    for t, lists in sorted(inp.topic_throttles.items()):
        if t not in replicas:
            continue  # filtered out or deleted since the configs were read
        for d in THROTTLE_DIRECTIONS:
            if d in lists:
                n = count_throttled_replicas(lists[d], replicas[t])
                if n:
                    topics.append(TopicThrottleSnap(t, d, n))
    return brokers, tuple(topics)


def assemble_snapshot(inp: CycleInputs, history: History, now_ms: int,
                      with_status: bool = True) -> Snapshot:
    """The snapshot of one cycle; updates ``history`` (rates, timelines, windows)."""
    parts = tuple(
        PartitionSnap(p.topic, p.partition, p.leader, p.replicas, p.isr,
                      o.log_start if (o := inp.offsets.get(TopicPartition(p.topic, p.partition))) else None,
                      o.log_end if o else None)
        for p in inp.partitions
    )
    log_ends = {TopicPartition(p.topic, p.partition): p.log_end for p in parts if p.log_end is not None}
    history.observe_log_ends(now_ms, log_ends)
    end_sums: dict[str, int] = {}
    for tp, end in log_ends.items():
        end_sums[tp.topic] = end_sums.get(tp.topic, 0) + end
    topic_names = sorted({p.topic for p in parts})
    size_sums: dict[str, int] | None = None
    if inp.sizes is not None:
        size_sums = {}
        for tp, size in inp.sizes.items():
            size_sums[tp.topic] = size_sums.get(tp.topic, 0) + size
    # topics whose offsets all failed keep no rate point this cycle
    history.observe_topics(now_ms, {t: end_sums[t] for t in topic_names if t in end_sums}, size_sums)
    topics = []
    for t in topic_names:
        mr, br = history.messages_in_rate(t), history.bytes_in_rate(t)
        ret = inp.retention.get(t)
        topics.append(TopicSnap(
            topic=t,
            messages_in_per_second=mr.per_second if mr else None,
            bytes_in_per_second=br.per_second if br else None,
            size_bytes=size_sums.get(t) if size_sums is not None else None,
            retention_ms=ret[0] if ret is not None and ret[0] >= 0 else None,
        ))
    groups = tuple(group_snap(g, inp, history, now_ms, with_status) for g in inp.groups)
    history.forget_groups_except(g.group_id for g in inp.groups)
    history.end_cycle()
    broker_throttles, topic_throttles = throttle_snaps(inp)
    return Snapshot(
        taken_at_ms=now_ms,
        cluster_id=inp.cluster_id,
        controller_id=inp.controller_id,
        brokers=inp.brokers,
        partitions=parts,
        topics=tuple(topics),
        groups=groups,
        health=health_snap(_health(inp)),
        lag_time_skipped=inp.lag_time_skipped,
        broker_throttles=broker_throttles,
        topic_throttles=topic_throttles,
        families=inp.families,
    )
