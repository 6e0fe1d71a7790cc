"""The scale-out playbook on a local sandbox, end to end, against real Kafka.

From one node to three under continuous traffic from an idempotent ``acks=all``
producer and a consuming group: no acknowledged record lost, per-key order kept, the
group keeps consuming; the run is killed with SIGKILL at every step boundary (right
after each step is journaled started, and right after it is journaled finished) and
inside the reassignment, and resumed each time; the end state is RF 3, ISR 3,
``min.insync.replicas=2``, preferred leaders spread within 1, health OK, the topic
registry updated so ``topics diff`` is clean, no throttle left, no duplicate node, no
second reassignment. (Refusals, paging and the run lock: test_playbook_safety.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from helpers import cli_sandbox, run_cli

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.reassign.journal import Journal
from opskit.adapters.scaleout.runner import KILL_AT_ENV
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.scale import voters

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "opskit" / "registry" / "hip30.yaml"
TOPIC = "llm_usage"  # billing data: the records that must not be lost


class Traffic:
    """An idempotent acks=all producer (keys k0..k7, a sequence per key) and a group."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: list[tuple[str, int]] = []
        self.errors: list[str] = []
        self.consumed = 0
        self.consumed_after_mark = 0
        self.mark = False
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]

    def __enter__(self) -> Self:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)

    def wait_consumed_after_mark(self, timeout: float = 180.0) -> None:
        """After the run the group consumes again: its members find the coordinator
        anew after the rolling restart moved it (a few seconds; longer on a loaded host)."""
        deadline = time.monotonic() + timeout
        time.sleep(5)
        while self.consumed_after_mark == 0 and time.monotonic() < deadline:
            time.sleep(1)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5, "message.timeout.ms": 300000})
        seq = 0

        def done(err: object, msg: object) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                k = msg.key().decode()  # type: ignore[attr-defined]
                self.acked.append((k, int(msg.value().decode())))  # type: ignore[attr-defined]

        while not self._stop.is_set():
            for _ in range(20):
                p.produce(TOPIC, key=f"k{seq % 8}".encode(), value=str(seq).encode(),
                          on_delivery=done)
                seq += 1
            p.poll(0.05)
        assert p.flush(120) == 0

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "billing-agg",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True})
        c.subscribe([TOPIC])
        while not self._stop.is_set():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                self.consumed += 1
                if self.mark:
                    self.consumed_after_mark += 1
        c.close()


def read_all(bootstrap: str) -> dict[str, list[int]]:
    """Every record of TOPIC by key, in log order: partitions assigned by hand from the
    beginning and read to their high watermark (no group: a rebalance of a subscribed
    reader restarted it from the beginning and read records twice, seen in CI)."""
    from confluent_kafka import OFFSET_BEGINNING
    from confluent_kafka import TopicPartition as CkTp

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{time.time()}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        parts = c.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
        ends = {p: c.get_watermark_offsets(CkTp(TOPIC, p), timeout=30)[1] for p in parts}
        c.assign([CkTp(TOPIC, p, OFFSET_BEGINNING) for p in parts])
        by_key: dict[str, list[int]] = {}
        pending = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 300
        while pending:
            assert time.monotonic() < deadline, f"partitions {sorted(pending)} not read to the end"
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(f"reading {TOPIC}: {m.error()}")
            else:
                by_key.setdefault(m.key().decode(), []).append(int(m.value().decode()))
            if (m.offset() or 0) + (0 if m.error() else 1) >= ends[m.partition()]:
                pending.discard(m.partition())
        return by_key
    finally:
        c.close()


@pytest.fixture
def one_node(uniq: str) -> Iterator[Sandbox]:
    yield from _one_node(f"pb{uniq}", "3.7", "static")


@pytest.fixture
def one_node_dynamic(uniq: str) -> Iterator[Sandbox]:
    yield from _one_node(f"pd{uniq}", "4.x", "dynamic")


def _one_node(name: str, version: str, quorum: str) -> Iterator[Sandbox]:
    with cli_sandbox(name, "--kafka-version", version, "--quorum", quorum) as sb:
        yield sb


