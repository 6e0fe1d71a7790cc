"""The generated rules and Alertmanager config pass Prometheus' and Alertmanager's own tools.

promtool and amtool come from Debian's prometheus / prometheus-alertmanager packages,
installed by scripts/install-prometheus.sh.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from opskit.core.alert_rules import ALERT_NAMES

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "alerts"
RULE_FILES = [ALERTS / "opskit-recording.rules.yml", ALERTS / "opskit-alerts.rules.yml"]


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not installed: run scripts/install-prometheus.sh")
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)


def test_promtool_check_rules_with_lint() -> None:
    r = _run(_tool("promtool"), "check", "rules", "--lint=all", "--lint-fatal",
             *map(str, RULE_FILES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_prometheusrule_manifest_groups_pass_promtool(tmp_path: Path) -> None:
    manifest = yaml.safe_load((ALERTS / "prometheusrule.yaml").read_text())
    f = tmp_path / "from-manifest.rules.yml"
    f.write_text(yaml.safe_dump({"groups": manifest["spec"]["groups"]}))
    r = _run(_tool("promtool"), "check", "rules", "--lint=all", "--lint-fatal", str(f))
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_check_rules_catches_a_broken_rule(tmp_path: Path) -> None:
    # the check above can fail: a rule with a syntax error is refused
    f = tmp_path / "broken.rules.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"alert": "Broken", "expr": "sum by (cluster (kafka_brokers)"}]}]}))
    r = _run(_tool("promtool"), "check", "rules", str(f))
    assert r.returncode != 0


def test_promtool_unit_tests_pass() -> None:
    r = _run(_tool("promtool"), "test", "rules", str(ALERTS / "tests" / "opskit-alerts.test.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    tests = yaml.safe_load((ALERTS / "tests" / "opskit-alerts.test.yml").read_text())["tests"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for t in tests:
        for case in t["alert_rule_test"]:
            (fires if case["exp_alerts"] else quiet).add(case["alertname"])
    assert fires == set(ALERT_NAMES)
    # the Watchdog always fires by design
    assert quiet == set(ALERT_NAMES) - {"Watchdog"}


def test_unit_tests_check_both_severities_of_two_level_alerts() -> None:
    rules = yaml.safe_load((ALERTS / "opskit-alerts.rules.yml").read_text())["groups"][0]["rules"]
    tests = yaml.safe_load((ALERTS / "tests" / "opskit-alerts.test.yml").read_text())["tests"]
    expected = {(r["alert"], r["labels"]["severity"]) for r in rules}
    seen = {(c["alertname"], a["exp_labels"]["severity"])
            for t in tests for c in t["alert_rule_test"] for a in c["exp_alerts"]}
    assert expected - seen == set()


def test_amtool_check_config() -> None:
    r = _run(_tool("amtool"), "check-config", str(ALERTS / "alertmanager.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_amtool_check_config_refuses_a_bad_config(tmp_path: Path) -> None:
    cfg = yaml.safe_load((ALERTS / "alertmanager.yml").read_text())
    cfg["route"]["receiver"] = "no-such-receiver"
    f = tmp_path / "am.yml"
    f.write_text(yaml.safe_dump(cfg))
    r = _run(_tool("amtool"), "check-config", str(f))
    assert r.returncode != 0


@pytest.mark.parametrize("labels, receiver", [
    (["alertname=KafkaConsumerGroupLag", "severity=critical", "consumergroup=billing-agg"],
     "pagerduty-critical"),
    (["alertname=KafkaOfflinePartitions", "severity=critical", "cluster=prod"], "pagerduty-critical"),
    (["alertname=KafkaConsumerGroupLag", "severity=warning", "consumergroup=billing-agg"], "warnings"),
    (["alertname=KafkaUnderReplicatedPartitions", "severity=warning"], "warnings"),
    (["alertname=KafkaKRaftSingleVoter", "severity=info"], "info"),
    (["alertname=Watchdog", "severity=info"], "watchdog"),
    (["alertname=SomethingElse"], "warnings"),
])
def test_amtool_routes(labels: list[str], receiver: str) -> None:
    r = _run(_tool("amtool"), "config", "routes", "test",
             f"--config.file={ALERTS / 'alertmanager.yml'}", f"--verify.receivers={receiver}",
             *labels)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == receiver


def test_amtool_routes_detects_a_wrong_receiver() -> None:
    r = _run(_tool("amtool"), "config", "routes", "test",
             f"--config.file={ALERTS / 'alertmanager.yml'}", "--verify.receivers=warnings",
             "alertname=KafkaOfflinePartitions", "severity=critical")
    assert r.returncode != 0
