"""The compatibility matrix: every read command of opskit against every real broker.

Brokers (columns): Apache Kafka 3.7 and 4.x (the ``kafka`` / ``kafka4`` fixtures),
and the real binaries of Tansu, the Hanzo Stream gateway, Heraclitus and
StreamNest (tests/compat_fixtures.py; installed by scripts/install-compat.sh).
Each column is one broker process for the whole session, shared with the other
tests. The broker double (tests/broker_double.py) is not a column: it is for
fault injection only.

Each broker gets the same small scenario: topic ``T`` (2 partitions, 10
records each, produced in batches as real producers do) with group ``G``
committed at 4 and 7, and topic ``T2`` (1 partition, 10 records) with group
``G2`` committed at 3 for ``throughput``. StreamNest (HTTP only, no groups)
gets the same topics and records through its HTTP API. Each cell runs the
command in-process (`opskit ... -b BROKER --timeout 3`) and is classified:

* **works**: exit code and output verified against what was produced and
  committed (not just exit 0);
* **degrades**: exit 3 with exactly one line ``opskit: error: ...`` on stderr
  naming what the broker lacks, no traceback (or, for ``health``, a verified
  report whose unanswerable checks are UNKNOWN with the reason);
* **n/a**: the command cannot apply to the broker (StreamNest has no consumer
  groups and no Kafka protocol): exit 3, one line saying why;
* **fails**: anything else; expected failures are xfail with their reason (an
  xfail that starts to work shows as XPASS: the matrix is then to be updated).

``EXPECTED`` below is the one place the expected cells live. With
``OPSKIT_WRITE_COMPAT_MATRIX=1`` a complete run (all six brokers) writes
docs/compat-matrix.md from the *observed* cells; ``test_doc_matches_expected``
(no broker needed) keeps the doc's table equal to ``EXPECTED``.
"""

from __future__ import annotations

import csv
import io
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from compat_fixtures import create_topics
from confluent_kafka import Producer
from helpers import (
    MATRIX_BEGIN,
    MATRIX_END,
    CliResult,
    check_matrix_doc,
    commit,
    create_topic,
    run_cli,
)

from opskit.cli import exits
from opskit.sandbox import compat

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat-matrix.md"
WRITE_ENV = "OPSKIT_WRITE_COMPAT_MATRIX"
TIMEOUT = "3"
#: wall-clock bound of one cell: no command may hang
CELL_BUDGET_S = 25.0

BROKERS = ("apache-3.7", "apache-4.x", "tansu", "hanzo-stream", "heraclitus", "streamnest")
#: the columns of docs/compat-matrix.md: every broker, each a real binary
DOC_BROKERS = BROKERS
#: the session fixture (tests/conftest.py, tests/compat_fixtures.py) of each column
FIXTURE = {"apache-3.7": "kafka", "apache-4.x": "kafka4", "tansu": "tansu",
           "hanzo-stream": "hanzo_stream", "heraclitus": "heraclitus",
           "streamnest": "streamnest"}

COMMANDS = (
    "lag",
    "lag --no-time",
    "lag --all-groups",
    "lag --window",
    "health",
    "throughput",
    "snapshot",
    "topics diff",
    "offsets reset (dry run)",
    "offsets export",
)

WORKS, DEGRADES, NA, FAILS = "works", "degrades", "n/a", "fails"

_TANSU_HW = ("Tansu 0.6 answers ListOffsets (latest) with the newest batch's base offset + 1 "
             "(1 after 10 batched records) while its Fetch high watermark is right (10): opskit "
             "cross-checks the two and uses the Fetch high watermark, which the records fetched "
             "past the listed end confirm (noted as log_end_from_fetch)")
_HANZO_NO_LIST = "no ListGroups (API 16): exits 3 naming the API"
_HANZO_SNAPSHOT = ("no ListGroups: brokers and topics written, groups left out with the "
                   "reason (groups_note); exit 3 with one line")
_HANZO_RESET = ("plan computed (partitions named); refused with exit 5 since the group cannot "
                "be checked to be inactive without DescribeGroups")
_HANZO_CONFIGS = ("DescribeConfigs advertised but librdkafka's v1 request is never answered: "
                  "exits 3 after --timeout, naming the API")

#: (command, broker) -> (expected cell, why). The one place the matrix is stated.
EXPECTED: dict[tuple[str, str], tuple[str, str]] = {}
for _cmd in COMMANDS:
    EXPECTED[(_cmd, "apache-3.7")] = (WORKS, "")
    EXPECTED[(_cmd, "apache-4.x")] = (WORKS, "")
