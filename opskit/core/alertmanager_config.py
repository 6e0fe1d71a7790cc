"""Alertmanager's routing for opskit's alerts, as data (pure): critical pages PagerDuty
(Events API v2), warnings go to a webhook, info nowhere; the thresholds config
(:class:`opskit.core.alert_rules.AlertPolicy`) names the receivers."""

from __future__ import annotations

from typing import Any

from opskit.core.alert_rules import AlertPolicy

#: labels that decide alert groups, hence PagerDuty incidents (dedup key = hash of the group key)
GROUP_BY = ["cluster", "consumergroup", "topic"]


def alertmanager_config(policy: AlertPolicy) -> dict[str, Any]:
    """Routing: critical -> PagerDuty (Events API v2), warning -> webhook, info -> nowhere."""
    am = policy.alertmanager
    runbook = '{{ (index .Alerts 0).Annotations.runbook_url }}'
    pd: dict[str, Any] = {
        "routing_key_file": am["pagerduty_routing_key_file"],
        "url": am["pagerduty_url"],
        "send_resolved": True,
        "severity": '{{ if .CommonLabels.severity }}{{ .CommonLabels.severity }}{{ else }}critical{{ end }}',
        "client": "opskit alerts",
        "client_url": runbook,
        "description": '{{ range .Alerts }}{{ .Annotations.summary }} {{ end }}',
        "links": [{"href": runbook, "text": "runbook"}],
        "details": {
            "firing": '{{ .Alerts.Firing | len }}',
            "resolved": '{{ .Alerts.Resolved | len }}',
            "alertnames": '{{ range .Alerts }}{{ .Labels.alertname }} {{ end }}',
            "cluster": '{{ .CommonLabels.cluster }}',
            "consumergroup": '{{ .CommonLabels.consumergroup }}',
            "topic": '{{ .CommonLabels.topic }}',
            "runbook_url": runbook,
        },
    }
    tls: dict[str, Any] = {}
    if am.get("ca_file"):
        tls = {"http_config": {"tls_config": {"ca_file": am["ca_file"]}}}
        pd.update(tls)
    return {
        "global": {"resolve_timeout": "5m"},
        "route": {
            "receiver": "warnings",
            "group_by": list(GROUP_BY),
            "group_wait": am["group_wait"],
            "group_interval": am["group_interval"],
            "repeat_interval": am["repeat_interval"],
            "routes": [
                {"receiver": "watchdog", "matchers": ['alertname="Watchdog"'],
                 "group_wait": "0s", "repeat_interval": "5m"},
                {"receiver": "pagerduty-critical", "matchers": ['severity="critical"']},
                {"receiver": "warnings", "matchers": ['severity="warning"']},
                {"receiver": "info", "matchers": ['severity="info"']},
            ],
        },
        "inhibit_rules": [
            {"source_matchers": ['severity="critical"'], "target_matchers": ['severity="warning"'],
             "equal": ["alertname", "cluster", "consumergroup", "topic"]},
            {"source_matchers": ['alertname="KafkaBrokerDown"'],
             "target_matchers": ['alertname="KafkaUnderReplicatedPartitions"'],
             "equal": ["cluster"]},
            {"source_matchers": ['alertname=~"KafkaClusterUnreachable|KafkaExporterDown"'],
             "target_matchers": [('alertname=~"KafkaNoActiveController|KafkaBrokerDown|'
                                  'KafkaExporterCollectionIncomplete|KafkaExporterSnapshotStale"')],
             "equal": ["cluster"]},
        ],
        "receivers": [
            {"name": "pagerduty-critical", "pagerduty_configs": [pd]},
            {"name": "warnings", "webhook_configs": [
                {"url": am["warning_webhook_url"], "send_resolved": True, **tls}]},
            {"name": "watchdog", "webhook_configs": [
                {"url": am["watchdog_webhook_url"], "send_resolved": False, **tls}]},
            {"name": "info"},
        ],
    }