def journal(sb: Sandbox) -> dict[str, object]:
    path = sb.playbook_dir / "journal.json"
    try:
        return json.loads(path.read_text())["state"]  # type: ignore[no-any-return]
    except (OSError, ValueError, KeyError):
        return {}


def _launch(args: list[str], kill_at: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, KILL_AT_ENV: kill_at}
    return subprocess.Popen([sys.executable, "-m", "opskit.cli.main", *args], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)


def run_killed_at(args: list[str], kill_at: str, timeout: float = 600) -> None:
    """Run the playbook in a child process that SIGKILLs itself at ``kill_at``
    (``started:<step>`` / ``finished:<step>``, the runner's test-only failpoint)."""
    proc = _launch(args, kill_at)
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, \
        f"{kill_at}: exited {proc.returncode}: {err.decode()[-800:]}"


def reassign_journals(sb: Sandbox) -> Journal:
    return Journal(sb.require().cluster_id)


def kill_inside_reassignment(sb: Sandbox, args: list[str], timeout: float = 600) -> None:
    """Run the playbook (raise_rf in flight) and SIGKILL it from outside once the RF plan's
    moves are submitted and before its throttles are removed."""
    journals = reassign_journals(sb)

    def events() -> list[str]:
        plans = [d.name for d in journals.root.iterdir()] if journals.root.exists() else []
        return [e["kind"] for p in plans for e in journals.events(p)]

    before = events().count("submit")
    proc = _launch(args, "finished:raise_rf")
    deadline = time.monotonic() + timeout

    def moving() -> bool:
        """Kafka has the moves: the journal records a submission before it sends it, so
        a kill right after the record can land before the request (then the resumed run
        submits them, correctly, a first time)."""
        with KafkaAdmin(sb.connection(), timeout=5) as admin:
            return any(len(p.replicas) > 1 for parts in admin.metadata().topics.values()
                       for p in parts)

    try:
        while events().count("submit") == before or not moving():
            assert proc.poll() is None, f"ended before submitting ({proc.returncode})"
            assert time.monotonic() < deadline, "the RF plan was never submitted"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    kinds = events()
    assert "remove_throttles" not in kinds and "finished" not in kinds, kinds  # mid-move


def jvms_of(sb: Sandbox) -> dict[int, int]:
    """How many live processes run each node's config (a duplicate node shows as 2)."""
    counts: dict[int, int] = {}
    for n in sb.require().nodes:
        counts[n.node_id] = 0
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    cmd = (d / "cmdline").read_bytes().decode(errors="replace")
                except OSError:
                    continue
                if str(n.config_path) in cmd and "kafka.Kafka" in cmd:
                    counts[n.node_id] += 1
    return counts


def no_throttles(admin: KafkaAdmin, brokers: list[int], topics: list[str]) -> None:
    for b, cfg in admin.broker_configs(brokers).items():
        for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
            value, is_default = cfg.get(k, (None, True))
            assert is_default or value is None, f"broker {b} still has {k}={value}"
    for t, cfg in admin.topic_configs(topics).items():
        for k in ("leader.replication.throttled.replicas",
                  "follower.replication.throttled.replicas"):
            assert not (cfg.get(k, (None, True))[0] or ""), f"{t} still has {k}"


def check_end_state(sb: Sandbox, registry: Path, context: str) -> None:
    with KafkaAdmin(sb.connection()) as admin:
        meta = admin.metadata()
        brokers = sorted(b.node_id for b in meta.brokers)
        assert brokers == [0, 1, 2]
        leaders = dict.fromkeys(brokers, 0)
        for t, parts in meta.topics.items():
            for p in parts:
                assert len(p.replicas) == 3 and sorted(p.isr) == sorted(p.replicas), (t, p)
                assert p.leader == p.replicas[0]
                leaders[p.leader] += 1
        assert max(leaders.values()) - min(leaders.values()) <= 1, leaders
        topics = [t for t in meta.topics if not t.startswith("__")]
        for t, cfg in admin.topic_configs(topics).items():
            assert cfg["min.insync.replicas"][0] == "2", t
        no_throttles(admin, brokers, list(meta.topics))
    assert [n.node_id for n in sb.require().nodes] == [0, 1, 2]   # no duplicate node
    assert jvms_of(sb) == {0: 1, 1: 1, 2: 1}
    r = run_cli("health", "--context", context)
    assert r.code == 0, r.out + r.err
    r = run_cli("topics", "diff", str(registry), "--context", context)
    assert r.code == 0, r.out + r.err
    new_topics_and_groups_work(sb)


