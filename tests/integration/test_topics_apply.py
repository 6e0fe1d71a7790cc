"""`opskit topics diff|apply` against a real broker."""

from __future__ import annotations

from opskit.cli import exits
from tests.helpers import create_topic, run_cli


def _registry(tmp_path, uniq, parts=3, retention="2d"):
    p = tmp_path / "reg.yaml"
    p.write_text(
        f"topics:\n"
        f"  - {{name: reg_a_{uniq}, partitions: {parts}, retention: {retention}, key: team_id}}\n"
        f"  - {{name: reg_b_{uniq}, partitions: 1, retention: 1d, configs: {{cleanup.policy: delete}}}}\n"
        f"groups:\n  - {{name: reg-group-{uniq}, topics: [reg_a_{uniq}]}}\n")
    return p


def test_dry_run_changes_nothing_then_execute_converges(kafka, uniq, tmp_path):
    bs = kafka.bootstrap
    reg = _registry(tmp_path, uniq)
    d = run_cli("topics", "diff", str(reg), "-b", bs, "-o", "json")
    assert d.code == exits.WARNING
    kinds = {(c["kind"], c["topic"]) for c in d.json()["changes"]}
    assert ("create", f"reg_a_{uniq}") in kinds and ("create", f"reg_b_{uniq}") in kinds
    dry = run_cli("topics", "apply", str(reg), "-b", bs)
    assert dry.code == 0 and "would apply" in dry.out and "dry run" in dry.err
    admin = kafka.admin()
    assert f"reg_a_{uniq}" not in admin.metadata().topics  # nothing changed
    ex = run_cli("topics", "apply", str(reg), "-b", bs, "--execute", "-o", "json")
    assert ex.code == 0, ex.err
    md = admin.metadata()
    assert len(md.topics[f"reg_a_{uniq}"]) == 3
    cfg = admin.topic_configs([f"reg_a_{uniq}"])[f"reg_a_{uniq}"]
    assert cfg["retention.ms"][0] == str(2 * 86_400_000)
    again = run_cli("topics", "diff", str(reg), "-b", bs, "-o", "json")
    mine = [c for c in again.json()["changes"] if uniq in c["topic"]]
    assert mine == []


def test_drift_fixed_and_reduction_refused(kafka, uniq, tmp_path):
    bs = kafka.bootstrap
    create_topic(bs, f"reg_a_{uniq}", 5, config={"retention.ms": "1000"})
    create_topic(bs, f"reg_b_{uniq}", 1)
    reg = _registry(tmp_path, uniq, parts=3)
    r = run_cli("topics", "apply", str(reg), "-b", bs, "--execute", "-o", "json")
    assert r.code == exits.REFUSED, r.err
    assert "cannot reduce partitions" in r.err
    admin = kafka.admin()
    assert len(admin.metadata().topics[f"reg_a_{uniq}"]) == 5  # never reduced
    cfg = admin.topic_configs([f"reg_a_{uniq}"])[f"reg_a_{uniq}"]
    assert cfg["retention.ms"][0] == str(2 * 86_400_000)  # the safe change was applied
    # adding partitions is applied
    reg2 = _registry(tmp_path, uniq, parts=7)
    r2 = run_cli("topics", "apply", str(reg2), "-b", bs, "--execute")
    assert r2.code == 0, r2.err
    assert len(admin.metadata().topics[f"reg_a_{uniq}"]) == 7


def test_malformed_registry_changes_nothing(kafka, uniq, tmp_path):
    bs = kafka.bootstrap
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"topics:\n  - name: ok_{uniq}\n    partitions: 1\n  - name: Bad-Name\n    partitions: 1\n")
    r = run_cli("topics", "apply", str(bad), "-b", bs, "--execute")
    assert r.code == exits.USAGE and "snake_case" in r.err and len(r.err.strip().splitlines()) == 1
    assert f"ok_{uniq}" not in kafka.admin().metadata().topics
    broken = tmp_path / "broken.yaml"
    broken.write_text("topics: [\n")
    r = run_cli("topics", "apply", str(broken), "-b", bs, "--execute")
    assert r.code == exits.USAGE and "invalid YAML" in r.err


def test_hip30_registry_applies_cleanly(kafka):
    bs = kafka.bootstrap
    r = run_cli("topics", "apply", "-b", bs, "--execute")
    assert r.code == 0, r.err
    d = run_cli("topics", "diff", "-b", bs, "-o", "json")
    hip = {"events_plugin_ingestion", "llm_usage", "billing_events", "audit_log",
           "agent_rpc_metering", "dead_letter"}
    assert [c for c in d.json()["changes"] if c["topic"] in hip] == []
    md = kafka.admin().metadata()
    assert len(md.topics["events_plugin_ingestion"]) == 16
