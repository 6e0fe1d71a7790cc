"""Snapshot -> Prometheus metric families (pure; names and labels from ``names.py``).

Rules: unknown values are left out (never NaN); no value is negative (a
partition without a leader has no ``kafka_topic_partition_leader`` series);
at ``Granularity.TOPIC`` every partition-level family is dropped. Status is
exported kube-state-metrics style, one series per possible status with value
0 or 1, so alerts on ``== 1`` never see a series appear or vanish on change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Protocol, TypeGuard

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from opskit.exporter.freshness import FamilyRead
from opskit.exporter.names import BY_NAME, GROUP_STATUSES, Kind, MetricSpec
from opskit.exporter.options import Granularity
from opskit.exporter.snapshot import GroupPartitionSnap, PartitionSnap, Snapshot


def served(granularity: Granularity, name: str,
           value: float | None) -> tuple[MetricSpec, float] | None:
    """The family's contract and the value to serve, None when the sample is left out:
    no value, not finite or negative, or a partition-level family at topic granularity."""
    if value is None:
        return None
    v = float(value)
    if not math.isfinite(v) or v < 0:
        return None
    spec = BY_NAME[name]
    if spec.partition_level and granularity is Granularity.TOPIC:
        return None
    return spec, v


class _Families:
    """Creates families on first use, in contract order, with the contract's labels."""

    def __init__(self, granularity: Granularity) -> None:
        self.granularity = granularity
        self.families: dict[str, Metric] = {}

    def add(self, name: str, labels: tuple[str, ...], value: float | None) -> None:
        kept = served(self.granularity, name, value)
        if kept is None:
            return
        spec, v = kept
        fam = self.families.get(name)
        if fam is None:
            if spec.kind is Kind.COUNTER:
                fam = CounterMetricFamily(name.removesuffix("_total"), spec.help, labels=list(spec.labels))
            else:
                fam = GaugeMetricFamily(name, spec.help, labels=list(spec.labels))
            self.families[name] = fam
        if len(labels) != len(spec.labels):  # a programming error: the contract decides
            raise ValueError(f"{name} takes labels {spec.labels}, got {labels}")
        fam.add_metric(list(labels), v)  # type: ignore[attr-defined]

    def ordered(self) -> list[Metric]:
        order = list(BY_NAME)
        return [self.families[n] for n in sorted(self.families, key=order.index)]


#: the big families, built and rendered one at a time so only one is in memory
_PARTITION_VALUES: dict[str, Callable[[PartitionSnap], float | int | None]] = {
    "kafka_topic_partition_current_offset": lambda p: p.log_end,
    "kafka_topic_partition_oldest_offset": lambda p: p.log_start,
    "kafka_topic_partition_in_sync_replica": lambda p: len(p.isr),
    "kafka_topic_partition_leader": lambda p: p.leader if p.leader >= 0 else None,
    "kafka_topic_partition_leader_is_preferred":
        lambda p: int(bool(p.replicas) and p.leader >= 0 and p.leader == p.replicas[0]),
    "kafka_topic_partition_replicas": lambda p: len(p.replicas),
    "kafka_topic_partition_under_replicated_partition": lambda p: int(len(p.isr) < len(p.replicas)),
}
_GROUP_PARTITION_VALUES: dict[str, Callable[[GroupPartitionSnap], float | int | None]] = {
    "kafka_consumergroup_current_offset": lambda gp: gp.committed,
    "kafka_consumergroup_lag": lambda gp: gp.lag,
    "opskit_consumergroup_lag_seconds": lambda gp: gp.lag_seconds,
}


def iter_families(snap: Snapshot, granularity: Granularity = Granularity.PARTITION) -> Iterator[Metric]:
    """Every Kafka-derived family of the snapshot (self-metrics are separate).

    The small families come first; then each per-partition family is built only
    when the previous one has been consumed (rendered), which bounds memory at
    10,000s of partitions.
    """
    yield from _small_families(snap, granularity)
    if granularity is Granularity.TOPIC:
        return  # every remaining family is per partition
    for name, value in _PARTITION_VALUES.items():
        f = _Families(granularity)
        for p in snap.partitions:
            f.add(name, (p.topic, str(p.partition)), value(p))
        yield from f.ordered()
    for name, gvalue in _GROUP_PARTITION_VALUES.items():
        f = _Families(granularity)
        for g in snap.groups:
            for gp in g.partitions:
                f.add(name, (g.group_id, gp.topic, str(gp.partition)), gvalue(gp))
        yield from f.ordered()