EXPECTED.update({
    ("lag", "tansu"): (WORKS, _TANSU_HW),
    ("lag --no-time", "tansu"): (WORKS, _TANSU_HW),
    ("lag --all-groups", "tansu"): (WORKS, _TANSU_HW),
    ("lag --window", "tansu"): (WORKS, _TANSU_HW),
    ("health", "tansu"): (DEGRADES, ("no DescribeQuorum: the quorum check is UNKNOWN, the "
                                     "rest verified")),
    ("throughput", "tansu"): (WORKS, _TANSU_HW),
    ("snapshot", "tansu"): (WORKS, _TANSU_HW),
    ("topics diff", "tansu"): (DEGRADES, ("DescribeConfigs answers without any config entries: "
                                          "exits 3 saying drift cannot be judged")),
    ("offsets reset (dry run)", "tansu"): (WORKS, _TANSU_HW),
    ("offsets export", "tansu"): (WORKS, ""),
})
#: the real gateway (vendored binary, 1e7e840): its answer to an OffsetFetch naming two or more
#: topics cannot be parsed, so opskit asks one topic per request there (remembered per broker)
_HANZO_GROUPS = ("no DescribeGroups, and an OffsetFetch naming two or more topics gets an answer "
                 "that cannot be parsed: committed offsets read one topic per request with the "
                 "partitions named; state and members shown as unknown with the reason")
EXPECTED.update({
    ("lag", "hanzo-stream"): (WORKS, _HANZO_GROUPS),
    ("lag --no-time", "hanzo-stream"): (WORKS, _HANZO_GROUPS),
    ("lag --all-groups", "hanzo-stream"): (DEGRADES, _HANZO_NO_LIST),
    ("lag --window", "hanzo-stream"): (WORKS, _HANZO_GROUPS),
    ("health", "hanzo-stream"): (DEGRADES, ("DescribeConfigs is never answered: "
                                            "min.insync.replicas unreadable, so RF against it is "
                                            "UNKNOWN (exit 3); under/at min ISR verified OK from "
                                            "full ISRs, the rest verified")),
    ("throughput", "hanzo-stream"): (WORKS, ""),
    ("snapshot", "hanzo-stream"): (DEGRADES, _HANZO_SNAPSHOT),
    ("topics diff", "hanzo-stream"): (DEGRADES, _HANZO_CONFIGS),
    ("offsets reset (dry run)", "hanzo-stream"): (DEGRADES, _HANZO_RESET),
    ("offsets export", "hanzo-stream"): (WORKS, _HANZO_GROUPS),
})
#: Heraclitus (signaldb b66e54df): advertises 34 APIs, handles 13; DescribeGroups, ListGroups
#: and DescribeConfigs close the connection. OffsetFetch with the partitions named works there
_HERA_GROUPS = ("Heraclitus closes the connection on DescribeGroups: committed offsets read "
                "with the partitions named; state and members shown as unknown with the reason")
_HERA_RESET = ("Heraclitus closes the connection on DescribeGroups: plan computed (partitions "
               "named), then refused with exit 5 since the group cannot be checked to be "
               "inactive")
_HERA_NO_LIST = "Heraclitus closes the connection on ListGroups: exits 3 naming the API"
_HERA_CONFIGS = "Heraclitus closes the connection on DescribeConfigs: exits 3 naming the API"
_HERA_HEALTH = ("DescribeConfigs closes the connection: min.insync.replicas unreadable, so RF "
                "against it is UNKNOWN (exit 3); under/at min ISR verified OK from full ISRs; "
                "quorum and reassignments UNKNOWN, not supported")
EXPECTED.update({
    ("lag", "heraclitus"): (WORKS, _HERA_GROUPS),
    ("lag --no-time", "heraclitus"): (WORKS, _HERA_GROUPS),
    ("lag --all-groups", "heraclitus"): (DEGRADES, _HERA_NO_LIST),
    ("lag --window", "heraclitus"): (WORKS, _HERA_GROUPS),
    ("health", "heraclitus"): (DEGRADES, _HERA_HEALTH),
    ("throughput", "heraclitus"): (WORKS, ""),
    ("snapshot", "heraclitus"): (DEGRADES, ("no ListGroups (the connection is closed): brokers "
                                            "and topics written, groups left out with the "
                                            "reason; exit 3 with one line")),
    ("topics diff", "heraclitus"): (DEGRADES, _HERA_CONFIGS),
    ("offsets reset (dry run)", "heraclitus"): (DEGRADES, _HERA_RESET),
    ("offsets export", "heraclitus"): (WORKS, _HERA_GROUPS),
})
#: what an xfail cell is to become once opskit is fixed (default: works), with its exit code
GOAL: dict[tuple[str, str], tuple[str, int]] = {}
#: StreamNest speaks HTTP only: health and throughput have their own adapter
#: (opskit/adapters/http/streamnest.py), every other command refuses with one line
_SN_NA = ("StreamNest has no consumer groups, no committed offsets and no Kafka protocol: "
          "exit 3 with one line saying so")
