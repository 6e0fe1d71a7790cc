"""``opskit reassign execute|status|cancel|verify`` on real 3-broker clusters (Kafka 3.7, 4.x).

* RF 1 -> 3 of two topics and ``__consumer_offsets`` while an idempotent acks=all
  producer and a consumer group run, with ``kill -9`` of opskit at random moments
  (``OPSKIT_REASSIGN_KILLS``, default 10; the seed is printed) and a resume each time:
  the end state equals the plan, no partition was submitted twice (the journal) nor
  started twice (the controller's metadata log),
  no reassignment is left in flight, no throttle config is left anywhere, no
  acknowledged record is lost, per-key order holds, the group kept consuming.
* Throttle values that existed before (static in server.properties, dynamic
  cluster default, dynamic per broker, a topic's throttled replicas) are back exactly.
* Bad plans and unsafe situations: one line, documented exit code, nothing changed.
* A broker stopped during a move: the run says what it waits for and stops
  (bounded); after the broker is back, ``--resume`` finishes and cleans up.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import commit, create_topic, produce, run_cli

from opskit.adapters.reassign.journal import Journal
from opskit.core.models import TopicPartition
from opskit.core.reassign.plan_input import parse_plan, plan_id

ROOT = Path(__file__).resolve().parents[2]
THROTTLE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
                 "leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
KILLS = int(os.environ.get("OPSKIT_REASSIGN_KILLS", "10"))


class _Cluster:
    def __init__(self, version: str) -> None:
        from opskit.errors import SandboxError
        from opskit.sandbox.cluster import Sandbox
        from opskit.sandbox.ports import free_port_block

        old = os.environ.get("OPSKIT_SANDBOX_HEAP")
        os.environ["OPSKIT_SANDBOX_HEAP"] = "512m"
        try:
            for attempt in range(3):  # a free port can be taken by another process meanwhile
                self.sandbox = Sandbox(f"rx{version.replace('.', '')}-{uuid.uuid4().hex[:6]}")
                try:
                    st, _ = self.sandbox.up(brokers=3, version=version, port=free_port_block(3))
                    break
                except SandboxError as e:
                    self.sandbox.down()
                    if attempt == 2 or "Address already in use" not in str(e):
                        raise
        finally:
            if old is None:
                os.environ.pop("OPSKIT_SANDBOX_HEAP", None)
            else:
                os.environ["OPSKIT_SANDBOX_HEAP"] = old
        self.bootstrap = st.bootstrap
        self.version = st.version
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def replicas(self, topic: str) -> dict[int, list[int]]:
        """Replicas per partition; a topic just created is waited for (up to 30 s) until
        the metadata answer lists its partitions (it can come back empty at first)."""
        deadline = time.monotonic() + 30
        while True:
            md = self.admin.list_topics(topic, timeout=15).topics[topic]
            if md.partitions or time.monotonic() > deadline:
                return {p.id: list(p.replicas) for p in md.partitions.values()}
            time.sleep(0.2)

    def cluster_id(self) -> str:
        return str(self.admin.list_topics(timeout=15).cluster_id)

    def configs(self, kind: ResourceType, name: str) -> dict[str, tuple[str | None, int]]:
        # a fresh client: a broker restarted by a test is reached at once, not after the
        # long-lived client's reconnect backoff
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for f in admin.describe_configs([ConfigResource(kind, name)],
                                        request_timeout=60).values():
            return {k: (v.value, int(v.source)) for k, v in f.result(60).items()}
        return {}

    def throttles(self) -> dict[str, tuple[str | None, int]]:
        """Every throttle key set dynamically on a broker, the cluster default or a topic."""
        out: dict[str, tuple[str | None, int]] = {}
        resources = [(ResourceType.BROKER, str(b)) for b in (0, 1, 2)]
        topics = self.admin.list_topics(timeout=15).topics
        resources += [(ResourceType.TOPIC, t) for t in topics]
        for kind, name in resources:
            for k, (v, src) in self.configs(kind, name).items():
                if k in THROTTLE_KEYS and src in (1, 2, 3) and v:  # 3: the cluster default
                    out[f"{kind.name}:{name}:{k}"] = (v, src)
        return out

    def in_flight(self) -> dict[Any, Any]:
        from kafka.admin import KafkaAdminClient

        c = KafkaAdminClient(bootstrap_servers=self.bootstrap.split(","))
        try:
            found = c.list_partition_reassignments()
        finally:
            c.close()
        return {tp: d for tp, d in found.items() if d["adding_replicas"] or d["removing_replicas"]}

    def reassignment_starts(self) -> dict[tuple[str, int], int]:
        """The broker's side of "never submitted twice": per partition, how many times the
        controller started adding replicas (PartitionChangeRecords with non-empty
        addingReplicas in the metadata log of node 0, read with Kafka's DumpLogSegments)."""
        from opskit.sandbox.dist import ensure_kafka_dist

        node0 = next(n for n in self.sandbox.require().nodes if n.node_id == 0)
        logs = sorted(str(p) for p in (node0.dir / "data" / "__cluster_metadata-0").glob("*.log"))
        dist = ensure_kafka_dist(self.version)
        r = None
        for cls in ("kafka.tools.DumpLogSegments", "org.apache.kafka.tools.DumpLogSegments"):
            r = dist.run_tool(cls, "--cluster-metadata-decoder", "--files", ",".join(logs),
                              timeout=180)
            if r.returncode == 0:
                break
        assert r is not None and r.returncode == 0, r.stderr[-500:] if r else ""
        names: dict[str, str] = {}
        starts: dict[tuple[str, int], int] = {}
        for line in r.stdout.splitlines():
            _, sep, payload = line.partition("payload: ")
            if not sep:
                continue
            try:
                rec = json.loads(payload)
            except ValueError:
                continue
            data = rec.get("data", {})
            if rec.get("type") == "TOPIC_RECORD":
                names[data["topicId"]] = data["name"]
            elif rec.get("type") == "PARTITION_CHANGE_RECORD" and data.get("addingReplicas"):
                key = (names.get(data["topicId"], data["topicId"]), int(data["partitionId"]))
                starts[key] = starts.get(key, 0) + 1
        return starts

    def alter_configs(self, kind: ResourceType, name: str, values: dict[str, str | None]) -> None:
        if name == "":  # the cluster default: only Kafka's tool sets it (no empty name in
            # librdkafka or kafka-python)
            from opskit.sandbox.dist import ensure_kafka_dist

            change = (["--add-config", ",".join(f"{k}={v}" for k, v in values.items())]
                      if all(v is not None for v in values.values())
                      else ["--delete-config", ",".join(values)])
            r = ensure_kafka_dist(self.version).run_tool(
                "kafka.admin.ConfigCommand", "--bootstrap-server", self.bootstrap,
                "--entity-type", "brokers", "--entity-default", "--alter", *change, timeout=120)
            assert r.returncode == 0, r.stderr
            return
        entries = [ConfigEntry(k, v or "", incremental_operation=(
            AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE))
            for k, v in values.items()]
        for f in self.admin.incremental_alter_configs(
                [ConfigResource(kind, name, incremental_configs=entries)]).values():
            f.result(15)


def _start(version: str) -> Iterator[_Cluster]:
    c = _Cluster(version)
    try:
        yield c
    finally:
        c.sandbox.down()


@pytest.fixture(scope="module")
def rc37() -> Iterator[_Cluster]:
    yield from _start("3.7")


@pytest.fixture(scope="module")
def rc4x() -> Iterator[_Cluster]:
    yield from _start("4.x")


def _opskit(*args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", *args]


def _write_plan(path: Path, targets: dict[tuple[str, int], list[int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(targets.items())]}))
    return path


def _rf3(c: _Cluster, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    out = {}
    for t in topics:
        for p, reps in c.replicas(t).items():
            out[(t, p)] = reps + [b for b in (0, 1, 2) if b not in reps]
    return out


class Workload:
    """An idempotent acks=all producer of keyed, numbered records and a consumer group."""

    def __init__(self, bootstrap: str, topics: list[str], group: str) -> None:
        self.bootstrap, self.topics, self.group = bootstrap, topics, group
        self.acked: list[tuple[str, str, int]] = []
        self.consumed: list[tuple[str, str, int]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def __enter__(self) -> Workload:  # noqa: PYI034
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                      "acks": "all", "linger.ms": 5})
        seq: dict[str, int] = {}

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append((msg.topic(), msg.key().decode(), int(msg.value())))
            else:
                self.errors.append(str(err))

        n = 0
        while not self.stop.is_set():
            topic = self.topics[n % len(self.topics)]
            key = f"k{n % 20}"
            s = seq.get(f"{topic}/{key}", 0)
            seq[f"{topic}/{key}"] = s + 1
            p.produce(topic, key=key.encode(), value=str(s).encode(), on_delivery=done)
            p.poll(0)
            n += 1
            time.sleep(0.005)
        p.flush(60)

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 500, "session.timeout.ms": 10000})
        c.subscribe(self.topics)
        idle_after_stop = 0
        while idle_after_stop < 20:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                if self.stop.is_set():
                    idle_after_stop += 1
                continue
            if msg.value().isdigit():  # (the preloaded records are not the workload's)
                self.consumed.append((msg.topic(), msg.key().decode(), int(msg.value())))
        c.close()