def build_families(snap: Snapshot, granularity: Granularity = Granularity.PARTITION) -> list[Metric]:
    return list(iter_families(snap, granularity))


def small_families(snap: Snapshot, granularity: Granularity = Granularity.PARTITION) -> list[Metric]:
    """The families that are not per partition (a few per topic and group)."""
    return _small_families(snap, granularity)


# --------------------------------------------------------------------------- fast text

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def _esc(v: str) -> str:
    return v.translate(_ESCAPES) if ("\\" in v or '"' in v or "\n" in v) else v


def _num(v: float) -> str:
    if type(v) is int:  # the usual value (offsets, lag, counts): str(int(v)) below
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return str(int(v))
    return repr(float(v))


def _header(name: str) -> str:
    spec = BY_NAME[name]
    help_text = spec.help.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {help_text}\n# TYPE {name} {spec.kind.value}\n"


#: series per text chunk of :func:`render_partition_families` (bounds the text held at once)
CHUNK_SERIES = 8192


def _kept(v: float | None) -> TypeGuard[float]:
    """A value that is served: known, finite, not negative."""
    return v is not None and v >= 0 and math.isfinite(v)


class RenderCache:
    """The text of each group's block of the per-group-partition families, kept from one
    render to the next (:func:`render_partition_families` with ``cache=``): a block whose
    group, partitions and values are those of the previous render is served from here
    instead of being written again. Only the groups of the latest render are kept.

    A block is reused only when its key is equal: the group's topics and partitions, in
    order, and that family's value of each (values that compare equal are written the same
    way: ``1``, ``1.0`` and ``True`` all as ``1``, ``-0.0`` and ``0`` as ``0``; NaN never
    equals itself, so it is always written again, and left out as always)."""

    __slots__ = ("groups", "reused", "written")

    def __init__(self) -> None:
        #: group id -> (topics, partitions, per family: (values, text, series))
        self.groups: dict[str, tuple[tuple[str, ...], tuple[int, ...],
                                     list[tuple[tuple[object, ...], str, int]]]] = {}
        #: blocks reused / written in the latest render (tests, benchmarks)
        self.reused = 0
        self.written = 0


_GROUP_VALUE_ATTRS = {
    "kafka_consumergroup_current_offset": attrgetter("committed"),
    "kafka_consumergroup_lag": attrgetter("lag"),
    "opskit_consumergroup_lag_seconds": attrgetter("lag_seconds"),
}
_TOPIC = attrgetter("topic")
_PARTITION = attrgetter("partition")


def render_partition_families(snap: Snapshot, granularity: Granularity = Granularity.PARTITION,
                              chunk_series: int = CHUNK_SERIES, cache: RenderCache | None = None
                              ) -> Iterator[tuple[str, int]]:
    """The per-partition families in the text exposition format, in chunks of at
    most ``chunk_series`` series: ``(text, series)``; a family's ``# HELP`` /
    ``# TYPE`` header opens its first chunk, and a family without series is left
    out. Same names, labels and values as :func:`iter_families` yields for them,
    written directly: at 10,000 partitions and 500 groups these are ~230,000
    series, and building prometheus_client sample objects for each costs seconds
    of CPU and ~100 MB per cycle. Chunking keeps only a few hundred kB of text
    alive at a time (the caller compresses each chunk and drops it).

    The label text of a partition is built once for its seven families; of a group
    partition, from the group's escaped id and its topic's escaped label, built once
    per cycle for the three group families.

    With a ``cache`` (the collector's, kept between cycles), the group families are
    written group by group and each group's block of a family is reused from the previous
    render when nothing in it changed (:class:`RenderCache`); the text is the same as
    without it, cut into chunks at group boundaries (a chunk may exceed ``chunk_series``
    by one group's block).
    """
    if granularity is Granularity.TOPIC:
        return
    labels = [(p, f'{{topic="{_esc(p.topic)}",partition="{p.partition}"}} ')
              for p in snap.partitions]
    for name, value in _PARTITION_VALUES.items():
        yield from _chunks(name, _partition_lines(name, labels, value), chunk_series)
    if cache is not None:
        yield from _cached_group_families(snap, cache, chunk_series)
        return
    topic_lbl: dict[str, str] = {}
    group_labels: list[tuple[GroupPartitionSnap, str]] = []
    for g in snap.groups:
        gid = f'{{consumergroup="{_esc(g.group_id)}'
        for gp in g.partitions:
            tl = topic_lbl.get(gp.topic)
            if tl is None:
                tl = topic_lbl[gp.topic] = f'",topic="{_esc(gp.topic)}",partition="'
            group_labels.append((gp, f'{gid}{tl}{gp.partition}"}} '))
    for name, gvalue in _GROUP_PARTITION_VALUES.items():
        yield from _chunks(name, _lines(name, group_labels, gvalue), chunk_series)