for _cmd in COMMANDS:
    EXPECTED[(_cmd, "streamnest")] = (NA, _SN_NA)
EXPECTED.update({
    ("health", "streamnest"): (WORKS, ("over HTTP (-b http://HOST:PORT,...): every broker's "
                                       "/metadata, owners agreeing, each partition's owner "
                                       "answering")),
    ("throughput", "streamnest"): (WORKS, ("from each broker's streamnest_messages_produced_total"
                                           " / _consumed_total on /metrics: cluster totals, not "
                                           "per topic or group")),
})

#: (command, broker) -> (observed cell, detail), filled as the cells run
OBSERVED: dict[tuple[str, str], tuple[str, str]] = {}
VERSIONS: dict[str, str] = {}


# --------------------------------------------------------------------------- scenario


@dataclass
class Target:
    name: str
    bootstrap: str
    version: str
    topic: str = ""
    group: str = ""
    topic2: str = ""
    group2: str = ""
    committed: dict[int, int] = field(default_factory=lambda: {0: 4, 1: 7})
    records: int = 10
    #: the StreamNest cluster (HTTP API) for the StreamNest column
    streamnest: compat.StreamNestCluster | None = None


def _create_topics(target: Target, topics: dict[str, int]) -> None:
    if target.name.startswith("apache"):
        for t, n in topics.items():
            create_topic(target.bootstrap, t, n)
        return
    # librdkafka's CreateTopics v4 is never answered by the Hanzo gateway: kafka-python's
    create_topics(target.bootstrap, topics)


