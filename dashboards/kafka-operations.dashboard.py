"""Operations: reassignments, leadership, quorum, and the exporter itself."""

from grafanalib.core import Dashboard

from opskit.dashboards.common import (
    CLUSTER,
    DEFAULT_RUNBOOK_BASE,
    Layout,
    cluster_var,
    datasource_var,
    target,
)
from opskit.dashboards.common import (
    dashboard as make_dashboard,
)


def build(runbook_base: str = DEFAULT_RUNBOOK_BASE) -> Dashboard:
    lay = Layout(runbook_base)
    by = "max by (cluster)"
    lay.row("Reassignments and throttles", "scaling")
    lay.stat("Reassignments in progress", "scaling",
             [target(f"{by} (opskit_cluster_reassignments_in_progress{{{CLUSTER}}})",
                     "{{cluster}}")], w=6)
    lay.timeseries("Reassignments and under-replication", "scaling", [
        target(f"{by} (opskit_cluster_reassignments_in_progress{{{CLUSTER}}})",
               "reassigning {{cluster}}"),
        target(f"{by} (kafka_under_replicated_partitions{{{CLUSTER}}})", "URP {{cluster}}", "B"),
    ], w=12)
    lay.timeseries("Replication throttles", "scaling", [
        target(f"max by (cluster, broker, direction) "
               f"(opskit_broker_replication_throttle_bytes_per_second{{{CLUSTER}}})",
               "broker {{broker}} {{direction}}")], unit="Bps", w=6,
        description="leader/follower.replication.throttled.rate set on each broker. A "
                    "reassignment started with a throttle leaves it until removed: empty "
                    "means no throttle.")
    lay.table("Topics with throttled replicas", "scaling", [
        target(f"max by (cluster, topic, direction) "
               f"(opskit_topic_throttled_replicas{{{CLUSTER}}})", "", "A", instant=True,
               fmt="table")], w=24, h=6,
        description="Replicas listed in leader/follower.replication.throttled.replicas "
                    "(* counts every replica). Remove them once the reassignment is done.")
    lay.row("Leadership and quorum", "KafkaPreferredLeaderImbalance")
    lay.timeseries("Partitions not on their preferred leader", "KafkaPreferredLeaderImbalance", [
        target(f"{by} (opskit_cluster_preferred_leader_imbalance{{{CLUSTER}}})", "{{cluster}}")])
    lay.timeseries("KRaft follower lag", "KafkaKRaftFollowerLagging", [
        target(f"max by (cluster, node, role) (opskit_kraft_quorum_follower_lag{{{CLUSTER}}})",
               "{{role}} {{node}}")])
    lay.row("Exporter", "KafkaExporterDown")
    lay.stat("Exporter targets up", "KafkaExporterDown",
             [target('sum(up{job="opskit-exporter"})', "up")], w=6,
             thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}])
    lay.timeseries("Snapshot age and collection time", "KafkaExporterSnapshotStale", [
        target(f"max by (cluster) (opskit_exporter_snapshot_age_seconds{{{CLUSTER}}})",
               "snapshot age {{cluster}}"),
        target(f"max by (cluster) (opskit_exporter_collection_duration_seconds{{{CLUSTER}}})",
               "collection {{cluster}}", "B"),
    ], unit="s", w=18)
    return make_dashboard("opskit-kafka-operations", "Kafka / Operations",
                          "Reassignments, throttles, leadership, KRaft quorum, exporter health",
                          lay, [datasource_var(), cluster_var()], ["operations"])


dashboard = build()
