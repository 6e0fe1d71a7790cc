"""The explicit static -> dynamic quorum upgrade (Kafka 4.1+), then a scale-out that
takes the dynamic (add-controller) path, on Kafka 4.3.1 formatted with a static quorum."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from helpers import cli_sandbox, create_topic, run_cli

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.kraft_features import read_kraft_version
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.scale import voters


@pytest.fixture
def static4(uniq: str) -> Iterator[Sandbox]:
    with cli_sandbox(f"pq{uniq}", "--kafka-version", "4.x", "--quorum", "static") as sb:
        yield sb


def props(sb: Sandbox, node: int) -> str:
    return sb.require().nodes[node].config_path.read_text()


@pytest.mark.timeout(1800)  # a whole scale-out with 3 restarts: 450-470 s at load 1-3, past
# 600 s at load 15-25 (the run's own waits bound it, each with its deadline)
@pytest.mark.kafka4
def test_upgrade_quorum_then_scale_out_adds_controllers(static4: Sandbox) -> None:
    sb = static4
    conf = sb.connection().to_librdkafka()
    create_topic(conf, "llm_usage", 4)
    p = Producer(conf)
    for i in range(100):
        p.produce("llm_usage", key=f"k{i % 8}".encode(), value=str(i).encode())
    assert p.flush(60) == 0
    assert read_kraft_version(sb.connection()) == 0
    name = ["--sandbox", sb.name]

    # static: more voters refused, with the fix named; the plan is broker-only
    r = run_cli("playbook", "scale-out", *name, "--controllers", "3")
    assert r.code == 5 and "upgrade-quorum" in r.err and len(r.err.splitlines()) == 1, r.err
    plan = run_cli("playbook", "scale-out", *name, "-o", "json")
    assert plan.code == 0 and plan.json()["plan"]["new_node_roles"] == "broker"

    # the upgrade: a dry run changes nothing
    r = run_cli("playbook", "upgrade-quorum", *name, "-o", "json")
    assert r.code == 0, r.err
    assert r.json()["dry_run"] and any("irreversible" in a for a in r.json()["actions"])
    assert read_kraft_version(sb.connection()) == 0 and sb.require().quorum == "static"
    assert "controller.quorum.voters=" in props(sb, 0)

    r = run_cli("playbook", "upgrade-quorum", *name, "--execute", "-o", "json")
    assert r.code == 0, r.err
    assert read_kraft_version(sb.connection()) == 1
    assert voters(sb) == [0]
    record = json.loads((sb.playbook_dir / "quorum-upgrade.json").read_text())
    (entry,) = record["history"]
    assert (entry["kraft_version_before"], entry["kraft_version_after"]) == (0, 1)
    assert "controller.quorum.voters=" not in props(sb, 0)
    assert "controller.quorum.bootstrap.servers=" in props(sb, 0)
    # once only
    r = run_cli("playbook", "upgrade-quorum", *name, "--execute")
    assert r.code == 5 and "already dynamic" in r.err, r.err

    # --controllers bounds how many new nodes become voters (plan only)
    two = run_cli("playbook", "scale-out", *name, "--controllers", "2", "-o", "json")
    assert two.code == 0, two.err
    assert two.json()["plan"]["new_voters"] == [1]
    assert "promote_voter:2" not in two.json()["plan"]["steps"]

    # the scale-out now takes the dynamic path: observers, then voters one at a time
    # (node 0 still runs with the static list it started with: it keeps working)
    r = run_cli("playbook", "scale-out", *name, "--controllers", "3", "--throttle", "20MiB",
                "--execute", "-o", "json")
    assert r.code == 0, r.err
    assert r.json()["plan"]["quorum"] == "dynamic"
    assert "promote_voter:2" in r.json()["done"]
    assert voters(sb) == [0, 1, 2]
    assert [n.roles for n in sb.require().nodes] == ["broker,controller"] * 3

    # node 0 restarted from its rewritten file rejoins the dynamic quorum and its replicas
    # catch up (leadership moves back later, by Kafka's own imbalance check: not waited for)
    sb.stop_node(0)
    sb.start_node(0)
    assert voters(sb) == [0, 1, 2]
    deadline = time.monotonic() + 120
    while True:
        with KafkaAdmin(sb.connection()) as admin:
            parts = [p for ps in admin.metadata().topics.values() for p in ps]
        behind = [p for p in parts if sorted(p.isr) != sorted(p.replicas) or p.leader < 0]
        if not behind or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert not behind and all(len(p.replicas) == 3 for p in parts)