def _group_blocks(snap: Snapshot, cache: RenderCache
                  ) -> list[list[tuple[tuple[object, ...], str, int]]]:
    """Every group's blocks (one per group family, in family order): reused from
    ``cache`` where the key is unchanged, else written; ``cache`` then holds these."""
    old, new = cache.groups, {}
    topic_lbl: dict[str, str] = {}
    out: list[list[tuple[tuple[object, ...], str, int]]] = []
    reused = written = 0
    for g in snap.groups:
        parts = g.partitions
        topics, numbers = tuple(map(_TOPIC, parts)), tuple(map(_PARTITION, parts))
        prev = old.get(g.group_id)
        if prev is not None and (prev[0] != topics or prev[1] != numbers):
            prev = None
        labelled: list[tuple[GroupPartitionSnap, str]] | None = None
        blocks: list[tuple[tuple[object, ...], str, int]] = []
        for i, (name, attr) in enumerate(_GROUP_VALUE_ATTRS.items()):
            values = tuple(map(attr, parts))
            if prev is not None and prev[2][i][0] == values:
                blocks.append(prev[2][i])
                reused += 1
                continue
            if labelled is None:
                gid = f'{{consumergroup="{_esc(g.group_id)}'
                labelled = []
                for gp in parts:
                    tl = topic_lbl.get(gp.topic)
                    if tl is None:
                        tl = topic_lbl[gp.topic] = f'",topic="{_esc(gp.topic)}",partition="'
                    labelled.append((gp, f'{gid}{tl}{gp.partition}"}} '))
            lines = list(_lines(name, labelled, _GROUP_PARTITION_VALUES[name]))
            blocks.append((values, "".join(lines), len(lines)))
            written += 1
        new[g.group_id] = (topics, numbers, blocks)
        out.append(blocks)
    cache.groups, cache.reused, cache.written = new, reused, written
    return out


def _cached_group_families(snap: Snapshot, cache: RenderCache, chunk_series: int
                           ) -> Iterator[tuple[str, int]]:
    """The group families from whole group blocks (:func:`_group_blocks`), joined into
    chunks of about ``chunk_series`` series; a family without series is left out."""
    groups = _group_blocks(snap, cache)
    for i, name in enumerate(_GROUP_VALUE_ATTRS):
        buf: list[str] = []
        n = 0
        header = True
        for blocks in groups:
            _, text, k = blocks[i]
            if not k:
                continue
            if header:
                buf.append(_header(name))
                header = False
            buf.append(text)
            n += k
            if n >= chunk_series:
                yield "".join(buf), n
                buf, n = [], 0
        if n:
            yield "".join(buf), n


def _lines(name: str, labelled: list[tuple[GroupPartitionSnap, str]],
           value: Callable[[GroupPartitionSnap], float | int | None]) -> Iterator[str]:
    """One family's lines of the labelled group partitions whose value is served (as
    :func:`_kept` and :func:`_num` decide; an int, the usual value, is checked inline)."""
    for gp, lbl in labelled:
        v = value(gp)
        if v is None:
            continue
        if type(v) is int:
            if v >= 0:
                yield f"{name}{lbl}{v}\n"
        elif _kept(v):
            yield f"{name}{lbl}{_num(v)}\n"


