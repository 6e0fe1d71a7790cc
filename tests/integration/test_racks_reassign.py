"""Rack-aware placement on real clusters (Kafka 3.7 and 4.x).

Four brokers in three racks (``sandbox up --brokers 3 --racks a,b,c``, then ``sandbox
add-node``: node 3 continues the cycle into rack a). Two topics are created with their
replicas concentrated in rack a (explicit assignments: an RF 2 topic wholly on brokers
0 and 3, an RF 3 topic with two replicas there). The fenced commands
of ``runbooks/multi-rack.md`` are run in order (``reassign plan --rebalance``, rack-aware
by default: the racks are read from the cluster; ``reassign execute`` preview, then
``--execute``; ``verify``; ``health``; ``cancel`` preview) while an idempotent acks=all
producer and a consumer group run.
Afterwards, read from Metadata: every partition spans min(RF, racks) racks, the
replicas that moved equal the printed lower bound, no reassignment or throttle is left,
no acknowledged record is lost and the order per key holds.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import CliResult, commit, produce, run_cli
from test_reassign_exec import Workload  # the idempotent acks=all producer + group

from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block

RUNBOOK = Path(__file__).resolve().parents[2] / "runbooks" / "multi-rack.md"
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
PAIRS = [[0, 3], [3, 0], [0, 3], [3, 0]]                   # RF 2, both replicas in rack a
TRIPLES = [[0, 3, 1], [3, 0, 2], [1, 0, 3], [2, 3, 0]]     # RF 3, two replicas in rack a


@pytest.fixture(params=["3.7", "4.x"])
def racked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    version = str(request.param)
    name = f"rackrx{version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sb = Sandbox(name)
    try:
        r = run_cli("sandbox", "up", "--name", name, "--brokers", "3", "--racks", "a,b,c",
                    "--kafka-version", version, "--port", str(free_port_block(3)),
                    "--no-context")
        assert r.code == 0, r.out + r.err
        a = run_cli("sandbox", "add-node", "--name", name)
        assert a.code == 0 and "node 3 " in a.out and "in rack a" in a.out, a.out + a.err
        yield sb
    finally:
        sb.down()


def _replicas(admin: AdminClient) -> dict[tuple[str, int], list[int]]:
    md = admin.list_topics(timeout=15)
    return {(t, p.id): list(p.replicas) for t, tm in md.topics.items()
            for p in tm.partitions.values()}


def _throttles(admin: AdminClient, brokers: list[int], topics: list[str]) -> dict[str, str]:
    """Every throttle key set dynamically on a broker (source 1), as the cluster default
    (3, seen through every broker) or on a topic (1)."""
    found: dict[str, str] = {}
    calls = [[ConfigResource(ResourceType.BROKER, str(b))] for b in brokers]  # one per call
    calls.append([ConfigResource(ResourceType.TOPIC, t) for t in topics])
    for resources in calls:
        for res, fut in admin.describe_configs(resources, request_timeout=60).items():
            for key, entry in fut.result(60).items():
                if key in THROTTLE_KEYS and int(entry.source) in (1, 2, 3) and entry.value:
                    found[f"{res.name}:{key}"] = entry.value
    return found


def _create_on(admin: AdminClient, topic: str, assignment: list[list[int]],
               config: dict[str, str]) -> None:
    for f in admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment,
                                           config=config)]).values():
        f.result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=15).topics.get(topic)
        if t is not None and len(t.partitions) == len(assignment) and all(
                p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {topic} not ready")


def runbook_commands() -> list[str]:
    """The ``opskit ...`` lines of runbooks/multi-rack.md's fenced blocks, in order."""
    out, fenced = [], False
    for raw in RUNBOOK.read_text().splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith("opskit "):
            out.append(line)
    return out


def _opskit(command: str) -> CliResult:
    """Run one runbook command line; health may say WARNING (1), everything else exits 0."""
    argv = shlex.split(command)
    r = run_cli(*argv[1:])
    assert "opskit: error:" not in r.err, f"{command}: {r.err}"
    assert r.code == 0 or (argv[1] == "health" and r.code == 1), f"{command}: exit {r.code} {r.err}"
    return r


