"""The real Heraclitus (vendored binary, file storage): no command exits 0 with a missing or
impossible answer, and each says what it could not read.

Heraclitus advertises 34 APIs and handles 13: on ListGroups, DescribeGroups and
DescribeConfigs it closes the connection. Before, ``snapshot`` said "lag severity: OK" and
"No consumer groups" with exit 0 (there were two groups), ``throughput`` reported 0
partitions and 0 messages while records were produced, ``lag --all-groups`` blamed a
missing Describe ACL. After a restart on file storage every partition's log end reads 0
while the records and the committed offsets survive: opskit names it (the broker lost its
log end) instead of "lag 0, OK".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from compat_fixtures import create_topics
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.log_end_check import checked_log_offsets
from opskit.core.connection import ConnectionConfig
from opskit.core.log_end import LogEndSource
from opskit.core.models import TopicPartition
from opskit.sandbox import compat

TIMEOUT = "5"


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str

    @property
    def error(self) -> str:
        lines = [ln for ln in self.err.splitlines() if ln.startswith("opskit: error:")]
        assert len(lines) == 1, self.err
        return lines[0]


def _run(bootstrap: str, tmp: Path, *argv: str) -> Run:
    env = dict(os.environ, OPSKIT_CONFIG=str(tmp / "config.yaml"),
               OPSKIT_STATE=str(tmp / "state"), PYTHONWARNINGS="ignore")
    p = subprocess.run([sys.executable, "-m", "opskit.cli.main", *argv, "-b", bootstrap,
                        "--timeout", TIMEOUT], check=False, capture_output=True, text=True,
                       timeout=180, env=env, stdin=subprocess.DEVNULL)
    assert "Traceback" not in p.stderr, p.stderr
    return Run(p.returncode, p.stdout, p.stderr)


def _produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"x", key=str(i).encode())
    assert p.flush(30) == 0


def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[CkTP(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


@dataclass(frozen=True)
class Scenario:
    bootstrap: str
    topic: str
    groups: tuple[str, str]


@pytest.fixture(scope="module")
def scenario(heraclitus: compat.CompatBroker) -> Scenario:
    u = uuid.uuid4().hex[:8]
    topic = f"hn-{u}"
    create_topics(heraclitus.bootstrap, {topic: 1})
    _produce(heraclitus.bootstrap, topic, 40)
    groups = (f"hn-a-{u}", f"hn-b-{u}")
    _commit(heraclitus.bootstrap, groups[0], {(topic, 0): 30})
    _commit(heraclitus.bootstrap, groups[1], {(topic, 0): 10})
    return Scenario(heraclitus.bootstrap, topic, groups)


@pytest.mark.timeout(600)
def test_no_command_says_ok_over_what_it_could_not_read(scenario: Scenario,
                                                        tmp_path: Path) -> None:
    bs = scenario.bootstrap
    snap = _run(bs, tmp_path, "snapshot", "--no-time")
    assert snap.code == 3, snap.err
    assert "- lag severity: **UNKNOWN**" in snap.out and "**OK**" not in snap.out
    assert "No consumer groups" not in snap.out
    assert f"the broker at {bs} closed the connection on ListGroups" in snap.error
    assert f"| {scenario.topic} | 1 | 1 |" in snap.out  # the rest of the document stands

    every = _run(bs, tmp_path, "lag", "--all-groups", "--no-time")
    assert every.code == 3, every.err
    assert f"the broker at {bs} closed the connection on ListGroups" in every.error
    assert "ACL" not in every.err and "cannot reach" not in every.err

    health = _run(bs, tmp_path, "health", "-o", "json")
    assert health.code == 3, health.err
    findings = {f["check"]: f for f in json.loads(health.out)["findings"]}
    assert "closed the connection on DescribeConfigs" in findings["under_min_isr"]["message"]

    dr = _run(bs, tmp_path, "dr", "snapshot", "--file", str(tmp_path / "dr.json"))
    assert dr.code == 3 and "closed the connection on DescribeConfigs" in dr.error, dr.err
    assert not (tmp_path / "dr.json").exists()


@pytest.mark.timeout(600)
def test_throughput_counts_what_was_produced(scenario: Scenario, tmp_path: Path) -> None:
    bs = scenario.bootstrap
    stop = threading.Event()

    def keep_producing() -> None:  # for as long as the command runs, whatever the load
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        while not stop.is_set():
            p.produce(scenario.topic, value=b"x")
            p.flush(10)
            time.sleep(0.1)

    t = threading.Thread(target=keep_producing)
    t.start()
    try:
        r = _run(bs, tmp_path, "throughput", "--interval", "3s", "-t", scenario.topic,
                 "-o", "json")
    finally:
        stop.set()
        t.join()
    # was: 0 partitions, 0 messages, exit 0 (the failed ListGroups left librdkafka unable
    # to find a leader, and the failed log-end reads were dropped)
    [row] = json.loads(r.out)["topics"]
    assert row["partitions"] == 1, row
    assert row["messages"] is not None and row["messages"] > 0, row
    assert r.code == 3 and "ListGroups" in r.error, r.err  # the consumed rates are unknown


@pytest.mark.timeout(600)
def test_a_restart_that_lost_the_log_end_is_named(fresh_heraclitus: compat.CompatBroker,
                                                  tmp_path: Path) -> None:
    b = fresh_heraclitus
    topic, group = f"hr-{uuid.uuid4().hex[:8]}", f"hr-g-{uuid.uuid4().hex[:8]}"
    create_topics(b.bootstrap, {topic: 1})
    _produce(b.bootstrap, topic, 40)
    _commit(b.bootstrap, group, {(topic, 0): 30})
    # Heraclitus writes records to its files in the background: a restart before that
    # loses them (then nothing settles the log end: committed beyond it, UNKNOWN as well).
    # Here the records must survive, so wait until its partition directory holds them.
    part = b.workdir / "heraclitus-data" / "heraclitus" / "messages" / f"topic={topic}" / \
        "partition=0"
    deadline = time.monotonic() + 60
    while not (part.is_dir() and any(f.is_file() for f in part.rglob("*"))):
        assert time.monotonic() < deadline, f"no records written under {part}"
        time.sleep(0.2)
    b.restart()
    tp = TopicPartition(topic, 0)
    admin = KafkaAdmin(ConnectionConfig(b.bootstrap), timeout=5)
    try:
        offs, checks = checked_log_offsets(admin, [tp], admin.metadata())
    finally:
        admin.close()
    assert offs.offsets[tp].log_end == 0  # what the broker says after the restart
    v = checks[tp]
    assert v.log_end is None and v.source is LogEndSource.RECORDS_PAST_END, v
    assert "lost its log end" in v.detail and "returned records up to offset" in v.detail, v.detail
    # lag names it: the group is UNKNOWN (exit 3), never "lag 0, OK" (what a proxy hiding
    # the unsupported APIs showed before: committed_beyond_log_end, severity OK, exit 0)
    lag = _run(b.bootstrap, tmp_path, "lag", "-g", group, "-o", "json")
    assert lag.code == 3, lag.err
    data = json.loads(lag.out)
    [g] = data["groups"]
    [p] = g["partitions"]
    assert g["severity"] == "UNKNOWN" and data["severity"] == "UNKNOWN", g
    assert p["anomalies"][0] == "log_end_lost" and p["lag"] is None, p
    assert "lost its log end" in data["log_end_checks"][f"{topic}:0"]["detail"]
    table = _run(b.bootstrap, tmp_path, "lag", "-g", group, "--no-time")
    assert table.code == 3 and "log_end_lost" in table.out and "restarted" in table.out, table.out
    # throughput refuses to measure over a log end it cannot trust: one line, exit 3
    r = _run(b.bootstrap, tmp_path, "throughput", "--interval", "1s", "-t", topic, "-g", group)
    assert r.code == 3 and "lost its log end" in r.error, r.err
