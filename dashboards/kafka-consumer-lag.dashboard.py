"""Consumer lag: messages and seconds, rates, ETA, retention headroom, status, partitions."""

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

SEL = f'{CLUSTER},consumergroup=~"$consumergroup",topic=~"$topic"'
GSEL = f'{CLUSTER},consumergroup=~"$consumergroup"'
HIP30_LAG = [{"color": "green", "value": None}, {"color": "orange", "value": 100_000},
             {"color": "red", "value": 1_000_000}]


def build(runbook_base: str = DEFAULT_RUNBOOK_BASE) -> Dashboard:
    lay = Layout(runbook_base)
    lay.row("Group", "consumer-lag-resolution")
    lay.stat("Lag (messages)", "KafkaConsumerGroupLag",
             [target(f"sum by (consumergroup) (kafka_consumergroup_lag_sum{{{SEL}}})",
                     "{{consumergroup}}")], thresholds=HIP30_LAG,
             description="HIP-30: 100K warning, 1M critical (per-group overrides in alerts)")
    lay.stat("Lag (time)", "KafkaConsumerGroupLagSeconds",
             [target(f"max by (consumergroup) (opskit_consumergroup_lag_seconds_max{{{SEL}}})",
                     "{{consumergroup}}")], unit="s",
             description="Age of the oldest unconsumed record")
    lay.stat("Status", "KafkaConsumerGroupStalled",
             [target(f"max by (consumergroup, status) (opskit_consumergroup_status{{{GSEL}}}) == 1",
                     "{{consumergroup}} {{status}}")],
             description="OK, WARN, ERR, STALL, STOP, REWIND or UNKNOWN (value 1 = current)")
    lay.stat("Members", "KafkaConsumerGroupNoMembers",
             [target(f"max by (consumergroup) (kafka_consumergroup_members{{{GSEL}}})",
                     "{{consumergroup}}")])
    lay.stat("Catch-up ETA", "consumer-lag-resolution",
             [target(f"max by (consumergroup, topic) (opskit_consumergroup_catchup_eta_seconds"
                     f"{{{SEL}}})", "{{consumergroup}} {{topic}}"),
              target(f"max by (consumergroup, topic) (opskit_consumergroup_falling_behind"
                     f"{{{SEL}}})", "falling behind {{consumergroup}} {{topic}}", "B")],
             unit="s", description="Seconds to catch up at current rates; "
                                   "falling behind = 1 when the group cannot catch up")
    lay.stat("Retention headroom", "KafkaConsumerGroupLagNearRetention",
             [target(f"min by (consumergroup, topic) "
                     f"(opskit_consumergroup_retention_headroom_seconds{{{SEL}}})",
                     "{{consumergroup}} {{topic}}"),
              target(f"sum by (consumergroup, topic) (opskit_consumergroup_records_lost{{{SEL}}})",
                     "records lost {{consumergroup}} {{topic}}", "B")],
             unit="s", description="Time before retention deletes unconsumed records; "
                                   "records lost = already deleted before being read")
    lay.row("Over time", "consumer-lag-resolution")
    lay.timeseries("Lag in messages", "KafkaConsumerGroupLag", [
        target(f"sum by (consumergroup, topic) (kafka_consumergroup_lag_sum{{{SEL}}})",
               "{{consumergroup}} {{topic}}")], thresholds=HIP30_LAG)
    lay.timeseries("Lag in seconds", "KafkaConsumerGroupLagSeconds", [
        target(f"max by (consumergroup, topic) (opskit_consumergroup_lag_seconds_max{{{SEL}}})",
               "{{consumergroup}} {{topic}}")], unit="s")
    lay.timeseries("Produce vs consume rate", "KafkaConsumerGroupLagGrowing", [
        target(f'sum by (topic) (opskit_topic_messages_in_per_second{{{CLUSTER},topic=~"$topic"}})',
               "produced {{topic}}"),
        target(f"sum by (consumergroup, topic) (opskit_consumergroup_consume_rate{{{SEL}}})",
               "consumed {{consumergroup}} {{topic}}", "B")], unit="short")
    lay.timeseries("Retention headroom", "KafkaConsumerGroupLagNearRetention", [
        target(f"min by (consumergroup, topic) "
               f"(opskit_consumergroup_retention_headroom_seconds{{{SEL}}})",
               "{{consumergroup}} {{topic}}")], unit="s")
    lay.row("Partitions", "consumer-lag-resolution")
    lay.table("Per partition", "consumer-lag-resolution", [
        target(f"max by (consumergroup, topic, partition) (kafka_consumergroup_lag{{{SEL}}})",
               "", "A", instant=True, fmt="table"),
        target(f"max by (consumergroup, topic, partition) "
               f"(opskit_consumergroup_lag_seconds{{{SEL}}})", "", "B", instant=True, fmt="table"),
        target(f"max by (consumergroup, topic, partition) "
               f"(kafka_consumergroup_current_offset{{{SEL}}})", "", "C", instant=True,
               fmt="table"),
    ], description="A: lag (messages), B: lag (seconds), C: committed offset")
    variables = [
        datasource_var(), cluster_var(),
        query_var("consumergroup", "Group",
                  f"label_values(kafka_consumergroup_lag_sum{{{CLUSTER}}}, consumergroup)"),
        query_var("topic", "Topic",
                  f'label_values(kafka_consumergroup_lag_sum{{{CLUSTER},'
                  f'consumergroup=~"$consumergroup"}}, topic)'),
    ]
    return make_dashboard("opskit-kafka-consumer-lag", "Kafka / Consumer lag",
                          "Lag in messages and time, rates, catch-up ETA, retention risk, status",
                          lay, variables, ["lag"])


dashboard = build()
