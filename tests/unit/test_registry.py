import pytest
import yaml

from opskit.adapters.files.registry_file import default_registry_path, load_registry
from opskit.core.registry import (
    ActualTopic,
    ChangeKind,
    parse_registry,
    parse_retention,
    plan_topic_changes,
    topic_name_problems,
)
from opskit.errors import InvalidInputError


def test_hip30_registry_matches_the_document():
    reg = load_registry(default_registry_path())
    got = {t.name: (t.partitions, t.retention_ms, t.key) for t in reg.topics}
    day = 86_400_000
    assert got == {
        "events_plugin_ingestion": (16, 7 * day, "team_id"),
        "llm_usage": (8, 14 * day, "team_id"),
        "billing_events": (4, 30 * day, "org_id"),
        "audit_log": (4, 90 * day, "org_id"),
        "agent_rpc_metering": (8, 7 * day, "agent_id"),
        "dead_letter": (1, 30 * day, "source_topic"),
    }
    # HIP-30's provisioning commands use exactly these retention.ms values
    assert reg.topic("audit_log").desired_configs() == {"retention.ms": "7776000000"}
    assert {g.name for g in reg.groups} == {"analytics-ingest", "billing-agg", "audit-archive",
                                            "llm-metrics", "rpc-billing", "dead-letter-monitor"}


@pytest.mark.parametrize("value,ms", [("7d", 604_800_000), ("12h", 43_200_000), (1000, 1000),
                                      ("forever", -1), ("250ms", 250)])
def test_parse_retention(value, ms):
    assert parse_retention(value, "x") == ms


@pytest.mark.parametrize("value", ["7 days", "-5", True, None, "1y"])
def test_parse_retention_rejects(value):
    with pytest.raises(InvalidInputError):
        parse_retention(value, "x")


@pytest.mark.parametrize("name,ok", [("llm_usage", True), ("LlmUsage", False), ("prod_llm_usage", False),
                                     ("stg_events", False), ("llm-usage", False), ("a_b_c", True)])
def test_topic_naming(name, ok):
    assert (topic_name_problems(name) == []) is ok


@pytest.mark.parametrize("doc,fragment", [
    ("[]", "top level"),
    ("topics: []", "non-empty"),
    ("topics: [{name: Bad_Name, partitions: 1}]", "snake_case"),
    ("topics: [{name: prod_x, partitions: 1}]", "environment prefix"),
    ("topics: [{name: a, partitions: 0}]", "positive"),
    ("topics: [{name: a, partitions: 1}, {name: a, partitions: 1}]", "twice"),
    ("topics: [{name: a, partitions: 1, retention: soon}]", "retention"),
    ("topics: [{name: a, partitions: 1, colour: red}]", "unknown field"),
    ("topics: [{name: a, partitions: 1}]\ngroups: [{name: Bad_Group}]", "kebab-case"),
    ("topics: [{name: a, partitions: 1}]\ngroups: [{name: g, topics: [b]}]", "unregistered topic"),
])
def test_registry_validation_errors(doc, fragment):
    with pytest.raises(InvalidInputError) as e:
        parse_registry(yaml.safe_load(doc), "reg.yaml")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_malformed_yaml_file_is_one_line_error(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("topics:\n  - name: a\n   partitions: [\n")
    with pytest.raises(InvalidInputError) as e:
        load_registry(p)
    assert "line" in str(e.value) and "\n" not in str(e.value)


def _reg(parts=4, retention="7d"):
    return parse_registry({"topics": [{"name": "a", "partitions": parts, "retention": retention}]})


def test_plan_create_missing_and_report_unregistered():
    plan = plan_topic_changes(_reg(), {"zz_extra": ActualTopic("zz_extra", 1, 1),
                                       "__consumer_offsets": ActualTopic("__consumer_offsets", 50, 1)})
    kinds = [(c.kind, c.topic) for c in plan.changes]
    assert (ChangeKind.CREATE, "a") in kinds
    assert (ChangeKind.UNREGISTERED, "zz_extra") in kinds
    assert all(c.topic != "__consumer_offsets" for c in plan.changes)


def test_plan_never_reduces_partitions():
    actual = {"a": ActualTopic("a", 8, 1, {"retention.ms": ("604800000", False)})}
    plan = plan_topic_changes(_reg(parts=4), actual)
    assert [c.kind for c in plan.changes] == [ChangeKind.REFUSED_REDUCE_PARTITIONS]
    assert plan.applicable == () and plan.refused


def test_plan_adds_partitions_and_fixes_config():
    actual = {"a": ActualTopic("a", 2, 1, {"retention.ms": ("1000", False)})}
    plan = plan_topic_changes(_reg(parts=4), actual)
    assert {c.kind for c in plan.applicable} == {ChangeKind.ADD_PARTITIONS, ChangeKind.SET_CONFIG}
    cfg = next(c for c in plan.changes if c.kind is ChangeKind.SET_CONFIG)
    assert (cfg.config, cfg.current, cfg.desired) == ("retention.ms", "1000", "604800000")


def test_plan_in_sync():
    actual = {"a": ActualTopic("a", 4, 1, {"retention.ms": ("604800000", False)})}
    assert plan_topic_changes(_reg(), actual).in_sync


def test_configs_not_readable_are_not_drift():
    """No DescribeConfigs ACL: configs are not compared (never 'set retention.ms' on a
    value that was only unreadable); partitions still are."""
    actual = {"a": ActualTopic("a", 2, 1, configs_known=False)}
    plan = plan_topic_changes(_reg(parts=4), actual)
    assert [c.kind for c in plan.changes] == [ChangeKind.ADD_PARTITIONS]
    assert plan_topic_changes(_reg(parts=4), {"a": ActualTopic("a", 4, 1, configs_known=False)}).in_sync
