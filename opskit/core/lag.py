"""Consumer lag in messages: pure computation from already-read broker answers.

Read order matters and is the adapter's job: committed offsets are read
*before* log end offsets, so a consumer that commits in between can only make
lag look slightly larger, never negative. Whatever the broker says, lag here is
never negative: impossible answers are clamped and flagged as anomalies.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache

from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupLag,
    LagThresholds,
    Member,
    PartitionLag,
    PartitionOffsets,
    Severity,
    TopicLag,
    TopicPartition,
)

#: anomalies that leave a partition's log end unknown (its row has no log end nor lag)
UNKNOWN_LOG_END = frozenset({Anomaly.LOG_END_INCONSISTENT, Anomaly.LOG_END_LOST})
#: anomalies that leave a partition's lag unknown: its group is UNKNOWN unless CRITICAL
#: (log offsets that could not be read count: lag 0 over them would be a false OK)
UNKNOWN_LAG = UNKNOWN_LOG_END | {Anomaly.COMMITTED_BEYOND_LOG_END, Anomaly.OFFSETS_UNAVAILABLE,
                                 Anomaly.COMMITTED_INVALID, Anomaly.COMMITTED_UNREADABLE}


def partition_lag(
    tp: TopicPartition,
    committed: int | None,
    offsets: PartitionOffsets | None,
    member: Member | None = None,
    exists: bool = False,
    unreadable: bool = False,
) -> PartitionLag:
    """Lag of one partition, with anomalies for impossible or lossy answers.

    ``offsets`` is None when they could not be read; ``exists`` then says
    whether the partition is in the cluster metadata (offline) or not (deleted).
    ``unreadable``: the broker answered an error for the committed offset (a topic the
    principal may not describe is also absent from the metadata: not called deleted).
    """
    m = member
    if unreadable:
        return _unreadable_commit(tp, offsets, m, exists)
    if committed is not None and committed < 0:  # not an offset: shown as none, flagged
        return _invalid_commit(tp, offsets, m, exists)
    if offsets is None:
        anomalies: list[Anomaly] = [
            Anomaly.OFFSETS_UNAVAILABLE if exists else Anomaly.PARTITION_MISSING]
        if committed is None:
            anomalies.append(Anomaly.NO_COMMITTED_OFFSET)
        return PartitionLag(tp, committed, None, None, None, m, tuple(anomalies))
    start, end = offsets.log_start, offsets.log_end
    if committed is not None and start <= committed <= end:
        return PartitionLag(tp, committed, start, end, end - committed, m)  # the usual answer
    anomalies = []
    if start > end:
        anomalies.append(Anomaly.LOG_START_BEYOND_LOG_END)
    if committed is None:
        anomalies.append(Anomaly.NO_COMMITTED_OFFSET)
        return PartitionLag(tp, None, start, end, None, m, tuple(anomalies))
    lost = 0
    if committed > end:
        anomalies.append(Anomaly.COMMITTED_BEYOND_LOG_END)
        lag = 0
    else:
        lag = end - committed
        if committed < start:
            anomalies.append(Anomaly.COMMITTED_BELOW_LOG_START)
            lost = start - committed
    return PartitionLag(tp, committed, start, end, lag, m, tuple(anomalies), lost)


def _invalid_commit(tp: TopicPartition, offsets: PartitionOffsets | None, m: Member | None,
                    exists: bool) -> PartitionLag:
    """A negative committed offset: the row keeps the log offsets, no committed offset
    and no lag, and says why (:attr:`Anomaly.COMMITTED_INVALID`, an unknown lag)."""
    if offsets is None:
        missing = Anomaly.OFFSETS_UNAVAILABLE if exists else Anomaly.PARTITION_MISSING
        return PartitionLag(tp, None, None, None, None, m, (missing, Anomaly.COMMITTED_INVALID))
    anomalies = [Anomaly.COMMITTED_INVALID]
    if offsets.log_start > offsets.log_end:
        anomalies.insert(0, Anomaly.LOG_START_BEYOND_LOG_END)
    return PartitionLag(tp, None, offsets.log_start, offsets.log_end, None, m, tuple(anomalies))


def _unreadable_commit(tp: TopicPartition, offsets: PartitionOffsets | None, m: Member | None,
                       exists: bool) -> PartitionLag:
    """A committed offset the broker would not give: no committed offset, no lag, the
    log offsets when known (:attr:`Anomaly.COMMITTED_UNREADABLE`, an unknown lag)."""
    if offsets is None:
        extra = (Anomaly.OFFSETS_UNAVAILABLE,) if exists else ()
        return PartitionLag(tp, None, None, None, None, m, (*extra, Anomaly.COMMITTED_UNREADABLE))
    return PartitionLag(tp, None, offsets.log_start, offsets.log_end, None, m,
                        (Anomaly.COMMITTED_UNREADABLE,))


def oldest_unconsumed_offset(p: PartitionLag) -> int | None:
    """Offset of the oldest unconsumed record of a group partition: the committed
    offset, or the log start when retention deleted past it. None when the group is
    at the log end, or when the offsets needed are unknown."""
    c, start, end = p.committed, p.log_start, p.log_end
    if c is None or start is None or end is None or c >= end:
        return None
    if c > start:  # noqa: PLR1730 - not max(): called once per group partition of a report
        start = c
    return start if start < end else None


def severity_for(total_lag: int, thresholds: LagThresholds) -> Severity:
    """HIP-30: lag > warn is WARNING, lag > crit is CRITICAL."""
    if total_lag > thresholds.crit:
        return Severity.CRITICAL
    if total_lag > thresholds.warn:
        return Severity.WARNING
    return Severity.OK


def partitions_of_interest(
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    partition_counts: Mapping[str, int],
    topics: Iterable[str] | None = None,
    unreadable: Iterable[TopicPartition] = (),
) -> list[TopicPartition]:
    """Partitions a lag report covers for a group.

    Every committed, assigned or unreadable partition (its committed offset could not
    be read), plus every other partition of the topics those belong to: a partition
    the group never committed on is exactly what on-call needs to see, and Kafka's own
    tool hides it when the group has no active member.
    """
    wanted = set(topics) if topics is not None else None
    tps: set[TopicPartition] = set(committed)
    tps.update(unreadable)
    for m in group.members:
        tps.update(m.assignment)
    for topic in {tp.topic for tp in tps}:
        tps.update(topic_partitions(topic, partition_counts.get(topic, 0)))
    if wanted is not None:
        tps = {tp for tp in tps if tp.topic in wanted}
    return sorted(tps)  # named tuples: by topic, then partition


@lru_cache(maxsize=4096)
def topic_partitions(topic: str, count: int) -> tuple[TopicPartition, ...]:
    """The partitions 0..count-1 of a topic (built once per topic and count: a report
    asks for them once per group reading the topic)."""
    return tuple(TopicPartition(topic, p) for p in range(count))


def compute_group_lag(
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
    partition_counts: Mapping[str, int],
    thresholds: LagThresholds | None = None,
    topics: Iterable[str] | None = None,
    partitions: Iterable[TopicPartition] | None = None,
    disputed: Mapping[TopicPartition, Anomaly] | None = None,
    unreadable: Collection[TopicPartition] = (),
) -> GroupLag:
    """Lag of a whole group: per partition, per topic, total, and its severity.

    ``partitions``: the group's :func:`partitions_of_interest` when the caller has
    already computed them (the same arguments give the same list).
    ``disputed``: partitions whose log end the broker contradicted itself about
    (:mod:`opskit.core.log_end`): LOG_END_FROM_FETCH is noted on the row (its log end
    in ``log_offsets`` is the Fetch's); LOG_END_INCONSISTENT and LOG_END_LOST make the
    row's log end and lag unknown. Those, COMMITTED_BEYOND_LOG_END and OFFSETS_UNAVAILABLE
    make the group UNKNOWN (unless its known lag is already critical).
    ``unreadable``: partitions whose committed offset the broker answered with an error
    (COMMITTED_UNREADABLE, an unknown lag: the group is UNKNOWN unless critical)."""
    th = thresholds or LagThresholds()
    owner: dict[TopicPartition, Member] = {}
    for m in group.members:  # the first member owning a partition, as member_for
        for tp in m.assignment:
            owner.setdefault(tp, m)
    rows: list[PartitionLag] = []
    add = rows.append
    for tp in (partitions if partitions is not None
               else partitions_of_interest(group, committed, partition_counts, topics,
                                           unreadable)):
        offs = log_offsets.get(tp)
        c = committed.get(tp)
        if (offs is not None and c is not None and c >= 0 and offs.log_start <= c <= offs.log_end
                and tp not in unreadable):
            # the usual answer of partition_lag, without the call (one per group partition)
            add(PartitionLag(tp, c, offs.log_start, offs.log_end, offs.log_end - c, owner.get(tp)))
            continue
        add(partition_lag(
            tp, c, offs, owner.get(tp),
            exists=offs is None and tp.partition < partition_counts.get(tp.topic, 0),
            unreadable=tp in unreadable,
        ))
    if disputed:
        rows = [_disputed_row(r, disputed[r.tp]) if r.tp in disputed else r for r in rows]
    per_topic: dict[str, list[PartitionLag]] = {}
    for r in rows:
        in_topic = per_topic.get(r.tp.topic)
        if in_topic is None:
            per_topic[r.tp.topic] = [r]
        else:
            in_topic.append(r)
    topic_lags = tuple(_topic_lag(t, rs) for t, rs in sorted(per_topic.items()))
    total = sum(t.lag for t in topic_lags)
    severity = severity_for(total, th)
    if severity is not Severity.CRITICAL and any(
            r.anomalies and _lag_unknown(r) for r in rows):
        # never OK (nor a mere WARNING) on answers that contradict each other or a position
        # past the log end: the lag of those partitions is not known
        severity = Severity.UNKNOWN
    return GroupLag(
        group_id=group.group_id,
        state=group.state,
        partitions=tuple(rows),
        members=len(group.members),
        total_lag=total,
        topics=topic_lags,
        severity=severity,
        thresholds=th,
    )


#: anomalies about the committed offset, kept on a row whose log end is disputed
_NO_COMMIT = (Anomaly.NO_COMMITTED_OFFSET, Anomaly.COMMITTED_INVALID, Anomaly.COMMITTED_UNREADABLE)


def _disputed_row(r: PartitionLag, anomaly: Anomaly) -> PartitionLag:
    if anomaly in UNKNOWN_LOG_END:
        return r._replace(log_end=None, lag=None, records_lost=0,
                          anomalies=(anomaly,) + tuple(
                              a for a in r.anomalies if a in _NO_COMMIT))
    return r._replace(anomalies=(*r.anomalies, anomaly))


def worst(severities: Iterable[Severity]) -> Severity:
    """The worst severity, ordered OK < WARNING < UNKNOWN < CRITICAL (a known critical
    lag outranks an unknown one; an unknown one is never reported as OK or WARNING)."""
    order = [Severity.OK, Severity.WARNING, Severity.UNKNOWN, Severity.CRITICAL]
    result = Severity.OK
    for s in severities:
        if order.index(s) > order.index(result):
            result = s
    return result


def _topic_lag(topic: str, rs: list[PartitionLag]) -> TopicLag:
    """A topic's row of a group from its partitions' rows, in one pass."""
    lag = without = unknown = 0
    for r in rs:
        lag += r.lag or 0
        if r.anomalies and _lag_unknown(r):
            unknown += 1
        elif r.committed is None:
            without += 1
    return TopicLag(topic=topic, lag=lag, partitions=len(rs), partitions_without_commit=without,
                    partitions_lag_unknown=unknown)


def _lag_unknown(r: PartitionLag) -> bool:
    return any(a in UNKNOWN_LAG for a in r.anomalies)