def _run_with_kills(bootstrap: str, plan: Path, throttle: str, seed: int, kills: int
                    ) -> tuple[int, int]:
    """Start the execution, kill -9 it at random moments ``kills`` times, then let it
    finish. Returns (kills done, runs)."""
    rng = random.Random(seed)
    done = runs = 0
    args = _opskit("reassign", "execute", str(plan), "--throttle", throttle,
                   "--rate-interval", "0.5", "--execute", "-b", bootstrap)
    while done < kills:
        runs += 1
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc.wait(rng.uniform(0.4, 4.0))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
            done += 1
            continue
        _out, err = proc.communicate()
        assert proc.returncode == 0, err.decode()
        return done, runs  # finished before the next kill
    runs += 1
    r = subprocess.run(args, check=False, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    return done, runs


@pytest.mark.parametrize("version", ["3.7", "4.x"])
def test_rf_raise_under_load_survives_kill9(version: str, request: pytest.FixtureRequest,
                                            tmp_path: Path) -> None:
    c: _Cluster = request.getfixturevalue("rc37" if version == "3.7" else "rc4x")
    suffix = uuid.uuid4().hex[:6]
    topics = [f"events_plugin_ingestion_{suffix}", f"events_billing_{suffix}"]
    for t in topics:
        create_topic(c.bootstrap, t, 3, 1)
        produce(c.bootstrap, t, {p: 1500 for p in range(3)}, value=b"v" * 1000)
    commit(c.bootstrap, f"rx-init-{suffix}", {(topics[0], 0): 0})  # creates __consumer_offsets
    # __consumer_offsets down to one replica first (opskit itself, no data moves), so
    # the raise below takes it 1 -> 3 like the topics
    offsets = c.replicas("__consumer_offsets")
    down = _write_plan(tmp_path / "down.json", {("__consumer_offsets", p): r[:1]
                                                for p, r in offsets.items()})
    r = subprocess.run(_opskit("reassign", "execute", str(down), "--execute", "-b", c.bootstrap),
                       check=False, capture_output=True, timeout=180)
    assert r.returncode == 0, r.stderr.decode()
    assert all(len(r) == 1 for r in c.replicas("__consumer_offsets").values())

    targets = _rf3(c, [*topics, "__consumer_offsets"])
    plan = _write_plan(tmp_path / "rf3.json", targets)
    seed = int(os.environ.get("OPSKIT_REASSIGN_SEED", random.randrange(1 << 30)))
    print(f"kill seed {seed}")
    with Workload(c.bootstrap, topics, f"rx-group-{suffix}") as load:
        time.sleep(3)
        consumed_before = len(load.consumed)
        kills, runs = _run_with_kills(c.bootstrap, plan, "400KB", seed, KILLS)
        time.sleep(3)
        consumed_during = len(load.consumed) - consumed_before
    print(f"{kills} kills in {runs} runs")
    assert kills >= min(KILLS, runs - 1)

    # end state equals the plan, nothing in flight, verify agrees
    for (t, p), want in targets.items():
        assert c.replicas(t)[p] == want, (t, p)
    assert c.in_flight() == {}
    v = run_cli("reassign", "verify", str(plan), "-b", c.bootstrap)
    assert v.code == 0, v.out + v.err
    # no partition submitted twice (journal), no throttle left anywhere
    journal = Journal(c.cluster_id())
    subs = journal.submissions(plan_id(parse_plan(plan.read_text())))
    assert subs and max(subs.values()) == 1, subs
    assert set(subs) <= {TopicPartition(t, p) for (t, p) in targets}
    # ... and on the broker: each partition gained its replicas in one reassignment
    starts = c.reassignment_starts()
    for key in targets:
        assert starts.get(key) == 1, (key, starts.get(key))
    assert c.throttles() == {}
    # no acknowledged record lost, order per key kept, the group kept consuming
    assert not load.errors, load.errors[:3]
    assert consumed_during > 0
    assert set(load.acked) <= set(load.consumed)
    firsts: dict[tuple[str, str], list[int]] = {}
    seen: set[tuple[str, str, int]] = set()
    for rec in load.consumed:
        if rec not in seen:
            seen.add(rec)
            firsts.setdefault((rec[0], rec[1]), []).append(rec[2])
    for key, seqs in firsts.items():
        assert seqs == sorted(seqs), key


def test_throttles_that_existed_before_come_back_exactly(rc37: _Cluster, tmp_path: Path) -> None:
    c = rc37
    topic = f"rx_throttle_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 2, 1)
    produce(c.bootstrap, topic, {0: 500, 1: 500}, value=b"v" * 1000)
    # static on broker 2 (server.properties, restart), dynamic default, dynamic on broker 1,
    # and a topic's own throttled replicas
    st = c.sandbox.require()
    node2 = next(n for n in st.nodes if n.node_id == 2)
    original = node2.config_path.read_text()
    node2.config_path.write_text(original + "leader.replication.throttled.rate=7770000\n")
    c.sandbox.stop_node(2)
    c.sandbox.start_node(2)
    try:
        c.alter_configs(ResourceType.BROKER, "", {"follower.replication.throttled.rate": "8880000"})
        c.alter_configs(ResourceType.BROKER, "1", {"leader.replication.throttled.rate": "9990000"})
        c.alter_configs(ResourceType.TOPIC, topic, {"leader.replication.throttled.replicas": "1:0"})
        before = {b: c.configs(ResourceType.BROKER, b) for b in ("0", "1", "2")}
        assert before["0"]["follower.replication.throttled.rate"] == ("8880000", 3)
        before_topic = c.configs(ResourceType.TOPIC, topic)
        plan = _write_plan(tmp_path / "p.json", _rf3(c, [topic]))
        r = run_cli("reassign", "execute", str(plan), "--throttle", "2MB", "--rate-interval", "0",
                    "--execute", "-b", c.bootstrap)
        assert r.code == 0, r.err
        for b in ("0", "1", "2"):
            now = c.configs(ResourceType.BROKER, b)
            for k in THROTTLE_KEYS[:2]:
                assert now.get(k) == before[b].get(k), (b, k, now.get(k), before[b].get(k))
        assert c.configs(ResourceType.BROKER, "2")["leader.replication.throttled.rate"] == \
            ("7770000", 4)
        now_topic = c.configs(ResourceType.TOPIC, topic)
        for k in THROTTLE_KEYS[2:]:
            assert now_topic.get(k) == before_topic.get(k), k
    finally:
        c.alter_configs(ResourceType.BROKER, "", {"follower.replication.throttled.rate": None})
        c.alter_configs(ResourceType.BROKER, "1", {"leader.replication.throttled.rate": None})
        c.alter_configs(ResourceType.TOPIC, topic, {"leader.replication.throttled.replicas": None})
        node2.config_path.write_text(original)
        c.sandbox.stop_node(2)
        c.sandbox.start_node(2)


def _nothing_changed(c: _Cluster, topic: str, reps: dict[int, list[int]],
                     throttles: dict[str, tuple[str | None, int]]) -> None:
    assert c.replicas(topic) == reps
    assert c.in_flight() == {}
    assert c.throttles() == throttles


@pytest.mark.parametrize("case,code,needle", [
    ("malformed", 2, "not valid JSON"),
    ("duplicate", 2, "listed twice"),
    ("unknown_broker", 5, "not registered"),
    ("unknown_topic", 4, "does not exist"),
    ("stale", 5, "changed since the plan was made"),
    ("rf_above_brokers", 5, "above the 3 registered brokers"),
])
def test_bad_plans_change_nothing(rc37: _Cluster, tmp_path: Path, case: str, code: int,
                                  needle: str) -> None:
    c = rc37
    topic = f"rx_bad_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 1, 1)
    reps = c.replicas(topic)
    throttles = c.throttles()
    cur = reps[0]
    other = [b for b in (0, 1, 2) if b not in cur]
    entry: dict[str, Any] = {"topic": topic, "partition": 0, "replicas": cur + other[:1]}
    doc: dict[str, Any] = {"version": 1, "partitions": [entry]}
    text = json.dumps(doc)
    if case == "malformed":
        text = text[:-3]
    elif case == "duplicate":
        entry["replicas"] = [cur[0], cur[0]]
        text = json.dumps(doc)
    elif case == "unknown_broker":
        entry["replicas"] = [cur[0], 42]
        text = json.dumps(doc)
    elif case == "unknown_topic":
        entry["topic"] = "no_such_topic_rx"
        text = json.dumps(doc)
    elif case == "rf_above_brokers":
        entry["replicas"] = [0, 1, 2, 3]
        text = json.dumps(doc)
    elif case == "stale":
        doc["opskit"] = {
            "format": "opskit/reassign-plan", "format_version": 1,
            "created": "2026-11-24T00:00:00Z", "goal": {"kind": "from-json"},
            "brokers": [0, 1, 2],
            "base": [{"topic": topic, "partition": 0, "replicas": other[1:], "size_bytes": 0}],
            "estimates": {"replicas_moved": 1, "replicas_lower_bound": 1, "bytes_moved": 0,
                          "bytes_lower_bound": 0}}
        text = json.dumps(doc)
    plan = tmp_path / "plan.json"
    plan.write_text(text)
    r = subprocess.run(_opskit("reassign", "execute", str(plan), "--throttle", "1MB",
                               "--execute", "-b", c.bootstrap),
                       check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("opskit: error:") and needle in lines[0], lines
    _nothing_changed(c, topic, reps, throttles)


def test_refuses_foreign_reassignment_then_adopts_it(rc37: _Cluster, tmp_path: Path) -> None:
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient

    c = rc37
    topic = f"rx_adopt_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 2, 1)
    produce(c.bootstrap, topic, {0: 2000, 1: 10}, value=b"v" * 1000)
    reps = c.replicas(topic)
    src, dst = reps[0][0], next(b for b in (0, 1, 2) if b not in reps[0])
    # someone else's slow move: a tiny throttle of their own keeps it in flight
    c.alter_configs(ResourceType.BROKER, str(dst), {"follower.replication.throttled.rate": "20000"})
    c.alter_configs(ResourceType.TOPIC, topic,
                    {"follower.replication.throttled.replicas": f"0:{dst}"})
    kp = KafkaAdminClient(bootstrap_servers=c.bootstrap.split(","))
    try:
        kp.alter_partition_reassignments({KTP(topic, 0): [src, dst]})
    finally:
        kp.close()
    targets = {(topic, 0): [src, dst], (topic, 1): reps[1] + [dst] if dst not in reps[1] else reps[1]}
    plan = _write_plan(tmp_path / "p.json", targets)
    r = run_cli("reassign", "execute", str(plan), "--throttle", "5MB", "--rate-interval", "0",
                "--execute", "-b", c.bootstrap)
    assert r.code == 5 and "--adopt" in r.err, r.err
    assert c.throttles().keys() == {f"BROKER:{dst}:follower.replication.throttled.rate",
                                    f"TOPIC:{topic}:follower.replication.throttled.replicas"}
    s = run_cli("reassign", "status", "-o", "json", "-b", c.bootstrap)
    assert s.code == 0 and any(x["partition"] == f"{topic}:0" for x in s.json()["in_flight"])
    r = run_cli("reassign", "execute", str(plan), "--throttle", "5MB", "--rate-interval", "0",
                "--adopt", "--execute", "-o", "json", "-b", c.bootstrap)
    assert r.code == 0, r.err
    assert f"{topic}:0" in r.json()["adopted"]
    subs = Journal(c.cluster_id()).submissions(plan_id(parse_plan(plan.read_text())))
    assert all(tp.partition != 0 for tp in subs)  # the adopted move was never submitted
    assert c.replicas(topic)[0] == [src, dst]
    # their own throttle values are back as they were
    assert c.configs(ResourceType.BROKER, str(dst))["follower.replication.throttled.rate"][0] == "20000"
    c.alter_configs(ResourceType.BROKER, str(dst), {"follower.replication.throttled.rate": None})
    c.alter_configs(ResourceType.TOPIC, topic, {"follower.replication.throttled.replicas": None})


def test_broker_stopped_mid_move_pauses_then_resumes(rc37: _Cluster, tmp_path: Path) -> None:
    c = rc37
    topic = f"rx_stop_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 1, 1)
    produce(c.bootstrap, topic, {0: 4000}, value=b"v" * 1000)
    cur = c.replicas(topic)[0]
    victim = next(b for b in (1, 2) if b not in cur)  # never node 0, the controller
    plan = _write_plan(tmp_path / "p.json", {(topic, 0): cur + [victim]})
    proc = subprocess.Popen(_opskit("reassign", "execute", str(plan), "--throttle", "300KB",
                                    "--rate-interval", "0", "--stall-timeout", "8", "--execute",
                                    "-b", c.bootstrap),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not c.in_flight() and time.time() < deadline:
        time.sleep(0.3)
    assert c.in_flight(), "the move never started"
    c.sandbox.stop_node(victim)
    try:
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode == 3, err
        assert f"waiting for broker(s) {victim}" in err
        assert err.strip().splitlines()[-1].startswith("opskit: error: no progress for 8s")
    finally:
        c.sandbox.start_node(victim)
    # while it is unfinished, another plan is refused (their throttles would overlap)
    other = _write_plan(tmp_path / "other.json", {(topic, 0): cur})
    o = run_cli("reassign", "execute", str(other), "--execute", "-b", c.bootstrap)
    assert o.code == 5 and "another opskit execution is unfinished" in o.err, o.err
    r = subprocess.run(_opskit("reassign", "execute", str(plan), "--resume", "--execute",
                               "-b", c.bootstrap), check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert c.replicas(topic)[0] == cur + [victim]
    assert c.throttles() == {}


def test_cancel_reverts_in_flight_moves(rc37: _Cluster, tmp_path: Path) -> None:
    c = rc37
    topic = f"rx_cancel_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 1, 1)
    produce(c.bootstrap, topic, {0: 8000}, value=b"v" * 1000)  # ~80 s at the throttle
    cur = c.replicas(topic)[0]
    dst = next(b for b in (0, 1, 2) if b not in cur)
    plan = _write_plan(tmp_path / "p.json", {(topic, 0): cur + [dst]})
    proc = subprocess.Popen(_opskit("reassign", "execute", str(plan), "--throttle", "100KB",
                                    "--rate-interval", "0", "--execute", "-b", c.bootstrap),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not c.in_flight() and time.time() < deadline:
        time.sleep(0.3)
    dry = run_cli("reassign", "cancel", "-b", c.bootstrap)
    assert dry.code == 0 and "would cancel 1" in dry.out
    r = run_cli("reassign", "cancel", "--execute", "-b", c.bootstrap)
    assert r.code == 0 and "cancelled 1" in r.out, r.out + r.err
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 6 and "did not complete" in err, err  # never resubmitted
    assert c.replicas(topic)[0] == cur
    assert c.throttles() == {}


def test_tansu_lacks_the_apis(tmp_path: Path) -> None:
    from opskit.sandbox import compat

    if compat.find_binary("tansu") is None:
        pytest.skip("tansu not installed; run scripts/install-compat.sh")
    b = compat.start_tansu(tmp_path / "tansu")
    try:
        r = run_cli("reassign", "status", "-b", b.bootstrap)
    finally:
        b.stop()
    assert r.code == 3, r.err
    assert "does not support" in r.err
    assert any(api in r.err for api in ("PartitionReassignments", "ElectLeaders",
                                        "IncrementalAlterConfigs", "DescribeConfigs"))


def test_throttle_below_the_write_rate_is_refused(rc37: _Cluster, tmp_path: Path) -> None:
    c = rc37
    topic = f"rx_hot_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 1, 1)
    cur = c.replicas(topic)[0]
    dst = next(b for b in (0, 1, 2) if b not in cur)
    plan = _write_plan(tmp_path / "p.json", {(topic, 0): cur + [dst]})
    stop = threading.Event()

    def write() -> None:  # about 1 MB/s into the moving partition
        p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20})
        while not stop.is_set():
            for _ in range(100):
                p.produce(topic, value=b"w" * 1000)
            p.poll(0)
            time.sleep(0.1)
        p.flush(30)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    try:
        time.sleep(2)
        r = run_cli("reassign", "execute", str(plan), "--throttle", "50KB", "--execute",
                    "-b", c.bootstrap)
    finally:
        stop.set()
        t.join(30)
    assert r.code == 5, r.err
    assert "below the write rate" in r.err and r.err.count("\n") == 1
    assert c.replicas(topic)[0] == cur and c.in_flight() == {}


def test_opskit_plan_then_execute_then_verify(rc37: _Cluster, tmp_path: Path) -> None:
    """The two halves together: ``reassign plan`` writes the file (with its base for
    compare-and-set), ``execute`` runs it, ``verify`` agrees; Kafka's tool reads the same file."""
    c = rc37
    topic = f"rx_planned_{uuid.uuid4().hex[:6]}"
    create_topic(c.bootstrap, topic, 3, 1)
    produce(c.bootstrap, topic, {p: 200 for p in range(3)}, value=b"v" * 1000)
    plan = tmp_path / "rf3.json"
    r = run_cli("reassign", "plan", "--replication-factor", "3", "--topic", topic,
                "--write-plan", str(plan), "-b", c.bootstrap)
    assert r.code == 0, r.err
    assert "opskit" in json.loads(plan.read_text())
    dry = run_cli("reassign", "execute", str(plan), "--throttle", "5MB", "-o", "json",
                  "-b", c.bootstrap)
    assert dry.code == 0, dry.err
    assert dry.json()["to_move"] == 3 and dry.json()["compare_and_set"] == "plan base"
    r = run_cli("reassign", "execute", str(plan), "--throttle", "5MB", "--execute",
                "-b", c.bootstrap)
    assert r.code == 0, r.err
    assert all(len(reps) == 3 for reps in c.replicas(topic).values())
    v = run_cli("reassign", "verify", str(plan), "-b", c.bootstrap)
    assert v.code == 0, v.out
    # the same plan again: everything is in place, nothing is submitted
    again = run_cli("reassign", "execute", str(plan), "--throttle", "5MB", "--execute",
                    "-o", "json", "-b", c.bootstrap)
    assert again.code == 0, again.err
    assert c.throttles() == {} and c.in_flight() == {}
