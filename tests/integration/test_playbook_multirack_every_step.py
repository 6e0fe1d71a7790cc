"""``opskit playbook multi-rack`` on a real Kafka 4.3 sandbox (the newest 4.x), SIGKILLed
at every failpoint of every step in turn and resumed each time with the command
``playbook status`` prints, under an idempotent acks=all producer and a consumer group.

The failpoints (``OPSKIT_TEST_KILL_AT``, adapters/scaleout/runner.py) are the step
boundaries the runner passes, ``started:<step>`` (the journal says the step is in flight,
nothing of it done) and ``finished:<step>`` (the journal says it is done, the next one not
started), and the ones inside the steps of adapters/scaleout/multirack.py,
``stopped:set_rack:N`` (node N stopped, its rack not yet written), ``restarted:set_rack:N``
(node N started in its rack, nothing waited for) and ``planned:spread`` (the spread's plan
file written, nothing submitted): 8 steps, 23 kills, 24 runs. The first
test keeps that list equal to the failpoints the code passes.

After each kill: the process died of SIGKILL, the journal is where the failpoint says,
``playbook status`` says "interrupted (pid N gone)" (not "running") and prints the
resume command, no replication throttle is set (from the spread on: only it sets them),
each node was restarted at most once; once a ``set_rack`` step is done, every partition is in ISR.
At the end, test_playbook_multirack.py's acceptance: every broker reports its rack
(Metadata, DescribeCluster), every partition spans min(RF, 3) racks, the replicas moved
equal the dry run's lower bound, no throttle left, no acknowledged record lost, order per
key kept; each step started and finished once in the journal, each spread partition
submitted once.

The kill inside the spread's copy (moves submitted, throttles set) is
test_playbook_multirack.py's (Kafka 3.7).
"""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from multirack_helpers import (
    STEPS,
    Journal,
    Workload,
    assert_acceptance,
    assert_nothing_left,
    dry_run,
    end,
    interrupted,
    journal_state,
    launch,
    replicas,
    sandbox_without_racks,
    setup_topics,
)
from test_racks_reassign import _throttles

from opskit.sandbox.cluster import Sandbox

ROOT = Path(__file__).resolve().parents[2]
VERSION = "4.3"
THROTTLE = "5MB"


def failpoints(steps: list[str]) -> list[str]:
    """Every failpoint a multi-rack run on a sandbox passes, in the order it passes them."""
    out: list[str] = []
    for key in steps:
        out.append(f"started:{key}")
        if key.startswith("set_rack:"):
            out += [f"stopped:{key}", f"restarted:{key}"]
        if key == "spread":
            out.append("planned:spread")
        out.append(f"finished:{key}")
    return out


def test_the_failpoint_list_is_every_failpoint_the_code_passes() -> None:
    """A failpoint added to the runner or the multi-rack steps is killed at here too."""
    src = ROOT / "opskit" / "adapters" / "scaleout"
    call = re.compile(r'failpoint\(\s*"(\w+)",\s*([^)]*)\)')
    runner = {w for w, _ in call.findall((src / "runner.py").read_text())}
    assert runner == {"started", "finished"}, runner
    steps = {(w, k.strip()) for w, k in call.findall((src / "multirack.py").read_text())}
    assert steps == {("stopped", "step.key"), ("restarted", "step.key"),
                     ("planned", '"spread"')}, steps
    got = failpoints(STEPS)
    assert len(got) == 2 * len(STEPS) + 2 * 3 + 1 and len(set(got)) == len(got), got
    # Kubernetes (multirack_k8s.py, its pod restart in k8s_restart.py, the spread
    # inherited): the same ones inside set_rack, plus ``patched`` (the template replaced,
    # the pod not deleted yet). test_playbook_multirack_k8s.py kills at stopped:set_rack:2
    # and planned:spread, test_playbook_multirack_k8s_4x.py at restarted:set_rack:1
    k8s = {(w, k.strip()) for w, k in call.findall((src / "multirack_k8s.py").read_text())}
    assert k8s == {("restarted", "step.key")}, k8s
    pod = {(w, k.strip()) for w, k in call.findall((src / "k8s_restart.py").read_text())}
    assert pod == {("patched", "step_key"), ("stopped", "step_key")}, pod


@pytest.fixture
def no_racks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    with sandbox_without_racks(monkeypatch, VERSION) as sb:
        yield sb