def _partition_lines(name: str, labelled: list[tuple[PartitionSnap, str]],
                     value: Callable[[PartitionSnap], float | int | None]) -> Iterator[str]:
    """One partition family's lines (as :func:`_lines`: an int, the usual value, is
    checked and written inline)."""
    for p, lbl in labelled:
        v = value(p)
        if type(v) is int:
            if v >= 0:
                yield f"{name}{lbl}{v}\n"
        elif _kept(v):
            yield f"{name}{lbl}{_num(v)}\n"


def _chunks(name: str, lines: Iterator[str], chunk_series: int) -> Iterator[tuple[str, int]]:
    """Lines joined ``chunk_series`` at a time (pulled by ``islice``, not one by one);
    the header counts as one line of the first chunk, which holds at least one series."""
    it = iter(lines)
    buf = list(islice(it, max(1, chunk_series - 1)))
    if not buf:
        return
    yield _header(name) + "".join(buf), len(buf)
    while buf := list(islice(it, chunk_series)):
        yield "".join(buf), len(buf)


class FamilySink(Protocol):
    """What :func:`fill_small_families` adds each series to (:class:`_Families`, or the
    text writer of :mod:`opskit.exporter.small_text`)."""

    def add(self, name: str, labels: tuple[str, ...], value: float | None) -> None: ...


def _small_families(snap: Snapshot, granularity: Granularity) -> list[Metric]:
    f = _Families(granularity)
    fill_small_families(snap, f)
    return f.ordered()


def fill_small_families(snap: Snapshot, f: FamilySink) -> None:
    """Add every series of the small families to ``f``, family by family in a fixed
    order (the sink orders the families by the contract)."""
    f.add("kafka_brokers", (), len(snap.brokers))
    for b in snap.brokers:
        f.add("kafka_broker_info", (b.address, str(b.node_id)), 1)
    per_topic: dict[str, int] = {}
    for p in snap.partitions:
        per_topic[p.topic] = per_topic.get(p.topic, 0) + 1
    for name, n in sorted(per_topic.items()):
        f.add("kafka_topic_partitions", (name,), n)
    for g in snap.groups:
        gid = g.group_id
        for gt in g.topics:
            lbl2 = (gid, gt.topic)
            f.add("kafka_consumergroup_current_offset_sum", lbl2, gt.committed_sum)
            f.add("kafka_consumergroup_lag_sum", lbl2, gt.lag_sum)
            f.add("opskit_consumergroup_lag_seconds_max", lbl2, gt.lag_seconds_max)
            f.add("opskit_consumergroup_consume_rate", lbl2, gt.consume_rate)
            f.add("opskit_consumergroup_catchup_eta_seconds", lbl2, gt.catchup_eta_seconds)
            f.add("opskit_consumergroup_falling_behind", lbl2,
                  None if gt.falling_behind is None else int(gt.falling_behind))
            f.add("opskit_consumergroup_retention_headroom_seconds", lbl2, gt.retention_headroom_seconds)
            f.add("opskit_consumergroup_records_lost", lbl2, gt.records_lost)
        f.add("kafka_consumergroup_members", (gid,), g.members)
        if g.status is not None:
            for s in GROUP_STATUSES:
                f.add("opskit_consumergroup_status", (gid, s), int(s == g.status))
        f.add("opskit_consumergroup_state", (gid, g.state), 1)
        if g.severity.value != "UNKNOWN":
            f.add("opskit_consumergroup_severity", (gid,), g.severity.nagios_code)
        for kind, n in sorted(g.anomalies.items()):
            f.add("opskit_consumergroup_anomalies", (gid, kind), n)
    for t in snap.topics:
        f.add("opskit_topic_messages_in_per_second", (t.topic,), t.messages_in_per_second)
        f.add("opskit_topic_bytes_in_per_second", (t.topic,), t.bytes_in_per_second)
        f.add("opskit_topic_size_bytes", (t.topic,), t.size_bytes)
        f.add("opskit_topic_retention_ms", (t.topic,), t.retention_ms)
    for tt in snap.topic_throttles:
        f.add("opskit_topic_throttled_replicas", (tt.topic, tt.direction), tt.replicas)
    h = snap.health
    f.add("opskit_cluster_brokers_expected", (), h.brokers_expected)
    f.add("opskit_cluster_controller_id", (), snap.controller_id if snap.controller_id >= 0 else None)
    f.add("opskit_cluster_under_replicated_partitions", (), h.under_replicated)
    f.add("opskit_cluster_under_min_isr_partitions", (), h.under_min_isr)
    f.add("opskit_cluster_at_min_isr_partitions", (), h.at_min_isr)
    f.add("opskit_cluster_offline_partitions", (), h.offline)
    f.add("opskit_cluster_preferred_leader_imbalance", (), h.preferred_leader_imbalance)
    f.add("opskit_cluster_reassignments_in_progress", (), h.reassignments)
    for bt in snap.broker_throttles:
        f.add("opskit_broker_replication_throttle_bytes_per_second", (str(bt.broker), bt.direction),
              bt.bytes_per_second)
    f.add("opskit_kraft_quorum_leader_id", (), h.quorum_leader)
    f.add("opskit_kraft_quorum_voters", (), h.quorum_voters)
    for q in h.quorum_nodes:
        f.add("opskit_kraft_quorum_follower_lag", (str(q.node), q.role), q.lag)


