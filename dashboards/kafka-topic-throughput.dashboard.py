"""Topic throughput: messages and bytes in, consumption, size, dead letters."""

from grafanalib.core import Dashboard

from opskit.dashboards.common import (
    CLUSTER,
    DEFAULT_RUNBOOK_BASE,
    Layout,
    cluster_var,
    datasource_var,
    query_var,
    target,
)
from opskit.dashboards.common import (
    dashboard as make_dashboard,
)

TSEL = f'{CLUSTER},topic=~"$topic"'


def build(runbook_base: str = DEFAULT_RUNBOOK_BASE) -> Dashboard:
    lay = Layout(runbook_base)
    lay.row("Produced", "KafkaTopicThroughputDrop")
    lay.timeseries("Messages in per second", "KafkaTopicThroughputDrop", [
        target(f"sum by (topic) (kafka_messages_in_per_sec{{{TSEL}}})", "{{topic}}")],
        unit="short")
    lay.timeseries("Bytes in per second", "KafkaTopicThroughputDrop", [
        target(f"sum by (topic) (kafka_bytes_in_per_sec{{{TSEL}}})", "{{topic}}")], unit="Bps")
    lay.row("Consumed", "KafkaConsumerGroupLagGrowing")
    lay.timeseries("Consumed per second, by group", "KafkaConsumerGroupLagGrowing", [
        target(f"sum by (consumergroup, topic) (opskit_consumergroup_consume_rate{{{TSEL}}})",
               "{{consumergroup}} {{topic}}")], unit="short")
    lay.timeseries("Dead letters per 5 minutes", "KafkaDeadLetterGrowing", [
        target(f'sum by (topic) (delta(kafka_topic_partition_current_offset{{{CLUSTER},'
               f'topic="dead_letter"}}[5m]))', "{{topic}}")], unit="short")
    lay.row("Size and layout", "scaling")
    lay.timeseries("Size on disk", "scaling", [
        target(f"sum by (topic) (opskit_topic_size_bytes{{{TSEL}}})", "{{topic}}")],
        unit="bytes")
    lay.table("Topics", "scaling", [
        target(f"max by (topic) (kafka_topic_partitions{{{TSEL}}})", "", "A", instant=True,
               fmt="table"),
        target(f"max by (topic) (opskit_topic_retention_ms{{{TSEL}}})", "", "B", instant=True,
               fmt="table"),
    ], w=12, h=8, description="A: partitions, B: retention.ms")
    variables = [datasource_var(), cluster_var(),
                 query_var("topic", "Topic",
                           f"label_values(kafka_topic_partitions{{{CLUSTER}}}, topic)")]
    return make_dashboard("opskit-kafka-topics", "Kafka / Topic throughput",
                          "Messages and bytes in, consumption per group, size, dead letters",
                          lay, variables, ["topics"])


dashboard = build()