def test_rebalance_spreads_concentrated_replicas_over_racks(
        racked: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = racked.require()
    boot = st.bootstrap
    rack = {n.node_id: n.rack for n in st.nodes}
    assert rack == {0: "a", 1: "b", 2: "c", 3: "a"}
    admin = AdminClient({"bootstrap.servers": boot})
    suffix = uuid.uuid4().hex[:6]
    pairs, triples = f"rk_pairs_{suffix}", f"rk_triples_{suffix}"
    _create_on(admin, pairs, PAIRS, {})
    _create_on(admin, triples, TRIPLES, {"min.insync.replicas": "2"})
    for t in (pairs, triples):
        produce(boot, t, {p: 400 for p in range(4)}, value=b"r" * 1000, idempotent=True)
    commit(boot, f"rk-init-{suffix}", {(pairs, 0): 0})  # __consumer_offsets exists before the plan
    before = _replicas(admin)
    unspread = [tp for tp, reps in before.items()
                if len({rack[b] for b in reps}) < min(len(reps), 3)]
    assert len(unspread) == 8, unspread  # exactly the two topics' partitions

    # runbooks/multi-rack.md, step by step, with this cluster as the default bootstrap
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", boot)
    plan = tmp_path / "racks.json"
    commands = [c.replace("<plan-file>", str(plan)) for c in runbook_commands()]
    diagnosis = commands[:commands.index("opskit reassign plan --rebalance -o json") + 1]
    mitigation = commands[len(diagnosis):]
    results = {c: _opskit(c) for c in diagnosis}
    table = results["opskit reassign plan --rebalance"]
    assert "rack spread: 8 partitions over their rack limit before, 0 after" in table.out, table.out
    assert f"({1:.2f}x the lower bound" in table.out, table.out
    est = results["opskit reassign plan --rebalance -o json"].json()["opskit"]["estimates"]
    print("plan estimates:", est)
    assert est["unspread_before"] == 8 and est["unspread_after"] == 0, est
    assert est["replicas_moved"] == est["replicas_lower_bound"], est
    assert est["rack_replicas_lower_bound"] >= 8, est  # one replica of each partition at least
    # step 3 (in the runbook's prose): plan and keep the file
    written = _opskit(f"opskit reassign plan --rebalance --write-plan {plan}")
    assert plan.exists(), written.err
    # the plan just shown; but for each broker's capacity, which without --capacity is its
    # disk's usable space read live (DescribeLogDirs): other writers change it between plans
    kept = json.loads(plan.read_text())["opskit"]["estimates"]
    for e in (kept, est):
        assert set(e["bytes_per_broker"].pop("capacity")) == {"0", "1", "2", "3"}, e
    assert kept == est

    with Workload(boot, [pairs, triples], f"rk-group-{suffix}") as load:
        time.sleep(3)
        consumed_before = len(load.consumed)
        for c in mitigation:  # preview, execute, verify, health, cancel (a dry run)
            _opskit(c)
        time.sleep(3)
        consumed_during = len(load.consumed) - consumed_before
    again = _opskit("opskit reassign plan --rebalance")  # step 7
    assert ("nothing to move" in again.out
            or "rack spread: 0 partitions over their rack limit before" in again.out), again.out

    after = _replicas(admin)
    for tp, reps in after.items():
        assert len({rack[b] for b in reps}) == min(len(reps), 3), (tp, reps)
    # the replicas that arrived somewhere new: exactly the printed lower bound
    moved = sum(len(set(after[tp]) - set(before[tp])) for tp in before)
    assert moved == est["replicas_lower_bound"], (moved, est)
    assert all(len(after[tp]) == len(before[tp]) for tp in before)
    v = _opskit(f"opskit reassign verify {plan}")  # at target, nothing in flight, no throttle left
    assert v.code == 0, v.out + v.err
    assert _throttles(admin, sorted(rack), sorted({t for t, _ in after})) == {}
    # no acknowledged record lost, order per key kept, the group kept consuming
    assert not load.errors, load.errors[:3]
    assert load.acked and consumed_during > 0
    assert set(load.acked) <= set(load.consumed)
    firsts: dict[tuple[str, str], list[int]] = {}
    seen: set[tuple[str, str, int]] = set()
    for rec in load.consumed:
        if rec not in seen:
            seen.add(rec)
            firsts.setdefault((rec[0], rec[1]), []).append(rec[2])
    for key, seqs in firsts.items():
        assert seqs == sorted(seqs), key
