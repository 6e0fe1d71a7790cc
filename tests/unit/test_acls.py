"""HIP-30 ACLs as code (pure): the registry's security section, its expansion, drift,
the blanket-grant lint, and the DR restore's ACL plan."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from opskit.adapters.files.registry_file import default_registry_path, load_registry
from opskit.core.acls import (
    AclEntry,
    blanket_grants,
    desired_acls,
    monitor_acls,
    plan_acl_changes,
)
from opskit.core.dr import Snapshot, plan_acl_restore
from opskit.core.registry import parse_registry
from opskit.errors import InvalidInputError

HIP30 = yaml.safe_load(default_registry_path().read_text())


def _desired(data: dict) -> tuple[AclEntry, ...]:  # type: ignore[type-arg]
    reg = parse_registry(data)
    assert reg.security is not None
    return desired_acls(reg.security, [t.name for t in reg.topics], [g.name for g in reg.groups])


def test_hip30_table_is_in_the_registry() -> None:
    got = {(e.principal, e.resource_type, e.resource_name, e.operation) for e in _desired(HIP30)}
    # HIP-30's ACL table, row by row
    for row in [("insights-capture", "events_plugin_ingestion", "WRITE"),
                ("llm-gateway", "llm_usage", "WRITE"),
                ("analytics-ingest", "events_plugin_ingestion", "READ"),
                ("billing-aggregator", "llm_usage", "READ"),
                ("billing-aggregator", "billing_events", "WRITE"),
                ("audit-archiver", "audit_log", "READ")]:
        assert (f"User:{row[0]}", "TOPIC", row[1], row[2]) in got
    # consumers may join and commit in their group
    assert ("User:analytics-ingest", "GROUP", "analytics-ingest", "READ") in got


def test_dead_letter_writable_by_every_producer_and_only_them() -> None:
    acls = _desired(HIP30)
    producers = {e.principal for e in acls if e.operation == "WRITE" and e.resource_name != "dead_letter"}
    dlq_writers = {e.principal for e in acls if e.resource_name == "dead_letter" and e.operation == "WRITE"}
    assert producers == dlq_writers == {"User:insights-capture", "User:llm-gateway",
                                        "User:iam-service", "User:billing-aggregator"}


def test_no_blanket_access_and_monitor_never_reads() -> None:
    acls = _desired(HIP30)
    assert blanket_grants(acls) == ()
    monitor = [e for e in acls if e.principal == "User:monitor"]
    assert monitor and all(e.operation in ("DESCRIBE", "DESCRIBE_CONFIGS") for e in monitor)
    reg = load_registry(None)
    assert {e.resource_name for e in monitor if e.resource_type == "TOPIC"} == {t.name for t in reg.topics}
    assert {e.resource_name for e in monitor if e.resource_type == "GROUP"} == {g.name for g in reg.groups}


@pytest.mark.parametrize("mutate, message", [
    (lambda p: p[0].update(topics={"*": ["WRITE"]}), "wildcard"),
    (lambda p: p[0].update(topics={"events_plugin_ingestion": ["ALL"]}), "blanket"),
    (lambda p: p[0].update(name="*"), "every user"),
    (lambda p: p[0].update(topics={"unknown_topic": ["READ"]}), "not in the registry"),
    (lambda p: p[0].update(topics={"llm_usage": ["IDEMPOTENT_WRITE"]}), "does not apply"),
    (lambda p: p.append(dict(p[0])), "listed twice"),
    (lambda p: p[0].update(colour="red"), "unknown field"),
    (lambda p: p[0].update(topics={}), "grants nothing"),
])
def test_bad_security_sections_are_one_line_errors(mutate, message) -> None:  # type: ignore[no-untyped-def]
    data = copy.deepcopy(HIP30)
    mutate(data["security"]["principals"])
    with pytest.raises(InvalidInputError, match=message):
        parse_registry(data)


def test_drift_only_manages_registry_principals() -> None:
    want = _desired(HIP30)
    managed = {p.principal for p in parse_registry(HIP30).security.principals}  # type: ignore[union-attr]
    stray = AclEntry("User:llm-gateway", "TOPIC", "audit_log", "READ")
    deny = AclEntry("User:llm-gateway", "TOPIC", "audit_log", "WRITE", permission="DENY")
    other = AclEntry("User:someone-else", "TOPIC", "*", "ALL")
    have = set(want[1:]) | {stray, deny, other}
    plan = plan_acl_changes(want, have, managed)
    assert plan.missing == (want[0],)
    assert set(plan.extra) == {stray, deny}
    assert plan.prunable() == (stray,)  # a DENY is never pruned
    assert plan.unmanaged == (other,)
    assert [b.entry for b in plan.blanket] == [other]
    assert not plan.in_sync
    assert plan_acl_changes(want, want, managed).in_sync


def test_blanket_lint_catches_each_kind() -> None:
    cases = [AclEntry("User:a", "TOPIC", "*", "READ"), AclEntry("User:a", "GROUP", "", "READ",
                                                                 pattern_type="PREFIXED"),
             AclEntry("User:a", "TOPIC", "t", "ALL"), AclEntry("User:*", "TOPIC", "t", "READ")]
    assert [b.entry for b in blanket_grants(cases)] == sorted(cases)
    assert blanket_grants([AclEntry("User:a", "TOPIC", "*", "READ", permission="DENY"),
                           AclEntry("User:a", "CLUSTER", "kafka-cluster", "DESCRIBE")]) == ()


def test_kafka_acls_arguments() -> None:
    e = AclEntry("User:mon", "TOPIC", "llm_usage", "DESCRIBE_CONFIGS")
    assert e.kafka_acls_args() == ["--allow-principal", "User:mon", "--operation", "DescribeConfigs",
                                   "--topic", "llm_usage"]
    c = AclEntry("User:mon", "CLUSTER", "kafka-cluster", "DESCRIBE")
    assert c.kafka_acls_args()[-1] == "--cluster"


def test_monitor_acls_describe_only_unless_asked() -> None:
    base = monitor_acls("mon", ["t"], ["g"])
    assert {e.operation for e in base} == {"DESCRIBE"}
    more = monitor_acls("mon", ["t"], ["g"], describe_configs=True)
    assert {e.operation for e in more} == {"DESCRIBE", "DESCRIBE_CONFIGS"}


def test_entry_round_trip_and_old_snapshot_spelling() -> None:
    e = AclEntry("User:x", "CLUSTER", "kafka-cluster", "ALTER")
    assert AclEntry.from_dict(e.to_dict()) == e
    old = {"resource_type": "BROKER", "name": "kafka-cluster", "pattern_type": "LITERAL",
           "principal": "User:x", "host": "*", "operation": "ALTER", "permission_type": "ALLOW"}
    assert AclEntry.from_dict(old) == e


def _snap(acls: list[dict[str, str]] | None) -> Snapshot:
    return Snapshot(0, None, (), {}, None if acls is None else tuple(acls))


def test_dr_restore_plans_missing_acls_only() -> None:
    a = AclEntry("User:x", "TOPIC", "t", "READ")
    b = AclEntry("User:y", "GROUP", "g", "READ")
    create, warn = plan_acl_restore(_snap([a.to_dict(), b.to_dict()]), [a])
    assert create == (b,) and warn == ()
    create, warn = plan_acl_restore(_snap([a.to_dict()]), None)
    assert create == () and "no authorizer" in warn[0]
    assert plan_acl_restore(_snap(None), None) == ((), ())
    with pytest.raises(InvalidInputError):
        plan_acl_restore(_snap([{**a.to_dict(), "operation": "FLY"}]), [])


def test_registry_without_security_section_still_loads(tmp_path: Path) -> None:
    data = copy.deepcopy(HIP30)
    del data["security"]
    assert parse_registry(data).security is None
