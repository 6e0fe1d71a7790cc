"""Pure tests of the alert rule generator (opskit.core.alert_rules) and the checked-in files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from opskit.core.alert_rules import (
    ALERT_NAMES,
    RECORDED_NAMES,
    SEVERITIES,
    AlertPolicy,
    alert_specs,
    alerting_rules,
    parse_duration,
    policy_from_dict,
    prometheus_rule_manifest,
    rule_groups,
)
from opskit.core.alertmanager_config import alertmanager_config
from opskit.core.promql import promql_metric_names
from opskit.errors import InvalidInputError
from opskit.exporter.names import exported_names

ROOT = Path(__file__).resolve().parents[2]
#: series Prometheus itself creates for every target
PROMETHEUS_BUILTINS = {"up"}


def _policy() -> AlertPolicy:
    return policy_from_dict(yaml.safe_load((ROOT / "alerts" / "thresholds.yaml").read_text()))


def test_checked_in_thresholds_follow_hip30() -> None:
    p = _policy()
    assert p.defaults["lag_warn"] == 100_000
    assert p.defaults["lag_crit"] == 1_000_000
    rules = alerting_rules(p)
    urp = [r for r in rules if r["alert"] == "KafkaUnderReplicatedPartitions"]
    assert len(urp) == 1 and urp[0]["for"] == "5m" and urp[0]["expr"].endswith("> 0")
    assert "kafka_under_replicated_partitions" in urp[0]["expr"]


@pytest.mark.parametrize("bad, needle", [
    ({"thresholds": {"default": {"lag_warm": 1}}}, "lag_warm"),
    ({"thresholds": {"default": {"lag_warn": -1}}}, "non-negative"),
    ({"thresholds": {"default": {"lag_warn": "many"}}}, "non-negative"),
    ({"thresholds": {"default": {"lag_warn": 10, "lag_crit": 5}}}, "above"),
    ({"thresholds": {"groups": {"g": {"lag_warn": 2_000_000}}}}, "above"),
    ({"thresholds": {"groups": {"bad name!": {"lag_warn": 1}}}}, "bad group name"),
    ({"cluster": {"retention_headroom_warn": "six hours"}}, "bad duration"),
    ({"cluster": {"nope": 1}}, "unknown setting"),
    ({"for": {"NoSuchAlert": "5m"}}, "unknown alert"),
    ({"for": {"KafkaConsumerGroupLag": "5 minutes"}}, "bad duration"),
    ({"runbook_base_url": "runbooks/"}, "URL"),
    ({"alertmanager": {"pagerduty_url": "events.pagerduty.com"}}, "URL"),
    ({"surprise": 1}, "unknown key"),
])
def test_bad_config_is_rejected_with_a_reason(bad: dict, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        policy_from_dict(bad)


def test_parse_duration() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("5m") == 300
    assert parse_duration("1h") == 3600
    assert parse_duration("0s") == 0
    with pytest.raises(InvalidInputError):
        parse_duration("5")


def test_per_group_overrides_judge_each_group_by_exactly_one_threshold() -> None:
    p = policy_from_dict({"thresholds": {"groups": {
        "billing-agg": {"lag_warn": 10, "lag_crit": 20}, "a.b": {"lag_warn": 30}}}})
    warn = [s for s in alert_specs(p) if s.name == "KafkaConsumerGroupLag" and s.severity == "warning"]
    exprs = {s.scope: s.expr for s in warn}
    assert exprs["billing-agg"] == 'kafka_consumer_group_lag{consumergroup="billing-agg"} > 10'
    assert exprs["a.b"] == 'kafka_consumer_group_lag{consumergroup="a.b"} > 30'
    # the default rule excludes both overriding groups (dot escaped for the regex)
    assert exprs["default"] == 'kafka_consumer_group_lag{consumergroup!~"a\\\\.b|billing-agg"} > 100000'
    crit = [s for s in alert_specs(p) if s.name == "KafkaConsumerGroupLag" and s.severity == "critical"]
    # a.b overrides only lag_warn: its critical threshold is the default one
    assert {s.scope for s in crit} == {"billing-agg", "default"}
    assert [s.expr for s in crit if s.scope == "default"] == [
        'kafka_consumer_group_lag{consumergroup!~"billing-agg"} > 1000000']


def test_no_overrides_gives_one_unfiltered_rule() -> None:
    p = policy_from_dict({})
    lag = [s for s in alert_specs(p) if s.name == "KafkaConsumerGroupLag"]
    assert [s.expr for s in lag] == ["kafka_consumer_group_lag > 100000",
                                     "kafka_consumer_group_lag > 1000000"]


def test_every_alert_has_severity_runbook_and_summary() -> None:
    p = policy_from_dict({"runbook_base_url": "https://runbooks.example/kafka/"})
    rules = alerting_rules(p)
    assert {r["alert"] for r in rules} == set(ALERT_NAMES)
    for r in rules:
        assert r["labels"]["severity"] in SEVERITIES
        assert r["annotations"]["runbook_url"] == f"https://runbooks.example/kafka/{r['alert']}.md"
        assert r["annotations"]["summary"]
    assert {r["labels"]["severity"] for r in rules} == set(SEVERITIES)


def test_every_alert_has_a_runbook_page_with_the_four_sections() -> None:
    for name in ALERT_NAMES:
        page = ROOT / "runbooks" / f"{name}.md"
        assert page.is_file(), f"missing runbook {page}"
        text = page.read_text()
        for section in ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation"):
            assert section in text, f"{page.name} lacks {section}"


def test_for_override_applies() -> None:
    p = policy_from_dict({"for": {"KafkaConsumerGroupLag": "0s", "KafkaBrokerDown": "7m"}})
    rules = alerting_rules(p)
    assert all("for" not in r for r in rules if r["alert"] == "KafkaConsumerGroupLag")
    assert [r["for"] for r in rules if r["alert"] == "KafkaBrokerDown"] == ["7m"]


def test_recording_rules_provide_hip30_names_and_follow_naming() -> None:
    recorded = set(RECORDED_NAMES)
    assert {"kafka_messages_in_per_sec", "kafka_bytes_in_per_sec",
            "kafka_under_replicated_partitions", "kafka_consumer_group_lag"} <= recorded
    hip30 = {"kafka_messages_in_per_sec", "kafka_bytes_in_per_sec",
             "kafka_under_replicated_partitions", "kafka_consumer_group_lag"}
    for name in recorded - hip30:
        level, metric, ops = name.split(":")
        assert level and metric and ops, name
    # each HIP-30 alias is a plain copy of a level:metric:operations rule
    for r in rule_groups(policy_from_dict({}))["recording"][0]["rules"]:
        if r["record"] in hip30:
            assert r["expr"].count(":") == 2


def test_every_metric_referenced_by_a_rule_is_exported_or_recorded() -> None:
    known = exported_names() | set(RECORDED_NAMES) | PROMETHEUS_BUILTINS
    groups = rule_groups(_policy())
    used: set[str] = set()
    for g in groups["recording"] + groups["alerts"]:
        for r in g["rules"]:
            used |= promql_metric_names(r["expr"])
    assert used, "the extractor found nothing"
    assert used - known == set()


def test_promql_metric_names_extractor() -> None:
    assert promql_metric_names(
        'sum by (cluster, topic) (rate(kafka_topic_partition_current_offset{topic=~"$topic"}'
        '[$__rate_interval])) / on (cluster) group_left max(kafka_brokers) > 1e3') == {
        "kafka_topic_partition_current_offset", "kafka_brokers"}
    assert promql_metric_names('absent(up{job="x"})') == {"up"}
    assert promql_metric_names("vector(1)") == set()


def test_prometheus_rule_manifest_holds_both_groups() -> None:
    m = prometheus_rule_manifest(_policy())
    assert m["kind"] == "PrometheusRule"
    assert [g["name"] for g in m["spec"]["groups"]] == ["opskit-recording", "opskit-alerts"]


def test_alertmanager_routing_and_inhibition() -> None:
    cfg = alertmanager_config(policy_from_dict({"alertmanager": {
        "pagerduty_routing_key_file": "/keys/pd", "pagerduty_url": "https://127.0.0.1:1/v2/enqueue",
        "ca_file": "/keys/ca.pem"}}))
    assert cfg["route"]["group_by"] == ["cluster", "consumergroup", "topic"]
    routes = {tuple(r["matchers"]): r["receiver"] for r in cfg["route"]["routes"]}
    assert routes[('severity="critical"',)] == "pagerduty-critical"
    assert routes[('severity="warning"',)] == "warnings"
    pd = next(r for r in cfg["receivers"] if r["name"] == "pagerduty-critical")["pagerduty_configs"][0]
    assert pd["routing_key_file"] == "/keys/pd" and "routing_key" not in pd
    assert pd["url"] == "https://127.0.0.1:1/v2/enqueue"
    assert pd["http_config"]["tls_config"]["ca_file"] == "/keys/ca.pem"
    assert pd["send_resolved"] is True
    hooks = next(r for r in cfg["receivers"] if r["name"] == "warnings")["webhook_configs"]
    assert hooks[0]["http_config"]["tls_config"]["ca_file"] == "/keys/ca.pem"
    assert "runbook_url" in pd["links"][0]["href"]
    inhibit = cfg["inhibit_rules"]
    assert {"source_matchers": ['severity="critical"'], "target_matchers": ['severity="warning"'],
            "equal": ["alertname", "cluster", "consumergroup", "topic"]} in inhibit
    assert any(r["source_matchers"] == ['alertname="KafkaBrokerDown"']
               and r["target_matchers"] == ['alertname="KafkaUnderReplicatedPartitions"']
               for r in inhibit)


def test_checked_in_files_are_not_stale(tmp_path: Path) -> None:
    from opskit.cli.alerts import load_policy, render_files

    policy = load_policy(ROOT / "alerts" / "thresholds.yaml")
    for name, text in render_files(policy, "thresholds.yaml").items():
        path = ROOT / "alerts" / name
        assert path.is_file() and path.read_text() == text, (
            f"{path} is stale: run `opskit alerts generate`")


def _cli(*args: str) -> tuple[int, str, str]:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import run_cli

    r = run_cli(*args)
    return r.code, r.out, r.err


def test_alerts_generate_cli_writes_checks_and_refuses_bad_input(tmp_path: Path) -> None:
    cfg = tmp_path / "t.yaml"
    cfg.write_text("thresholds:\n  default: {lag_warn: 5, lag_crit: 50}\n")
    code, out, _ = _cli("alerts", "generate", "--config", str(cfg), "--out-dir", str(tmp_path))
    assert code == 0 and out.count("written:") == 4
    rules = yaml.safe_load((tmp_path / "opskit-alerts.rules.yml").read_text())["groups"][0]["rules"]
    assert "kafka_consumer_group_lag > 5" in [r["expr"] for r in rules]
    code, out, _ = _cli("alerts", "generate", "--config", str(cfg), "--out-dir", str(tmp_path),
                        "--check")
    assert code == 0 and "up to date" in out
    cfg.write_text("thresholds:\n  default: {lag_warn: 6, lag_crit: 50}\n")
    code, out, _ = _cli("alerts", "generate", "--config", str(cfg), "--out-dir", str(tmp_path),
                        "--check")
    assert code == 1 and "stale: " in out and "opskit-alerts.rules.yml" in out
    cfg.write_text("thresholds: [unclosed\n")
    code, _, err = _cli("alerts", "generate", "--config", str(cfg))
    assert code == 2 and err.startswith("opskit: error:") and len(err.splitlines()) == 1
    cfg.write_text("thresholds:\n  default: {lag_warn: 60, lag_crit: 50}\n")
    code, _, err = _cli("alerts", "generate", "--config", str(cfg))
    assert code == 2 and "lag_warn is above lag_crit" in err
    code, _, err = _cli("alerts", "generate", "--config", str(tmp_path / "missing.yaml"))
    assert code == 4 and "does not exist" in err
