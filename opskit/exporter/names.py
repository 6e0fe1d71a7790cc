"""The exporter's metric contract: every family it serves, with type and labels.

Two sets of names:

* ``kafka_*`` families keep danielqsj/kafka_exporter's names and labels exactly,
  so dashboards and alert rules written for it work unchanged.
* ``opskit_*`` families are opskit's own (lag in time, rates, retention risk,
  status, cluster health, and the exporter's self-metrics).

The exporter, the dashboards and the alert rules all read this module, so a
name can change in one place only (a test checks that every metric referenced by
a generated rule or panel is listed here).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(str, Enum):
    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: Kind
    labels: tuple[str, ...]
    help: str
    # "partition" families are dropped at --granularity topic
    partition_level: bool = False


G, C = Kind.GAUGE, Kind.COUNTER
_TP = ("topic", "partition")
_GTP = ("consumergroup", "topic", "partition")
_GT = ("consumergroup", "topic")

KAFKA_EXPORTER_COMPATIBLE: tuple[MetricSpec, ...] = (
    MetricSpec("kafka_brokers", G, (), "Number of brokers in the cluster"),
    MetricSpec("kafka_broker_info", G, ("address", "id"), "Broker information (value 1)"),
    MetricSpec("kafka_topic_partitions", G, ("topic",), "Number of partitions of the topic"),
    MetricSpec("kafka_topic_partition_current_offset", G, _TP,
               "Log end offset (high watermark) of the partition", True),
    MetricSpec("kafka_topic_partition_oldest_offset", G, _TP,
               "Log start offset of the partition", True),
    MetricSpec("kafka_topic_partition_in_sync_replica", G, _TP,
               "Number of in-sync replicas of the partition", True),
    MetricSpec("kafka_topic_partition_leader", G, _TP, "Leader broker id of the partition", True),
    MetricSpec("kafka_topic_partition_leader_is_preferred", G, _TP,
               "1 if the partition's leader is its preferred replica", True),
    MetricSpec("kafka_topic_partition_replicas", G, _TP, "Number of replicas of the partition", True),
    MetricSpec("kafka_topic_partition_under_replicated_partition", G, _TP,
               "1 if the partition is under-replicated", True),
    MetricSpec("kafka_consumergroup_current_offset", G, _GTP,
               "Committed offset of the group on the partition", True),
    MetricSpec("kafka_consumergroup_current_offset_sum", G, _GT,
               "Sum of the group's committed offsets on the topic"),
    MetricSpec("kafka_consumergroup_lag", G, _GTP,
               "Lag in messages of the group on the partition (never negative)", True),
    MetricSpec("kafka_consumergroup_lag_sum", G, _GT, "Lag in messages of the group on the topic"),
    MetricSpec("kafka_consumergroup_members", G, ("consumergroup",), "Members of the group"),
)

OPSKIT: tuple[MetricSpec, ...] = (
    # consumer groups
    MetricSpec("opskit_consumergroup_lag_seconds", G, _GTP,
               "Age in seconds of the oldest unconsumed record on the partition (0 when caught up)",
               True),
    MetricSpec("opskit_consumergroup_lag_seconds_max", G, _GT,
               "Largest lag in seconds of the group over the topic's partitions"),
    MetricSpec("opskit_consumergroup_consume_rate", G, _GT,
               "Messages per second the group consumed on the topic, over the last intervals"),
    MetricSpec("opskit_consumergroup_catchup_eta_seconds", G, _GT,
               "Seconds until the group catches up at current rates (absent if falling behind)"),
    MetricSpec("opskit_consumergroup_falling_behind", G, _GT,
               "1 if the group consumes slower than the topic is produced and has lag"),
    MetricSpec("opskit_consumergroup_retention_headroom_seconds", G, _GT,
               "Seconds before the oldest unconsumed record of the group on the topic is deleted "
               "by retention (smallest over partitions)"),
    MetricSpec("opskit_consumergroup_records_lost", G, _GT,
               "Records the group can no longer read: committed offset below the log start"),
    MetricSpec("opskit_consumergroup_status", G, ("consumergroup", "status"),
               "1 for the group's current status (OK, WARN, ERR, STALL, STOP, REWIND, UNKNOWN)"),
    MetricSpec("opskit_consumergroup_state", G, ("consumergroup", "state"),
               "1 for the group's coordinator state (Stable, Empty, Dead, ...)"),
    MetricSpec("opskit_consumergroup_severity", G, ("consumergroup",),
               "Threshold severity of the group's lag: 0 OK, 1 WARNING, 2 CRITICAL"),
    MetricSpec("opskit_consumergroup_anomalies", G, ("consumergroup", "kind"),
               "Partitions with an impossible or degraded broker answer, by kind"),
    # topics
    MetricSpec("opskit_topic_messages_in_per_second", G, ("topic",),
               "Messages per second produced to the topic (from log end offsets)"),
    MetricSpec("opskit_topic_bytes_in_per_second", G, ("topic",),
               "Bytes per second appended to the topic (from log-dir size growth; retention "
               "deletes make it read low)"),
    MetricSpec("opskit_topic_size_bytes", G, ("topic",), "Size on disk of the topic's leader replicas"),
    MetricSpec("opskit_topic_retention_ms", G, ("topic",), "retention.ms of the topic (absent if infinite)"),
    MetricSpec("opskit_topic_throttled_replicas", G, ("topic", "direction"),
               "Replicas listed in the topic's leader/follower.replication.throttled.replicas "
               "(* counts every replica; absent when unset)"),
    # cluster
    MetricSpec("opskit_cluster_brokers_expected", G, (), "Brokers expected by configuration"),
    MetricSpec("opskit_cluster_controller_id", G, (), "Id of the active controller"),
    MetricSpec("opskit_cluster_under_replicated_partitions", G, (), "Under-replicated partitions"),
    MetricSpec("opskit_cluster_under_min_isr_partitions", G, (), "Partitions with ISR below min.insync.replicas"),
    MetricSpec("opskit_cluster_at_min_isr_partitions", G, (), "Partitions with ISR equal to min.insync.replicas"),
    MetricSpec("opskit_cluster_offline_partitions", G, (), "Partitions without a leader"),
    MetricSpec("opskit_cluster_preferred_leader_imbalance", G, (),
               "Partitions whose leader is not the preferred replica"),
    MetricSpec("opskit_cluster_reassignments_in_progress", G, (), "Partition reassignments in progress"),
    MetricSpec("opskit_broker_replication_throttle_bytes_per_second", G, ("broker", "direction"),
               "The broker's leader/follower.replication.throttled.rate (absent when unset)"),
    MetricSpec("opskit_kraft_quorum_leader_id", G, (), "Id of the KRaft quorum leader"),
    MetricSpec("opskit_kraft_quorum_voters", G, (), "Number of KRaft voters"),
    MetricSpec("opskit_kraft_quorum_follower_lag", G, ("node", "role"),
               "Records a KRaft voter or observer is behind the leader"),
    # the exporter itself
    MetricSpec("opskit_kafka_up", G, (),
               "1 if the data served is current: the last cycle read metadata, consumer groups "
               "and log offsets; else 0"),
    MetricSpec("opskit_exporter_collection_duration_seconds", G, (),
               "Duration of the last collection cycle"),
    MetricSpec("opskit_exporter_collections_total", C, (), "Collection cycles run"),
    MetricSpec("opskit_exporter_collection_errors_total", C, ("kind",),
               "Collection errors by kind (unreachable, timeout, unsupported, kafka, auth, internal)"),
    MetricSpec("opskit_exporter_snapshot_age_seconds", G, (),
               "Seconds since the snapshot being served was collected"),
    MetricSpec("opskit_exporter_last_success_timestamp_seconds", G, (),
               "Unix time of the last successful collection"),
    MetricSpec("opskit_exporter_series", G, (), "Series served in the last scrape"),
    MetricSpec("opskit_exporter_schedule_aligned", G, (),
               "1 if collection cycles are started to end just before the next expected "
               "scrape; 0 on the fixed --interval schedule"),
    MetricSpec("opskit_exporter_scrape_period_seconds", G, (),
               "Scrape period estimated from the recent scrapes (absent when they are not regular)"),
    MetricSpec("opskit_exporter_family_up", G, ("family",),
               "1 if the family's latest read succeeded and its data is served, else 0"),
    MetricSpec("opskit_exporter_family_errors_total", C, ("family", "kind"),
               "Failed reads of a family by kind, in cycles that otherwise finished"),
    MetricSpec("opskit_exporter_data_age_seconds", G, ("family",),
               "Seconds since the family's data being served was read from Kafka"),
    MetricSpec("opskit_exporter_family_read_seconds", G, ("family",),
               "Duration of the family's latest read"),
    MetricSpec("opskit_exporter_family_refresh_seconds", G, ("family",),
               "How often the exporter reads the family"),
)

ALL: tuple[MetricSpec, ...] = KAFKA_EXPORTER_COMPATIBLE + OPSKIT
BY_NAME: dict[str, MetricSpec] = {m.name: m for m in ALL}

GROUP_STATUSES = ("OK", "WARN", "ERR", "STALL", "STOP", "REWIND", "UNKNOWN")
#: values of the ``direction`` label of the replication throttle families
THROTTLE_DIRECTIONS = ("leader", "follower")


def exported_names() -> set[str]:
    """Names as they appear on /metrics (counters gain ``_total`` already in their name)."""
    return set(BY_NAME)