def new_topics_and_groups_work(sb: Sandbox) -> None:
    """The scale-out is finished: a topic created without an RF gets RF 3 (the brokers
    run default.replication.factor=3 after the rolling restart), a new group's first
    commit works, __consumer_offsets is at RF 3."""
    from confluent_kafka import TopicPartition as CkTp

    name = f"after_scale_out_{int(time.time())}"
    with KafkaAdmin(sb.connection()) as admin:
        admin.create_topics([(name, 3, -1, {})])
        deadline = time.monotonic() + 60
        while not admin.metadata().topics.get(name):
            assert time.monotonic() < deadline, f"{name} never listed"
            time.sleep(0.5)
        parts = admin.metadata().topics[name]
        assert [len(p.replicas) for p in parts] == [3, 3, 3], parts
        c = Consumer({"bootstrap.servers": sb.require().bootstrap,
                      "group.id": f"first-commit-{name}", "enable.auto.commit": False})
        try:
            c.commit(offsets=[CkTp(name, 0, 0)], asynchronous=False)
        finally:
            c.close()
        offsets = admin.metadata().topics["__consumer_offsets"]
        assert {len(p.replicas) for p in offsets} == {3}
        admin.delete_topics([name])


def no_acknowledged_record_lost(sb: Sandbox, traffic: Traffic) -> None:
    """Every record the producer saw acknowledged is in the log, in order per key."""
    got = read_all(sb.require().bootstrap)
    acked: dict[str, list[int]] = {}
    for k, s in traffic.acked:
        acked.setdefault(k, []).append(s)
    assert acked, "the producer had no record acknowledged"
    for k, seqs in acked.items():
        lost = set(seqs) - set(got.get(k, []))
        assert not lost, f"{len(lost)} acknowledged records of {k} lost: {sorted(lost)[:10]}"
        dup = len(got[k]) - len(set(got[k]))
        assert dup == 0, f"{dup} records of {k} in the log twice"
        back = next((i for i in range(1, len(got[k])) if got[k][i] < got[k][i - 1]), None)
        assert back is None, (f"order of {k} changed at position {back}: "
                              f"{got[k][max(0, (back or 0) - 3):(back or 0) + 3]}")


