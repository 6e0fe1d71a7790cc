"""Errors that name the real cause, and a failed read that is never "nothing there".

A fault-injecting proxy (tests/broker_double.py) in front of the real Kafka 3.7 broker
closes the connection on one API (what Heraclitus does on ListGroups, DescribeGroups and
DescribeConfigs), never answers it, or answers it with bytes no client can parse. The
double is fault injection only: the real Heraclitus is tested in
test_heraclitus_never_ok.py.

* ``lag --all-groups``: a closed connection names the broker and the API and says it
  closed the connection (never a missing ACL, never "cannot reach": ApiVersions and
  Metadata were answered); an unanswered API is named as such; garbage is "answered
  something opskit cannot parse". Exit 3 each time.
* ``snapshot`` writes its document with "lag severity: UNKNOWN" and the reason instead
  of "No consumer groups" and "OK", exit 3; ``throughput`` counts the messages it could
  read and exits 3 for the consumed rates it could not; ``dr snapshot`` refuses in one
  line (exit 3): a DR snapshot without groups is not a DR snapshot.
* ``throughput`` on a broker whose ListOffsets fails: the topic's messages are
  "unknown", never 0 partitions / 0 messages with exit 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from broker_double import Behaviour, BrokerDouble
from helpers import commit, create_topic, produce

LIST_GROUPS, LIST_OFFSETS = 16, 2
TIMEOUT = "10"  # a closed connection fails at once; the budget only matters on a loaded CI machine


@dataclass(frozen=True)
class Scenario:
    bootstrap: str
    topic: str
    group: str


@pytest.fixture(scope="module")
def scenario(kafka) -> Scenario:  # type: ignore[no-untyped-def]
    u = uuid.uuid4().hex[:8]
    topic, group = f"cause_{u}", f"cause-g-{u}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: 5, 1: 5})
    commit(kafka.bootstrap, group, {(topic, 0): 2, (topic, 1): 3})
    return Scenario(kafka.bootstrap, topic, group)


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


@pytest.fixture
def closes_list_groups(scenario: Scenario) -> Iterator[BrokerDouble]:
    with BrokerDouble(scenario.bootstrap, Behaviour(close_on=frozenset({LIST_GROUPS}))) as d:
        yield d


@pytest.mark.timeout(300)
def test_lag_all_groups_names_the_api_the_broker_fails(scenario: Scenario, tmp_path: Path) -> None:
    expected = {
        "close": "closed the connection on ListGroups",
        "stall": "answers ApiVersions but not ListGroups",
        "garbage": "answered something opskit cannot parse to ListGroups",
    }
    for kind, words in expected.items():
        key = frozenset({LIST_GROUPS})
        b = {"close": Behaviour(close_on=key), "stall": Behaviour(stall_on=key),
             "garbage": Behaviour(garbage_on=key)}[kind]
        with BrokerDouble(scenario.bootstrap, b) as d:
            r = _run(d.bootstrap, tmp_path, "lag", "--all-groups", "--no-time")
        assert r.code == 3, (kind, r.code, r.err)
        assert words in r.error and d.bootstrap in r.error, (kind, r.error)
        assert "ACL" not in r.err and "cannot reach" not in r.err, (kind, r.err)
        assert "no consumer groups" not in r.out, (kind, r.out)


@pytest.mark.timeout(300)
def test_snapshot_without_groups_is_unknown_not_ok(scenario: Scenario, tmp_path: Path,
                                                   closes_list_groups: BrokerDouble) -> None:
    r = _run(closes_list_groups.bootstrap, tmp_path, "snapshot", "--no-time")
    assert r.code == 3, r.err
    assert "- lag severity: **UNKNOWN**" in r.out and "**OK**" not in r.out
    assert "No consumer groups" not in r.out
    assert "closed the connection on ListGroups" in r.out
    assert "closed the connection on ListGroups" in r.error
    # the rest of the document still stands
    assert f"| {scenario.topic} | 2 | 1 |" in r.out


@pytest.mark.timeout(300)
def test_throughput_and_dr_snapshot_without_a_group_list(scenario: Scenario, tmp_path: Path,
                                                         closes_list_groups: BrokerDouble) -> None:
    r = _run(closes_list_groups.bootstrap, tmp_path, "throughput", "--interval", "1s",
             "-t", scenario.topic, "-o", "json")
    assert r.code == 3, r.err
    assert r.out, r.err
    [row] = json.loads(r.out)["topics"]
    # the log end was read after the failed ListGroups: the topic is counted, not "0 partitions"
    assert row["partitions"] == 2 and row["messages"] == 0, row
    assert "consumed rates unknown" in r.error and "ListGroups" in r.error
    snap = tmp_path / "dr.json"
    r = _run(closes_list_groups.bootstrap, tmp_path, "dr", "snapshot", "--file", str(snap))
    assert r.code == 3 and "closed the connection on ListGroups" in r.error, r.err
    assert not snap.exists()


@pytest.mark.timeout(300)
def test_throughput_with_an_unreadable_log_end_is_unknown(scenario: Scenario,
                                                         tmp_path: Path) -> None:
    with BrokerDouble(scenario.bootstrap, Behaviour(close_on=frozenset({LIST_OFFSETS}))) as d:
        r = _run(d.bootstrap, tmp_path, "throughput", "--interval", "1s", "-t", scenario.topic,
                 "-g", scenario.group, "-o", "json")
        lag = _run(d.bootstrap, tmp_path, "lag", "-g", scenario.group, "-o", "json")
        snap = _run(d.bootstrap, tmp_path, "snapshot", "--no-time")
    # the snapshot is written, but its lag is UNKNOWN: exit 3 and one line (was exit 0)
    assert snap.code == 3, snap.err
    assert "- lag severity: **UNKNOWN**" in snap.out and "lag severity UNKNOWN" in snap.error
    assert scenario.group in snap.error
    assert r.code == 3, r.err
    assert r.out, r.err  # the counted part is printed, not only the error
    [row] = json.loads(r.out)["topics"]
    # was: 2 partitions, 0 messages, exit 0 (librdkafka answers a failed ListOffsets -1001)
    assert row["messages"] is None and row["messages_per_second"] is None, row
    assert row["log_end_unread"] == 2 and "ListOffsets" in row["log_end_note"], row
    assert "unknown" in r.error
    # lag over log offsets nobody read is UNKNOWN (was "lag 0, OK", exit 0; then exit 70)
    assert lag.code == 3, lag.err
    assert json.loads(lag.out)["severity"] == "UNKNOWN"
