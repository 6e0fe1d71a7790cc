"""``opskit health`` against real clusters: a broker failure drill on 3 nodes, quorum on 3.7 / 4.x."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.helpers import CliResult, create_topic, run_cli

NO_QUORUM_API = "broker does not support DescribeQuorum (needs Kafka 3.3+ KRaft)"


def health(bootstrap: str, *extra: str) -> CliResult:
    return run_cli("health", "-b", bootstrap, "--timeout", "10", *extra)


def health_json(bootstrap: str, *extra: str) -> tuple[int, dict[str, Any]]:
    r = health(bootstrap, "-o", "json", *extra)
    assert r.code in (0, 1, 2, 3), r.err
    if not r.out.strip():
        return r.code, {"error": r.err}
    return r.code, r.json()


def finding(report: dict[str, Any], check: str) -> dict[str, Any]:
    return next(f for f in report["findings"] if f["check"] == check)


def names(f: dict[str, Any]) -> set[str]:
    return {f"{p['topic']}:{p['partition']}" for p in f["partitions"]}


def poll(what: str, fn: Callable[[], tuple[bool, Any]], timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        ok, last = fn()
        if ok:
            return last
        time.sleep(1.0)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")


def create_on(bootstrap: str, name: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment)]).values():
        f.result(30)

    def ready() -> tuple[bool, Any]:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        ok = t is not None and t.error is None and all(
            p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in t.partitions.values())
        return ok, t
    poll(f"topic {name}", ready, 30)


def elect_preferred(bootstrap: str) -> None:
    from kafka.admin import KafkaAdminClient

    c = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000,
                         bootstrap_timeout_ms=15000)
    try:
        c.elect_leaders(0, None, timeout_ms=15000, raise_errors=False)  # 0 = PREFERRED
    finally:
        c.close()


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.delete_topics(topics, operation_timeout=30).values():
        try:
            f.result(30)
        except Exception as e:  # noqa: BLE001 - cleanup only, never fails the test
            print(f"cleanup: could not delete a topic: {e}")


@pytest.mark.three_brokers
def test_broker_failure_drill(kafka3: Any, uniq: str) -> None:
    bs = kafka3.bootstrap
    t2, t3, solo = f"health_min2_{uniq}", f"health_min3_{uniq}", f"health_solo_{uniq}"
    create_topic(bs, t2, 3, 3, {"min.insync.replicas": "2"})
    create_topic(bs, t3, 1, 3, {"min.insync.replicas": "3"})
    create_on(bs, solo, [[2]])  # RF 1, on broker 2 only

    # healthy first (earlier tests may have left leaders off their preferred replica)
    def healthy() -> tuple[bool, Any]:
        code, rep = health_json(bs, "--expected-brokers", "3")
        if code == 1 and finding(rep, "preferred_leader_imbalance")["severity"] == "WARNING":
            elect_preferred(bs)
        return code == 0, rep
    rep = poll("a healthy cluster", healthy, 60)
    assert rep["counts"]["brokers_registered"] == 3
    assert rep["quorum"]["leader"] == 0 and rep["quorum"]["voters"] == [0]
    assert set(rep["quorum"]["observers"]) >= {1, 2}
    assert rep["counts"]["at_min_isr"] == 0  # t3 has a full ISR == min ISR == RF: no warning

    try:
        kafka3.sandbox.stop_node(2)

        def degraded() -> tuple[bool, Any]:
            code, rep = health_json(bs, "--expected-brokers", "3")
            if "findings" not in rep:
                return False, rep
            ok = (f"{t3}:0" in names(finding(rep, "under_min_isr"))
                  and f"{solo}:0" in names(finding(rep, "offline_partitions"))
                  and rep["counts"]["brokers_registered"] == 2)
            return ok, (code, rep)
        code, rep = poll("the ISR to shrink after stopping broker 2", degraded, 90)

        assert code == 2
        assert rep["severity"] == "CRITICAL"
        b = finding(rep, "brokers")
        assert b["severity"] == "CRITICAL"
        assert "brokers registered 2 < expected 3" in b["message"]
        assert b["brokers"] == [2]

        off = finding(rep, "offline_partitions")
        assert off["severity"] == "CRITICAL"
        solo_p = next(p for p in off["partitions"] if p["topic"] == solo)
        assert solo_p["leader"] == -1 and solo_p["leader_down"] is True
        assert solo_p["down_replicas"] == [2]

        umi = finding(rep, "under_min_isr")
        assert umi["severity"] == "CRITICAL"
        t3p = next(p for p in umi["partitions"] if p["topic"] == t3)
        assert t3p["min_isr"] == 3 and len(t3p["isr"]) == 2 and 2 not in t3p["isr"]
        assert t3p["down_replicas"] == [2] and t3p["leader_down"] is False

        urp = finding(rep, "under_replicated")
        assert urp["severity"] == "WARNING"
        assert {f"{t2}:{i}" for i in range(3)} <= names(urp)
        atmin = finding(rep, "at_min_isr")  # RF 3 > min ISR 2, ISR now 2
        assert atmin["severity"] == "WARNING"
        assert {f"{t2}:{i}" for i in range(3)} <= names(atmin)
        assert f"{t3}:0" not in names(atmin)
        assert rep["counts"]["offline"] >= 1 and rep["counts"]["urp"] >= 4

        # the table output: same exit code, a summary line that says why
        r = health(bs, "--expected-brokers", "3")
        assert r.code == 2
        assert r.out.startswith("CRITICAL: ")
        assert "brokers registered 2 < expected 3" in r.out
        assert "leader broker down" in r.out
        assert r.err == ""  # kafka-python and librdkafka stay quiet without --debug
    finally:
        kafka3.sandbox.start_node(2)

    def recovered() -> tuple[bool, Any]:
        code, rep = health_json(bs, "--expected-brokers", "3")
        if "findings" not in rep:
            return False, rep
        if (code == 1 and rep["counts"]["urp"] == 0
                and finding(rep, "preferred_leader_imbalance")["severity"] == "WARNING"):
            # leaders moved off broker 2 stay moved until a preferred election
            elect_preferred(bs)
        return code == 0, rep
    try:
        rep = poll("the cluster to be healthy again", recovered, 120)
        assert rep["counts"]["offline"] == 0 and rep["counts"]["urp"] == 0
        assert rep["counts"]["brokers_registered"] == 3
    finally:
        delete_topics(bs, [t2, t3, solo])


def _assert_single_voter_quorum(bootstrap: str) -> None:
    _code, rep = health_json(bootstrap)
    q = finding(rep, "quorum")
    if rep["quorum"] is None:  # the client could not describe it: must say why
        assert q["severity"] == "UNKNOWN"
        assert q["message"] == NO_QUORUM_API, q["message"]
        pytest.fail(f"quorum UNKNOWN: {q['message']}")
    assert rep["quorum"]["leader"] == 0
    assert rep["quorum"]["voters"] == [0]
    assert q["severity"] == "OK"
    assert "single point of failure" in q["message"]
    assert finding(rep, "controller")["severity"] == "OK"
    assert finding(rep, "reassignments")["severity"] == "OK"
    assert rep["counts"]["reassignments"] == 0


def test_quorum_on_kafka37(kafka: Any) -> None:
    _assert_single_voter_quorum(kafka.bootstrap)


@pytest.mark.kafka4
def test_quorum_on_kafka4(kafka4: Any) -> None:
    _assert_single_voter_quorum(kafka4.bootstrap)


def test_unreachable_cluster_is_unknown_within_timeout() -> None:
    t0 = time.monotonic()
    r = run_cli("health", "-b", "127.0.0.1:1", "--timeout", "2")
    elapsed = time.monotonic() - t0
    assert r.code == 3
    assert r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opskit: error: cannot reach Kafka")
    assert elapsed < 10
