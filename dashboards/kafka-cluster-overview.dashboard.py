"""Kafka cluster overview: brokers, controller and quorum, partition health, throughput."""

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

RED_ABOVE_0 = [{"color": "green", "value": None}, {"color": "red", "value": 1}]


def build(runbook_base: str = DEFAULT_RUNBOOK_BASE) -> Dashboard:
    lay = Layout(runbook_base)
    by = "max by (cluster)"
    lay.row("Brokers, controller and quorum", "KafkaBrokerDown")
    lay.stat("Brokers online", "KafkaBrokerDown",
             [target(f"{by} (kafka_brokers{{{CLUSTER}}})", "{{cluster}}")])
    lay.stat("Brokers expected", "KafkaBrokerDown",
             [target(f"{by} (opskit_cluster_brokers_expected{{{CLUSTER}}})", "{{cluster}}")])
    lay.stat("Active controller", "KafkaNoActiveController",
             [target(f"{by} (opskit_cluster_controller_id{{{CLUSTER}}})", "{{cluster}}")],
             description="Node id of the active controller")
    lay.stat("KRaft quorum leader", "KafkaNoActiveController",
             [target(f"{by} (opskit_kraft_quorum_leader_id{{{CLUSTER}}})", "{{cluster}}")])
    lay.stat("KRaft voters", "KafkaKRaftSingleVoter",
             [target(f"{by} (opskit_kraft_quorum_voters{{{CLUSTER}}})", "{{cluster}}")],
             thresholds=[{"color": "orange", "value": None}, {"color": "green", "value": 3}])
    lay.stat("Kafka reachable", "KafkaClusterUnreachable",
             [target(f"{by} (opskit_kafka_up{{{CLUSTER}}})", "{{cluster}}")],
             thresholds=[{"color": "red", "value": None}, {"color": "green", "value": 1}])
    lay.row("Partitions", "KafkaUnderReplicatedPartitions")
    lay.stat("Under-replicated", "KafkaUnderReplicatedPartitions",
             [target(f"{by} (kafka_under_replicated_partitions{{{CLUSTER}}})", "{{cluster}}")],
             thresholds=RED_ABOVE_0, w=6)
    lay.stat("Under min ISR", "KafkaUnderMinIsrPartitions",
             [target(f"{by} (opskit_cluster_under_min_isr_partitions{{{CLUSTER}}})",
                     "{{cluster}}")], thresholds=RED_ABOVE_0, w=6)
    lay.stat("Offline", "KafkaOfflinePartitions",
             [target(f"{by} (opskit_cluster_offline_partitions{{{CLUSTER}}})", "{{cluster}}")],
             thresholds=RED_ABOVE_0, w=6)
    lay.stat("Not on preferred leader", "KafkaPreferredLeaderImbalance",
             [target(f"{by} (opskit_cluster_preferred_leader_imbalance{{{CLUSTER}}})",
                     "{{cluster}}")], w=6)
    lay.timeseries("Partition health", "KafkaUnderReplicatedPartitions", [
        target(f"{by} (kafka_under_replicated_partitions{{{CLUSTER}}})", "URP {{cluster}}"),
        target(f"{by} (opskit_cluster_under_min_isr_partitions{{{CLUSTER}}})",
               "under min ISR {{cluster}}", "B"),
        target(f"{by} (opskit_cluster_at_min_isr_partitions{{{CLUSTER}}})",
               "at min ISR {{cluster}}", "C"),
        target(f"{by} (opskit_cluster_offline_partitions{{{CLUSTER}}})", "offline {{cluster}}",
               "D"),
    ], w=24)
    lay.row("Throughput", "KafkaTopicThroughputDrop")
    lay.timeseries("Messages in / consumed per second", "KafkaTopicThroughputDrop", [
        target(f"sum by (cluster) (kafka_messages_in_per_sec{{{CLUSTER}}})", "in {{cluster}}"),
        target(f"sum by (cluster) (cluster_consumergroup:opskit_consumergroup_consume_rate:sum"
               f"{{{CLUSTER}}})", "consumed (all groups) {{cluster}}", "B"),
    ], unit="short")
    lay.timeseries("Bytes in per second", "KafkaTopicThroughputDrop", [
        target(f"sum by (cluster) (kafka_bytes_in_per_sec{{{CLUSTER}}})", "in {{cluster}}"),
    ], unit="Bps", description="From log-dir size growth: retention deletes make it read low")
    return make_dashboard("opskit-kafka-cluster", "Kafka / Cluster overview",
                          "Brokers, controller and KRaft quorum, partition health, throughput",
                          lay, [datasource_var(), cluster_var()], ["cluster"])


dashboard = build()