def _produce(bs: str, topic: str, per_partition: dict[int, int]) -> None:
    """Batched, as real producers send (linger 20 ms, one flush)."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "acks": "all"})
    failed: list[str] = []
    for part, n in per_partition.items():
        for i in range(n):
            p.produce(topic, b"m" * 100, key=str(i).encode(), partition=part,
                      on_delivery=lambda e, _m: failed.append(str(e)) if e else None)
    assert p.flush(30) == 0 and not failed, failed[:3]


def _commit(bs: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    commit(bs, group, offsets)  # retried while a fresh cluster's coordinator is not ready


def _prepare(target: Target) -> Target:
    u = uuid.uuid4().hex[:8]
    target.topic, target.group = f"mx_{u}", f"mx-g-{u}"
    target.topic2, target.group2 = f"mx_tp_{u}", f"mx-tp-g-{u}"
    sn = target.streamnest
    if sn is not None:  # the same topics and records through the HTTP API; no groups exist
        sn.create_topic(target.topic, 2)
        sn.create_topic(target.topic2, 1)
        for i in range(target.records):
            for p in (0, 1):
                sn.produce(target.topic, f"m{i}", partition=p, index=(i + p) % len(sn.ports))
            sn.produce(target.topic2, f"m{i}", partition=0)
        return target
    bs = target.bootstrap
    _create_topics(target, {target.topic: 2, target.topic2: 1})
    _produce(bs, target.topic, {0: target.records, 1: target.records})
    _produce(bs, target.topic2, {0: target.records})
    _commit(bs, target.group, {(target.topic, p): o for p, o in target.committed.items()})
    _commit(bs, target.group2, {(target.topic2, 0): 3})
    return target


@pytest.fixture(scope="module", params=BROKERS)
def target(request: pytest.FixtureRequest) -> Target:
    """The column's broker: the session's one process (shared with the other tests)."""
    name: str = request.param
    broker = request.getfixturevalue(FIXTURE[name])
    if name.startswith("apache"):
        VERSIONS[name] = f"Apache Kafka {broker.version}"
    else:
        VERSIONS[name] = broker.version
    sn = broker if isinstance(broker, compat.StreamNestCluster) else None
    return _prepare(Target(name, broker.bootstrap, broker.version, streamnest=sn))


# --------------------------------------------------------------------------- verifiers


def _partitions(data: dict[str, Any], group: str, topic: str) -> dict[int, dict[str, Any]]:
    [g] = [g for g in data["groups"] if g["group"] == group]
    return {p["partition"]: p for p in g["partitions"] if p["topic"] == topic}


def _check_lag_rows(t: Target, data: dict[str, Any], with_time: bool) -> None:
    parts = _partitions(data, t.group, t.topic)
    [g] = [g for g in data["groups"] if g["group"] == t.group]
    if g["state"] == "Unknown":  # a broker without DescribeGroups: said so, never guessed
        assert g["members"] is None, g["members"]
        assert "DescribeGroups" in (g.get("state_note") or ""), g.get("state_note")
    assert sorted(parts) == [0, 1], f"partitions {sorted(parts)}"
    for p, want in t.committed.items():
        row = parts[p]
        assert row["committed_offset"] == want, f"p{p} committed {row['committed_offset']}"
        assert row["log_end_offset"] == t.records, f"p{p} log end {row['log_end_offset']}"
        assert row["lag"] == t.records - want, f"p{p} lag {row['lag']}"
        if with_time:
            assert row["lag_seconds"] is not None and row["lag_seconds"] >= 0, \
                f"p{p} lag_seconds {row['lag_seconds']}"


def _lag(t: Target, r: CliResult) -> str:
    assert r.code == exits.OK, f"exit {r.code}"
    _check_lag_rows(t, r.json(), with_time=True)
    return WORKS


def _lag_no_time(t: Target, r: CliResult) -> str:
    assert r.code == exits.OK, f"exit {r.code}"
    _check_lag_rows(t, r.json(), with_time=False)
    return WORKS


#: exit code of ``lag --window`` for each status (the scenario's lag is far below thresholds)
_WINDOW_EXIT = {"OK": exits.OK, "WARN": 1, "STOP": 1, "REWIND": 1, "STALL": 2, "ERR": 2}


def _lag_window(t: Target, r: CliResult) -> str:
    data = r.json()
    [g] = [g for g in data["groups"] if g["group"] == t.group]
    # the group is idle with lag: OK while the sampled span is shorter than the status
    # policy's minimum history, STOP/STALL once a slow machine stretches the sampling past
    # it. Which one is timing, not compatibility: check the numbers and that the exit code
    # follows the status.
    assert g["status"] in ("OK", "STOP", "STALL"), f"status {g['status']}"
    assert r.code == _WINDOW_EXIT[g["status"]], f"exit {r.code} for status {g['status']}"
    assert g["total_lag"] == 2 * t.records - sum(t.committed.values()), f"lag {g['total_lag']}"
    _check_lag_rows(t, data["lag"], with_time=False)
    return WORKS


def _health(t: Target, r: CliResult) -> str:
    data = r.json()
    assert len(data["brokers"]) == 1, f"brokers {data['brokers']}"
    assert data["counts"]["partitions"] >= 3, f"partitions {data['counts']['partitions']}"
    bad = [f for f in data["findings"] if f["severity"] not in ("OK", "UNKNOWN")]
    assert not bad, f"false findings: {[f['message'] for f in bad]}"
    by_check = {f["check"]: f for f in data["findings"]}
    # without min.insync.replicas, "under" and "at" min ISR are OK only as far as a full ISR
    # proves them (every ISR full: under_replicated OK); RF against min ISR is never known
    full_isr = by_check["under_replicated"]["severity"] == "OK"
    unverified = [f["check"] for f in data["findings"]
                  if f["severity"] == "OK" and "not readable" in f["message"]
                  and not (full_isr and f["check"] in ("under_min_isr", "at_min_isr"))]
    assert not unverified, f"OK without the data: {unverified}"
    unknown = [f for f in data["findings"] if f["severity"] == "UNKNOWN"]
    if not unknown:
        assert r.code == exits.OK, f"exit {r.code}"
        return WORKS
    assert r.code == exits.UNKNOWN and all(
        "not support" in f["message"] or "not readable" in f["message"] for f in unknown), \
        f"unknown findings without a reason: {[f['message'] for f in unknown]}"
    return DEGRADES


def _throughput(t: Target, r: CliResult) -> str:
    assert r.code == exits.OK, f"exit {r.code}"
    data = r.json()
    [row] = [x for x in data["topics"] if x["topic"] == t.topic2]
    assert row["messages"] == 6, f"messages in {row['messages']} (6 produced)"
    rows = [x for x in data["groups"] if x["group"] == t.group2]
    assert rows and rows[0]["messages"] == 2, f"consumed {rows[0]['messages'] if rows else None} (2 committed)"
    return WORKS


def _snapshot(t: Target, r: CliResult) -> str:
    data = r.json()
    [top] = [x for x in data["topics"] if x["topic"] == t.topic]
    assert len(top["partitions"]) == 2
    if data.get("groups_note"):  # brokers and topics, groups left out with the reason
        assert r.code == exits.UNKNOWN and data["groups"] == [], f"exit {r.code}"
        assert "ListGroups" in data["groups_note"], data["groups_note"]
        return DEGRADES
    assert r.code == exits.OK, f"exit {r.code}"
    _check_lag_rows(t, data, with_time=False)
    return WORKS


def _topics_diff(t: Target, r: CliResult) -> str:
    """T matches the registry; T2 is registered with retention 1d but has Kafka's default
    7d: exactly one config change, with the broker's real value. Other topics on a
    shared test cluster only show up as unregistered."""
    assert r.code == exits.WARNING, f"exit {r.code}"
    changes = r.json()["changes"]
    ours = [c for c in changes if c["topic"] in (t.topic, t.topic2)]
    assert [(c["topic"], c["kind"], c["config"]) for c in ours] == \
        [(t.topic2, "set_config", "retention.ms")], f"changes {ours}"
    assert (ours[0]["current"], ours[0]["desired"]) == ("604800000", "86400000"), ours[0]
    others = {c["kind"] for c in changes if c not in ours}
    assert others <= {"unregistered"}, f"unexpected changes {others}"
    return WORKS


def _reset(t: Target, r: CliResult) -> str:
    refused = r.code == exits.REFUSED  # the plan, then the refusal: state cannot be checked
    if refused:
        assert "DescribeGroups" in r.err, f"exit {r.code}: {r.err.strip()[:200]}"
    else:
        assert r.code == exits.OK, f"exit {r.code}"
    data = r.json()
    assert data["executed"] is False
    rows = {x["partition"]: x for x in data["groups"][0]["rows"]}
    for p, want in t.committed.items():
        assert rows[p]["current_offset"] == want and rows[p]["target_offset"] == 0, rows[p]
        assert rows[p]["log_end_offset"] == t.records, f"p{p} log end {rows[p]['log_end_offset']}"
        assert rows[p]["records_replayed"] == want, rows[p]
    return DEGRADES if refused else WORKS


def _export(t: Target, r: CliResult) -> str:
    assert r.code == exits.OK, f"exit {r.code}"
    got = {(row[0], int(row[1])): int(row[2]) for row in csv.reader(io.StringIO(r.out)) if row}
    assert got == {(t.topic, p): o for p, o in t.committed.items()}, got
    return WORKS


def _sn_health(t: Target, r: CliResult) -> str:
    assert r.code == exits.OK, f"exit {r.code}"
    data = r.json()
    sn = t.streamnest
    assert sn is not None and data["kind"] == "streamnest"
    md = sn.request("/metadata")["topic_partitions"]
    assert len(md[t.topic]["partitions"]) == 2 and len(md[t.topic2]["partitions"]) == 1
    c = data["counts"]
    assert (c["brokers"], c["brokers_answering"]) == (len(sn.ports), len(sn.ports)), c
    assert c["partitions"] == sum(len(m["partitions"]) for m in md.values()), c
    assert c["partitions_owner_unreachable"] == 0, c
    return WORKS


def _sn_throughput(t: Target, r: CliResult) -> str:
    assert r.code == exits.OK, f"exit {r.code}"
    data = r.json()
    assert (data["produced"], data["consumed"]) == (6, 2), \
        f"produced {data['produced']} (6), consumed {data['consumed']} (2)"
    return WORKS


def _not_applicable(t: Target, r: CliResult) -> str:
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == exits.UNKNOWN, f"exit {r.code}"
    assert len(lines) == 1 and "no consumer groups" in lines[0] and not r.out.strip(), r.err
    return NA


def _registry(t: Target, tmp: Path) -> Path:
    f = tmp / "registry.yaml"
    f.write_text(
        "defaults:\n  replication_factor: 1\n"
        f"topics:\n  - name: {t.topic}\n    partitions: 2\n    retention: 7d\n"
        f"  - name: {t.topic2}\n    partitions: 1\n    retention: 1d\n"
    )
    return f


Runner = Callable[[Target, Path, pytest.MonkeyPatch], tuple[list[str], Callable[[Target, CliResult], str]]]


def _args(t: Target, command: str, tmp: Path, mp: pytest.MonkeyPatch
          ) -> tuple[list[str], Callable[[Target, CliResult], str]]:
    sn = t.streamnest
    if sn is not None and command == "health":
        return ["health", "-o", "json"], _sn_health
    if sn is not None and command == "throughput":
        from opskit.cli import throughput as tp_mod

        real_sleep = time.sleep

        def between(seconds: float) -> None:  # 6 records in, 2 read through another broker
            for i in range(6):
                sn.produce(t.topic2, f"n{i}", partition=0, index=i % len(sn.ports))
            for off in (0, 1):
                assert sn.consume(t.topic2, 0, off, index=1) is not None
            real_sleep(min(seconds, 1.0))

        mp.setattr(tp_mod, "_sleep", between)
        return ["throughput", "--interval", "1s", "-o", "json"], _sn_throughput
    argv, verify = _kafka_args(t, command, tmp, mp)
    return argv, (_not_applicable if sn is not None else verify)


def _kafka_args(t: Target, command: str, tmp: Path, mp: pytest.MonkeyPatch
                ) -> tuple[list[str], Callable[[Target, CliResult], str]]:
    if command == "lag":
        return ["lag", "-g", t.group, "-o", "json"], _lag
    if command == "lag --no-time":
        return ["lag", "-g", t.group, "--no-time", "-o", "json"], _lag_no_time
    if command == "lag --all-groups":
        return ["lag", "--all-groups", "--no-time", "-o", "json"], _lag_no_time
    if command == "lag --window":
        return (["lag", "-g", t.group, "--no-time", "--window", "2s", "--interval", "1s",
                 "-o", "json"], _lag_window)
    if command == "health":
        return ["health", "--expected-brokers", "1", "-o", "json"], _health
    if command == "throughput":
        from opskit.cli import throughput as tp_mod

        real_sleep = time.sleep

        def between_readings(seconds: float) -> None:  # 6 records in, 2 consumed
            _produce(t.bootstrap, t.topic2, {0: 6})
            _commit(t.bootstrap, t.group2, {(t.topic2, 0): 5})
            real_sleep(min(seconds, 1.0))

        mp.setattr(tp_mod, "_sleep", between_readings)
        return (["throughput", "--interval", "1s", "-t", t.topic2, "-g", t.group2, "-o", "json"],
                _throughput)
    if command == "snapshot":
        return ["snapshot", "--no-time", "-o", "json"], _snapshot
    if command == "topics diff":
        return ["topics", "diff", str(_registry(t, tmp)), "-o", "json"], _topics_diff
    if command == "offsets reset (dry run)":
        return (["offsets", "reset", "--group", t.group, "--topic", t.topic, "--to-earliest",
                 "-o", "json"], _reset)
    if command == "offsets export":
        return ["offsets", "export", "--group", t.group], _export
    raise AssertionError(f"no runner for {command!r}")


def classify(r: CliResult, seconds: float, verify: Callable[[], str],
             na: bool = False) -> tuple[str, str]:
    """works / degrades / n/a / fails, with a one-line detail."""
    err_lines = [ln for ln in r.err.splitlines() if ln.strip()]
    if "Traceback" in r.err or r.code == exits.INTERNAL:
        return FAILS, f"exit {r.code}: {err_lines[-1] if err_lines else 'traceback'}"
    if seconds > CELL_BUDGET_S:
        return FAILS, f"took {seconds:.0f}s (bound {CELL_BUDGET_S:.0f}s)"
    errors = [ln for ln in err_lines if ln.startswith("opskit: error:")]
    if errors:
        if r.code == exits.UNKNOWN and len(errors) == 1 and not r.out.strip():
            if na:  # the command cannot apply: the line must say why
                try:
                    return verify(), errors[0]
                except AssertionError as e:
                    return FAILS, f"exit {r.code}: {e}".splitlines()[0]
            return DEGRADES, f"{errors[0]} ({seconds:.1f}s)"
        if r.code == exits.UNKNOWN and len(errors) == 1:  # a partial document: check it
            try:
                return verify(), f"{errors[0]} ({seconds:.1f}s)"
            except (AssertionError, KeyError, ValueError, TypeError) as e:
                why = str(e).splitlines()[0] if str(e) else type(e).__name__
                return FAILS, f"exit {r.code}: {errors[0]}; output wrong: {why}"
        return FAILS, f"exit {r.code}: {errors[0]}"
    try:
        return verify(), f"exit {r.code} ({seconds:.1f}s)"
    except (AssertionError, KeyError, ValueError, TypeError) as e:
        return FAILS, f"exit {r.code}: output wrong: {e}".splitlines()[0]


def _sanitize(text: str, t: Target) -> str:
    for old, new in ((t.bootstrap, "<broker>"), (t.topic2, "<topic2>"), (t.topic, "<topic>"),
                     (t.group2, "<group2>"), (t.group, "<group>")):
        text = text.replace(old, new)
    return re.sub(r"127\.0\.0\.1:\d+", "<broker>", text)


@pytest.mark.timeout(600)  # the first cell of a column also starts its broker (a cold Kafka)
@pytest.mark.parametrize("command", COMMANDS)
def test_cell(target: Target, command: str, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    argv, verify = _args(target, command, tmp_path, monkeypatch)
    t0 = time.monotonic()
    r = run_cli(*argv, "-b", target.bootstrap, "--timeout", TIMEOUT)
    seconds = time.monotonic() - t0
    cell, detail = classify(r, seconds, lambda: verify(target, r), na=verify is _not_applicable)
    if cell == DEGRADES and r.code == exits.REFUSED:
        detail = next((f"{ln} ({seconds:.1f}s)" for ln in r.err.splitlines()
                       if ln.startswith("refused:")), detail)
    detail = _sanitize(detail, target)
    OBSERVED[(command, target.name)] = (cell, detail)
    want, why = EXPECTED[(command, target.name)]
    if want == FAILS:  # a fix elsewhere shows as XPASS: the matrix is then to be updated
        request.node.add_marker(pytest.mark.xfail(reason=f"{why} (observed: {detail})",
                                                  strict=False))
        goal, code = GOAL.get((command, target.name), (WORKS, -1))
        assert cell == goal and code in (-1, r.code), \
            f"{command} on {target.name}: {cell}, exit {r.code}: {detail}"
        return
    assert cell == want, f"{command} on {target.name}: expected {want} ({why}), got {cell}: {detail}"


def test_api_versions_probe(target: Target) -> None:
    """The capability probe on each real broker: what it advertises decides the cells."""
    from opskit.adapters.kafka import capabilities
    from opskit.core.connection import ConnectionConfig

    if target.streamnest is not None:  # HTTP only: nothing to probe, named as not Kafka
        conn = ConnectionConfig(target.streamnest.bootstrap.split(",")[0].removeprefix("http://"))
        assert "answers HTTP" in (capabilities.not_kafka(conn, timeout=3.0) or "")
        return
    conn = ConnectionConfig(target.bootstrap)
    c = capabilities.probe(conn, timeout=3.0)
    assert c.known and c.broker == target.bootstrap, c.reason
    assert capabilities.probe(conn, timeout=3.0) is c  # cached per bootstrap
    missing = {op for op in capabilities.OPERATION_APIS if capabilities.missing_for(c, op)}
    if target.name.startswith("apache"):
        assert missing == set(), missing
    elif target.name == "tansu":
        assert {"log_dirs", "describe_quorum", "create_partitions"} <= missing
        assert not missing & {"describe_groups", "list_groups", "committed_offsets",
                              "log_offsets", "topic_configs"}
    elif target.name == "heraclitus":  # advertises 34 APIs, whether or not it handles them
        assert not missing & {"committed_offsets", "log_offsets", "metadata"}, missing
    else:  # the gateway
        assert {"describe_groups", "list_groups", "delete_topics", "log_dirs"} <= missing
        assert not missing & {"committed_offsets", "log_offsets", "topic_configs",
                              "create_topics", "metadata"}


# --------------------------------------------------------------------------- the document



def render_table(cells: dict[tuple[str, str], tuple[str, str]]) -> str:
    """The Markdown matrix: one row per command, one column per broker; cell + footnote."""
    notes: list[str] = []
    lines = ["| command | " + " | ".join(DOC_BROKERS) + " |", "|---|" + "---|" * len(DOC_BROKERS)]
    for cmd in COMMANDS:
        row = []
        for b in DOC_BROKERS:
            cell, why = cells[(cmd, b)]
            if why:
                if why not in notes:
                    notes.append(why)
                cell += f" [{notes.index(why) + 1}]"
            row.append(cell)
        lines.append(f"| `{cmd}` | " + " | ".join(row) + " |")
    lines.append("")
    lines += [f"[{i}] {n}" for i, n in enumerate(notes, 1)]
    return "\n".join(lines)


def _shown(k: tuple[str, str], observed: str) -> str:
    """The doc's cell: what was observed, except that an expected failure that has not
    reached its goal is shown as failing (its exit-3 line is not a legitimate degrade)."""
    if EXPECTED[k][0] == FAILS and observed != GOAL.get(k, (WORKS, -1))[0]:
        return FAILS
    return observed


def write_doc(observed: dict[tuple[str, str], tuple[str, str]]) -> None:
    cells = {k: (_shown(k, observed[k][0]), EXPECTED[k][1])
             for k in EXPECTED if k[1] in DOC_BROKERS}
    details = "\n".join(
        f"| `{cmd}` | {b} | {observed[(cmd, b)][0]} | {observed[(cmd, b)][1].replace('|', '/')} |"
        for cmd in COMMANDS for b in DOC_BROKERS
    )
    versions = ", ".join(VERSIONS.get(b, b) for b in DOC_BROKERS)
    DOC.write_text(f"""# Compatibility matrix (command x broker)

