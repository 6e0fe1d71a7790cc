"""`opskit acls` and `dr restore`'s ACLs on a real secured broker (SASL_PLAINTEXT sandbox,
StandardAuthorizer, admin super user): diff, apply (dry run, --execute with a backup,
--prune), restore from the backup (undo), lint, and a DR snapshot's ACLs recreated.
Every name is unique to the test, so the shared cluster's other ACLs are never touched
(and the test checks they are not)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import run_cli
from secured_scenario import build

from opskit.adapters.acls.admin import AclsAdmin
from opskit.cli.exits import exit_code_for
from opskit.core.acls import AclEntry
from opskit.errors import NotAuthorisedError


@pytest.fixture
def names() -> dict[str, str]:
    u = uuid.uuid4().hex[:8]
    return {"t": f"acl_{u}", "dlq": f"acl_dlq_{u}", "g": f"acl-{u}", "prod": f"prod-{u}",
            "cons": f"cons-{u}", "mon": f"mon-{u}", "other": f"other-{u}"}


def registry(tmp: Path, n: dict[str, str]) -> Path:
    p = tmp / "registry.yaml"
    p.write_text(yaml.safe_dump({
        "topics": [{"name": n["t"], "partitions": 1}, {"name": n["dlq"], "partitions": 1}],
        "groups": [{"name": n["g"], "topics": [n["t"]]}],
        "security": {"dead_letter": n["dlq"], "principals": [
            {"name": n["prod"], "topics": {n["t"]: ["WRITE"]}},
            {"name": n["cons"], "topics": {n["t"]: ["READ"]}, "groups": {n["g"]: ["READ"]}},
            {"name": n["mon"], "monitor": True},
        ]},
    }))
    return p


def mine(admin: AclsAdmin, n: dict[str, str]) -> set[AclEntry]:
    users = {f"User:{n[k]}" for k in ("prod", "cons", "mon", "other")}
    return {e for e in admin.acls() if e.principal in users}


def test_diff_apply_prune_restore_and_lint(kafka_sasl_plaintext: Any, names: dict[str, str],
                                          tmp_path: Path) -> None:
    c, n = kafka_sasl_plaintext, names
    reg = str(registry(tmp_path, n))
    args = c.cli_args("admin")
    with AclsAdmin(c.conn("admin"), timeout=15) as admin:
        others_before = {e for e in admin.acls()} - mine(admin, n)
        stray = AclEntry(f"User:{n['prod']}", "TOPIC", n["t"], "READ")  # not in the registry
        deny = AclEntry(f"User:{n['prod']}", "GROUP", n["g"], "READ", permission="DENY")
        unmanaged = AclEntry(f"User:{n['other']}", "TOPIC", n["t"], "DESCRIBE")
        admin.create_acls([stray, deny, unmanaged])

        diff = run_cli("acls", "diff", reg, "-o", "json", *args)
        assert diff.code == 1, diff.err
        kinds = {(c["kind"], c["principal"], c["resource_name"], c["operation"])
                 for c in diff.json()["changes"]}
        # dead_letter: WRITE for the producer (it writes a topic), not for the consumer
        assert ("missing", f"User:{n['prod']}", n["dlq"], "WRITE") in kinds
        assert not any(k[1] == f"User:{n['cons']}" and k[2] == n["dlq"] for k in kinds)
        assert ("missing", f"User:{n['mon']}", "kafka-cluster", "DESCRIBE") in kinds
        assert ("extra", f"User:{n['prod']}", n["t"], "READ") in kinds
        assert [u["principal"] for u in diff.json()["unmanaged"]
                if u["resource_name"] == n["t"]] == [f"User:{n['other']}"]

        dry = run_cli("acls", "apply", reg, *args)
        assert dry.code == 0 and "dry run" in dry.err
        assert mine(admin, n) == {stray, deny, unmanaged}  # nothing changed

        bdir = tmp_path / "acl-backups"
        done = run_cli("acls", "apply", reg, "--execute", "--prune", "--backup-dir", str(bdir),
                       "-o", "json", *args)
        assert done.code == 0, done.err
        [backup] = list(bdir.glob("acls-*.json"))
        saved = {AclEntry.from_dict(a) for a in json.loads(backup.read_text())["acls"]}
        assert {stray, deny, unmanaged} <= saved and others_before <= saved
        now = mine(admin, n)
        assert stray not in now  # pruned
        assert deny in now and unmanaged in now  # a DENY and another principal's: kept
        again = run_cli("acls", "diff", reg, "-o", "json", *args)
        # still drift: the DENY of a managed principal (reported, never pruned)
        assert [(c["kind"], c["permission"]) for c in again.json()["changes"]] == [("extra", "DENY")]

        undo = run_cli("acls", "restore", str(backup), "--execute", "--backup-dir", str(bdir), *args)
        assert undo.code == 0, undo.err
        assert mine(admin, n) == {stray, deny, unmanaged}
        assert {e for e in admin.acls()} - mine(admin, n) == others_before

        # lint: a blanket grant on the cluster is found (and left alone)
        blanket = AclEntry("User:*", "TOPIC", n["t"], "READ")
        admin.create_acls([blanket])
        try:
            lint = run_cli("acls", "lint", reg, "-o", "json", *args)
            assert lint.code == 1
            assert [b["principal"] for b in lint.json()["blanket"] if b["resource_name"] == n["t"]
                    ] == ["User:*"]
            assert run_cli("acls", "lint", reg, "--no-cluster").code == 0
        finally:
            admin.delete_acls([blanket, stray, deny, unmanaged])


def test_acls_need_describe_on_the_cluster(kafka_sasl_plaintext: Any) -> None:
    """A principal without Describe on the cluster (HIP-30's audit-archiver, which no test
    grants anything on the cluster): one line naming the ACL, never "every ACL is missing"
    (librdkafka answers such a DescribeAcls with nothing at all)."""
    c = kafka_sasl_plaintext
    with AclsAdmin(c.conn("audit-archiver"), timeout=15) as admin, pytest.raises(
            NotAuthorisedError) as e:
        admin.acls()
    assert str(e.value).startswith("not authorised for describing ACLs: User:audit-archiver "
                                   "needs Describe on the cluster"), e.value
    assert exit_code_for(e.value) == 6


def test_dr_restore_recreates_acls(kafka_sasl_plaintext: Any, names: dict[str, str],
                                   tmp_path: Path) -> None:
    c, n = kafka_sasl_plaintext, names
    s = build(c, tmp_path)  # its own topic and groups: the restore touches nothing else
    args = c.cli_args("admin")
    entries = [AclEntry(f"User:{n['cons']}", "TOPIC", s.topic, "READ"),
               AclEntry(f"User:{n['cons']}", "GROUP", s.group, "READ")]
    with AclsAdmin(c.conn("admin"), timeout=15) as admin:
        admin.create_acls(entries)
        snap = tmp_path / "snap.json"
        taken = run_cli("dr", "snapshot", "-t", s.topic, "-g", s.group, "--file", str(snap), *args)
        assert taken.code == 0, taken.err
        recorded = {AclEntry.from_dict(a) for a in json.loads(snap.read_text())["acls"]}
        assert set(entries) <= recorded
        admin.delete_acls(entries)
        try:
            dry = run_cli("dr", "restore", str(snap), "-o", "json", *args)
            assert dry.code == 0, dry.err
            planned = {AclEntry.from_dict(a) for a in dry.json()["create_acls"]}
            assert planned == set(entries) and not set(entries) & set(admin.acls())
            done = run_cli("dr", "restore", str(snap), "--execute", "--yes", "--backup-dir",
                           str(tmp_path / "b"), *args)
            assert done.code == 0, done.err
            assert set(entries) <= set(admin.acls())
            assert list((tmp_path / "b").glob("acls-*.json"))  # the target's ACLs, before
        finally:
            admin.delete_acls(entries)
