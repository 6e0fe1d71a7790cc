"""``opskit playbook multi-rack`` on a real Kafka 3.7 sandbox (4.x with
``OPSKIT_TEST_MULTIRACK_KAFKA=4.x``): three brokers in no rack
(one zone) put in racks a, b, c and every partition spread over them, under an idempotent
acks=all producer and a consumer group, SIGKILLed inside ``set_rack:1`` (node 1 stopped,
its rack not yet written) and inside ``spread`` (moves submitted, throttles set), each
time resumed with the command ``playbook status`` prints.

At the end, from Metadata and DescribeCluster: every broker reports its rack, every
partition spans min(RF, racks) racks (3 for the RF 3 topics and ``__consumer_offsets``),
the replicas that moved equal the lower bound the dry run printed, no throttle is left,
no acknowledged record is lost and the order per key holds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import commit, produce, run_cli
from test_racks_reassign import _create_on, _replicas, _throttles
from test_racks_sandbox import metadata_racks
from test_reassign_exec import Workload  # the idempotent acks=all producer + group

from opskit.adapters.reassign.journal import Journal
from opskit.adapters.scaleout.runner import KILL_AT_ENV
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block

ROOT = Path(__file__).resolve().parents[2]
#: RF 2, every replica on brokers 0 and 1: broker 2 holds none until the spread
PAIRS = [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1], [1, 0]]


#: the Kafka version the test runs on: CI runs 3.7 (HIP-30's); ``4.x`` passed by hand
#: (2026-11-27, 324 s at load 13-25), left out of CI to keep it lean
VERSION = os.environ.get("OPSKIT_TEST_MULTIRACK_KAFKA", "3.7")


@pytest.fixture
def no_racks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    name = f"mrack{VERSION.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sb = Sandbox(name)
    try:
        r = run_cli("sandbox", "up", "--name", name, "--brokers", "3", "--kafka-version", VERSION,
                    "--port", str(free_port_block(3)))
        assert r.code == 0, r.out + r.err
        yield sb
    finally:
        sb.down()


def _launch(args: list[str], kill_at: str | None = None) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    return subprocess.Popen([sys.executable, "-m", "opskit.cli.main", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)


def _end(proc: subprocess.Popen[bytes], timeout: float = 900) -> str:
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return err.decode()


def _journal(sb: Sandbox) -> dict[str, object]:
    try:
        data = json.loads((sb.playbook_dir / "multi-rack" / "journal.json").read_text())
        return data["state"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return {}


def _interrupted(sb: Sandbox, pid: int) -> list[str]:
    """``playbook status`` names the dead pid and the command that resumes the run."""
    st = run_cli("playbook", "status", "--sandbox", sb.name)
    assert st.code == 0, st.err
    m = re.search(r"multi-rack mr-\w+: interrupted \(pid (\d+) gone\): resume with (.+)", st.out)
    assert m is not None and int(m.group(1)) == pid, st.out
    command = shlex.split(m.group(2).strip())
    assert command[:3] == ["opskit", "playbook", "resume"], command
    return command[1:]


def _kill_inside_spread(sb: Sandbox, args: list[str], timeout: float = 900) -> int:
    """Run the playbook and SIGKILL it from outside once the spread's moves are submitted
    and Kafka is copying them (a partition has more replicas than its RF)."""
    journals = Journal(sb.require().cluster_id)

    def events() -> list[str]:
        plans = [d.name for d in journals.root.iterdir()] if journals.root.exists() else []
        return [e["kind"] for p in plans for e in journals.events(p)]

    admin = AdminClient({"bootstrap.servers": sb.require().bootstrap})
    proc = _launch(args)
    deadline = time.monotonic() + timeout
    try:
        while True:
            assert proc.poll() is None, f"ended before the spread copied: {_end(proc)[-1500:]}"
            assert time.monotonic() < deadline, "the spread was never submitted"
            if _journal(sb).get("in_flight") == "spread" and "submit" in events():
                reps = _replicas(admin)
                if any(len(r) > 2 if t.startswith("mr_pairs") else len(r) > 3
                       for (t, _), r in reps.items()):
                    break
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    kinds = events()
    assert "remove_throttles" not in kinds and "finished" not in kinds, kinds  # mid-move
    return proc.pid


@pytest.mark.timeout(1800)
def test_multi_rack_killed_inside_set_rack_and_spread_then_resumed(no_racks: Sandbox) -> None:
    sb = no_racks
    boot = sb.require().bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    suffix = uuid.uuid4().hex[:6]
    pairs, triples = f"mr_pairs_{suffix}", f"mr_triples_{suffix}"
    _create_on(admin, pairs, PAIRS, {})
    _create_on(admin, triples, [[0, 1, 2], [1, 2, 0], [2, 0, 1]] * 2, {"min.insync.replicas": "2"})
    # 1.5 MB per partition: at 300 KB/s the spread's copy lasts long enough to be killed in
    produce(boot, pairs, {p: 1500 for p in range(len(PAIRS))}, value=b"m" * 1000,
            idempotent=True)
    commit(boot, f"mr-init-{suffix}", {(pairs, 0): 0})  # __consumer_offsets before the plan
    assert metadata_racks(sb) == {0: None, 1: None, 2: None}

    base = ["playbook", "multi-rack", "--sandbox", sb.name, "--racks", "0=a,1=b,2=c",
            "--throttle", "300KB"]
    dry = run_cli(*base, "-o", "json")
    assert dry.code == 0, dry.err
    plan = dry.json()["plan"]
    steps = plan["steps"]
    # broker-only nodes first, the static quorum's controller (node 0) last
    assert steps == ["preflight", "set_rack:1", "set_rack:2", "set_rack:0", "spread",
                     "elect_leaders", "verify_spread", "final_health"], steps
    bound = plan["replicas_lower_bound"]
    assert plan["replicas_to_move"] == bound and bound > 0, plan
    text = run_cli(*base)
    assert f"{bound} replica(s) to move, lower bound {bound}" in text.out, text.out
    assert not sb.playbook_dir.joinpath("multi-rack", "journal.json").exists()  # a dry run
    before = _replicas(admin)

    with Workload(boot, [pairs, triples], f"mr-group-{suffix}") as load:
        time.sleep(3)
        # 1: inside set_rack:1, node 1 stopped and its file not yet rewritten
        proc = _launch([*base, "--execute"], kill_at="stopped:set_rack:1")
        err = _end(proc)
        assert proc.returncode == -signal.SIGKILL, err[-1500:]
        assert _journal(sb)["in_flight"] == "set_rack:1"
        assert not sb.status()["nodes"][1]["running"]
        resume = _interrupted(sb, proc.pid)
        assert resume == ["playbook", "resume", "--sandbox", sb.name, "--throttle", "300KB"]
        # a scale-out is refused while this run is unfinished (one run lock, one run)
        so = run_cli("playbook", "scale-out", "--sandbox", sb.name, "--brokers", "4")
        assert so.code == 5 and "multi-rack run" in so.err, so.err
        # 2: the printed command resumes it; killed again inside the spread's copy
        pid = _kill_inside_spread(sb, resume)
        assert _journal(sb)["in_flight"] == "spread"
        done = set(_journal(sb)["done"])  # type: ignore[arg-type]
        assert {"set_rack:1", "set_rack:2", "set_rack:0"} <= done
        assert _interrupted(sb, pid) == resume
        # 3: resumed to the end
        proc = _launch(resume)
        err = _end(proc)
        assert proc.returncode == 0, err[-2000:]
        consumed_mid = len(load.consumed)
        time.sleep(3)
        assert len(load.consumed) > consumed_mid  # the group still consumes

    status = run_cli("playbook", "status", "--sandbox", sb.name, "-o", "json")
    j = status.json()
    assert j["phase"] == "done" and "process" not in j, j
    # each step started once by the runs that were not killed in it
    started = [e["step"] for e in j["journal"] if e["what"] == "started"]
    assert sorted(started) == sorted(steps), started
    assert metadata_racks(sb) == {0: "a", 1: "b", 2: "c"}
    rack = {0: "a", 1: "b", 2: "c"}
    after = _replicas(admin)
    for tp, reps in after.items():
        assert len({rack[b] for b in reps}) == min(len(reps), 3), (tp, reps)
        assert len(reps) == len(before[tp])
    moved = sum(len(set(after[tp]) - set(before[tp])) for tp in before)
    assert moved == bound, (moved, bound)
    spread = next((sb.playbook_dir / "multi-rack").glob("spread-*.json"))
    est = json.loads(spread.read_text())["opskit"]["estimates"]
    assert est["replicas_moved"] == est["replicas_lower_bound"] == bound, est
    assert _throttles(admin, [0, 1, 2], sorted({t for t, _ in after})) == {}
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
    again = run_cli(*base, "-o", "json")  # planned again: nothing left to restart or move
    assert again.code == 0, again.err
    assert again.json()["plan"]["replicas_to_move"] == 0
    assert [s for s in again.json()["plan"]["steps"] if s.startswith("set_rack")] == []
