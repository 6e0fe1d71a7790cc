"""What the ``opskit playbook multi-rack`` tests on a real sandbox share
(test_playbook_multirack.py: killed inside ``set_rack:1`` and inside the spread;
test_playbook_multirack_every_step.py: killed at every failpoint in turn): the sandbox of
three brokers in no rack, the two topics, the dry run, launching and SIGKILLing the
playbook, ``playbook status``'s "interrupted" line, and the acceptance checked at the end.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
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
#: RF 3 (min.insync.replicas 2): one replica per broker already
TRIPLES = [[0, 1, 2], [1, 2, 0], [2, 0, 1]] * 2
#: the racks the playbook gives brokers 0, 1, 2
RACK = {0: "a", 1: "b", 2: "c"}
#: the playbook's steps on three brokers of a static quorum: broker-only nodes first, the
#: controller (node 0) last
STEPS = ["preflight", "set_rack:1", "set_rack:2", "set_rack:0", "spread", "elect_leaders",
         "verify_spread", "final_health"]

__all__ = [
    "RACK",
    "STEPS",
    "Journal",
    "Workload",
    "assert_acceptance",
    "assert_nothing_left",
    "assert_workload",
    "dry_run",
    "end",
    "interrupted",
    "journal_state",
    "launch",
    "replicas",
    "run_cli",
    "sandbox_without_racks",
    "setup_topics",
]

replicas = _replicas


@contextmanager
def sandbox_without_racks(monkeypatch: pytest.MonkeyPatch, version: str) -> Iterator[Sandbox]:
    """Three brokers of Kafka ``version``, none in a rack (one zone); removed afterwards."""
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    name = f"mrack{version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sb = Sandbox(name)
    try:
        r = run_cli("sandbox", "up", "--name", name, "--brokers", "3", "--kafka-version", version,
                    "--port", str(free_port_block(3)))
        assert r.code == 0, r.out + r.err
        yield sb
    finally:
        sb.down()


def setup_topics(sb: Sandbox, suffix: str, records: int, value_size: int) -> tuple[str, str]:
    """Topic ``mr_pairs_*`` (RF 2 on brokers 0 and 1, ``records`` of ``value_size`` bytes
    per partition) and ``mr_triples_*`` (RF 3); ``__consumer_offsets`` created before the
    plan. Returns their names."""
    boot = sb.require().bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    pairs, triples = f"mr_pairs_{suffix}", f"mr_triples_{suffix}"
    _create_on(admin, pairs, PAIRS, {})
    _create_on(admin, triples, TRIPLES, {"min.insync.replicas": "2"})
    produce(boot, pairs, dict.fromkeys(range(len(PAIRS)), records), value=b"m" * value_size,
            idempotent=True)
    commit(boot, f"mr-init-{suffix}", {(pairs, 0): 0})  # __consumer_offsets before the plan
    assert metadata_racks(sb) == {0: None, 1: None, 2: None}
    return pairs, triples


def dry_run(sb: Sandbox, base: list[str]) -> int:
    """The plan without ``--execute``: the steps, as many replicas to move as the lower
    bound it prints (returned), no journal written."""
    dry = run_cli(*base, "-o", "json")
    assert dry.code == 0, dry.err
    plan = dry.json()["plan"]
    assert plan["steps"] == STEPS, plan["steps"]
    bound = plan["replicas_lower_bound"]
    assert plan["replicas_to_move"] == bound and bound > 0, plan
    text = run_cli(*base)
    assert f"{bound} replica(s) to move, lower bound {bound}" in text.out, text.out
    assert not sb.playbook_dir.joinpath("multi-rack", "journal.json").exists()  # a dry run
    return int(bound)


def launch(args: list[str], kill_at: str | None = None) -> subprocess.Popen[bytes]:
    """``opskit ARGS`` in a process of its own (``kill_at``: the failpoint it dies at)."""
    env = dict(os.environ)
    env.pop(KILL_AT_ENV, None)
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    return subprocess.Popen([sys.executable, "-m", "opskit.cli.main", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)


def end(proc: subprocess.Popen[bytes], timeout: float = 900) -> str:
    """Wait for ``proc`` (SIGKILLed after ``timeout``); its stderr."""
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    return err.decode()


def journal_state(sb: Sandbox) -> dict[str, object]:
    """The multi-rack run's journal ({} when there is none yet)."""
    try:
        data = json.loads((sb.playbook_dir / "multi-rack" / "journal.json").read_text())
        return data["state"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return {}


def interrupted(sb: Sandbox, pid: int) -> list[str]:
    """``playbook status`` names the dead pid and the command that resumes the run
    (returned without its leading ``opskit``)."""
    st = run_cli("playbook", "status", "--sandbox", sb.name)
    assert st.code == 0, st.err
    m = re.search(r"multi-rack mr-\w+: interrupted \(pid (\d+) gone\): resume with (.+)", st.out)
    assert m is not None and int(m.group(1)) == pid, st.out
    assert "RUNNING" not in st.out, st.out  # the step in flight is marked INTERRUPTED
    j = run_cli("playbook", "status", "--sandbox", sb.name, "-o", "json").json()
    assert j["process"]["state"] == "interrupted" and j["process"]["pid_gone"], j["process"]
    assert j.get("in_flight_state") in (None, "interrupted"), j.get("in_flight_state")
    command = shlex.split(m.group(2).strip())
    assert command[:3] == ["opskit", "playbook", "resume"], command
    return command[1:]


def describe_cluster_racks(admin: AdminClient) -> dict[int, str | None]:
    """broker id -> rack from DescribeCluster."""
    nodes = admin.describe_cluster(request_timeout=30).result(60).nodes
    return {int(n.id): n.rack for n in nodes}


def assert_acceptance(sb: Sandbox, before: dict[tuple[str, int], list[int]], bound: int,
                      load: Workload) -> dict[str, object]:
    """The acceptance at the end of a run: ``playbook status`` says done and names no
    process, every step started and finished once in the journal, every broker reports
    its rack (Metadata, DescribeCluster), every partition spans min(RF, 3) racks, the
    replicas moved equal the dry run's lower bound, no throttle left, no acknowledged
    record lost and the order per key kept, a new plan has nothing left to do. Returns
    ``playbook status -o json``."""
    admin = AdminClient({"bootstrap.servers": sb.require().bootstrap})
    status = run_cli("playbook", "status", "--sandbox", sb.name, "-o", "json")
    j = status.json()
    assert j["phase"] == "done" and "process" not in j, j
    text = run_cli("playbook", "status", "--sandbox", sb.name).out
    assert f"multi-rack {j['run_id']}: done" in text, text
    assert "interrupted" not in text and "running" not in text, text
    # each step started (and finished) once: a resumed step is journaled "resumed"
    for what in ("started", "finished"):
        seen = [e["step"] for e in j["journal"] if e["what"] == what]
        assert sorted(seen) == sorted(STEPS), (what, seen)
    assert metadata_racks(sb) == RACK
    assert describe_cluster_racks(admin) == RACK
    after = _replicas(admin)
    for tp, reps in after.items():
        assert len({RACK[b] for b in reps}) == min(len(reps), 3), (tp, reps)
        assert len(reps) == len(before[tp])
    moved = sum(len(set(after[tp]) - set(before[tp])) for tp in before)
    assert moved == bound, (moved, bound)
    spread = next((sb.playbook_dir / "multi-rack").glob("spread-*.json"))
    est = json.loads(spread.read_text())["opskit"]["estimates"]
    assert est["replicas_moved"] == est["replicas_lower_bound"] == bound, est
    assert _throttles(admin, [0, 1, 2], sorted({t for t, _ in after})) == {}
    assert_workload(load)
    return j  # type: ignore[no-any-return]


def assert_workload(load: Workload) -> None:
    """No acknowledged record lost, the order per key kept (the first time each record
    was consumed: a redelivery after a rebalance may repeat older ones)."""
    assert not load.errors, load.errors[:3]
    assert load.acked and set(load.acked) <= set(load.consumed)
    firsts: dict[tuple[str, str], list[int]] = {}
    seen_recs: set[tuple[str, str, int]] = set()
    for rec in load.consumed:
        if rec not in seen_recs:
            seen_recs.add(rec)
            firsts.setdefault((rec[0], rec[1]), []).append(rec[2])
    for key, seqs in firsts.items():
        assert seqs == sorted(seqs), key


def assert_nothing_left(base: list[str]) -> None:
    """Planned again: nothing left to restart or move."""
    again = run_cli(*base, "-o", "json")
    assert again.code == 0, again.err
    assert again.json()["plan"]["replicas_to_move"] == 0
    assert [s for s in again.json()["plan"]["steps"] if s.startswith("set_rack")] == []
