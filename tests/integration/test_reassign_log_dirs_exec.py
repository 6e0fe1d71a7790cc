"""Draining a log directory (JBOD disk) on real brokers: ``reassign plan --remove-log-dirs``
and its execution (AlterReplicaLogDirs), ``reassign verify`` of the plan
(``sandbox up --log-dirs N``).

3.7.2 (3 brokers, 2 log dirs each, a topic at RF 3): under an idempotent acks=all producer,
the drain of broker 1's ``data`` is SIGKILLed while a copy is in flight (``reassign verify``
then exits 1 or 2) and resumed by the same command: every replica is off broker 1's
``data`` at the end (DescribeLogDirs), no future replica is left, the other brokers'
directories hold what they held before, the intra-broker throttle is gone, no acknowledged
record is lost (all read back by assigned partitions). No consumer group: on 3.7.2 a
just-created, empty ``__consumer_offsets`` partition moved between directories was never
swapped in (a broker NullPointerException; README). Kafka's own
``kafka-reassign-partitions --verify`` reads the plan file and reports every replica move
completed, and so does ``reassign verify`` (exit 0); with broker 1 stopped it exits 3 (no
replica "done"). ``plan`` and ``execute`` say in one line that nothing is cordoned.

4.3.1 (3 log dirs, ``data-2`` already cordoned by the operator): the drain of ``data``
cordons it (``cordoned.log.dirs`` = the value found + ``data``, both reported cordoned by
DescribeLogDirs while the copy runs); a topic created meanwhile gets no replica in
``data``; ``reassign cancel --execute`` drops the copies in flight (the replicas stay in
``data``, ``reassign verify`` exits 2) and puts the value found back; the same plan run to
the end leaves ``data`` empty and keeps the cordon (``reassign verify``: 0, ``data``
reported cordoned).

4.3.1, 3 brokers (2 log dirs each, a topic at RF 3): one plan drains ``data`` of brokers 1
and 2 at once: both are cordoned while the copies run, ``reassign cancel --execute`` puts
both values back, the same plan run to the end empties both and keeps both cordons, and
``reassign uncordon --brokers 1,2`` removes them; broker 0 is never touched.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import produce, run_cli

from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block

THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
CORDON = "cordoned.log.dirs"


class _Producer:
    """An idempotent acks=all producer of numbered records (no consumer group: see the
    3.7 test), and a read of everything at the end with assigned partitions."""

    def __init__(self, boot: str, topic: str) -> None:
        self.boot, self.topic = boot, topic
        self.acked: list[tuple[str, int]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)

    def _run(self) -> None:
        p = Producer({"bootstrap.servers": self.boot, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5})

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append((msg.key().decode(), int(msg.value())))
            else:
                self.errors.append(str(err))

        n = 0
        while not self.stop.is_set():
            p.produce(self.topic, key=f"k{n % 20}".encode(), value=str(n).encode(),
                      on_delivery=done)
            p.poll(0)
            n += 1
            time.sleep(0.005)
        p.flush(60)

    def read_all(self, partitions: int) -> list[tuple[str, int]]:
        c = Consumer({"bootstrap.servers": self.boot, "group.id": "unused",
                      "enable.auto.commit": False})
        ends = {}
        for p in range(partitions):
            ends[p] = c.get_watermark_offsets(TopicPartition(self.topic, p), timeout=30)[1]
        c.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        got: list[tuple[str, int]] = []
        pos = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 120
        while any(pos[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            pos[msg.partition()] = msg.offset() + 1
            if msg.value().isdigit():  # (the preloaded records are not the producer's)
                got.append((msg.key().decode(), int(msg.value())))
        c.close()
        return got


def _sandbox(version: str, log_dirs: int, monkeypatch: pytest.MonkeyPatch,
             brokers: int = 1) -> Iterator[Sandbox]:
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    name = f"ldrx{version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    sb = Sandbox(name)
    try:
        r = run_cli("sandbox", "up", "--name", name, "--brokers", str(brokers), "--log-dirs",
                    str(log_dirs), "--kafka-version", version, "--port",
                    str(free_port_block(brokers)), "--no-context")
        assert r.code == 0, r.out + r.err
        assert f"{log_dirs} log dirs per node" in r.out, r.out
        yield sb
    finally:
        sb.down()


@pytest.fixture
def jbod37(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from _sandbox("3.7", 2, monkeypatch, brokers=3)


@pytest.fixture
def jbod43(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from _sandbox("4.x", 3, monkeypatch)


@pytest.fixture
def jbod43x3(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sandbox]:
    yield from _sandbox("4.x", 2, monkeypatch, brokers=3)


def _opskit(*args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", *args]


def _dirs(boot: str, broker: int = 0) -> dict[str, dict[str, Any]]:
    """log dir -> {"cordoned": bool|None, "replicas": {(topic, p): is_future}} of a broker."""
    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

    k = KafkaAdminClient(bootstrap_servers=boot)
    try:
        res = k.describe_log_dirs(None, brokers=[broker])
    finally:
        k.close()
    out: dict[str, dict[str, Any]] = {}
    for d in res[0]["log_dirs"]:
        reps = {(t["name"], p["partition_index"], p["is_future_key"])
                for t in d["topics"] for p in t["partitions"]}
        out[d["log_dir"]] = {"cordoned": d.get("is_cordoned"), "replicas": reps}
    return out


def _config(boot: str, key: str, broker: int = 0) -> tuple[str | None, int]:
    admin = AdminClient({"bootstrap.servers": boot})
    for f in admin.describe_configs([ConfigResource(ResourceType.BROKER, str(broker))],
                                    request_timeout=60).values():
        e = f.result(60).get(key)
        return (None, -1) if e is None else (e.value, int(e.source))
    return None, -1


def _create(boot: str, topic: str, partitions: int, rf: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": boot})
    for f in admin.create_topics([NewTopic(topic, partitions, rf)]).values():
        f.result(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sum(1 for b in range(rf) for d in _dirs(boot, b).values() for r in d["replicas"]
               if r[0] == topic) == partitions * rf:
            return
        time.sleep(0.3)
    raise AssertionError(f"{topic}: not all partitions on disk")


def _wait(what: str, cond: Any, deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _kafka_tool(sb: Sandbox, boot: str, *args: str) -> str:
    from opskit.sandbox.dist import ensure_kafka_dist

    dist = ensure_kafka_dist(sb.require().version)
    new = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    cls = new if dist._has_class("kafka-tools-", new) else "kafka.admin.ReassignPartitionsCommand"
    r = dist.run_tool(cls, "--bootstrap-server", boot, *args)
    assert r.returncode == 0, r.stderr[-800:]
    return str(r.stdout)


def _finish(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run to the end; on a timeout, fail showing what it printed."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{args} did not end within {timeout:g}s: {out}{err}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def _futures(boot: str, broker: int = 0) -> list[tuple[str, int, bool]]:
    return [r for d in _dirs(boot, broker).values() for r in d["replicas"] if r[2]]


def test_drain_a_log_dir_of_one_broker_on_37_rf3_under_load_killed_and_resumed(
        jbod37: Sandbox, tmp_path: Path) -> None:
    st = jbod37.require()
    boot, node = st.bootstrap, st.nodes[1]  # broker 1: not the controller
    data, other = str(node.dir / "data"), str(node.dir / "data-1")
    s = uuid.uuid4().hex[:6]
    topic = f"ld37_{s}"
    _create(boot, topic, 6, rf=3)
    produce(boot, topic, {p: 800 for p in range(6)}, value=b"d" * 1000)  # 4.8 MB a replica
    restarted: list[bool] = []
    with _Producer(boot, topic) as load:
        # no consumer group: on 3.7.2 moving the just-created, empty __consumer_offsets
        # partitions between directories stalled (see docs/design-multi-rack.md)
        _wait("the producer", lambda: bool(load.acked))
        before = {b: _dirs(boot, b) for b in (0, 1, 2)}
        on_data = {r for r in before[1][data]["replicas"] if r[0] == topic}
        assert len(on_data) >= 2, before[1]  # Kafka spread the partitions over both dirs

        plan = tmp_path / "drain.json"
        r = run_cli("reassign", "plan", "--remove-log-dirs", f"1:{data}", "--write-plan",
                    str(plan), "-b", boot)
        assert r.code == 0, r.err
        assert "not cordoned" in r.err and "KIP-1066 needs Kafka 4.3+" in r.err, r.err
        assert f"{data}:" in r.out and "(drained)" in r.out, r.out
        doc = json.loads(plan.read_text())
        moved = {(p["topic"], p["partition"]) for p in doc["partitions"]}
        assert moved == {(t, p) for t, p, _f in before[1][data]["replicas"]}
        for p in doc["partitions"]:  # only broker 1's replica is named, the others "any"
            assert sorted(p["replicas"]) == [0, 1, 2], p
            assert p["log_dirs"] == [other if b == 1 else "any" for b in p["replicas"]], p

        args = _opskit("reassign", "execute", str(plan), "--throttle", "400KB", "--execute",
                       "-b", boot)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _wait("a copy in flight",
                  lambda: bool(_futures(boot, 1)) or proc.poll() is not None)
            assert proc.poll() is None, proc.communicate()
            assert _config(boot, THROTTLE, 1) == ("400000", 2)
        finally:
            proc.send_signal(signal.SIGKILL)  # opskit dies mid-copy
            _out, err = proc.communicate(timeout=30)
        assert "not cordoned" in err, err
        # verify mid-drain: one move sent, the others not: never 0
        mid = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
        assert mid.code in (1, 2), mid.out + mid.err
        assert {r["state"] for r in mid.json()["replicas"]} - {"done"}, mid.out
        again = _finish([*args, "--stall-timeout", "60"])
        assert "resuming plan" in again.stderr, again.stderr
        if again.returncode == 3 and "not swapped in" in again.stderr:
            # Kafka 3.7.2 left a finished copy unswapped (its NullPointerException): the run
            # said so and stopped; the remedy is a broker restart, then the same command
            jbod37.stop_node(1)
            jbod37.start_node(1)
            again = _finish(args)
            restarted.append(True)
        assert again.returncode == 0, again.stdout + again.stderr
        time.sleep(2)  # a little more load after the drain
    after = {b: _dirs(boot, b) for b in (0, 1, 2)}
    assert after[1][data]["replicas"] == set(), after[1][data]
    assert all(_futures(boot, b) == [] for b in (0, 1, 2))
    assert {(t, p) for t, p, _f in after[1][other]["replicas"] if t == topic} == \
        {(topic, p) for p in range(6)}
    for b in (0, 2):  # the other brokers' directories untouched
        assert {d: v["replicas"] for d, v in after[b].items()} == \
            {d: v["replicas"] for d, v in before[b].items()}, b
    assert _config(boot, THROTTLE, 1)[1] != 2  # our dynamic value is gone
    assert load.errors == [] and load.acked
    consumed = load.read_all(6)
    assert set(load.acked) <= set(consumed)  # no acknowledged record lost
    assert len(consumed) == len(set(consumed))  # none written twice (idempotence)
    print(f"broker restarted for Kafka 3.7.2's unswapped copy: {bool(restarted)}")
    out = _kafka_tool(jbod37, boot, "--reassignment-json-file", str(plan), "--verify")
    assert out.count("completed successfully") == len(doc["partitions"]), out
    # opskit's verify agrees: every replica in its planned directory, no throttle: 0
    v = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
    assert v.code == 0, v.out + v.err
    vd = v.json()
    assert [(r["partition"], r["broker"], r["state"]) for r in vd["replicas"]] == \
        [(f"{t}:{p}", 1, "done") for t, p in sorted(moved)]
    # what the drained directory holds now (the read-back consumer's group lookup created
    # __consumer_offsets after the drain: on 3.7, with no cordon, Kafka can put it there)
    now = {r for r in _dirs(boot, 1)[data]["replicas"]}
    assert not {r for r in now if r[0] == topic}
    assert [(d["broker"], d["dir"], d["replicas"]) for d in vd["log_dirs"]] == \
        [(1, data, len(now))], (vd["log_dirs"], now)
    assert not vd["log_dirs"][0]["cordoned"]  # 3.7: no KIP-1066 (None: not reported)
    assert vd["throttles_left"] == []
    assert vd["execution"] == "done"
    # the drained broker gone: unverifiable, exit 3 every time, never "done". Until the
    # controller fences it, a read routed to it fails the whole command (exit 3, no
    # report); then each of its replicas is reported "unknown"
    jbod37.stop_node(1)
    deadline = time.monotonic() + 120
    while True:
        gone = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
        assert gone.code == 3, gone.out + gone.err
        if gone.out.strip() or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert {r["state"] for r in gone.json()["replicas"]} == {"unknown"}, gone.out
    assert "could not be verified" in gone.err and "broker 1" in gone.err, gone.err


def test_drain_a_log_dir_on_43_cordons_cancel_restores_finish_keeps(
        jbod43: Sandbox, tmp_path: Path) -> None:
    st = jbod43.require()
    boot, node = st.bootstrap, st.nodes[0]
    data, d1, d2 = (str(node.dir / n) for n in ("data", "data-1", "data-2"))
    admin = AdminClient({"bootstrap.servers": boot})
    s = uuid.uuid4().hex[:6]
    topic = f"ld43_{s}"
    _create(boot, topic, 6)
    produce(boot, topic, {p: 1000 for p in range(6)}, value=b"d" * 1000)  # 6 MB
    # the operator cordoned data-2 already: the value the cancel must put back
    res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry(CORDON, d2, incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    _wait("data-2 cordoned", lambda: _dirs(boot)[d2]["cordoned"] is True)
    on_data = {(t, p) for t, p, _f in _dirs(boot)[data]["replicas"]}
    assert on_data

    plan = tmp_path / "drain.json"
    r = run_cli("reassign", "plan", "--remove-log-dirs", f"0:{data}", "--write-plan", str(plan),
                "-b", boot)
    assert r.code == 0, r.err
    assert f"cordons 0:{data} before the first move" in r.err, r.err
    doc = json.loads(plan.read_text())
    assert all(p["log_dirs"] == [d1] for p in doc["partitions"])  # not into cordoned data-2

    # 1. a slow drain: cordoned (merged) while it copies; a new topic avoids data
    proc = subprocess.Popen(_opskit("reassign", "execute", str(plan), "--throttle", "50KB",
                                    "--execute", "-b", boot),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait("the copy", lambda: bool(_futures(boot)) or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()
        dirs = _dirs(boot)
        assert dirs[data]["cordoned"] is True and dirs[d2]["cordoned"] is True, dirs
        assert dirs[d1]["cordoned"] is False
        assert _config(boot, CORDON) == (f"{d2},{data}", 2)
        mid = f"ldmid_{s}"
        _create(boot, mid, 4)  # uncordoned, Kafka would pick the emptiest directory
        dirs = _dirs(boot)
        assert {(t, p) for t, p, _f in dirs[d1]["replicas"] if t == mid} == \
            {(mid, p) for p in range(4)}, dirs

        # 2. cancel: copies dropped, replicas stay in data, the value found comes back
        c = run_cli("reassign", "cancel", "--execute", "-b", boot)
        assert c.code == 0, c.out + c.err
        assert "cordon values put back" in c.out, c.out
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 6 and "cancelled" in err, out + err
    assert _futures(boot) == []
    assert {(t, p) for t, p, _f in _dirs(boot)[data]["replicas"]} == on_data
    v = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
    assert v.code == 2 and {r["state"] for r in v.json()["replicas"]} == {"differs"}, v.out
    assert _config(boot, CORDON) == (d2, 2)
    assert _config(boot, THROTTLE)[1] != 2

    # 3. the same plan to the end: data empty, the cordon kept
    fin = _finish(_opskit("reassign", "execute", str(plan), "--throttle", "5MB", "--execute",
                          "-b", boot))
    assert fin.returncode == 0, fin.stdout + fin.stderr
    assert "stay cordoned" in fin.stdout, fin.stdout
    dirs = _dirs(boot)
    assert dirs[data]["replicas"] == set() and _futures(boot) == []
    assert dirs[data]["cordoned"] is True
    assert _config(boot, CORDON) == (f"{d2},{data}", 2)
    assert _config(boot, THROTTLE)[1] != 2
    v = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
    assert v.code == 0, v.out + v.err
    assert {r["state"] for r in v.json()["replicas"]} == {"done"}
    assert v.json()["log_dirs"] == [{"broker": 0, "dir": data, "cordoned": True,
                                     "replicas": 0}]
    st_out = run_cli("reassign", "status", "-o", "json", "-b", boot)
    assert st_out.code == 0, st_out.err
    drains = st_out.json()["log_dir_drains"]
    assert [(d["done"], d["cancelled"], d["cordon"]) for d in drains] == [(True, False, "kept")]

    # 4. the disk stays after all: uncordon puts the value found before the drain back
    u = run_cli("reassign", "uncordon", "--brokers", "0", "--execute", "-b", boot)
    assert u.code == 0, u.out + u.err
    assert _config(boot, CORDON) == (d2, 2)


def test_drain_log_dirs_of_two_brokers_in_one_plan_on_43(jbod43x3: Sandbox,
                                                          tmp_path: Path) -> None:
    st = jbod43x3.require()
    boot = st.bootstrap
    data = {b: str(st.nodes[b].dir / "data") for b in (1, 2)}
    other = {b: str(st.nodes[b].dir / "data-1") for b in (1, 2)}
    s = uuid.uuid4().hex[:6]
    topic = f"ld43x_{s}"
    _create(boot, topic, 6, rf=3)
    produce(boot, topic, {p: 600 for p in range(6)}, value=b"d" * 1000)  # 0.6 MB a replica
    before = {b: _dirs(boot, b) for b in (0, 1, 2)}
    on_data = {b: {(t, p) for t, p, _f in before[b][data[b]]["replicas"]} for b in (1, 2)}
    assert on_data[1] and on_data[2], before  # Kafka spread each broker's over both dirs

    plan = tmp_path / "drain2.json"
    spec = f"1:{data[1]},2:{data[2]}"
    r = run_cli("reassign", "plan", "--remove-log-dirs", spec, "--write-plan", str(plan),
                "-b", boot)
    assert r.code == 0, r.err
    assert f"cordons {spec} before the first move" in r.err, r.err
    doc = json.loads(plan.read_text())
    assert {(p["topic"], p["partition"]) for p in doc["partitions"]} == on_data[1] | on_data[2]
    for p in doc["partitions"]:  # a drained broker's replica named into its other dir
        key = (p["topic"], p["partition"])
        want = [other[b] if b in (1, 2) and key in on_data[b] else "any" for b in p["replicas"]]
        assert p["log_dirs"] == want, p

    # 1. a slow drain: both directories cordoned while the copies run
    proc = subprocess.Popen(_opskit("reassign", "execute", str(plan), "--throttle", "20KB",
                                    "--execute", "-b", boot),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait("a copy", lambda: bool(_futures(boot, 1) or _futures(boot, 2))
              or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()
        for b in (1, 2):
            dirs = _dirs(boot, b)
            assert dirs[data[b]]["cordoned"] is True and dirs[other[b]]["cordoned"] is False
            assert _config(boot, CORDON, b) == (data[b], 2)
        assert _config(boot, CORDON, 0)[1] != 2  # broker 0: not in the plan

        # 2. cancel: copies dropped on both, both values put back (none was set)
        c = run_cli("reassign", "cancel", "--execute", "-b", boot)
        assert c.code == 0, c.out + c.err
        assert "cordon values put back" in c.out, c.out
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 6 and "cancelled" in err, out + err
    for b in (1, 2):
        assert _futures(boot, b) == []
        assert _config(boot, CORDON, b)[1] != 2, b
        assert _config(boot, THROTTLE, b)[1] != 2, b
        assert _dirs(boot, b)[data[b]]["cordoned"] is False
    v = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
    assert v.code in (1, 2), v.out + v.err  # some copies may have finished before the cancel
    assert {r["state"] for r in v.json()["replicas"]} - {"done"}, v.out

    # 3. the same plan to the end: both emptied, both cordons kept
    fin = _finish(_opskit("reassign", "execute", str(plan), "--throttle", "5MB", "--execute",
                          "-b", boot))
    assert fin.returncode == 0, fin.stdout + fin.stderr
    assert "stay cordoned" in fin.stdout, fin.stdout
    after = {b: _dirs(boot, b) for b in (0, 1, 2)}
    for b in (1, 2):
        assert {r for r in after[b][data[b]]["replicas"] if r[0] == topic} == set(), after[b]
        assert after[b][data[b]]["cordoned"] is True
        assert {(t, p) for t, p, _f in after[b][other[b]]["replicas"] if t == topic} == \
            {(topic, p) for p in range(6)}
        assert _futures(boot, b) == []
        assert _config(boot, CORDON, b) == (data[b], 2)
    assert {d: v["replicas"] for d, v in after[0].items()} == \
        {d: v["replicas"] for d, v in before[0].items()}  # broker 0 untouched
    v = run_cli("reassign", "verify", str(plan), "-o", "json", "-b", boot)
    assert v.code == 0, v.out + v.err
    vd = v.json()
    assert {r["state"] for r in vd["replicas"]} == {"done"}
    assert sorted((d["broker"], d["dir"], d["cordoned"]) for d in vd["log_dirs"]) == \
        [(1, data[1], True), (2, data[2], True)]

    # 4. uncordon both: nothing was set before the drain, so nothing is left
    u = run_cli("reassign", "uncordon", "--brokers", "1,2", "--execute", "-b", boot)
    assert u.code == 0, u.out + u.err
    for b in (1, 2):
        assert _config(boot, CORDON, b)[1] != 2, b
        assert _dirs(boot, b)[data[b]]["cordoned"] is False