@pytest.mark.timeout(2400)   # ~40 process starts, 3 node starts and 3 restarts
def test_static_quorum_scale_out_under_traffic_killed_at_every_step(
        one_node: Sandbox, tmp_path: Path) -> None:
    """SIGKILL right after each step is journaled started (before it acts) and right
    after it is journaled finished (before the next starts), and once inside the
    reassignment; every run after a kill resumes from the journal."""
    sb = one_node
    ctx = f"sandbox-{sb.name}"
    assert run_cli("topics", "apply", "--context", ctx, "--execute").code == 0
    registry = tmp_path / "hip30.yaml"
    shutil.copy(REGISTRY, registry)
    plan = run_cli("playbook", "scale-out", "--sandbox", sb.name, "-o", "json")
    assert plan.code == 0, plan.err
    steps: list[str] = plan.json()["plan"]["steps"]
    assert "raise_rf" in steps and not any(k.startswith("promote_voter") for k in steps)
    # the rolling restart: broker-only nodes first, the single controller last
    restarts = [k for k in steps if k.startswith("restart_node:")]
    assert restarts == ["restart_node:1", "restart_node:2", "restart_node:0"]
    assert steps[-2:] == ["verify_defaults", "final_health"]
    first_restart = restarts[0]
    args = ["playbook", "scale-out", "--sandbox", sb.name, "--throttle", "20MiB",
            "--registry", str(registry), "--execute"]
    lock = sb.playbook_dir / "run.lock"
    bootstrap = sb.require().bootstrap
    with Traffic(bootstrap) as traffic:
        time.sleep(3)
        for key in steps:
            run_killed_at(args, f"started:{key}")
            j = journal(sb)
            assert j["in_flight"] == key and key not in j["done"], (key, j)  # type: ignore[operator]
            if key == steps[0]:      # the killed run's lock file stays; it must not block
                assert lock.exists() and "pid" in lock.read_text()
            if key == "raise_rf":
                kill_inside_reassignment(sb, args)
                assert journal(sb)["in_flight"] == "raise_rf"
            if key == first_restart:     # killed with the node stopped: the resume starts it
                run_killed_at(args, f"stopped:{key}")
                assert journal(sb)["in_flight"] == key
                assert jvms_of(sb)[int(key.split(":")[1])] == 0
            run_killed_at(args, f"finished:{key}")
            j = journal(sb)
            assert j["in_flight"] is None and key in j["done"], (key, j)  # type: ignore[operator]
        r = run_cli("playbook", "resume", "--sandbox", sb.name, "--throttle", "20MiB",
                    "--registry", str(registry))
        assert r.code == 0, r.err
        traffic.mark = True
        traffic.wait_consumed_after_mark()
    assert traffic.errors == []
    assert traffic.consumed_after_mark > 0                   # the group kept consuming
    state = journal(sb)
    assert state["phase"] == "done" and state["done"] == steps
    entries = state["journal"]
    resumed = [e["step"] for e in entries if e["what"] == "resumed"]  # type: ignore[index,union-attr]
    at_rf, at_restart = steps.index("raise_rf"), steps.index(first_restart)
    assert resumed == [*steps[:at_rf + 1], "raise_rf", *steps[at_rf + 1:at_restart + 1],
                       first_restart, *steps[at_restart + 1:]]
    started = [e["step"] for e in entries if e["what"] == "started"]  # type: ignore[index,union-attr]
    assert started == steps                                    # each step started once
    # no second reassignment: one execution per plan (RF raise, leader reorder), every
    # partition submitted once in each
    journals = reassign_journals(sb)
    plans = sorted(d.name for d in journals.root.iterdir())
    assert len(plans) == 2, plans
    for p in plans:
        subs = journals.submissions(p)
        assert subs and set(subs.values()) == {1}, (p, subs.most_common(3))
    check_end_state(sb, registry, ctx)
    assert voters(sb) == [0]                                  # the static voter set unchanged
    no_acknowledged_record_lost(sb, traffic)
    # a scheduled run after the finished run: one line, nothing done, exit 0 (not a nightly
    # failure); without the journal it is today's refusal
    r = run_cli(*args)
    assert r.code == 0, r.err
    assert r.out.strip() == (f"scale-out {state['run_id']} finished at "
                             f"{entries[-1]['at']}; the cluster has 3 brokers: "  # type: ignore[index]
                             "nothing to do"), r.out
    assert journal(sb) == state
    path = sb.playbook_dir / "journal.json"
    path.rename(path.with_name("journal.moved"))
    r = run_cli("playbook", "scale-out", "--sandbox", sb.name)
    assert r.code == 5 and "already has 3 brokers" in r.err


