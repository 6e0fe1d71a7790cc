"""Drain by cordon (KIP-1066) on real brokers: Kafka 4.3.1 cordons, Kafka 3.7 warns.

4.3.1 (three brokers, a cluster of this module's own): ``reassign plan --remove-brokers 2``
says the execution will cordon broker 2; ``reassign execute --execute`` cordons it before
the first move (``cordoned.log.dirs=*``, per broker, dynamic). While the drain copies, a
topic created without an assignment gets no replica on broker 2 (read from the metadata;
with RF 2 on three brokers, 6 partitions all avoiding broker 2 by chance is 1 in 729).
The first drain is killed with SIGKILL mid-copy (the cordon stays), then ``reassign cancel
--execute`` puts the value found before back, and the resumed execution submits nothing
more and does not cordon again. A second drain runs to the end: no replica left on
broker 2, the cordon kept, ``verify`` exit 0, a ``--rebalance`` plan leaves the cordoned,
empty broker out; ``reassign uncordon --execute`` lifts it.

3.7 (the shared three-broker cluster): the same kind of drain plan warns in one line that
broker 2 is not cordoned and what that leaves unprotected, and drains.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic, ResourceType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import produce, run_cli
from test_reassign_exec import _Cluster

from opskit.adapters.reassign.journal import Journal
from opskit.core.reassign.plan_input import parse_plan, plan_id

KEY = "cordoned.log.dirs"


@pytest.fixture(scope="module")
def c43() -> Iterator[_Cluster]:
    c = _Cluster("4.x")
    try:
        yield c
    finally:
        c.sandbox.down()


def _opskit(*args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", *args]


def _create(admin: AdminClient, topic: str, partitions: int, rf: int = 2,
            assignment: list[list[int]] | None = None) -> None:
    new = (NewTopic(topic, len(assignment), replica_assignment=assignment) if assignment
           else NewTopic(topic, partitions, rf))
    for f in admin.create_topics([new]).values():
        f.result(30)


def _cordon(c: _Cluster, broker: int) -> tuple[str | None, int]:
    return c.configs(ResourceType.BROKER, str(broker)).get(KEY, (None, -1))


def _wait(what: str, cond, deadline_s: float = 120.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _all_replicas(c: _Cluster) -> dict[tuple[str, int], list[int]]:
    md = c.admin.list_topics(timeout=15)
    return {(t, p.id): list(p.replicas) for t, tm in md.topics.items()
            for p in tm.partitions.values()}


def _mid_drain_topic(c: _Cluster, name: str) -> list[list[int]]:
    _create(c.admin, name, 6, 2)
    reps = c.replicas(name)
    assert len(reps) == 6, reps
    return list(reps.values())


def test_drain_cordons_first_cancel_uncordons_finished_drain_keeps_it(
        c43: _Cluster, tmp_path: Path) -> None:
    c, boot = c43, c43.bootstrap
    assert c.version.startswith("4.3")
    s = uuid.uuid4().hex[:6]
    data = f"cd_data_{s}"
    _create(c.admin, data, 4, assignment=[[2, 0], [1, 2], [2, 1], [0, 2]])
    produce(boot, data, {p: 1500 for p in range(4)}, value=b"d" * 1000)  # 6 MB, 1.5 on 2
    assert _cordon(c, 2)[0] in ("", None)

    plan = tmp_path / "drain.json"
    r = run_cli("reassign", "plan", "--remove-brokers", "2", "--write-plan", str(plan), "-b", boot)
    assert r.code == 0, r.err
    assert "cordons broker(s) 2 before the first move" in r.err, r.err
    dry = run_cli("reassign", "execute", str(plan), "--throttle", "100KB", "-o", "json",
                  "-b", boot)
    assert dry.code == 0, dry.err
    assert dry.json()["cordon"] == {"brokers": [2], "cordon": True, "note": None}
    assert _cordon(c, 2)[0] in ("", None)  # the dry run changed nothing

    # 1. a slow drain: cordoned before anything moves; a topic created now avoids broker 2
    args = _opskit("reassign", "execute", str(plan), "--throttle", "100KB", "--rate-interval",
                   "0", "--execute", "-b", boot)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait("the cordon", lambda: _cordon(c, 2) == ("*", 2))
        _wait("a move in flight", lambda: bool(c.in_flight()))
        mid = _mid_drain_topic(c, f"cd_mid_{s}")
        assert all(2 not in reps for reps in mid), mid
        assert proc.poll() is None and c.in_flight()  # it really was mid-drain
    finally:
        proc.send_signal(signal.SIGKILL)  # and opskit dies mid-copy
        proc.communicate(timeout=30)
    assert _cordon(c, 2) == ("*", 2)  # the cordon outlives the process

    # 2. cancel: the moves revert, the value found before (none) comes back
    r = run_cli("reassign", "cancel", "--execute", "-b", boot)
    assert r.code == 0, r.out + r.err
    assert "broker(s) 2 uncordoned" in r.out, r.out
    assert _cordon(c, 2)[1] != 2 and not _cordon(c, 2)[0]
    _wait("the cancelled moves to settle", lambda: not c.in_flight())
    # the resumed execution submits nothing more and does not cordon again
    r2 = subprocess.run(_opskit("reassign", "execute", str(plan), "--resume", "--execute",
                                "-b", boot), check=False, capture_output=True, text=True,
                        timeout=300)
    assert r2.returncode == 6 and "did not complete" in r2.stderr, r2.stdout + r2.stderr
    assert "uncordoned" in r2.stderr + r2.stdout, r2.stderr
    assert not _cordon(c, 2)[0] and c.throttles() == {} and c.in_flight() == {}
    pid = plan_id(parse_plan(plan.read_text()))
    events = [e["kind"] for e in Journal(c.cluster_id()).events(pid)]
    assert events.count("cordon") == 1, events  # cordoned once, before the first submit
    assert events.index("cordon") < events.index("submit"), events

    # 3. a drain to the end: the cordon is kept; a topic created meanwhile avoids broker 2
    plan2 = tmp_path / "drain2.json"
    r = run_cli("reassign", "plan", "--remove-brokers", "2", "--write-plan", str(plan2), "-b", boot)
    assert r.code == 0, r.err
    proc = subprocess.Popen(_opskit("reassign", "execute", str(plan2), "--throttle", "400KB",
                                    "--rate-interval", "0", "--execute", "-b", boot),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait("the cordon", lambda: _cordon(c, 2) == ("*", 2))
    _wait("a move in flight", lambda: bool(c.in_flight()) or proc.poll() is not None)
    running = proc.poll() is None
    mid2 = _mid_drain_topic(c, f"cd_mid2_{s}")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    assert running, "the drain ended before a topic could be created during it"
    assert all(2 not in reps for reps in mid2), mid2
    assert "broker(s) 2 stay cordoned" in out, out
    left = {tp: reps for tp, reps in _all_replicas(c).items() if 2 in reps}
    assert left == {}, left
    assert _cordon(c, 2) == ("*", 2)
    v = run_cli("reassign", "verify", str(plan2), "-b", boot)
    assert v.code == 0, v.out + v.err
    st = run_cli("reassign", "status", "-o", "json", "-b", boot)
    assert st.json()["cordoned"] == {"2": "*"}, st.out

    # a later plan does not fill the cordoned, empty broker again (Kafka would accept it)
    rb = run_cli("reassign", "plan", "--rebalance", "-o", "json", "-b", boot)
    assert rb.code == 0, rb.err
    assert "broker(s) 2 are cordoned and hold no replica: left out of the plan" in rb.err, rb.err
    assert all(2 not in p["replicas"] for p in rb.json()["partitions"]), rb.out

    # 4. lift it (the broker stays, say): back to no dynamic value
    u = run_cli("reassign", "uncordon", "--brokers", "2", "--execute", "-b", boot)
    assert u.code == 0, u.out + u.err
    assert not _cordon(c, 2)[0]


def test_drain_on_37_warns_in_one_line_and_drains(kafka3, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Kafka 3.7 cannot cordon: one warning line, then the drain as before. The plan covers
    this test's topic only (the shared cluster's RF 3 topics cannot leave a broker)."""
    from opskit.core.reassign.model import (
        Broker,
        Goal,
        GoalKind,
        PartitionState,
        Policy,
        Topology,
    )
    from opskit.core.reassign.plan import plan_reassignment

    boot = kafka3.bootstrap
    admin = AdminClient({"bootstrap.servers": boot})
    topic = f"cd37_{uuid.uuid4().hex[:6]}"
    _create(admin, topic, 2, assignment=[[2, 0], [1, 2]])
    produce(boot, topic, {0: 200, 1: 200}, value=b"d" * 1000)
    md = admin.list_topics(topic, timeout=15).topics[topic]
    topo = Topology(tuple(Broker(b) for b in (0, 1, 2)),
                    tuple(PartitionState(topic, p.id, tuple(p.replicas), tuple(p.isrs), p.leader)
                          for p in md.partitions.values()))
    plan = plan_reassignment(topo, Goal(GoalKind.REMOVE_BROKERS, brokers=(2,)), Policy(),
                             datetime.now(UTC))
    path = tmp_path / "drain37.json"
    path.write_text(plan.to_json())
    r = run_cli("reassign", "execute", str(path), "--throttle", "5MB", "--execute", "-b", boot)
    assert r.code == 0, r.out + r.err
    warnings = [ln for ln in r.err.splitlines() if ln.startswith("opskit: warning:")]
    assert len(warnings) == 1, r.err
    print(warnings[0])
    assert "broker(s) 2 not cordoned" in warnings[0] and "4.3" in warnings[0], warnings
    assert "created meanwhile can still get replicas there" in warnings[0], warnings
    after = admin.list_topics(topic, timeout=15).topics[topic].partitions
    assert all(2 not in p.replicas and len(p.replicas) == 2 for p in after.values()), after