Generated by `tests/integration/test_compat_matrix.py` with
`{WRITE_ENV}=1 python -m pytest tests/integration/test_compat_matrix.py`; do not
edit by hand. Every cell is one run of the command against a real broker
holding the same scenario: topic T (2 partitions, 10 records each, produced in
batches), group G committed at 4 and 7; topic T2 (1 partition) with group G2
for `throughput`, which produces 6 records and commits 2 more between its readings.
`topics diff` gets a registry with T as it is and T2 with retention 1d instead of
the 7d default: exactly one config change must come out.
Commands run as `opskit ... -b BROKER --timeout {TIMEOUT}` (in-process: no interpreter
start); each cell's detail ends with the command's wall time, the machine's load not
controlled (issue 21 asks a degrading cell to end within `--timeout` + 1 s; a test does
not assert times, the table shows them).

- **works**: exit code and output checked against what was produced and committed.
- **degrades**: exit 3 (UNKNOWN) with one line `opskit: error: ...` naming the missing
  API and the broker, no traceback, no hang; for `health`, the checks the broker can
  answer are verified and the others are UNKNOWN with the reason; for `offsets reset`
  on a broker without DescribeGroups, the plan is verified and then refused (exit 5)
  with the reason; for `snapshot` there, the partial document (brokers, topics, no
  groups, the reason) is verified along with exit 3.
