"""opskit against the real StreamNest binary (3 brokers, each started on its own).

StreamNest speaks HTTP only: opskit is pointed at it with ``-b http://HOST:PORT,...``.
``health`` checks every broker's /metadata and every partition owner, ``throughput``
and the exporter read the brokers' two counters, and the Kafka-only commands
refuse in one line (exit 3). Numbers are checked against what the test did.
"""

from __future__ import annotations

import signal
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from helpers import run_cli

from opskit.cli import exits
from opskit.sandbox import compat


def _counters(sn: compat.StreamNestCluster) -> dict[str, tuple[float, float]]:
    out = {}
    for port, url in zip(sn.ports, sn.urls, strict=True):
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            lines = r.read().decode().splitlines()
        vals = {ln.split()[0]: float(ln.split()[1]) for ln in lines if ln.startswith("streamnest_")}
        out[f"127.0.0.1:{port}"] = (vals["streamnest_messages_produced_total"],
                                    vals["streamnest_messages_consumed_total"])
    return out


def test_health_true_numbers(streamnest: compat.StreamNestCluster) -> None:
    topic = f"h_{uuid.uuid4().hex[:8]}"
    streamnest.create_topic(topic, 5)
    r = run_cli("health", "-b", streamnest.bootstrap, "--expected-brokers", "3", "-o", "json",
                "--timeout", "5")
    assert r.code == exits.OK, r.out + r.err
    data = r.json()
    assert data["kind"] == "streamnest" and data["severity"] == "OK"
    assert {b["broker"] for b in data["brokers"]} == {f"127.0.0.1:{p}" for p in streamnest.ports}
    assert all(b["answers"] for b in data["brokers"])
    md = streamnest.request("/metadata")["topic_partitions"]
    assert data["counts"]["topics"] == len(md)
    assert data["counts"]["partitions"] == sum(len(m["partitions"]) for m in md.values())
    assert data["counts"]["partitions_owner_unreachable"] == 0


def test_throughput_counts_what_was_produced_and_consumed(
    streamnest: compat.StreamNestCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opskit.cli import throughput as tp_mod

    topic = f"t_{uuid.uuid4().hex[:8]}"
    streamnest.create_topic(topic, 3)
    real_sleep = time.sleep

    def between(seconds: float) -> None:  # 9 produced through 3 brokers, 4 consumed
        for i in range(9):
            streamnest.produce(topic, f"m{i}", partition=i % 3, index=(i + 1) % 3)
        for off in range(2):
            assert streamnest.consume(topic, 0, off, index=2) is not None
            assert streamnest.consume(topic, 2, off, index=1) is not None
        real_sleep(min(seconds, 0.5))

    monkeypatch.setattr(tp_mod, "_sleep", between)
    before = _counters(streamnest)
    r = run_cli("throughput", "-b", streamnest.bootstrap, "--interval", "1s", "-o", "json")
    after = _counters(streamnest)
    assert r.code == exits.OK, r.out + r.err
    data = r.json()
    assert (data["produced"], data["consumed"]) == (9, 4)
    rows = {x["broker"]: (x["produced"], x["consumed"]) for x in data["brokers"]}
    assert rows == {b: (int(after[b][0] - before[b][0]), int(after[b][1] - before[b][1]))
                    for b in after}
    r = run_cli("throughput", "-b", streamnest.bootstrap, "-g", "g1", "--interval", "1s")
    assert r.code == exits.UNKNOWN and "no consumer groups" in r.err


def test_exporter_once_serves_up_and_counters(streamnest: compat.StreamNestCluster) -> None:
    streamnest.produce(_topic(streamnest), "x", partition=0)
    before = _counters(streamnest)
    r = run_cli("exporter", "--once", "-b", streamnest.bootstrap, "--timeout", "5")
    after = _counters(streamnest)
    assert r.code == exits.OK, r.err
    lines = r.out.splitlines()
    assert "opskit_streamnest_up 1" in lines
    for b in before:
        assert f'opskit_streamnest_broker_up{{broker="{b}"}} 1' in lines
        got = next(ln for ln in lines
                   if ln.startswith(f'opskit_streamnest_messages_produced_total{{broker="{b}"}}'))
        assert before[b][0] <= float(got.split()[-1]) <= after[b][0]


def _topic(sn: compat.StreamNestCluster) -> str:
    t = f"e_{uuid.uuid4().hex[:8]}"
    sn.create_topic(t, 3)
    return t


@pytest.mark.parametrize("argv", [
    ("lag", "-g", "g1"),
    ("lag", "--all-groups"),
    ("offsets", "reset", "--group", "g1", "--topic", "t", "--to-earliest"),
    ("offsets", "reset", "--group", "g1", "--topic", "t", "--to-earliest", "--execute"),
    ("snapshot",),
])
def test_kafka_only_commands_say_why_in_one_line(
    streamnest: compat.StreamNestCluster, argv: tuple[str, ...]
) -> None:
    t0 = time.monotonic()
    r = run_cli(*argv, "-b", streamnest.bootstrap, "--timeout", "3")
    assert r.code == exits.UNKNOWN, r.out + r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("opskit: error: "), r.err
    assert "no consumer groups" in lines[0] and "Traceback" not in r.err
    assert r.out == ""
    assert time.monotonic() - t0 < 4  # nothing is asked: the refusal is immediate


def test_a_broker_down_is_critical_and_never_a_smaller_total(tmp_path: Path) -> None:
    from compat_fixtures import require_binaries

    require_binaries("streamnest")
    with compat.start_streamnest(tmp_path / "sn", brokers=3) as sn:
        sn.create_topic("down", 6)
        victim = next(p for r, p in sn.handle._procs if r == "broker-2")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        r = run_cli("health", "-b", sn.urls[0], "-o", "json", "--timeout", "3")
        assert r.code == exits.CRITICAL, r.out + r.err
        data = r.json()
        assert data["counts"]["brokers"] == 3 and data["counts"]["brokers_answering"] == 2
        assert data["counts"]["partitions_owner_unreachable"] == 2  # 6 partitions, round robin
        r = run_cli("throughput", "-b", sn.urls[0], "--interval", "0.5s", "-o", "json",
                    "--timeout", "3")
        assert r.code == exits.UNKNOWN and r.json()["produced"] is None, r.out + r.err
        r = run_cli("exporter", "--once", "-b", sn.urls[0], "--timeout", "3")
        assert r.code == exits.UNKNOWN and "opskit_streamnest_up 0" in r.out.splitlines()
