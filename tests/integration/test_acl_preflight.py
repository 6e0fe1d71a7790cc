"""A principal without the rights is refused before any backup or change (issue #28):
exit 6, one ``opskit: error:`` line naming each missing ACL, no backup file, the
cluster as it was. On the SASL_SSL sandbox (StandardAuthorizer, no ACL means no
access), as HIP-30's monitor (Describe only) and as a HIP-30 service principal
(billing-aggregator). A control with the ACLs granted shows the checks let a
principal that holds them through (a prefixed Create ACL included).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import run_cli
from secured_scenario import PARTITIONS, Scenario, build

from opskit.adapters.acls.admin import AclsAdmin
from opskit.core.acls import AclEntry


@pytest.fixture(scope="module")
def scenario(kafka_sasl_ssl: Any, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return build(kafka_sasl_ssl, tmp_path_factory.mktemp("acl-preflight"))


def _one_line(r: Any, code: int) -> str:
    assert r.code == code, (r.code, r.err)
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opskit: error: "), r.err
    assert "Request(" not in lines[0] and "KafkaError{" not in lines[0], lines[0]
    return str(lines[0])


def _files(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.is_file()] if d.exists() else []


def _committed(s: Scenario, group: str) -> dict[int, int]:
    with s.cluster.admin() as a:
        return {tp.partition: o for tp, o in a.committed_offsets([group])[group].items()}


def _context_for(s: Scenario, user: str) -> str:
    name = f"pre-{user}-{s.topic}"
    c = s.cluster.conn(user)
    args = ["context", "set", name, "-b", s.cluster.bootstrap, "--security-protocol",
            c.security_protocol, "--sasl-mechanism", "PLAIN", "--username", user,
            "--password-file", s.cluster.password_file(user)]
    if c.ca_file:
        args += ["--ca", c.ca_file]
    assert run_cli(*args).code == 0
    return name


def test_monitor_refused_before_any_backup(scenario: Scenario, tmp_path: Path) -> None:
    s = scenario
    mon = s.args("monitor")
    # offsets reset --execute: no Read on the group nor the topic
    backups = tmp_path / "backups"
    r = run_cli("offsets", "reset", "-g", s.reset_group_monitor, "-t", s.topic, "--to-earliest",
                "--execute", "--yes", "--backup-dir", str(backups), *mon)
    line = _one_line(r, 6)
    assert "refused before any change" in line and "User:monitor" in line, line
    assert f"Read on group {s.reset_group_monitor}" in line and f"Read on topic {s.topic}" in line
    assert _files(backups) == []
    assert _committed(s, s.reset_group_monitor) == dict.fromkeys(range(PARTITIONS), 5)

    # acls apply --execute: Describe on the cluster (reads the ACLs), no Alter
    reg = tmp_path / "acl-registry.yaml"
    newcomer = f"svc-new-{uuid.uuid4().hex[:6]}"
    reg.write_text(yaml.safe_dump({
        "topics": [{"name": s.topic, "partitions": PARTITIONS, "retention": "7d"}],
        "security": {"principals": [{"name": newcomer, "topics": {s.topic: ["WRITE"]}}]}}))
    with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
        before = sorted(a.acls())
    acl_backups = tmp_path / "acl-backups"
    r = run_cli("acls", "apply", str(reg), "--execute", "--backup-dir", str(acl_backups), *mon)
    assert "lacks Alter on the cluster" in _one_line(r, 6)
    assert _files(acl_backups) == []
    with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
        assert sorted(a.acls()) == before

    # the control: with Read on the group and the topic, the same reset goes through
    grant = [AclEntry("User:monitor", "GROUP", s.reset_group_monitor, "READ"),
             AclEntry("User:monitor", "TOPIC", s.topic, "READ")]
    with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
        a.create_acls(grant)
    try:
        r = run_cli("offsets", "reset", "-g", s.reset_group_monitor, "-t", s.topic,
                    "--to-earliest", "--execute", "--yes", "--backup-dir", str(backups), *mon)
        assert r.code == 0, r.err
        assert len(_files(backups)) == 1
        assert _committed(s, s.reset_group_monitor) == dict.fromkeys(range(PARTITIONS), 0)
    finally:
        with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
            a.delete_acls(grant)
    # its undo, without the Read ACLs again: refused the same way, no second backup
    [backup] = _files(backups)
    r = run_cli("offsets", "restore", str(backup), "--execute", "--yes", "--backup-dir",
                str(backups), *mon)
    assert r.code == 6, r.err        # after restore's line naming the backup it read
    last = r.err.splitlines()[-1]
    assert last.startswith("opskit: error: offsets restore refused before any change"), r.err
    assert r.err.count("opskit: error:") == 1 and "Request(" not in r.err
    assert _files(backups) == [backup]
    assert _committed(s, s.reset_group_monitor) == dict.fromkeys(range(PARTITIONS), 0)

    # dr restore --execute: a topic to create and a group's offsets to set, neither
    # allowed: refused whole (it created the topic, then failed on the group)
    from opskit.core.dr import SNAPSHOT_FORMAT, SNAPSHOT_VERSION

    new_topic = f"{s.topic}_dr"
    snap = tmp_path / "snapshot.json"
    snap.write_text(json.dumps({
        "format": SNAPSHOT_FORMAT, "version": SNAPSHOT_VERSION, "taken_at_ms": 0,
        "cluster_id": None, "acls": None,
        "topics": [{"name": new_topic, "partitions": 1, "replication_factor": 1,
                    "configs": {}}],
        "groups": {s.reset_group_monitor: [
            {"topic": s.topic, "partition": 0, "offset": 2, "record_timestamp_ms": None}]}}))
    r = run_cli("dr", "restore", str(snap), "--execute", "--yes", "--backup-dir",
                str(backups), *mon)
    line = _one_line(r, 6)
    assert f"Create on the cluster or on topic {new_topic}" in line, line
    assert f"Read on group {s.reset_group_monitor}" in line, line
    assert _files(backups) == [backup]
    with s.cluster.admin() as a:
        assert new_topic not in a.metadata().topics
    assert _committed(s, s.reset_group_monitor) == dict.fromkeys(range(PARTITIONS), 0)


def test_service_principal_is_told_the_missing_acls(scenario: Scenario, tmp_path: Path) -> None:
    s = scenario
    user = "billing-aggregator"
    ctx = _context_for(s, user)
    try:
        # offsets reset (dry run): no Describe on the group nor the topic
        r = run_cli("offsets", "reset", "-g", s.group, "-t", s.topic, "--to-earliest",
                    "--context", ctx)
        line = _one_line(r, 6)
        assert f"Describe on group {s.group}" in line and f"Describe on topic {s.topic}" in line

        # topics apply --execute: Describe on the topics (so it can plan), nothing else
        new = f"{s.topic}_new"
        reg = tmp_path / "topics.yaml"
        reg.write_text(yaml.safe_dump({"topics": [
            {"name": s.topic, "partitions": PARTITIONS + 1, "retention": "7d"},
            {"name": new, "partitions": 1, "retention": "1d"}]}))
        p = f"User:{user}"
        describe = [AclEntry(p, "TOPIC", t, "DESCRIBE") for t in (s.topic, new)]
        with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
            a.create_acls(describe)
        r = run_cli("topics", "apply", str(reg), "--execute", "--context", ctx)
        line = _one_line(r, 6)
        assert f"Alter on topic {s.topic}" in line, line
        assert f"Create on the cluster or on topic {new}" in line, line
        with s.cluster.admin() as a:
            meta = a.metadata()
        assert new not in meta.topics and len(meta.topics[s.topic]) == PARTITIONS

        # the control: Alter on the topic and Create by a prefixed ACL (no cluster Create)
        with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
            a.create_acls([AclEntry(p, "TOPIC", s.topic, "ALTER"),
                           AclEntry(p, "TOPIC", new, "CREATE", pattern_type="PREFIXED")])
        r = run_cli("topics", "apply", str(reg), "--execute", "--context", ctx)
        assert r.code == 0, r.err
        with s.cluster.admin() as a:
            meta = a.metadata()
        assert new in meta.topics and len(meta.topics[s.topic]) == PARTITIONS + 1
    finally:
        run_cli("context", "delete", ctx)