@dataclass(frozen=True)
class ExporterStatus:
    """The exporter's own state at scrape time."""

    up: bool
    collections: int
    errors: Mapping[str, int] = field(default_factory=dict)
    last_duration_s: float | None = None
    last_success_s: float | None = None
    #: when the snapshot being served was collected (epoch s); None: no data served
    served_snapshot_s: float | None = None
    #: family -> the outcome of its latest read
    families: Mapping[str, FamilyRead] = field(default_factory=dict)
    #: (family, kind) -> failed reads
    family_errors: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: the families this exporter reads (each has its series from the start)
    expected_families: tuple[str, ...] = ()
    #: cycles are started to end just before the next expected scrape
    schedule_aligned: bool = False
    #: the scrape period estimated from the recent scrapes (None: none regular)
    scrape_period_s: float | None = None


ERROR_KINDS = ("unreachable", "timeout", "unsupported", "kafka", "auth", "internal")


def self_families(st: ExporterStatus, now_s: float, data_series: int) -> list[Metric]:
    """Self-metrics; ``opskit_exporter_series`` counts these plus ``data_series``."""
    f = _Families(Granularity.PARTITION)
    f.add("opskit_kafka_up", (), int(st.up))
    f.add("opskit_exporter_collection_duration_seconds", (), st.last_duration_s)
    f.add("opskit_exporter_collections_total", (), st.collections)
    for kind in sorted(set(ERROR_KINDS) | set(st.errors)):
        f.add("opskit_exporter_collection_errors_total", (kind,), st.errors.get(kind, 0))
    if st.served_snapshot_s is not None:
        f.add("opskit_exporter_snapshot_age_seconds", (), max(0.0, now_s - st.served_snapshot_s))
    f.add("opskit_exporter_last_success_timestamp_seconds", (), st.last_success_s)
    f.add("opskit_exporter_schedule_aligned", (), int(st.schedule_aligned))
    f.add("opskit_exporter_scrape_period_seconds", (), st.scrape_period_s)
    served = st.served_snapshot_s is not None
    names = list(st.expected_families) + sorted(set(st.families) - set(st.expected_families))
    for fam in names:
        r = st.families.get(fam)
        f.add("opskit_exporter_family_up", (fam,), int(served and r is not None and r.ok))
        if served and r is not None and r.data_at_s is not None:
            f.add("opskit_exporter_data_age_seconds", (fam,), max(0.0, now_s - r.data_at_s))
        if r is not None:
            f.add("opskit_exporter_family_read_seconds", (fam,), r.read_s)
            f.add("opskit_exporter_family_refresh_seconds", (fam,), r.refresh_s)
        kinds = set(ERROR_KINDS) | {k for (n, k) in st.family_errors if n == fam}
        for kind in sorted(kinds):
            f.add("opskit_exporter_family_errors_total", (fam, kind),
                  st.family_errors.get((fam, kind), 0))
    fams = f.ordered()
    own = sum(len(m.samples) for m in fams) + 1
    f.add("opskit_exporter_series", (), data_series + own)
    return f.ordered()


def count_series(families: list[Metric]) -> int:
    return sum(len(m.samples) for m in families)


def iter_names(families: list[Metric]) -> Iterator[str]:
    for m in families:
        yield m.name
