"""The sandbox CLI (lifecycle, clean errors) and the HIP-30 traffic scenarios."""

from __future__ import annotations

import socket
import time

from opskit.cli import exits
from opskit.sandbox.ports import free_port_block
from tests.helpers import run_cli


def test_sandbox_lifecycle_idempotent_and_port_taken(uniq):
    name = f"life-{uniq}"
    port = free_port_block(1)
    r = run_cli("sandbox", "up", "--name", name, "--port", str(port), "--kafka-version", "4.x")
    assert r.code == 0, r.err
    try:
        assert "started" in r.out and "4.3" in r.out
        again = run_cli("sandbox", "up", "--name", name)
        assert again.code == 0 and "already running" in again.out
        st = run_cli("sandbox", "status", "--name", name, "-o", "json")
        assert st.code == 0 and st.json()["running"] and st.json()["nodes"][0]["roles"] == "broker,controller"
        other = run_cli("sandbox", "up", "--name", name, "--brokers", "3")
        assert other.code == exits.SANDBOX and "exists with 1 broker" in other.err
        # the context was written and works
        ctx = run_cli("context", "show", f"sandbox-{name}", "-o", "json")
        assert ctx.json()["bootstrap"] == f"127.0.0.1:{port}"
        # a port held by someone else is a clean error, not a hang
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            taken = s.getsockname()[1]
            clash = run_cli("sandbox", "up", "--name", f"clash-{uniq}", "--port", str(taken))
            assert clash.code == exits.SANDBOX and "in use" in clash.err
    finally:
        down = run_cli("sandbox", "down", "--name", name)
    assert down.code == 0
    assert run_cli("sandbox", "status", "--name", name).code == exits.NOT_FOUND


def test_keep_then_restart_keeps_data(uniq):
    name = f"keep-{uniq}"
    r = run_cli("sandbox", "up", "--name", name, "--port", str(free_port_block(1)), "--no-context")
    assert r.code == 0, r.err
    try:
        bs = run_cli("sandbox", "status", "--name", name, "-o", "json").json()["bootstrap"]
        from tests.helpers import create_topic

        create_topic(bs, f"kept_{uniq}", 2)
        assert run_cli("sandbox", "down", "--name", name, "--keep").code == 0
        st = run_cli("sandbox", "status", "--name", name, "-o", "json")
        assert st.code == exits.UNKNOWN and not st.json()["running"]
        again = run_cli("sandbox", "up", "--name", name)
        assert again.code == 0 and "restarted" in again.out
        from opskit.adapters.kafka.admin.client import KafkaAdmin
        from opskit.core.connection import ConnectionConfig

        md = KafkaAdmin(ConnectionConfig(bs), timeout=15).metadata()
        assert len(md.topics[f"kept_{uniq}"]) == 2
    finally:
        run_cli("sandbox", "down", "--name", name)


def test_load_creates_the_on_call_scenarios(kafka):
    from opskit.sandbox.load import LoadRunner

    bs = kafka.bootstrap
    assert run_cli("topics", "apply", "-b", bs, "--execute").code == 0
    runner = LoadRunner(bs, rate=400, seed=7)
    runner.start()
    try:
        time.sleep(14)
        r = run_cli("lag", "--all-groups", "-b", bs, "-o", "json")
    finally:
        runner.stop()
    groups = {g["group"]: g for g in r.json()["groups"]}
    for g in ("analytics-ingest", "billing-agg", "llm-metrics", "audit-archive", "rpc-billing",
              "dead-letter-monitor"):
        assert g in groups, g
    produced = runner.stats.produced
    assert produced.get("events_plugin_ingestion", 0) > 1000
    # healthy group keeps up; the lagging one falls behind by much more
    assert groups["billing-agg"]["total_lag"] > 5 * max(groups["llm-metrics"]["total_lag"], 20)
    # stopped group: no members, committed offsets, lag
    aa = groups["audit-archive"]
    assert aa["state"] == "Empty" and aa["members"] == 0 and aa["total_lag"] > 0
    assert any(p["committed_offset"] is not None for p in aa["partitions"])
    # active group that never commits on odd partitions
    rb = groups["rpc-billing"]
    assert rb["state"] == "Stable" and rb["members"] >= 1
    odd = [p for p in rb["partitions"] if p["partition"] % 2 == 1]
    assert odd and all(p["committed_offset"] is None and p["client_id"] for p in odd)
    even = [p for p in rb["partitions"] if p["partition"] % 2 == 0]
    assert all(p["committed_offset"] is not None for p in even)


def test_envelope_shape():
    import random

    from opskit.sandbox.load import TOPIC_WEIGHTS, make_event

    rnd = random.Random(1)
    for topic in TOPIC_WEIGHTS:
        key, env = make_event(topic, rnd, 1_736_937_000.123)
        assert env["schema"] == "hanzo.stream.v1"
        assert {"id", "type", "source", "timestamp", "data"} <= set(env)
        assert env["timestamp"] == "2025-01-15T10:30:00.123Z"
        assert env["id"].startswith("evt_") and len(env["id"]) == 30
        if topic in ("events_plugin_ingestion", "llm_usage"):
            assert key == env["team_id"]
        if topic in ("audit_log", "billing_events"):
            assert key == env["org_id"]
        if topic == "agent_rpc_metering":
            assert key == env["data"]["agent_id"]
