"""Snapshot -> metric families, and cycle inputs -> snapshot: pure, no Kafka."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.lag import compute_group_lag
from opskit.core.models import (
    GroupDescription,
    GroupState,
    LagThresholds,
    Member,
    PartitionOffsets,
    Severity,
    TopicPartition,
)
from opskit.errors import UsageError
from opskit.exporter import names
from opskit.exporter.assemble import CycleInputs, assemble_snapshot, lag_time_positions
from opskit.exporter.families import ExporterStatus, build_families, self_families
from opskit.exporter.history import History
from opskit.exporter.options import Granularity, NameFilter
from opskit.exporter.snapshot import (
    BrokerSnap,
    GroupPartitionSnap,
    GroupSnap,
    GroupTopicSnap,
    HealthSnap,
    PartitionSnap,
    QuorumNodeSnap,
    Snapshot,
    TopicSnap,
)

T = "events_plugin_ingestion"


def _render(fams) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    class C:
        def collect(self):
            return fams

    reg = CollectorRegistry(auto_describe=False)
    reg.register(C())  # type: ignore[arg-type]
    text = generate_latest(reg).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _snap(**kw) -> Snapshot:
    base = {
        "taken_at_ms": 1_000_000,
        "cluster_id": "c1",
        "controller_id": 1,
        "brokers": (BrokerSnap(1, "k1:9092"), BrokerSnap(2, "k2:9092")),
        "partitions": (
            PartitionSnap(T, 0, 1, (1, 2), (1, 2), 5, 100),
            PartitionSnap(T, 1, -1, (2, 1), (), None, None),  # offline
            PartitionSnap(T, 2, 2, (1, 2), (2,), 0, 40),       # URP, not preferred
        ),
        "topics": (TopicSnap(T, 12.5, None, 4096, 604_800_000),),
        "groups": (GroupSnap(
            "analytics-ingest", "Stable", 2, Severity.WARNING, "WARN",
            partitions=(GroupPartitionSnap(T, 0, 90, 10, 3.5),
                        GroupPartitionSnap(T, 2, None, None, None)),
            topics=(GroupTopicSnap(T, 90, 10, 3.5, 4.0, None, True, 1000.0, 0),),
            anomalies={"no_committed_offset": 1, "committed_below_log_start": 0},
        ),),
        "health": HealthSnap(2, 1, 0, 0, 1, 1, None, 1, 1, (QuorumNodeSnap(1, "voter", 0),)),
    }
    base.update(kw)
    return Snapshot(**base)  # type: ignore[arg-type]


def test_every_family_is_in_the_contract_with_its_labels():
    fams = build_families(_snap())
    for m in fams:
        spec = names.BY_NAME.get(m.name) or names.BY_NAME[m.name + "_total"]
        for s in m.samples:
            assert tuple(sorted(s.labels)) == tuple(sorted(spec.labels)), m.name
            assert math.isfinite(s.value) and s.value >= 0, (m.name, s)


def test_kafka_exporter_compatible_values():
    v = _render(build_families(_snap()))
    tp0 = (("partition", "0"), ("topic", T))
    assert v["kafka_brokers"][()] == 2
    assert v["kafka_broker_info"][(("address", "k1:9092"), ("id", "1"))] == 1
    assert v["kafka_topic_partitions"][(("topic", T),)] == 3
    assert v["kafka_topic_partition_current_offset"][tp0] == 100
    assert v["kafka_topic_partition_oldest_offset"][tp0] == 5
    assert v["kafka_topic_partition_in_sync_replica"][tp0] == 2
    assert v["kafka_topic_partition_leader"][tp0] == 1
    assert v["kafka_topic_partition_replicas"][tp0] == 2
    tp2 = (("partition", "2"), ("topic", T))
    assert v["kafka_topic_partition_under_replicated_partition"][tp2] == 1
    assert v["kafka_topic_partition_under_replicated_partition"][tp0] == 0
    assert v["kafka_topic_partition_leader_is_preferred"][tp2] == 0
    assert v["kafka_topic_partition_leader_is_preferred"][tp0] == 1
    g0 = (("consumergroup", "analytics-ingest"), ("partition", "0"), ("topic", T))
    assert v["kafka_consumergroup_lag"][g0] == 10
    assert v["kafka_consumergroup_current_offset"][g0] == 90
    gt = (("consumergroup", "analytics-ingest"), ("topic", T))
    assert v["kafka_consumergroup_lag_sum"][gt] == 10
    assert v["kafka_consumergroup_current_offset_sum"][gt] == 90
    assert v["kafka_consumergroup_members"][(("consumergroup", "analytics-ingest"),)] == 2


def test_unknown_values_are_absent_never_nan_or_negative():
    v = _render(build_families(_snap()))
    tp1 = (("partition", "1"), ("topic", T))
    # offline partition: no leader series (would be -1), no offsets
    assert tp1 not in v["kafka_topic_partition_leader"]
    assert tp1 not in v["kafka_topic_partition_current_offset"]
    assert v["kafka_topic_partition_in_sync_replica"][tp1] == 0
    g2 = (("consumergroup", "analytics-ingest"), ("partition", "2"), ("topic", T))
    assert g2 not in v["kafka_consumergroup_lag"]
    assert g2 not in v["opskit_consumergroup_lag_seconds"]
    assert "opskit_consumergroup_catchup_eta_seconds" not in v  # falling behind: no ETA
    assert "opskit_topic_bytes_in_per_second" not in v
    assert "opskit_cluster_reassignments_in_progress" not in v  # unknown


def test_opskit_families():
    v = _render(build_families(_snap()))
    g = (("consumergroup", "analytics-ingest"),)
    gt = g + (("topic", T),)
    assert v["opskit_consumergroup_lag_seconds_max"][gt] == 3.5
    assert v["opskit_consumergroup_consume_rate"][gt] == 4.0
    assert v["opskit_consumergroup_falling_behind"][gt] == 1
    assert v["opskit_consumergroup_retention_headroom_seconds"][gt] == 1000.0
    assert v["opskit_consumergroup_records_lost"][gt] == 0
    statuses = {k[1][1]: val for k, val in v["opskit_consumergroup_status"].items()}
    assert statuses == {s: float(s == "WARN") for s in names.GROUP_STATUSES}
    assert v["opskit_consumergroup_state"][g + (("state", "Stable"),)] == 1
    assert v["opskit_consumergroup_severity"][g] == 1
    assert v["opskit_consumergroup_anomalies"][(("consumergroup", "analytics-ingest"),
                                                ("kind", "no_committed_offset"))] == 1
    assert v["opskit_topic_messages_in_per_second"][(("topic", T),)] == 12.5
    assert v["opskit_topic_size_bytes"][(("topic", T),)] == 4096
    assert v["opskit_topic_retention_ms"][(("topic", T),)] == 604_800_000
    assert v["opskit_cluster_under_replicated_partitions"][()] == 1
    assert v["opskit_cluster_offline_partitions"][()] == 1
    assert v["opskit_cluster_brokers_expected"][()] == 2
    assert v["opskit_kraft_quorum_leader_id"][()] == 1
    assert v["opskit_kraft_quorum_follower_lag"][(("node", "1"), ("role", "voter"))] == 0


def test_topic_granularity_drops_partition_families_only():
    part = {m.name for m in build_families(_snap(), Granularity.PARTITION)}
    topic = {m.name for m in build_families(_snap(), Granularity.TOPIC)}
    level = {s.name for s in names.ALL if s.partition_level}
    assert part & level
    assert not topic & level
    assert topic == part - level


def test_self_families_count_series_and_errors():
    st = ExporterStatus(up=False, collections=3, errors={"unreachable": 2}, last_duration_s=1.5,
                        last_success_s=900.0, served_snapshot_s=990.0)
    v = _render(self_families(st, 1000.0, data_series=40))
    assert v["opskit_kafka_up"][()] == 0
    assert v["opskit_exporter_snapshot_age_seconds"][()] == 10.0
    assert v["opskit_exporter_collection_errors_total"][(("kind", "unreachable"),)] == 2
    assert v["opskit_exporter_collection_errors_total"][(("kind", "timeout"),)] == 0
    assert v["opskit_exporter_collections_total"][()] == 3
    own = sum(len(x) for x in v.values()) - sum(1 for k in v if k.endswith("_created"))
    assert v["opskit_exporter_series"][()] == 40 + own
    # no snapshot served: no age series
    v2 = _render(self_families(ExporterStatus(up=False, collections=0), 1000.0, 0))
    assert "opskit_exporter_snapshot_age_seconds" not in v2


def test_name_filter():
    f = NameFilter.of(["billing-.*", "audit-archive"], ["billing-test.*"], "group")
    assert f.keep("billing-agg") and f.keep("audit-archive")
    assert not f.keep("billing-test-1") and not f.keep("analytics-ingest")
    assert not f.keep("xaudit-archive")  # full match only
    assert NameFilter().keep("anything") and not NameFilter().active
    with pytest.raises(UsageError, match="--topic-deny"):
        NameFilter.of(None, ["("], "topic")


# --------------------------------------------------------------------------- assemble


def _group(gid: str, committed: dict[int, int], offs: dict[TopicPartition, PartitionOffsets],
           members: int = 0):
    desc = GroupDescription(gid, GroupState.STABLE if members else GroupState.EMPTY,
                            tuple(Member(f"m{i}", "c", "h") for i in range(members)))
    return compute_group_lag(desc, {TopicPartition(T, p): o for p, o in committed.items()}, offs,
                             {T: 2}, LagThresholds(10, 100))


def _inputs(groups, offs, record_ts=None, sizes=None):
    return CycleInputs(
        cluster_id="c", controller_id=0, brokers=(BrokerSnap(0, "k:9092"),),
        partitions=(PartitionSnap(T, 0, 0, (0,), (0,)), PartitionSnap(T, 1, 0, (0,), (0,))),
        groups=groups, offsets=offs, record_ts=record_ts or {},
        retention={T: (3_600_000, -1)}, min_isr={T: 1}, sizes=sizes,
    )


def _offs(end0: int, end1: int, start0: int = 0):
    return {TopicPartition(T, 0): PartitionOffsets(TopicPartition(T, 0), start0, end0),
            TopicPartition(T, 1): PartitionOffsets(TopicPartition(T, 1), 0, end1)}


def test_assemble_lag_seconds_exact_zero_and_estimated():
    h = History(300_000, 600_000, 10)
    now = 10_000_000
    offs = _offs(100, 50)
    g = _group("g1", {0: 80, 1: 50}, offs)
    pos = lag_time_positions([g])
    assert pos == [(TopicPartition(T, 0), 80)]
    snap = assemble_snapshot(_inputs([g], offs, {pos[0]: now - 30_000}), h, now)
    rows = {p.partition: p for p in snap.groups[0].partitions}
    assert rows[0].lag == 20 and rows[0].lag_seconds == 30.0
    assert rows[1].lag == 0 and rows[1].lag_seconds == 0.0
    gt = snap.groups[0].topics[0]
    assert gt.lag_sum == 20 and gt.committed_sum == 130 and gt.lag_seconds_max == 30.0
    # retention.ms 1h, oldest unconsumed record 30 s old
    assert gt.retention_headroom_seconds == 3600 - 30
    # next cycle: the record was not read (budget): estimated from the log-end timeline
    offs2 = _offs(160, 50)
    g2 = _group("g1", {0: 120, 1: 50}, offs2)
    snap2 = assemble_snapshot(_inputs([g2], offs2), h, now + 60_000)
    est = {p.partition: p for p in snap2.groups[0].partitions}[0]
    # offset 120 was appended between the two cycles: age at most 60 s, more than 0
    assert est.lag_seconds is not None and 0 < est.lag_seconds <= 60


def test_assemble_rates_eta_and_status_over_cycles():
    h = History(300_000, 600_000, 10)
    t0 = 50_000_000
    snaps = []
    for k in range(4):  # producers +60/min on p0, consumer +90/min on p0
        offs = _offs(1000 + 60 * k, 10)
        g = _group("g1", {0: 700 + 90 * k, 1: 10}, offs, members=1)
        snaps.append(assemble_snapshot(_inputs([g], offs), h, t0 + 60_000 * k))
    last = snaps[-1]
    assert snaps[0].topics[0].messages_in_per_second is None  # one point: no rate yet
    assert last.topics[0].messages_in_per_second == pytest.approx(1.0)
    gt = last.groups[0].topics[0]
    assert gt.consume_rate == pytest.approx(1.5)
    lag = (1000 + 180) - (700 + 270)
    assert gt.lag_sum == lag
    assert gt.catchup_eta_seconds == pytest.approx(lag / 0.5)
    assert gt.falling_behind is False
    assert last.groups[0].status in names.GROUP_STATUSES


def test_vanished_groups_and_topics_leave_history():
    h = History(300_000, 600_000, 5)
    offs = _offs(10, 10)
    ga, gb = _group("a", {0: 1}, offs), _group("b", {0: 2}, offs)
    assemble_snapshot(_inputs([ga, gb], offs), h, 1_000_000)
    assert h.sizes()["groups"] == 2
    snap = assemble_snapshot(_inputs([ga], offs), h, 1_060_000)
    assert [g.group_id for g in snap.groups] == ["a"]
    assert h.sizes()["groups"] == 1
    empty = CycleInputs("c", 0, (), (), [], {})
    assemble_snapshot(empty, h, 1_120_000)
    assert h.sizes() == {"topics": 0, "timelines": 0, "groups": 0, "group_samples": 0}


def test_stored_samples_are_thinned_and_bounded():
    h = History(300_000, 600_000, 5)  # one stored sample every 120 s
    for k in range(40):  # 15 s cycles for 10 minutes
        offs = _offs(100 + k, 10)
        assemble_snapshot(_inputs([_group("a", {0: 50 + k, 1: 10}, offs)], offs), h, 2_000_000 + 15_000 * k)
    # 2 partitions x at most (5 + 1) samples each
    assert 0 < h.sizes()["group_samples"] <= 12


def test_health_counts_from_partitions():
    inp = CycleInputs(
        cluster_id="c", controller_id=0, brokers=(BrokerSnap(0, "a:1"), BrokerSnap(1, "b:1")),
        partitions=(PartitionSnap("t", 0, 0, (0, 1), (0,)), PartitionSnap("t", 1, -1, (1,), ())),
        groups=[], offsets={}, min_isr={"t": 2},
    )
    snap = assemble_snapshot(inp, History(60_000, 60_000, 5), 1)
    assert snap.health.under_replicated >= 1
    assert snap.health.offline == 1
    assert snap.health.under_min_isr >= 1
    assert snap.health.reassignments is None  # not asked: absent, not 0


def test_fast_partition_text_equals_prometheus_client_rendering():
    from opskit.exporter.families import render_partition_families, small_families

    weird = GroupSnap('we"ird\\grp\nx', "Empty", 0, Severity.OK, "OK",
                      partitions=(GroupPartitionSnap(T, 0, 7, 3, 1.25),))
    snap = _snap(groups=_snap().groups + (weird,))
    reference = _render(build_families(snap))
    chunks = list(render_partition_families(snap))
    fast_text = "".join(t for t, _ in chunks)
    fast: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(fast_text):
        for s in fam.samples:
            fast.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    small = _render(small_families(snap))
    assert set(fast) | set(small) == set(reference)
    assert not set(fast) & set(small)
    for name, series in fast.items():
        assert series == reference[name], name
    assert sum(n for _, n in chunks) == sum(len(v) for v in fast.values())
    g = (("consumergroup", 'we"ird\\grp\nx'), ("partition", "0"), ("topic", T))
    assert fast["opskit_consumergroup_lag_seconds"][g] == 1.25
    assert list(render_partition_families(snap, Granularity.TOPIC)) == []
    # small chunks: the same text and series count, cut into more pieces
    small_chunks = list(render_partition_families(snap, chunk_series=2))
    assert "".join(t for t, _ in small_chunks) == fast_text
    assert sum(n for _, n in small_chunks) == sum(n for _, n in chunks)
    assert len(small_chunks) > len(chunks)


def test_assemble_never_exports_zero_lag_seconds_for_an_unread_lagging_partition():
    """No Read ACL (a monitor): the committed record is never read. The first cycle's
    timeline starts now, so its age (0) would be exported as the lag: the series is left
    out until the timeline can interpolate the committed offset."""
    h = History(300_000, 600_000, 10)
    now = 20_000_000
    offs = _offs(100, 50)
    g = _group("g1", {0: 10, 1: 50}, offs)
    rows = {p.partition: p for p in assemble_snapshot(_inputs([g], offs), h, now).groups[0].partitions}
    assert rows[0].lag == 90 and rows[0].lag_seconds is None
    assert rows[1].lag == 0 and rows[1].lag_seconds == 0.0
    # later cycles: committed 10 is still older than the timeline's first point: still absent
    offs2 = _offs(160, 50)
    g2 = _group("g1", {0: 10, 1: 50}, offs2)
    snap = assemble_snapshot(_inputs([g2], offs2), h, now + 60_000)
    assert snap.groups[0].partitions[0].lag_seconds is None
    # nor a topic maximum over the partitions that are known (0 would understate it)
    assert snap.groups[0].topics[0].lag_seconds_max is None
    # the consumer moves inside the timeline (between the two points): an estimate appears
    offs3 = _offs(200, 50)
    g3 = _group("g1", {0: 130, 1: 50}, offs3)
    est = assemble_snapshot(_inputs([g3], offs3), h, now + 120_000).groups[0].partitions[0]
    assert est.lag_seconds is not None and 60 <= est.lag_seconds <= 120
