"""The exporter's snapshot building as it was before issue #22 (verbatim copy).

The per-object path: every cycle unpacks each group's stored window into the
core's ``GroupWindow``, evaluates it with :func:`~opskit.core.status.evaluate.evaluate_group`
and re-packs it; unpacks and re-packs every partition's log-end timeline; and
computes each group partition's lag in seconds through the general
:func:`~opskit.core.timing.group_partition.group_partition_time`.

Kept as the oracle of the equivalence test (``tests/unit/test_exporter_cycle_equivalence.py``)
and the baseline of ``benchmarks/bench_exporter_cycle.py`` (it lives beside that benchmark,
outside the package: the served exporter cannot import it). Only the functions the incremental path replaced are copied;
the rest is imported from :mod:`opskit.exporter.assemble` and :mod:`opskit.exporter.history`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from opskit.core.models import Anomaly, GroupLag, GroupState, PartitionLag, TopicPartition
from opskit.core.status.evaluate import evaluate_group
from opskit.core.status.window import (
    GroupWindow,
    OffsetSample,
    StatusPolicy,
)
from opskit.core.timing.group_partition import group_partition_time
from opskit.core.timing.lag_time import LagTimeBasis
from opskit.core.timing.rates import catch_up_eta, consume_rate, produce_rate
from opskit.core.timing.retention import RetentionBasis
from opskit.core.timing.timeline import OffsetTimeline
from opskit.exporter.assemble import (
    CycleInputs,
    _health,
    health_snap,
    read_position,
    throttle_snaps,
)
from opskit.exporter.history import (
    TIMELINE_POINTS,
    History,
    PackedWindow,
    _pack_timeline,
    _unpack_timeline,
)
from opskit.exporter.snapshot import (
    GroupPartitionSnap,
    GroupSnap,
    GroupTopicSnap,
    PartitionSnap,
    Snapshot,
    TopicSnap,
)


class BaselineHistory(History):
    """The history before #22: what is not overridden here did not change."""

    # ----- partitions -----
    def observe_log_ends(self, now_ms: int, log_ends: Mapping[TopicPartition, int]) -> None:
        for gone in set(self._timelines) - set(log_ends):
            del self._timelines[gone]
        self._tps = {tp: tp for tp in log_ends}
        live: dict[TopicPartition, OffsetTimeline] = {}
        for tp, end in log_ends.items():
            packed = self._timelines.get(tp)
            before = _unpack_timeline(packed) if packed is not None else OffsetTimeline((), TIMELINE_POINTS)
            after = before.add(end, now_ms)
            if packed is None or after is not before:
                self._timelines[tp] = _pack_timeline(after)
            live[tp] = after
        self._live_timelines = live

    def timeline(self, tp: TopicPartition) -> OffsetTimeline | None:
        live = self._live_timelines.get(tp)
        if live is not None:
            return live
        packed = self._timelines.get(tp)
        return _unpack_timeline(packed) if packed is not None else None

    # ----- groups -----
    def observe_group(self, group_id: str, now_ms: int,
                      samples: Mapping[TopicPartition, OffsetSample]) -> GroupWindow:
        """The group's window with this cycle's samples, for evaluation.

        It is kept (replacing the stored window) only when the last kept one is
        at least ``spacing_ms`` old.
        """
        packed = self._windows.get(group_id)
        stored = packed.unpack(group_id) if packed is not None else GroupWindow(group_id)
        current = stored.observe(now_ms, samples, self.policy)
        last = self._stored_at.get(group_id)
        if last is None or now_ms - last >= self.spacing_ms:
            self._windows[group_id] = PackedWindow(current, self._tps)
            self._stored_at[group_id] = now_ms
        return current