- **works [n]**: works, with a footnote saying how opskit got there on that broker.
- **n/a**: the command cannot apply to the broker (StreamNest has no consumer groups,
  no committed offsets and no Kafka protocol): exit 3 with one line saying so.
- **fails**: wrong or missing output today; kept as an expected failure (xfail) with
  the reason, never shown as works.

Brokers in the last run: {versions}.

Every column is the real broker binary, started by the tests (`opskit.sandbox.compat`;
the Hanzo gateway, Heraclitus and StreamNest in a private network namespace reached
through a loopback relay), one process per column for the whole test session; no cell
rests on a double (`tests/broker_double.py` is for fault injection only). StreamNest
speaks HTTP: it is given to opskit as `-b http://HOST:PORT,...` (3 brokers), gets the
same topics and records through its HTTP API, and `throughput` produces 6 records and
reads 2 between its readings. The "Observed" table below gives each cell's exit code
or error line and, for a degraded cell, how long the command took. This file is only
rewritten by a run that covered every cell of the table.

{MATRIX_BEGIN}
{render_table(cells)}
{MATRIX_END}

## Observed in the last run

| command | broker | cell | detail |
|---|---|---|---|
{details}
""")


def test_doc_matches_expected() -> None:
    """docs/compat-matrix.md shows exactly the cells EXPECTED states (no broker needed).

    Defined last, so it runs after every cell; with OPSKIT_WRITE_COMPAT_MATRIX=1 it
    first rewrites the doc from the observed cells (a run must cover them all)."""
    check_matrix_doc(DOC, render_table(EXPECTED), WRITE_ENV, __file__,
                     lambda: [k for k in EXPECTED if k not in OBSERVED and k[1] in DOC_BROKERS],
                     lambda: write_doc(OBSERVED))


def test_expected_covers_every_cell() -> None:
    assert set(EXPECTED) == {(c, b) for c in COMMANDS for b in BROKERS}
    assert {v[0] for v in EXPECTED.values()} <= {WORKS, DEGRADES, NA, FAILS}
    assert all(why for cell, why in EXPECTED.values() if cell != WORKS)


def test_tansu_log_end_is_cross_checked(target: Target) -> None:
    """On Tansu the lag rows say where the log end came from (ListOffsets is wrong there);
    on Apache Kafka the answers agree and nothing is noted."""
    r = run_cli("lag", "-g", target.group, "--no-time", "-o", "json", "-b", target.bootstrap,
                "--timeout", TIMEOUT)
    if target.name not in ("tansu", "apache-3.7", "apache-4.x"):
        pytest.skip("group lag on this broker is checked by its cells")
    data = r.json()
    rows = _partitions(data, target.group, target.topic)
    if target.name == "tansu":
        assert all("log_end_from_fetch" in rows[p]["anomalies"] for p in rows), rows
        checks = data["log_end_checks"]
        assert {c["source"] for c in checks.values()} == {"fetch_high_watermark"}, checks
        assert all(c["log_end"] == target.records for c in checks.values()), checks
    else:
        assert data["log_end_checks"] == {} and all(not rows[p]["anomalies"] for p in rows)
