"""A group whose committed offsets opskit could read only in part is never OK.

Facts on Kafka 3.7 (SASL, StandardAuthorizer), for a principal with Describe on the group
and on topic A but not on topic B, the group consuming both:

* OffsetFetch for all of the group's partitions leaves B out, with no error; the
  metadata of all topics leaves B out too;
* OffsetFetch naming B's partitions answers TOPIC_AUTHORIZATION_FAILED for each;
* DescribeGroups still names B's partitions in the members' assignments;
* ``kafka-consumer-groups.sh --describe`` fails (TopicAuthorizationException) while the
  group has a member; with no member it lists A only, as if B were not consumed.

Before: ``opskit lag`` showed B as partition_missing with lag 0 (a live member), the
group OK, exit 0; the exporter's status OK. Now B's partitions are committed_unreadable
(named with the error), the group UNKNOWN, exit 3, the exporter's status UNKNOWN. A group
with no member gives no signal at all (Kafka's tool shows the same as opskit): README.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import ActiveMember, commit, create_topic, parse_describe, produce, run_cli
from prometheus_client.parser import text_string_to_metric_families

from opskit.adapters.acls.admin import AclsAdmin
from opskit.core.acls import monitor_acls


@dataclass(frozen=True)
class Hidden:
    cluster: Any
    seen: str  # topic the monitor may describe
    hidden: str  # topic it may not
    live: str  # group with a member on both topics
    idle: str  # group with commits on both topics, no member


@pytest.fixture(scope="module")
def scene(kafka_sasl_ssl: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hidden]:
    import uuid

    u = uuid.uuid4().hex[:8]
    c = kafka_sasl_ssl
    s = Hidden(c, f"seen_{u}", f"hidden_{u}", f"live-{u}", f"idle-{u}")
    where = c.conn("admin").to_librdkafka()
    for t in (s.seen, s.hidden):
        create_topic(where, t, 2)
        produce(where, t, {0: 10, 1: 10})
    commit(where, s.idle, {(t, p): 4 for t in (s.seen, s.hidden) for p in (0, 1)})
    acls = monitor_acls("monitor", [s.seen], [s.live, s.idle])
    with AclsAdmin(c.conn("admin"), timeout=15) as a:
        a.create_acls(list(acls))
    with ActiveMember(where, s.live, [s.seen, s.hidden],
                      {(t, p): 3 for t in (s.seen, s.hidden) for p in (0, 1)}):
        yield s
    with AclsAdmin(c.conn("admin"), timeout=15) as a:
        a.delete_acls(list(acls))


def _tool(s: Hidden, tmp: Path, group: str) -> Any:
    dist = s.cluster.dist()
    cfg = s.cluster.command_config(tmp / "monitor.properties", "monitor")
    return dist.run_tool(dist.consumer_groups_class, "--bootstrap-server", s.cluster.bootstrap,
                         "--command-config", str(cfg), "--describe", "--group", group,
                         # its default 5 s ran out on TLS + SCRAM logins on a loaded machine
                         "--timeout", "120000")


@pytest.mark.parametrize("path", ["protocol", "librdkafka"])
def test_a_topic_hidden_by_acls_is_unreadable_never_ok(scene: Hidden, path: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    s = scene
    if path == "librdkafka":  # the same broker read through librdkafka (no protocol client)
        monkeypatch.setattr("opskit.adapters.kafka.reader.usable", lambda _c: False)
    r = run_cli("lag", "-g", s.live, "-o", "json", *s.cluster.cli_args("monitor"))
    assert r.code == 3, (r.code, r.out, r.err)
    d = r.json()
    (g,) = d["groups"]
    assert g["severity"] == "UNKNOWN" and d["severity"] == "UNKNOWN", g
    rows = {(p["topic"], p["partition"]): p for p in g["partitions"]}
    assert set(rows) == {(t, p) for t in (s.seen, s.hidden) for p in (0, 1)}, sorted(rows)
    for p in (0, 1):
        assert rows[(s.seen, p)]["lag"] == 7 and rows[(s.seen, p)]["anomalies"] == []
        hid = rows[(s.hidden, p)]
        assert hid["anomalies"] == ["committed_unreadable"], hid  # not partition_missing
        assert hid["lag"] is None and hid["committed_offset"] is None, hid
    assert d["commit_errors"] == {
        s.live: {f"{s.hidden}:{p}": "TOPIC_AUTHORIZATION_FAILED" for p in (0, 1)}}, d
    # the admin sees both topics: lag 7 each, OK (the numbers above are the true ones)
    a = run_cli("lag", "-g", s.live, "-o", "json", *s.cluster.cli_args("admin"))
    assert a.code == 0, a.err
    assert {(p["topic"], p["partition"]): p["lag"] for p in a.json()["groups"][0]["partitions"]} \
        == {(t, p): 7 for t in (s.seen, s.hidden) for p in (0, 1)}


def test_the_hidden_topic_asked_for_by_name_is_not_called_unknown(scene: Hidden) -> None:
    """Before: exit 4 'unknown topic' (the metadata of all topics leaves it out)."""
    s = scene
    r = run_cli("lag", "-g", s.live, "--topic", s.hidden, *s.cluster.cli_args("monitor"))
    assert r.code == 3 and r.out == "", (r.code, r.out, r.err)
    [line] = [ln for ln in r.err.splitlines() if ln.startswith("opskit: error:")]
    assert f"not authorised for describing topic '{s.hidden}'" in line, line
    assert "User:monitor needs the Describe ACL" in line, line


def test_kafka_tool_and_exporter_on_the_hidden_topic(scene: Hidden, tmp_path: Path) -> None:
    s = scene
    # Kafka's tool gives no lag for the group at all while it has a member
    proc = _tool(s, tmp_path, s.live)
    assert "TopicAuthorizationException" in proc.stdout + proc.stderr, (proc.stdout, proc.stderr)
    assert not parse_describe(proc.stdout)
    # the exporter: status UNKNOWN (was OK), the anomaly counted, the known lag served
    r = run_cli("exporter", "--once", "--group-allow", s.live,
                *s.cluster.cli_args("monitor"))
    v: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(r.out):
        for smp in fam.samples:
            v.setdefault(smp.name, {})[tuple(sorted(smp.labels.items()))] = smp.value
    status = {dict(k)["status"]: x for k, x in v["opskit_consumergroup_status"].items()
              if dict(k)["consumergroup"] == s.live}
    assert status["UNKNOWN"] == 1 and status["OK"] == 0, (status, r.err)
    kinds = {dict(k)["kind"]: x for k, x in v["opskit_consumergroup_anomalies"].items()
             if dict(k)["consumergroup"] == s.live}
    assert kinds["committed_unreadable"] == 2 and kinds["partition_missing"] == 0, kinds
    lag = {dict(k)["partition"]: x for k, x in v["kafka_consumergroup_lag"].items()
           if dict(k)["consumergroup"] == s.live and dict(k)["topic"] == s.seen}
    assert lag == {"0": 7, "1": 7}, lag


def test_a_group_without_member_hides_the_topic_as_kafkas_tool_does(scene: Hidden,
                                                                   tmp_path: Path) -> None:
    """The documented limit: no member, so nothing names the hidden topic (OffsetFetch
    and metadata leave it out without an error). opskit shows what Kafka's own tool
    shows, the visible topic only."""
    s = scene
    proc = _tool(s, tmp_path, s.idle)
    theirs = {(t, p): int(str(row["LAG"])) for (_g, t, p), row in parse_describe(proc.stdout).items()}
    assert theirs == {(s.seen, 0): 6, (s.seen, 1): 6}, (proc.stdout, proc.stderr)
    r = run_cli("lag", "-g", s.idle, "-o", "json", *s.cluster.cli_args("monitor"))
    ours = {(p["topic"], p["partition"]): p["lag"] for p in r.json()["groups"][0]["partitions"]}
    assert ours == theirs, ours