def _lag_seconds(p: PartitionLag, inp: CycleInputs, history: BaselineHistory, now_ms: int
                 ) -> tuple[float | None, float | None]:
    """(lag seconds, retention time left) of one group partition."""
    if p.lag is None or p.log_start is None or p.log_end is None or p.committed is None:
        return None, None
    pos = read_position(p)
    ts = inp.record_ts.get(pos) if pos is not None else None
    lt, rr = group_partition_time(
        now_ms, p, record_ts_ms=ts, retention=inp.retention.get(p.tp.topic),
        partition_size_bytes=(inp.sizes or {}).get(p.tp), timeline=history.timeline(p.tp),
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


def _min(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _max(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def group_snap(g: GroupLag, inp: CycleInputs, history: BaselineHistory, now_ms: int,
               with_status: bool = True) -> GroupSnap:
    rows: list[GroupPartitionSnap] = []
    lefts: dict[TopicPartition, float | None] = {}
    seconds: dict[TopicPartition, float | None] = {}
    samples: dict[TopicPartition, OffsetSample] = {}
    for p in g.partitions:
        secs, left = _lag_seconds(p, inp, history, now_ms)
        seconds[p.tp], lefts[p.tp] = secs, left
        rows.append(GroupPartitionSnap(p.tp.topic, p.tp.partition, p.committed, p.lag, secs))
        if p.log_end is not None:
            samples[p.tp] = OffsetSample(now_ms, p.committed, p.log_end, p.log_start)
    status: str | None = None
    cons: dict[str, float | None] = {}
    prod: dict[str, float | None] = {}
    if with_status:
        window = history.observe_group(g.group_id, now_ms, samples)
        policy = StatusPolicy(
            window_ms=history.policy.window_ms, max_samples=history.policy.max_samples,
            min_span_ms=history.policy.min_span_ms, thresholds=g.thresholds)
        st = evaluate_group(window, policy, now_ms, group_lag=g, lag_seconds=seconds)
        status = st.status.value
        per_c: dict[str, list[float | None]] = {}
        per_p: dict[str, list[float | None]] = {}
        for pw in window.partitions:
            per_c.setdefault(pw.tp.topic, []).append(consume_rate(pw.samples).per_second)
            per_p.setdefault(pw.tp.topic, []).append(produce_rate(pw.samples).per_second)
        cons = {t: _sum(v) for t, v in per_c.items()}
        prod = {t: _sum(v) for t, v in per_p.items()}
    topics: list[GroupTopicSnap] = []
    for t in g.topics:
        ps = [p for p in g.partitions if p.tp.topic == t.topic]
        committed = [p.committed for p in ps if p.committed is not None]
        c, pr = cons.get(t.topic), prod.get(t.topic)
        eta = catch_up_eta(t.lag, c, pr) if with_status else None
        topics.append(GroupTopicSnap(
            topic=t.topic,
            committed_sum=sum(committed) if committed else None,
            lag_sum=t.lag,
            # unknown when a lagging partition's lag in seconds is: a max over the others
            # would understate it
            lag_seconds_max=(None if any(seconds[p.tp] is None and (p.lag or 0) > 0 for p in ps)
                             else _max(seconds[p.tp] for p in ps)),
            consume_rate=c,
            catchup_eta_seconds=eta.eta_seconds if eta is not None else None,
            falling_behind=(eta.state.value == "falling_behind") if eta is not None and
            eta.state.value != "unknown" else None,
            retention_headroom_seconds=_min(lefts[p.tp] for p in ps),
            records_lost=sum(p.records_lost for p in ps),
        ))
    kinds = Counter(a.value for p in g.partitions for a in p.anomalies)
    anomalies = {a.value: kinds.get(a.value, 0) for a in Anomaly}
    return GroupSnap(
        group_id=g.group_id, state=g.state.value,
        # a broker that cannot describe groups: members unknown (no series), not zero
        members=None if g.state is GroupState.UNKNOWN and not g.members else g.members,
        severity=g.severity,
        status=status, partitions=tuple(rows), topics=tuple(topics), anomalies=anomalies,
    )


def assemble_snapshot(inp: CycleInputs, history: BaselineHistory, now_ms: int,
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
