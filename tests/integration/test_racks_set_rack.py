"""``sandbox set-rack``: three brokers in one rack moved to three racks on a live cluster
(Kafka 3.7 and 4.x), one restart per node, under an idempotent acks=all producer and a
consumer group: Kafka's ``kafka-broker-api-versions`` (Metadata) then reports racks a, b,
c; every RF 3 partition already spans them, so ``reassign plan --rebalance`` moves no
replica; a second call changes nothing; no acknowledged record is lost, order per key
holds.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import commit, create_topic, run_cli
from test_racks_sandbox import metadata_racks
from test_reassign_exec import Workload  # the idempotent acks=all producer + group

from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block


@pytest.fixture(params=["3.7", "4.x"])
def one_rack(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    version = str(request.param)
    name = f"setrack{version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sb = Sandbox(name)
    try:
        r = run_cli("sandbox", "up", "--name", name, "--brokers", "3", "--racks", "a",
                    "--kafka-version", version, "--port", str(free_port_block(3)),
                    "--no-context")
        assert r.code == 0 and "racks 0:a 1:a 2:a" in r.out, r.out + r.err
        yield sb
    finally:
        sb.down()


def _wait_full_isr(admin: AdminClient, timeout: float = 180) -> None:
    """Every partition's ISR is its whole replica set (the next restart is then safe)."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=15)
        short = [(t, p.id) for t, tm in md.topics.items() for p in tm.partitions.values()
                 if set(p.isrs) != set(p.replicas)]
        if not short:
            return
        assert time.monotonic() < deadline, f"under-replicated after {timeout}s: {short[:5]}"
        time.sleep(1)


def test_one_rack_to_three_racks_with_a_restart_per_node(one_rack: Sandbox) -> None:
    sb = one_rack
    boot = sb.require().bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    suffix = uuid.uuid4().hex[:6]
    topic = f"rk_moved_{suffix}"
    create_topic(boot, topic, 6, 3, config={"min.insync.replicas": "2"})
    commit(boot, f"rk-init-{suffix}", {(topic, 0): 0})
    _wait_full_isr(admin)
    assert metadata_racks(sb) == {0: "a", 1: "a", 2: "a"}

    with Workload(boot, [topic], f"rk-group-{suffix}") as load:
        time.sleep(3)
        for node, rack in ((1, "b"), (2, "c")):
            r = run_cli("sandbox", "set-rack", str(node), rack, "--name", sb.name)
            assert r.code == 0 and r.out.strip() == f"node {node} in rack {rack}", r.out + r.err
            _wait_full_isr(admin)
        consumed_mid = len(load.consumed)
        time.sleep(3)
        assert len(load.consumed) > consumed_mid  # the group consumes after the restarts

    assert metadata_racks(sb) == {0: "a", 1: "b", 2: "c"}
    assert {n.node_id: n.rack for n in sb.require().nodes} == {0: "a", 1: "b", 2: "c"}
    again = run_cli("sandbox", "set-rack", "2", "c", "--name", sb.name)
    assert again.code == 0 and again.out.strip() == "node 2 in rack c already", again.out
    plan = run_cli("reassign", "plan", "--rebalance", "-o", "json", "-b", boot)
    assert plan.code == 0, plan.err
    est = plan.json()["opskit"]["estimates"]
    assert est["replicas_moved"] == 0 and est["unspread_before"] == 0, est
    # no acknowledged record lost, order per key kept
    assert not load.errors, load.errors[:3]
    assert load.acked and set(load.acked) <= set(load.consumed)
    firsts: dict[tuple[str, str], list[int]] = {}
    seen: set[tuple[str, str, int]] = set()
    for rec in load.consumed:
        if rec not in seen:
            seen.add(rec)
            firsts.setdefault((rec[0], rec[1]), []).append(rec[2])
    for key, seqs in firsts.items():
        assert seqs == sorted(seqs), key


def test_set_rack_refuses_unknown_nodes_and_bad_racks(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    r = run_cli("sandbox", "set-rack", "1", "a b", "--name", "nothere")
    assert r.code == 2 and "--rack" in r.err and r.err.count("\n") == 1, r.err
    r = run_cli("sandbox", "set-rack", "1", "b", "--name", "nothere")
    assert r.code == 4 and "no sandbox named" in r.err, r.err
