"""``opskit reassign plan`` on a real 3-broker cluster (Kafka 3.7): plans from the live
topology (sizes from DescribeLogDirs), the plan file runs under Kafka's own
``kafka-reassign-partitions --execute/--verify`` (which ignores the ``opskit`` key; also
checked on Kafka 4.x), refusals and bad input (one line, documented exit code, nothing
changed)."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import create_topic, produce, run_cli


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15).topics[topic]
    return {p.id: list(p.replicas) for p in md.partitions.values()}


def _leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15).topics[topic]
    return {p.id: p.leader for p in md.partitions.values()}


def _create_on(bootstrap: str, topic: str, assignment: list[list[int]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)]).values():
        f.result(30)
    deadline = time.time() + 30
    while len(_replicas(bootstrap, topic)) < len(assignment) and time.time() < deadline:
        time.sleep(0.2)


def _tool(cluster: Any, *args: str) -> str:
    dist = cluster.dist()
    new = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    cls = new if dist._has_class("kafka-tools-", new) else "kafka.admin.ReassignPartitionsCommand"
    r = dist.run_tool(cls, "--bootstrap-server", cluster.bootstrap, *args)
    assert r.returncode == 0, r.stderr[-800:]
    return str(r.stdout)


def _run_with_kafka_tool(cluster: Any, plan: Path) -> None:
    """--execute, then --verify until every partition is completed (it then removes its
    throttles)."""
    _tool(cluster, "--reassignment-json-file", str(plan), "--execute")
    deadline = time.time() + 120
    while True:
        out = _tool(cluster, "--reassignment-json-file", str(plan), "--verify")
        if "in progress" not in out:
            assert "is completed" in out, out
            return
        assert time.time() < deadline, out
        time.sleep(1)


def test_raise_rf_plan_from_the_live_cluster(kafka3: Any, tmp_path: Path) -> None:
    topic = _topic("rplan-rf")
    create_topic(kafka3.bootstrap, topic, 6, rf=1)
    produce(kafka3.bootstrap, topic, {p: 50 * (p + 1) for p in range(6)})
    before = _replicas(kafka3.bootstrap, topic)
    leaders = _leaders(kafka3.bootstrap, topic)
    path = tmp_path / "rf.json"
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--replication-factor", "3",
                "--topic", topic, "--throttle", "1MB", "-o", "json", "--write-plan", str(path))
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    assert json.loads(path.read_text()) == plan  # the file is what -o json shows
    assert plan["version"] == 1
    assert sorted(p["partition"] for p in plan["partitions"]) == list(range(6))
    for p in plan["partitions"]:
        assert p["topic"] == topic
        assert sorted(p["replicas"]) == [0, 1, 2]
        assert p["replicas"][0] == leaders[p["partition"]]  # the leader stays first
        assert p["log_dirs"] == ["any"] * 3
    ops = plan["opskit"]
    assert ops["goal"] == {"kind": "replication-factor", "replication_factor": 3, "topics": [topic],
                           "include_internal": False}
    assert {(b["partition"], tuple(b["replicas"])) for b in ops["base"]} == \
        {(p, tuple(rs)) for p, rs in before.items()}
    sizes = {b["partition"]: b["size_bytes"] for b in ops["base"]}
    assert all(sizes[p] > 0 for p in range(6)), sizes  # DescribeLogDirs sizes
    assert sizes[5] > sizes[0]  # partition 5 got 6x the records of partition 0
    est = ops["estimates"]
    assert est["replicas_moved"] == est["replicas_lower_bound"] == 12
    assert est["bytes_moved"] == est["bytes_lower_bound"] == 2 * sum(sizes.values())
    assert est["throttle_bytes_per_s"] == 1_000_000
    busiest = max([*est["broker_bytes_in"].values(), *est["broker_bytes_out"].values()])
    assert est["duration_s"] == busiest / 1_000_000
    assert _replicas(kafka3.bootstrap, topic) == before  # planning changes nothing
    # the table says the same
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--replication-factor", "3",
                "--topic", topic)
    assert r.code == 0, r.err
    assert "replicas moved: 12 (1.00x the lower bound 12)" in r.out


def test_add_brokers_and_kafkas_tool_runs_the_plan(kafka3: Any, tmp_path: Path) -> None:
    topic = _topic("rplan-add")
    _create_on(kafka3.bootstrap, topic, [[p % 2] for p in range(8)])  # brokers 0 and 1 only
    produce(kafka3.bootstrap, topic, dict.fromkeys(range(8), 20))
    path = tmp_path / "add.json"
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--add-brokers", "2", "-o", "json",
                "--write-plan", str(path))
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    est = plan["opskit"]["estimates"]
    assert est["replicas_moved"] == est["replicas_lower_bound"] > 0
    assert "2" in est["broker_bytes_in"]
    # Kafka's tool runs opskit's plan as it is (it ignores the "opskit" key)
    _run_with_kafka_tool(kafka3, path)
    target = {(p["topic"], p["partition"]): p["replicas"] for p in plan["partitions"]}
    for (t, p), rs in target.items():
        assert _replicas(kafka3.bootstrap, t)[p] == rs
    # the same goal again: nothing to move; and the file as a from-json target: met
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--add-brokers", "2", "-o", "json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["partitions"] == []
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--from-json", str(path))
    assert r.code == 0, r.err
    assert "nothing to move" in r.out


def test_kafka_tool_output_is_a_from_json_target(kafka3: Any, tmp_path: Path) -> None:
    topic = _topic("rplan-tool")
    _create_on(kafka3.bootstrap, topic, [[0], [1]])
    # the tool's own file (no log_dirs) read by opskit
    target = tmp_path / "tool.json"
    target.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 0]}]}))
    r = run_cli("reassign", "plan", "-b", kafka3.bootstrap, "--from-json", str(target), "-o", "json")
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    assert plan["partitions"] == [{"topic": topic, "partition": 0, "replicas": [2, 0],
                                   "log_dirs": ["any", "any"]}]
    assert plan["opskit"]["base"][0]["replicas"] == [0]
    assert plan["opskit"]["estimates"]["replicas_moved"] == 1


def test_kafka4_tool_ignores_the_opskit_key(kafka4: Any, tmp_path: Path) -> None:
    topic = _topic("rplan-k4")
    create_topic(kafka4.bootstrap, topic, 1, rf=1)
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [0],
                                          "log_dirs": ["any"]}],
            "opskit": {"format": "opskit/reassign-plan", "format_version": 1,
                       "base": [{"topic": topic, "partition": 0, "replicas": [0]}]}}
    path = tmp_path / "k4.json"
    path.write_text(json.dumps(plan))
    _run_with_kafka_tool(kafka4, path)


def _one_line_error(r: Any, code: int, text: str) -> None:
    assert r.code == code, (r.code, r.out, r.err)
    assert r.err.startswith("opskit: error: ") and r.err.count("\n") == 1, r.err
    assert text in r.err, r.err
    assert "Traceback" not in r.err


def test_refusals_and_bad_input(kafka3: Any, tmp_path: Path) -> None:
    topic = _topic("rplan-bad")
    create_topic(kafka3.bootstrap, topic, 2, rf=1)
    before = _replicas(kafka3.bootstrap, topic)
    b = ["-b", kafka3.bootstrap]
    _one_line_error(run_cli("reassign", "plan", *b, "--add-brokers", "9"), 5, "broker 9 is not registered")
    _one_line_error(run_cli("reassign", "plan", *b, "--replication-factor", "4", "--all-topics"), 5,
                    "replication factor 4 is above the 3 registered brokers")
    _one_line_error(run_cli("reassign", "plan", *b, "--replication-factor", "2", "--topic", "nope-x"),
                    4, "topic 'nope-x' does not exist")
    _one_line_error(run_cli("reassign", "plan", *b), 2, "give exactly one goal")
    _one_line_error(run_cli("reassign", "plan", *b, "--rebalance", "--add-brokers", "1"), 2,
                    "give exactly one goal")
    _one_line_error(run_cli("reassign", "plan", *b, "--replication-factor", "2"), 2,
                    "needs --topic T (repeatable) or --all-topics")
    _one_line_error(run_cli("reassign", "plan", *b, "--add-brokers", "1,x"), 2, "not a list of broker ids")
    _one_line_error(run_cli("reassign", "plan", *b, "--rebalance", "--throttle", "fast"), 2, "--throttle")
    _one_line_error(run_cli("reassign", "plan", *b, "--rebalance", "--write-plan", str(tmp_path)), 2,
                    "plan file")
    bad = tmp_path / "bad.json"
    for text, message in [
        ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 1]}]}',
         "broker 1 is listed twice"),
        ('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [-1]}]}', "below 0"),
        ('{"version": 1, "partitions": [{"topic": "t", "replicas": [1]}]}', "missing field 'partition'"),
        ('{"version": 1, "partitions": [{"topic": "t", "partition": "0", "replicas": [1]}]}',
         "expected an integer"),
        ("{not json", "not valid JSON"),
    ]:
        bad.write_text(text)
        _one_line_error(run_cli("reassign", "plan", *b, "--from-json", str(bad)), 2, message)
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 7]}]}))
    _one_line_error(run_cli("reassign", "plan", *b, "--from-json", str(bad)), 5, "broker 7 is not registered")
    _one_line_error(run_cli("reassign", "plan", *b, "--from-json", str(tmp_path / "none.json")), 4, "")
    assert _replicas(kafka3.bootstrap, topic) == before