def _where(sb: Sandbox, point: str, journals: Journal) -> None:
    """The journal (and the sandbox) are where failpoint ``point`` stopped the run."""
    what, key = point.split(":", 1)
    st = journal_state(sb)
    done = list(st["done"])  # type: ignore[call-overload]
    if what == "finished":
        assert st["in_flight"] is None and done[-1] == key, (point, st["in_flight"], done)
    else:
        assert st["in_flight"] == key and key not in done, (point, st["in_flight"], done)
    if what == "stopped":
        node = int(key.rsplit(":", 1)[1])
        assert not sb.status()["nodes"][node]["running"], point
    if what == "finished" and key.startswith("set_rack:"):
        # the step's end: its node back, every partition's whole replica set in ISR
        admin = AdminClient({"bootstrap.servers": sb.require().bootstrap})
        md = admin.list_topics(timeout=30)
        short = {f"{t}-{p.id}": (list(p.replicas), list(p.isrs))
                 for t, tm in md.topics.items() for p in tm.partitions.values()
                 if sorted(p.isrs) != sorted(p.replicas)}
        assert short == {}, (point, short)
    if what == "planned":
        assert list((sb.playbook_dir / "multi-rack").glob("spread-*.json")), point
    if key == "spread" and what in ("started", "planned"):
        assert [e for d in _plans(journals) for e in journals.events(d)
                if e.get("kind") == "submit"] == [], point  # nothing submitted yet


def _plans(journals: Journal) -> list[str]:
    return [d.name for d in journals.root.iterdir()] if journals.root.exists() else []


@pytest.mark.kafka4
@pytest.mark.timeout(1800)
def test_multi_rack_on_4_3_killed_at_every_failpoint_then_resumed(no_racks: Sandbox) -> None:
    sb = no_racks
    assert sb.require().version.startswith("4.3.")
    boot = sb.require().bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    journals = Journal(sb.require().cluster_id)
    suffix = uuid.uuid4().hex[:6]
    # 100 KB per partition: the spread copies in about a second under the throttle
    pairs, triples = setup_topics(sb, suffix, records=100, value_size=1000)
    base = ["playbook", "multi-rack", "--sandbox", sb.name, "--racks", "0=a,1=b,2=c",
            "--throttle", THROTTLE]
    bound = dry_run(sb, base)
    before = replicas(admin)
    topics = sorted({t for t, _ in before})
    pids = {n["node_id"]: {n["pid"]} for n in sb.status()["nodes"]}
    points = failpoints(STEPS)
    resume_cmd = ["playbook", "resume", "--sandbox", sb.name, "--throttle", THROTTLE]

    with Workload(boot, [pairs, triples], f"mr-group-{suffix}") as load:
        time.sleep(3)
        args = [*base, "--execute"]
        for point in points:
            proc = launch(args, kill_at=point)
            err = end(proc)
            assert proc.returncode == -signal.SIGKILL, (point, proc.returncode, err[-2000:])
            _where(sb, point, journals)
            assert interrupted(sb, proc.pid) == resume_cmd, point
            for n in sb.status()["nodes"]:
                if n["running"]:
                    pids[n["node_id"]].add(n["pid"])
            if points.index(point) >= points.index("started:spread"):  # (only it throttles)
                fresh = AdminClient({"bootstrap.servers": boot})
                assert _throttles(fresh, [0, 1, 2], topics) == {}, point
            args = resume_cmd
        proc = launch(args)  # the last run: nothing kills it
        err = end(proc)
        assert proc.returncode == 0, err[-2000:]
        consumed_mid = len(load.consumed)
        time.sleep(3)
        assert len(load.consumed) > consumed_mid  # the group still consumes

    # every node restarted once (its rack), never twice by a resumed step
    for n in sb.status()["nodes"]:
        pids[n["node_id"]].add(n["pid"])
    assert {n: len(p) for n, p in pids.items()} == {0: 2, 1: 2, 2: 2}, pids
    j = assert_acceptance(sb, before, bound, load)
    journal: list[dict[str, str]] = j["journal"]  # type: ignore[assignment]
    resumed = [e["step"] for e in journal if e["what"] == "resumed"]
    assert sorted(resumed) == sorted(
        p.split(":", 1)[1] for p in points if not p.startswith("finished:")), resumed
    # each set_rack was finished by the run resumed after restarted:set_rack:N: the node
    # was not restarted again, and the step still waited for the ISR (it did not, once)
    for e in journal:
        if e["what"] == "finished" and e["step"].startswith("set_rack:"):
            assert "already: not restarted; every partition in ISR" in e["detail"], e
    # the spread's reassignment: one plan, each partition submitted once
    spread_plans = [p for p in _plans(journals) if journals.submissions(p)]
    assert len(spread_plans) == 1, spread_plans
    subs = journals.submissions(spread_plans[0])
    assert subs and set(subs.values()) == {1}, subs
    assert_nothing_left(base)
