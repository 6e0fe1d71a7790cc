"""A principal that cannot see what it asks about gets UNKNOWN (exit 3) naming the missing
ACL, never ``lag=0 OK`` nor ``OK ... 0 partitions`` (issue #15 s.4), on the SASL_SSL
sandbox. (What a HIP-30 monitor *can* see, and how it degrades, is in
test_security_matrix.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import run_cli
from secured_scenario import Scenario, build

from opskit.adapters.acls.admin import AclsAdmin
from opskit.core.acls import AclEntry


@pytest.fixture(scope="module")
def scenario(kafka_sasl_ssl: Any, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return build(kafka_sasl_ssl, tmp_path_factory.mktemp("least-privilege"))


def test_group_without_describe_is_unknown_naming_the_acl(scenario: Scenario) -> None:
    r = run_cli("lag", "-g", scenario.hidden_group, *scenario.args("monitor"))
    assert r.code == 3 and r.out == ""
    [line] = r.err.strip().splitlines()
    assert line.startswith("opskit: error: not authorised for describing group")
    assert "User:monitor needs the Describe ACL on the group" in line


def test_group_whose_topic_is_hidden_is_unknown_not_lag_zero(scenario: Scenario) -> None:
    """Describe on the group, not on its topic: Kafka leaves the topic's offsets out of
    OffsetFetch, so the group looks empty. Reported UNKNOWN (exit 3), never lag=0 OK."""
    s = scenario
    entry = AclEntry("User:monitor", "TOPIC", s.topic, "DESCRIBE")
    with AclsAdmin(s.cluster.conn("admin"), timeout=15) as a:
        a.delete_acls([entry])
        try:
            r = run_cli("lag", "-g", s.group, "-o", "json", *s.args("monitor"))
        finally:
            a.create_acls([entry])
    assert r.code == 3, (r.code, r.err)
    d = r.json()
    assert d["severity"] == "UNKNOWN" and d["groups"][0]["severity"] == "UNKNOWN"
    assert any("lacks the Describe ACL on the topics" in n for n in d["notes"])
    assert "note: UNKNOWN" in r.err


def _context_for(s: Scenario, user: str) -> str:
    name = f"lp-{user}-{s.topic}"
    c = s.cluster.conn(user)
    args = ["context", "set", name, "-b", s.cluster.bootstrap, "--security-protocol",
            c.security_protocol, "--sasl-mechanism", "PLAIN", "--username", user,
            "--password-file", s.cluster.password_file(user)]
    if c.ca_file:
        args += ["--ca", c.ca_file]
    assert run_cli(*args).code == 0
    return name


def test_no_visible_topic_or_group_is_unknown(scenario: Scenario) -> None:
    """HIP-30's audit-archiver holds no ACL on this cluster: health is not 'OK ... 0
    partitions' and lag --all-groups is not 'no consumer groups, OK'."""
    ctx = _context_for(scenario, "audit-archiver")
    h = run_cli("health", "-o", "json", "--context", ctx)
    assert h.code == 3, h.err
    [topics] = [f for f in h.json()["findings"] if f["check"] == "topics"]
    assert topics["severity"] == "UNKNOWN" and "User:audit-archiver" in topics["message"]
    lag = run_cli("lag", "--all-groups", "--context", ctx)
    assert lag.code == 3 and "no consumer group is visible to User:audit-archiver" in lag.err


def test_registry_topic_it_may_not_describe_is_unknown_not_missing(scenario: Scenario,
                                                                   tmp_path: Path) -> None:
    reg = tmp_path / "reg.yaml"
    reg.write_text(yaml.safe_dump({"topics": [{"name": scenario.topic, "partitions": 4}]}))
    ctx = _context_for(scenario, "audit-archiver")
    r = run_cli("topics", "diff", str(reg), "--context", ctx)
    assert r.code == 3 and r.out == ""
    assert f"topic '{scenario.topic}' is not visible to User:audit-archiver" in r.err
    assert "Describe ACL" in r.err