@pytest.mark.kafka4
@pytest.mark.timeout(2400)   # 3 node starts, 2 promotions and 3 restarts on a loaded host
def test_dynamic_quorum_scale_out_adds_voters(one_node_dynamic: Sandbox, tmp_path: Path) -> None:
    sb = one_node_dynamic
    ctx = f"sandbox-{sb.name}"
    assert run_cli("topics", "apply", "--context", ctx, "--execute").code == 0
    registry = tmp_path / "hip30.yaml"
    shutil.copy(REGISTRY, registry)
    plan = run_cli("playbook", "scale-out", "--sandbox", sb.name, "-o", "json")
    assert plan.code == 0, plan.err
    steps = plan.json()["plan"]["steps"]
    assert steps[1:5] == ["add_node:1", "add_node:2", "promote_voter:1", "promote_voter:2"]
    with Traffic(sb.require().bootstrap) as traffic:
        time.sleep(2)
        r = run_cli("playbook", "scale-out", "--sandbox", sb.name, "--throttle", "20MiB",
                    "--registry", str(registry), "--execute")
        assert r.code == 0, r.err
        traffic.mark = True
        traffic.wait_consumed_after_mark()
    assert traffic.errors == [] and traffic.consumed_after_mark > 0
    assert voters(sb) == [0, 1, 2]
    check_end_state(sb, registry, ctx)
    no_acknowledged_record_lost(sb, traffic)


@pytest.mark.timeout(900)
def test_new_brokers_down_during_the_rf_raise_are_said_paged_and_the_throttles_named(
        one_node: Sandbox, tmp_path: Path) -> None:
    """Both new brokers stopped while the RF raise copies to them (3.7, static): while it
    waits the run says on stderr which brokers it waits for, after --stall-timeout it
    stops, pages PagerDuty, and its exit line says the throttles stay set until a resume;
    abort + resume then finishes the copy, removes the throttles and stops."""
    from helpers import create_topic
    from pd_receiver import PagerDutyReceiver, routing_key

    sb = one_node
    bs = sb.require().bootstrap
    create_topic(bs, "bulk", 2, 1)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20})
    for i in range(12000):                       # 12 MB: minutes at the throttle below
        p.produce("bulk", key=str(i).encode(), value=b"x" * 1000)
    assert p.flush(60) == 0
    key = routing_key()
    keyf = tmp_path / "routing-key"
    keyf.write_text(key)
    with PagerDutyReceiver() as pd:
        proc = subprocess.Popen(
            [sys.executable, "-m", "opskit.cli.main", "playbook", "scale-out", "--sandbox",
             sb.name, "--throttle", "100KB", "--stall-timeout", "10", "--routing-key-file",
             str(keyf), "--pagerduty-url", pd.url, "--pagerduty-ca-file", str(pd.ca_file),
             "--execute"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while True:
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                assert time.monotonic() < deadline, "the RF raise never started copying"
                if journal(sb).get("in_flight") == "raise_rf":
                    with KafkaAdmin(sb.connection(), timeout=5) as admin:
                        parts = admin.metadata().topics.get("bulk", [])
                    if any(len(part.replicas) > 1 for part in parts):
                        break
                time.sleep(0.2)
            sb.stop_node(1)
            sb.stop_node(2)
            _, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        lines = err.strip().splitlines()
        assert any("waiting for broker(s) 1, 2 to come back" in ln for ln in lines[:-1]), err
        assert proc.returncode == 3, err[-2000:]
        last = lines[-1]
        assert last.startswith("opskit: error:") and "raise_rf" in last, last
        assert "the replication throttles stay set until 'opskit playbook resume'" in last
        assert pd.wait_for(lambda evs: len(evs) >= 1, timeout=30)
        (page,) = pd.events
    assert page["routing_key"] == key and "raise_rf" in page["payload"]["summary"], page
    assert key not in err
    with KafkaAdmin(sb.connection()) as admin:     # the throttles are still set, as said
        cfg = admin.broker_configs([0])[0]
        assert not cfg["leader.replication.throttled.rate"][1], cfg   # not the default

    sb.start_node(1)
    sb.start_node(2)
    assert run_cli("playbook", "abort", "--sandbox", sb.name, "--execute").code == 0
    r = run_cli("playbook", "resume", "--sandbox", sb.name, "--throttle", "50MiB")
    state = journal(sb)
    assert state["phase"] == "aborted", (r.code, r.err, state)
    assert "raise_rf" in state["done"], state                 # type: ignore[operator]
    with KafkaAdmin(sb.connection()) as admin:
        meta = admin.metadata()
        assert all(len(part.replicas) == 3 for part in meta.topics["bulk"])
        no_throttles(admin, [0, 1, 2], list(meta.topics))
