"""`opskit lag --window/--watch`, `opskit throughput` and `opskit snapshot` on a real broker."""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Self

import pytest

from opskit.cli import exits
from tests.helpers import ActiveMember, commit, create_topic, produce, run_cli


class Background(threading.Thread):
    """Produces ``per_round`` records every ``every`` seconds until stopped."""

    def __init__(self, bs: str, topic: str, per_round: int, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.bs, self.topic, self.per_round, self.every = bs, topic, per_round, every
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            produce(self.bs, self.topic, {0: self.per_round})
            self.stop_event.wait(self.every)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.join(30)


def test_window_stopped_group_with_growing_log_is_stall(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"stall_{uniq}", f"stall-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 20})
    commit(bs, g, {(t, 0): 5})
    with Background(bs, t, 10):
        r = run_cli("lag", "-g", g, "-b", bs, "--window", "4s", "--interval", "1s", "-o", "json")
    data = r.json()
    [grp] = data["groups"]
    assert grp["status"] == "STALL", grp["reasons"]
    assert r.code == exits.CRITICAL
    assert grp["produce_rate"] > 0 and grp["consume_rate"] == 0
    assert grp["catch_up"]["state"] == "falling_behind"
    assert "stuck at 5" in grp["partitions"][0]["explanation"]
    assert data["samples"] == 5
    assert grp["max_lag_seconds"] is not None and grp["max_lag_seconds"] > 3


def test_window_active_consumer_keeping_up_is_ok(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"keepup_{uniq}", f"keepup-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 10})
    from confluent_kafka import Consumer

    stop = threading.Event()
    ready = threading.Event()

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bs, "group.id": g, "auto.offset.reset": "earliest",
                      "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        c.subscribe([t])
        while not stop.is_set():
            m = c.poll(0.1)
            if m is not None and not m.error():
                ready.set()
        c.close()

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    assert ready.wait(60)
    time.sleep(1)
    try:
        with Background(bs, t, 5, every=0.3):
            r = run_cli("lag", "-g", g, "-b", bs, "--window", "4s", "--interval", "1s",
                        "-o", "json")
    finally:
        stop.set()
        th.join(30)
    [grp] = r.json()["groups"]
    assert grp["status"] == "OK", grp["reasons"]
    assert r.code == exits.OK
    assert grp["consume_rate"] > 0
    table = run_cli("lag", "-g", g, "-b", bs, "--window", "2s", "--interval", "1s")
    assert table.code == exits.OK and "OK" in table.out and "samples over" in table.out


def test_watch_iterations(kafka, uniq):
    bs = kafka.bootstrap
    t, g = f"watch_{uniq}", f"watch-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 30})
    commit(bs, g, {(t, 0): 10})
    r = run_cli("lag", "-g", g, "-b", bs, "--watch", "--interval", "0.5s", "--iterations", "3",
                "-o", "json")
    docs = [json.loads(line) for line in r.out.splitlines() if line.strip()]
    assert r.code == exits.OK and len(docs) == 3
    assert all(d["groups"][0]["total_lag"] == 20 for d in docs)
    table = run_cli("lag", "-g", g, "-b", bs, "--watch", "--interval", "0.5s", "--iterations", "2")
    assert table.code == exits.OK and "LAG-TIME" in table.out and t in table.out
    bad = run_cli("lag", "-g", g, "-b", bs, "--watch", "--window", "5s")
    assert bad.code == exits.USAGE and "Traceback" not in bad.err
    bad = run_cli("lag", "-g", g, "-b", bs, "--window", "1x")
    assert bad.code == exits.USAGE


def test_throughput_counts_produced_and_consumed(kafka, uniq, monkeypatch):
    from opskit.cli import throughput as tp_mod

    bs = kafka.bootstrap
    t, g = f"tput_{uniq}", f"tput-{uniq}"
    create_topic(bs, t, 2)
    produce(bs, t, {0: 10, 1: 10})
    commit(bs, g, {(t, 0): 0, (t, 1): 0})
    real_sleep = time.sleep

    def act(seconds: float) -> None:
        # between the two readings: 300 records in, 120 consumed
        produce(bs, t, {0: 200, 1: 100})
        commit(bs, g, {(t, 0): 80, (t, 1): 40})
        real_sleep(seconds)

    monkeypatch.setattr(tp_mod, "_sleep", act)
    r = run_cli("throughput", "--interval", "3s", "-t", t, "-g", g, "-b", bs, "-o", "json")
    assert r.code == 0, r.err
    d = r.json()
    dt = d["interval_seconds"]
    assert 2.9 < dt < 10
    [row] = d["topics"]
    assert row["messages"] == 300
    assert row["messages_per_second"] == pytest.approx(300 / dt, rel=1e-6)
    assert abs(row["messages_per_second"] - 300 / 3) < 100 * 0.35  # within the interval jitter
    # bytes from DescribeLogDirs: 300 records of ~100-byte values
    if row["bytes"] is not None:
        assert 300 * 100 <= row["bytes"] <= 300 * 250
        assert row["bytes_per_second"] == pytest.approx(row["bytes"] / dt)
    else:
        assert row["bytes_note"]
    [grow] = d["groups"]
    assert grow["group"] == g and grow["messages"] == 120
    assert grow["messages_per_second"] == pytest.approx(120 / dt)
    monkeypatch.setattr(tp_mod, "_sleep", lambda s: None)
    table = run_cli("throughput", "--interval", "1s", "-t", t, "-b", bs)
    assert table.code == 0 and "MSG/S IN" in table.out and t in table.out
    missing = run_cli("throughput", "-t", f"nosuch_{uniq}", "-b", bs)
    assert missing.code == exits.NOT_FOUND


def test_snapshot_json_and_markdown(kafka, uniq, tmp_path):
    bs = kafka.bootstrap
    t, g_idle, g_live = f"snap_{uniq}", f"snap-idle-{uniq}", f"snap-live-{uniq}"
    create_topic(bs, t, 2)
    ts = int(time.time() * 1000) - 90_000
    produce(bs, t, {0: 40, 1: 10}, timestamp_ms=ts)
    commit(bs, g_idle, {(t, 0): 15, (t, 1): 10})
    with ActiveMember(bs, g_live, [t], client_id="snap-member"):
        out = tmp_path / "snap.json"
        before = time.time() * 1000
        r = run_cli("snapshot", "-o", "json", "--file", str(out), "-b", bs)
        after = time.time() * 1000
        md = run_cli("snapshot", "-b", bs)
    assert r.code == 0, r.err
    data = json.loads(out.read_text())
    c = data["cluster"]
    assert c["controller_id"] == 0 and [b["id"] for b in c["brokers"]] == [0]
    assert c["cluster_id"]
    topic = next(x for x in data["topics"] if x["topic"] == t)
    assert [p["leader"] for p in topic["partitions"]] == [0, 0]
    assert all(p["isr"] == [0] and not p["under_replicated"] for p in topic["partitions"])
    groups = {x["group"]: x for x in data["groups"]}
    idle = groups[g_idle]
    assert idle["total_lag"] == 25 and idle["state"] == "Empty"
    p0 = next(p for p in idle["partitions"] if p["partition"] == 0)
    assert (before - ts) / 1000 - 1 <= p0["lag_seconds"] <= (after - ts) / 1000 + 1
    live = groups[g_live]
    [m] = live["members_detail"]
    assert m["client_id"] == "snap-member" and sorted(m["assignment"]) == [f"{t}:0", f"{t}:1"]
    assert md.code == 0
    assert "# Kafka snapshot" in md.out and f"### {g_idle}" in md.out
    assert "snap-member" in md.out and f"| {t} | 2 | 1 | 0 | 0 |" in md.out
    assert re.search(r"\| 1m[3-5][0-9]s \|", md.out)  # ~90 s lag time in the markdown table
