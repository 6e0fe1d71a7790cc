"""A broker that contradicts itself about the log end: the answer the records back, or UNKNOWN.

The broker double (tests/broker_double.py) sits in front of the real Kafka 3.7
broker and misreports one of the two answers that carry a partition's log end:
ListOffsets (latest) too low, as Tansu 0.6 does after batched produces; or the
Fetch high watermark too high, with no record behind it. opskit must report the
log end the fetched records confirm (and say so), and otherwise UNKNOWN (exit 3),
never OK; commands that act on the log end refuse.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from broker_double import BrokerDouble, misreporting
from helpers import commit, create_topic, produce, run_cli

from opskit.adapters.kafka.capabilities import api_versions
from opskit.cli import exits

RECORDS = 5
COMMITTED = {0: 2, 1: 3}


@dataclass(frozen=True)
class Scenario:
    bootstrap: str
    topic: str
    group: str
    apis: frozenset[int]


@pytest.fixture(scope="module")
def scenario(kafka) -> Scenario:  # type: ignore[no-untyped-def]
    u = uuid.uuid4().hex[:8]
    topic, group = f"le_{u}", f"le-g-{u}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: RECORDS, 1: RECORDS})
    commit(kafka.bootstrap, group, {(topic, p): o for p, o in COMMITTED.items()})
    host, _, port = kafka.bootstrap.rpartition(":")
    return Scenario(kafka.bootstrap, topic, group, frozenset(api_versions(host, int(port), 10)))


@pytest.fixture
def listed_too_low(scenario: Scenario) -> Iterator[str]:
    with BrokerDouble(scenario.bootstrap, misreporting(scenario.apis, latest_minus=3)) as d:
        yield d.bootstrap


@pytest.fixture
def unbacked_high_watermark(scenario: Scenario) -> Iterator[str]:
    with BrokerDouble(scenario.bootstrap, misreporting(scenario.apis, high_watermark_plus=4)) as d:
        yield d.bootstrap


def _rows(data: dict[str, Any], s: Scenario) -> dict[int, dict[str, Any]]:
    [g] = [g for g in data["groups"] if g["group"] == s.group]
    return {p["partition"]: p for p in g["partitions"] if p["topic"] == s.topic}


def test_listed_end_too_low_uses_the_fetch_high_watermark(scenario: Scenario,
                                                          listed_too_low: str) -> None:
    r = run_cli("lag", "-g", scenario.group, "-o", "json", "-b", listed_too_low, "--timeout", "5")
    assert r.code == exits.OK, r.err
    data = r.json()
    rows = _rows(data, scenario)
    for p, c in COMMITTED.items():
        assert (rows[p]["log_end_offset"], rows[p]["lag"]) == (RECORDS, RECORDS - c), rows[p]
        assert rows[p]["anomalies"] == ["log_end_from_fetch"], rows[p]
        assert rows[p]["lag_seconds"] is not None
        check = data["log_end_checks"][f"{scenario.topic}:{p}"]
        assert (check["source"], check["log_end"]) == ("fetch_high_watermark", RECORDS), check
        assert "ListOffsets (latest) says 2" in check["detail"], check


def test_no_time_checks_only_what_looks_wrong(scenario: Scenario, listed_too_low: str) -> None:
    """The documented limit: without lag in time no Fetch is at hand, so a partition whose
    committed offset is not past the (wrong) listed end is not cross-checked."""
    r = run_cli("lag", "-g", scenario.group, "--no-time", "-o", "json", "-b", listed_too_low,
                "--timeout", "5")
    assert r.code == exits.OK, r.err
    rows = _rows(r.json(), scenario)
    # p1: committed 3 is past the listed 2: checked, corrected
    assert (rows[1]["log_end_offset"], rows[1]["lag"], rows[1]["anomalies"]) == \
        (RECORDS, 2, ["log_end_from_fetch"])
    # p0: committed 2 equals the listed 2: nothing looks wrong, nothing is checked
    assert (rows[0]["log_end_offset"], rows[0]["lag"], rows[0]["anomalies"]) == (2, 0, [])


def test_reset_to_latest_plans_on_the_checked_log_end(scenario: Scenario,
                                                      listed_too_low: str) -> None:
    r = run_cli("offsets", "reset", "--group", scenario.group, "--topic", scenario.topic,
                "--to-latest", "-o", "json", "-b", listed_too_low, "--timeout", "5")
    assert r.code == exits.OK, r.err
    rows = {x["partition"]: x for x in r.json()["groups"][0]["rows"]}
    assert {p: rows[p]["target_offset"] for p in rows} == {0: RECORDS, 1: RECORDS}


def test_unbacked_high_watermark_is_unknown_never_ok(scenario: Scenario,
                                                     unbacked_high_watermark: str) -> None:
    bs = unbacked_high_watermark
    r = run_cli("lag", "-g", scenario.group, "-o", "json", "-b", bs, "--timeout", "5")
    assert r.code == exits.UNKNOWN, (r.code, r.err)
    data = r.json()
    assert data["severity"] == "UNKNOWN"
    [g] = [g for g in data["groups"] if g["group"] == scenario.group]
    assert g["severity"] == "UNKNOWN"
    for row in _rows(data, scenario).values():
        assert row["anomalies"] == ["log_end_inconsistent"] and row["lag"] is None, row
        assert row["log_end_offset"] is None
    assert {c["source"] for c in data["log_end_checks"].values()} == {"inconsistent"}
    # the table says why
    t = run_cli("lag", "-g", scenario.group, "-b", bs, "--timeout", "5")
    assert t.code == exits.UNKNOWN and "log_end_inconsistent" in t.out and "UNKNOWN" in t.out
    # commands that act on the log end refuse, in one line
    for argv in (["throughput", "--interval", "1s", "-t", scenario.topic],
                 ["offsets", "reset", "--group", scenario.group, "--topic", scenario.topic,
                  "--to-latest"]):
        r = run_cli(*argv, "-b", bs, "--timeout", "5")
        errors = [ln for ln in r.err.splitlines() if ln.startswith("opskit: error:")]
        assert r.code == exits.UNKNOWN and len(errors) == 1, (argv, r.code, r.err)
        assert "contradict" in errors[0], errors[0]


def test_window_on_contradicting_answers_is_unknown(scenario: Scenario,
                                                     unbacked_high_watermark: str) -> None:
    r = run_cli("lag", "-g", scenario.group, "--window", "2s", "--interval", "1s", "-o", "json",
                "-b", unbacked_high_watermark, "--timeout", "5")
    data = r.json()
    [g] = [g for g in data["groups"] if g["group"] == scenario.group]
    assert g["severity"] == "UNKNOWN" and "contradict" in g["reasons"][0], g
    assert r.code == exits.UNKNOWN, (r.code, r.err)
