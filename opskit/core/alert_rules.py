"""Prometheus recording and alerting rules for opskit, as data.

One thresholds config (``alerts/thresholds.yaml``, parsed by :func:`policy_from_dict`)
decides every number; :func:`rule_groups` turns it into Prometheus rule groups
(plain dicts, ready for YAML). Writing files is the CLI's job.

Recording rules follow ``level:metric:operations`` naming and provide HIP-30's
metric names (``kafka_messages_in_per_sec``, ``kafka_bytes_in_per_sec``,
``kafka_under_replicated_partitions``, ``kafka_consumer_group_lag``) as aliases.

Per-group overrides: a threshold overridden for some groups gives one rule for
each overriding group (``consumergroup="g"``) and one default rule that
excludes them (``consumergroup!~"g|h"``), so each group is judged by exactly
one threshold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from opskit.errors import InvalidInputError

SEVERITIES = ("critical", "warning", "info")
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d|w)$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_GROUP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

#: per-group threshold fields and their HIP-30 / opskit defaults
GROUP_FIELDS: dict[str, float] = {
    "lag_warn": 100_000,
    "lag_crit": 1_000_000,
    "lag_seconds_warn": 300,
    "lag_seconds_crit": 1800,
}

#: cluster-wide knobs and defaults (durations as Prometheus duration strings)
CLUSTER_DEFAULTS: dict[str, Any] = {
    "retention_headroom_warn": "6h",
    "retention_headroom_crit": "1h",
    "lag_growing_min": 1000,
    "dead_letter_topic": "dead_letter",
    "dead_letter_warn": 0,
    "dead_letter_crit": 1000,
    "throughput_drop_ratio": 0.5,
    "throughput_drop_min_rate": 1.0,
    "kraft_follower_lag_warn": 10_000,
    "snapshot_age_warn": "2m",
    "preferred_leader_imbalance_info": 0,
}

#: Alertmanager settings: receivers and timing
ALERTMANAGER_DEFAULTS: dict[str, Any] = {
    "pagerduty_routing_key_file": "/etc/alertmanager/secrets/pagerduty-routing-key",
    "pagerduty_url": "https://events.pagerduty.com/v2/enqueue",
    #: CA bundle Alertmanager trusts for every receiver (PagerDuty and webhooks)
    "ca_file": None,
    "warning_webhook_url": "http://alert-bridge.monitoring.svc:8080/kafka/warnings",
    "watchdog_webhook_url": "http://alert-bridge.monitoring.svc:8080/kafka/watchdog",
    "group_wait": "30s",
    "group_interval": "5m",
    "repeat_interval": "4h",
}


def parse_duration(text: str) -> float:
    """``5m`` -> 300.0. Raises InvalidInputError on anything else."""
    m = _DURATION.match(str(text).strip())
    if not m:
        raise InvalidInputError(f"bad duration {text!r} (use e.g. 30s, 5m, 1h, 7d)")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


@dataclass(frozen=True)
class AlertPolicy:
    """Everything the generated rules depend on."""

    runbook_base_url: str = "https://github.com/hanzoai/opskit/blob/main/runbooks"
    exporter_job: str = "opskit-exporter"
    defaults: dict[str, float] = field(default_factory=lambda: dict(GROUP_FIELDS))
    groups: dict[str, dict[str, float]] = field(default_factory=dict)
    cluster: dict[str, Any] = field(default_factory=lambda: dict(CLUSTER_DEFAULTS))
    #: alertname -> ``for`` duration overriding the built-in one
    durations: dict[str, str] = field(default_factory=dict)
    alertmanager: dict[str, Any] = field(default_factory=lambda: dict(ALERTMANAGER_DEFAULTS))

    def runbook_url(self, alertname: str) -> str:
        return f"{self.runbook_base_url.rstrip('/')}/{alertname}.md"


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidInputError(f"{where}: expected a non-negative number, got {value!r}")
    return value


def policy_from_dict(data: dict[str, Any]) -> AlertPolicy:
    """Validate a parsed thresholds config (same ``thresholds:`` shape as opskit's config file)."""
    if not isinstance(data, dict):
        raise InvalidInputError("thresholds config must be a mapping")
    known = {"runbook_base_url", "exporter_job", "thresholds", "cluster", "for", "alertmanager"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidInputError(f"thresholds config: unknown key {unknown[0]!r}")
    th = data.get("thresholds") or {}
    if not isinstance(th, dict):
        raise InvalidInputError("thresholds config: 'thresholds' must be a mapping")
    defaults = dict(GROUP_FIELDS)
    for k, v in (th.get("default") or {}).items():
        if k not in GROUP_FIELDS:
            raise InvalidInputError(f"thresholds.default: unknown threshold {k!r}")
        defaults[k] = _number(f"thresholds.default.{k}", v)
    groups: dict[str, dict[str, float]] = {}
    for g, over in (th.get("groups") or {}).items():
        if not isinstance(g, str) or not _GROUP_NAME.match(g):
            raise InvalidInputError(f"thresholds.groups: bad group name {g!r}")
        if not isinstance(over, dict):
            raise InvalidInputError(f"thresholds.groups.{g} must be a mapping")
        for k, v in over.items():
            if k not in GROUP_FIELDS:
                raise InvalidInputError(f"thresholds.groups.{g}: unknown threshold {k!r}")
            _number(f"thresholds.groups.{g}.{k}", v)
        groups[g] = dict(over)
    for g, over in groups.items():
        merged = {**defaults, **over}
        if merged["lag_warn"] > merged["lag_crit"]:
            raise InvalidInputError(f"thresholds for {g}: lag_warn is above lag_crit")
        if merged["lag_seconds_warn"] > merged["lag_seconds_crit"]:
            raise InvalidInputError(f"thresholds for {g}: lag_seconds_warn is above lag_seconds_crit")
    if defaults["lag_warn"] > defaults["lag_crit"]:
        raise InvalidInputError("thresholds.default: lag_warn is above lag_crit")
    cluster = dict(CLUSTER_DEFAULTS)
    for k, v in (data.get("cluster") or {}).items():
        if k not in CLUSTER_DEFAULTS:
            raise InvalidInputError(f"cluster: unknown setting {k!r}")
        if isinstance(CLUSTER_DEFAULTS[k], str) and k != "dead_letter_topic":
            parse_duration(str(v))
        elif k == "dead_letter_topic":
            if not isinstance(v, str) or not _GROUP_NAME.match(v):
                raise InvalidInputError(f"cluster.dead_letter_topic: bad topic name {v!r}")
        else:
            _number(f"cluster.{k}", v)
        cluster[k] = v
    durations: dict[str, str] = {}
    for name, d in (data.get("for") or {}).items():
        if name not in ALERT_NAMES:
            raise InvalidInputError(f"for: unknown alert {name!r}")
        parse_duration(str(d))
        durations[name] = str(d)
    am = dict(ALERTMANAGER_DEFAULTS)
    for k, v in (data.get("alertmanager") or {}).items():
        if k not in ALERTMANAGER_DEFAULTS:
            raise InvalidInputError(f"alertmanager: unknown setting {k!r}")
        if k.startswith("group_") or k == "repeat_interval":
            parse_duration(str(v))
        elif k.endswith("_url") and not (isinstance(v, str) and re.match(r"^https?://", v)):
            raise InvalidInputError(f"alertmanager.{k} must be an http(s) URL, got {v!r}")
        am[k] = v
    base = data.get("runbook_base_url", AlertPolicy.runbook_base_url)
    if not isinstance(base, str) or not re.match(r"^(https?|file)://", base):
        raise InvalidInputError(f"runbook_base_url must be an http(s) URL, got {base!r}")
    job = data.get("exporter_job", AlertPolicy.exporter_job)
    if not isinstance(job, str) or not job:
        raise InvalidInputError("exporter_job must be a non-empty string")
    return AlertPolicy(runbook_base_url=base, exporter_job=job, defaults=defaults, groups=groups,
                       cluster=cluster, durations=durations, alertmanager=am)


# ----------------------------------------------------------------- recording rules

def recording_rules() -> list[dict[str, str]]:
    """``level:metric:operations`` rules plus HIP-30's names as aliases of them."""
    by_topic = "cluster, topic"
    by_group = "cluster, consumergroup"
    return [
        {"record": "cluster_topic:opskit_topic_messages_in_per_second:sum",
         "expr": f"sum by ({by_topic}) (opskit_topic_messages_in_per_second)"},
        {"record": "cluster_topic:opskit_topic_bytes_in_per_second:sum",
         "expr": f"sum by ({by_topic}) (opskit_topic_bytes_in_per_second)"},
        {"record": "cluster:opskit_topic_messages_in_per_second:sum",
         "expr": "sum by (cluster) (cluster_topic:opskit_topic_messages_in_per_second:sum)"},
        {"record": "cluster:opskit_topic_bytes_in_per_second:sum",
         "expr": "sum by (cluster) (cluster_topic:opskit_topic_bytes_in_per_second:sum)"},
        {"record": "cluster:opskit_cluster_under_replicated_partitions:max",
         "expr": "max by (cluster) (opskit_cluster_under_replicated_partitions)"},
        {"record": "cluster_consumergroup:kafka_consumergroup_lag_sum:sum",
         "expr": f"sum by ({by_group}) (kafka_consumergroup_lag_sum)"},
        {"record": "cluster_consumergroup:kafka_consumergroup_lag_sum:deriv10m",
         "expr": "deriv(cluster_consumergroup:kafka_consumergroup_lag_sum:sum[10m])"},
        {"record": "cluster_consumergroup:opskit_consumergroup_lag_seconds_max:max",
         "expr": f"max by ({by_group}) (opskit_consumergroup_lag_seconds_max)"},
        {"record": "cluster_consumergroup:opskit_consumergroup_consume_rate:sum",
         "expr": f"sum by ({by_group}) (opskit_consumergroup_consume_rate)"},
        # HIP-30's names
        {"record": "kafka_messages_in_per_sec",
         "expr": "cluster_topic:opskit_topic_messages_in_per_second:sum"},
        {"record": "kafka_bytes_in_per_sec",
         "expr": "cluster_topic:opskit_topic_bytes_in_per_second:sum"},
        {"record": "kafka_under_replicated_partitions",
         "expr": "cluster:opskit_cluster_under_replicated_partitions:max"},
        {"record": "kafka_consumer_group_lag",
         "expr": "cluster_consumergroup:kafka_consumergroup_lag_sum:sum"},
    ]


RECORDED_NAMES = tuple(r["record"] for r in recording_rules())


# ----------------------------------------------------------------- alerting rules

@dataclass(frozen=True)
class AlertSpec:
    name: str
    severity: str
    expr: str
    for_: str
    summary: str
    description: str
    #: which thresholds judged it: "default" or the overriding group's name
    scope: str | None = None


#: every alert opskit defines, with its default ``for``; used to validate ``for:`` overrides
ALERT_NAMES = (
    "KafkaConsumerGroupLag", "KafkaConsumerGroupLagSeconds", "KafkaConsumerGroupLagGrowing",
    "KafkaConsumerGroupStalled", "KafkaConsumerGroupStopped", "KafkaConsumerGroupNoMembers",
    "KafkaConsumerGroupLagNearRetention", "KafkaConsumerGroupRecordsLost",
    "KafkaUnderReplicatedPartitions", "KafkaUnderMinIsrPartitions", "KafkaOfflinePartitions",
    "KafkaNoActiveController", "KafkaKRaftFollowerLagging", "KafkaKRaftSingleVoter",
    "KafkaBrokerDown", "KafkaClusterUnreachable", "KafkaExporterDown", "KafkaExporterAbsent",
    "KafkaExporterSnapshotStale", "KafkaExporterCollectionIncomplete", "KafkaDeadLetterGrowing", "KafkaTopicThroughputDrop",
    "KafkaPreferredLeaderImbalance", "Watchdog",
)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _per_group(policy: AlertPolicy, field_name: str,
               metric: str) -> list[tuple[str, float, str]]:
    """(selector-applied metric, threshold, scope): one per overriding group + the default."""
    overriding = sorted(g for g, o in policy.groups.items() if field_name in o)
    out: list[tuple[str, float, str]] = []
    for g in overriding:
        out.append((f'{metric}{{consumergroup="{g}"}}', policy.groups[g][field_name], g))
    if overriding:
        regex = "|".join(g.replace(".", "\\\\.") for g in overriding)
        out.append((f'{metric}{{consumergroup!~"{regex}"}}', policy.defaults[field_name], "default"))
    else:
        out.append((metric, policy.defaults[field_name], "default"))
    return out


def alert_specs(policy: AlertPolicy) -> list[AlertSpec]:
    c = policy.cluster
    job = policy.exporter_job
    specs: list[AlertSpec] = []
    lag = "kafka_consumer_group_lag"
    for sev, fld, for_ in (("warning", "lag_warn", "10m"), ("critical", "lag_crit", "5m")):
        for sel, thr, scope in _per_group(policy, fld, lag):
            specs.append(AlertSpec(
                "KafkaConsumerGroupLag", sev, f"{sel} > {_fmt(thr)}", for_,
                "Consumer group {{ $labels.consumergroup }} is {{ $value | humanize }} messages behind",
                f"Lag is above {_fmt(thr)} messages ({sev} threshold) for {for_}.", scope))
    lsec = "cluster_consumergroup:opskit_consumergroup_lag_seconds_max:max"
    for sev, fld, for_ in (("warning", "lag_seconds_warn", "10m"),
                           ("critical", "lag_seconds_crit", "5m")):
        for sel, thr, scope in _per_group(policy, fld, lsec):
            specs.append(AlertSpec(
                "KafkaConsumerGroupLagSeconds", sev, f"{sel} > {_fmt(thr)}", for_,
                "Consumer group {{ $labels.consumergroup }} is {{ $value | humanizeDuration }} behind",
                f"The oldest unconsumed record is older than {_fmt(thr)}s "
                "(lag-in-time objective).", scope))
    specs.append(AlertSpec(
        "KafkaConsumerGroupLagGrowing", "warning",
        "cluster_consumergroup:kafka_consumergroup_lag_sum:deriv10m > 0\n"
        "and on (cluster, consumergroup)\n"
        f"cluster_consumergroup:kafka_consumergroup_lag_sum:sum > {_fmt(c['lag_growing_min'])}",
        "15m", "Lag of {{ $labels.consumergroup }} keeps growing",
        "The group consumes slower than its topics are produced: lag has grown for 15 minutes."))
    for name, status, text in (
            ("KafkaConsumerGroupStalled", "STALL",
             "commits but its committed offsets do not move while it has lag"),
            ("KafkaConsumerGroupStopped", "STOP",
             "has not committed for longer than the evaluation window while it has lag")):
        specs.append(AlertSpec(
            name, "critical",
            f'max by (cluster, consumergroup) (opskit_consumergroup_status{{status="{status}"}}) == 1',
            "10m", f"Consumer group {{{{ $labels.consumergroup }}}} is {status}",
            f"The group {text}."))
    specs.append(AlertSpec(
        "KafkaConsumerGroupNoMembers", "warning",
        "max by (cluster, consumergroup) (kafka_consumergroup_members) == 0\n"
        "and on (cluster, consumergroup)\n"
        "cluster_consumergroup:kafka_consumergroup_lag_sum:sum > 0",
        "10m", "Consumer group {{ $labels.consumergroup }} has lag but no members",
        "Nobody consumes for the group while records wait."))
    head = "min by (cluster, consumergroup, topic) (opskit_consumergroup_retention_headroom_seconds)"
    for sev, key in (("warning", "retention_headroom_warn"), ("critical", "retention_headroom_crit")):
        secs = parse_duration(str(c[key]))
        specs.append(AlertSpec(
            "KafkaConsumerGroupLagNearRetention", sev, f"{head} < {_fmt(secs)}", "5m",
            "{{ $labels.consumergroup }} on {{ $labels.topic }}: unconsumed records are deleted in "
            "{{ $value | humanizeDuration }}",
            f"Retention will delete records the group has not read within {c[key]}."))
    specs.append(AlertSpec(
        "KafkaConsumerGroupRecordsLost", "critical",
        "max by (cluster, consumergroup, topic) (opskit_consumergroup_records_lost) > 0", "0s",
        "{{ $labels.consumergroup }} lost {{ $value }} records on {{ $labels.topic }}",
        "The committed offset is below the log start: retention deleted records the group never read."))
    specs.append(AlertSpec(
        "KafkaUnderReplicatedPartitions", "warning", "kafka_under_replicated_partitions > 0", "5m",
        "{{ $value }} under-replicated partitions",
        "Partitions have fewer in-sync replicas than replicas for 5 minutes (HIP-30)."))
    specs.append(AlertSpec(
        "KafkaUnderMinIsrPartitions", "critical",
        "max by (cluster) (opskit_cluster_under_min_isr_partitions) > 0", "1m",
        "{{ $value }} partitions are below min.insync.replicas",
        "Producers with acks=all (HIP-30) cannot write to these partitions."))
    specs.append(AlertSpec(
        "KafkaOfflinePartitions", "critical",
        "max by (cluster) (opskit_cluster_offline_partitions) > 0", "1m",
        "{{ $value }} partitions have no leader",
        "Offline partitions can be neither written nor read."))
    specs.append(AlertSpec(
        "KafkaNoActiveController", "critical",
        "max by (cluster) (opskit_kafka_up) == 1\n"
        "unless on (cluster)\n"
        "max by (cluster) (opskit_cluster_controller_id >= 0)", "2m",
        "The cluster has no active controller",
        "Kafka answers but reports no active controller: metadata changes and leader elections stop."))
    specs.append(AlertSpec(
        "KafkaKRaftFollowerLagging", "warning",
        "max by (cluster, node, role) (opskit_kraft_quorum_follower_lag) > "
        f"{_fmt(c['kraft_follower_lag_warn'])}", "10m",
        "KRaft {{ $labels.role }} {{ $labels.node }} is {{ $value }} records behind the leader",
        "A controller quorum member is not keeping up with the metadata log."))
    specs.append(AlertSpec(
        "KafkaKRaftSingleVoter", "info", "max by (cluster) (opskit_kraft_quorum_voters) == 1", "1h",
        "The KRaft controller quorum has a single voter",
        "The only controller is a single point of failure (HIP-30 phase 1)."))
    specs.append(AlertSpec(
        "KafkaBrokerDown", "critical",
        "max by (cluster) (opskit_cluster_brokers_expected)\n"
        "- on (cluster)\nmax by (cluster) (kafka_brokers) > 0", "2m",
        "{{ $value }} brokers are missing from the cluster",
        "Fewer brokers are registered than expected."))
    # opskit_kafka_up is 0 whenever the data served is not current; only a failed first
    # read (metadata) means Kafka itself was not reached (the other families: below)
    specs.append(AlertSpec(
        "KafkaClusterUnreachable", "critical",
        "max by (cluster) (opskit_kafka_up) == 0\n"
        "unless on (cluster)\n"
        'max by (cluster) (opskit_exporter_family_up{family="metadata"}) == 1', "2m",
        "The exporter cannot reach Kafka",
        "The exporter's collections fail at their first read (metadata): Kafka is down or "
        "unreachable from the exporter."))
    for sev, sel, for_, text in (
            ("critical", 'family=~"groups|offsets"', "5m",
             "lag series are missing, so no lag alert can fire"),
            ("warning", 'family!~"metadata|groups|offsets"', "15m",
             "the series built from it are missing or kept from an older read")):
        specs.append(AlertSpec(
            "KafkaExporterCollectionIncomplete", sev,
            f"max by (cluster, family) (opskit_exporter_family_up{{{sel}}}) == 0", for_,
            "The exporter cannot read {{ $labels.family }} from Kafka",
            f"Kafka answers, but its reads of this family fail: {text}."))
    specs.append(AlertSpec(
        "KafkaExporterDown", "critical", f'up{{job="{job}"}} == 0', "2m",
        "Prometheus cannot scrape the opskit exporter {{ $labels.instance }}",
        "Without the exporter no Kafka alert can fire."))
    specs.append(AlertSpec(
        "KafkaExporterAbsent", "critical", f'absent(up{{job="{job}"}})', "5m",
        "No opskit exporter target is being scraped",
        f"Prometheus has no target with job={job}: every Kafka alert is blind."))
    specs.append(AlertSpec(
        "KafkaExporterSnapshotStale", "warning",
        "max by (cluster, instance, family) (\n"
        "opskit_exporter_data_age_seconds\n"
        f"> 2 * opskit_exporter_family_refresh_seconds + "
        f"{_fmt(parse_duration(str(c['snapshot_age_warn'])))}\n)", "5m",
        "The exporter serves {{ $labels.family }} data {{ $value | humanizeDuration }} old",
        f"Reads of this family are not completing: its data is older than twice its refresh "
        f"period plus {c['snapshot_age_warn']}, so the values served are stale."))
    dlq = c["dead_letter_topic"]
    dl = (f'sum by (cluster, topic) (delta(kafka_topic_partition_current_offset{{topic="{dlq}"}}[15m]))')
    for sev, key in (("warning", "dead_letter_warn"), ("critical", "dead_letter_crit")):
        specs.append(AlertSpec(
            "KafkaDeadLetterGrowing", sev, f"{dl} > {_fmt(c[key])}", "0s",
            f"{{{{ $value | humanize }}}} records were written to {dlq} in 15 minutes",
            "Consumers are failing to process events and redirecting them to the dead letter topic."))
    cur = "cluster_topic:opskit_topic_messages_in_per_second:sum"
    prev = f'avg_over_time({cur}{{topic!="{dlq}"}}[1h] offset 10m)'
    specs.append(AlertSpec(
        "KafkaTopicThroughputDrop", "warning",
        f'avg_over_time({cur}{{topic!="{dlq}"}}[10m])\n'
        f"< {_fmt(c['throughput_drop_ratio'])} * {prev}\n"
        f"and {prev} > {_fmt(c['throughput_drop_min_rate'])}", "15m",
        "Produce rate to {{ $labels.topic }} dropped",
        f"The topic receives less than {_fmt(c['throughput_drop_ratio'])}x its rate of the hour "
        "before: a producer may be down."))
    specs.append(AlertSpec(
        "KafkaPreferredLeaderImbalance", "info",
        "max by (cluster) (opskit_cluster_preferred_leader_imbalance) > "
        f"{_fmt(c['preferred_leader_imbalance_info'])}", "30m",
        "{{ $value }} partitions are not led by their preferred replica",
        "Leadership is unbalanced; run a preferred leader election."))
    specs.append(AlertSpec(
        "Watchdog", "info", "vector(1)", "0s", "Alerting pipeline heartbeat",
        "Always firing. If it stops arriving, Prometheus or Alertmanager is broken."))
    return [_with_duration(s, policy) for s in specs]


def _with_duration(s: AlertSpec, policy: AlertPolicy) -> AlertSpec:
    d = policy.durations.get(s.name)
    if d is None:
        return s
    return AlertSpec(s.name, s.severity, s.expr, d, s.summary, s.description, s.scope)


def alerting_rules(policy: AlertPolicy) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in alert_specs(policy):
        rule: dict[str, Any] = {"alert": s.name, "expr": s.expr}
        if parse_duration(s.for_) > 0:
            rule["for"] = s.for_
        rule["labels"] = {"severity": s.severity}
        if s.scope is not None:
            rule["labels"]["threshold_scope"] = s.scope
        rule["annotations"] = {"summary": s.summary, "description": s.description,
                               "runbook_url": policy.runbook_url(s.name)}
        out.append(rule)
    return out


def rule_groups(policy: AlertPolicy) -> dict[str, list[dict[str, Any]]]:
    """File name -> rule groups: ``recording`` and ``alerts``."""
    return {
        "recording": [{"name": "opskit-recording", "rules": recording_rules()}],
        "alerts": [{"name": "opskit-alerts", "rules": alerting_rules(policy)}],
    }


def prometheus_rule_manifest(policy: AlertPolicy, name: str = "opskit-kafka",
                             namespace: str = "monitoring") -> dict[str, Any]:
    """A prometheus-operator ``PrometheusRule`` holding both groups."""
    groups = rule_groups(policy)
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/name": "opskit", "role": "alert-rules"}},
        "spec": {"groups": groups["recording"] + groups["alerts"]},
    }
