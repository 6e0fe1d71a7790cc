"""The read path on the REAL Heraclitus: the no-DescribeGroups path where it is closed.

Heraclitus advertises DescribeGroups (and ListGroups, DescribeConfigs) but closes the
connection on it. ``lag --group G`` used to exit 3 there, although an OffsetFetch that
names the partitions is answered: it now gives the true lag with state and members
unknown and the reason, and ``offsets export`` / ``offsets reset`` plan from the same
read. Its ListOffsets by timestamp answers the log end whatever the time: a reset by
time is refused when a record disproves it. One broker (memory storage) for the module;
every number is checked against what the test produced and committed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from compat_fixtures import create_topics, require_binaries
from helpers import commit, produce, run_cli

from opskit.cli import exits
from opskit.sandbox import compat

TOPICS = {"llm_usage": 2, "audit_log": 2, "dead_letter": 1}
#: group -> topics it committed on (one reads two topics)
GROUPS = {"llm-metrics": ["llm_usage", "audit_log"], "dead-letter-monitor": ["dead_letter"]}
OLD_TS_MS = int(time.time() * 1000) - 7_200_000
NEW_TS_MS = OLD_TS_MS + 3_600_000


def records(topic: str, partition: int) -> tuple[int, int]:
    i = sorted(TOPICS).index(topic)
    return 4 + i + 3 * partition, 2 + partition


def committed(group: str, topic: str, partition: int) -> int:
    return 1 + (sorted(GROUPS).index(group) + sorted(TOPICS).index(topic) + partition) % 4


@pytest.fixture(scope="module")
def heraclitus_run(tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[tuple[str, dict[str, dict[tuple[str, int], tuple[int, int]]]]]:
    require_binaries("heraclitus")
    b = compat.start_heraclitus(tmp_path_factory.mktemp("heraclitus-readpath"), storage="memory")
    try:
        create_topics(b.bootstrap, TOPICS)
        for t, n in TOPICS.items():
            produce(b.bootstrap, t, {p: records(t, p)[0] for p in range(n)}, timestamp_ms=OLD_TS_MS)
            produce(b.bootstrap, t, {p: records(t, p)[1] for p in range(n)}, timestamp_ms=NEW_TS_MS)
        expected: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
        for g, topics in GROUPS.items():
            offs = {(t, p): committed(g, t, p) for t in topics for p in range(TOPICS[t])}
            commit(b.bootstrap, g, offs)
            expected[g] = {tp: (o, sum(records(*tp))) for tp, o in offs.items()}
        yield b.bootstrap, expected
    finally:
        b.stop()


def _args(bootstrap: str) -> list[str]:
    return ["--bootstrap-server", bootstrap, "--timeout", "5"]


@pytest.mark.parametrize("no_time", [False, True])
def test_lag_without_describe_groups(heraclitus_run: tuple[str, dict], no_time: bool) -> None:  # type: ignore[type-arg]
    """Before: exit 3 'answers ApiVersions but not FindCoordinator / DescribeGroups'."""
    bootstrap, expected = heraclitus_run
    for group, want in expected.items():
        r = run_cli("lag", "--group", group, "-o", "json", *(["--no-time"] if no_time else []),
                    *_args(bootstrap))
        assert r.code == exits.OK, r.out + r.err
        [g] = r.json()["groups"]
        rows = {(p["topic"], p["partition"]): p for p in g["partitions"]}
        assert {tp: (p["committed_offset"], p["log_end_offset"], p["lag"])
                for tp, p in rows.items()} == {tp: (o, e, e - o) for tp, (o, e) in want.items()}
        assert g["state"] == "Unknown" and g["members"] is None
        assert "DescribeGroups" in g["state_note"] and "closed the connection" in g["state_note"]
    r = run_cli("lag", "--group", "llm-metrics", *_args(bootstrap))
    assert r.code == exits.OK, r.out + r.err
    assert "state=Unknown" in r.out and "members=?" in r.out, r.out


def test_offsets_export_and_reset_plan(heraclitus_run: tuple[str, dict]) -> None:  # type: ignore[type-arg]
    bootstrap, expected = heraclitus_run
    want = expected["llm-metrics"]
    r = run_cli("offsets", "export", "--group", "llm-metrics", *_args(bootstrap))
    assert r.code == exits.OK, r.out + r.err
    got = {(t, int(p)): int(o) for t, p, o in (ln.split(",") for ln in r.out.split())}
    assert got == {tp: o for tp, (o, _e) in want.items()}
    r = run_cli("offsets", "reset", "--group", "llm-metrics", "--all-topics", "--to-earliest",
                "-o", "json", *_args(bootstrap))
    assert r.code == exits.REFUSED, r.out + r.err  # state unknown: cannot be checked safe
    [plan] = r.json()["groups"]
    assert {(p["topic"], p["partition"]): (p["current_offset"], p["target_offset"])
            for p in plan["rows"]} == {tp: (o, 0) for tp, (o, _e) in want.items()}


def test_reset_by_time_refuses_the_log_end_answer(heraclitus_run: tuple[str, dict]) -> None:  # type: ignore[type-arg]
    """Between old and new records Heraclitus answers the log end; the newest record is
    newer than the time asked, so the answer is refused (exit 3, one line)."""
    bootstrap, _ = heraclitus_run
    between = datetime.fromtimestamp((OLD_TS_MS + 1_800_000) / 1000, UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.000Z")
    r = run_cli("offsets", "reset", "--group", "llm-metrics", "--all-topics", "--to-datetime",
                between, *_args(bootstrap))
    assert r.code == exits.UNKNOWN, r.out + r.err
    errors = [ln for ln in r.err.splitlines() if ln.startswith("opskit: error:")]
    assert len(errors) == 1 and "cannot be trusted with offsets by time" in errors[0], r.err
    assert "before it is already that new" in errors[0], errors


def test_exporter_once_reads_the_named_groups(heraclitus_run: tuple[str, dict]) -> None:  # type: ignore[type-arg]
    """ListGroups is advertised and closed: the exporter reads the groups named in
    --group-allow as on a broker without it (before: no group series at all)."""
    bootstrap, expected = heraclitus_run
    r = run_cli("exporter", "--once", "--group-allow", "llm-metrics", *_args(bootstrap))
    assert r.code in (exits.OK, exits.UNKNOWN), r.err[-2000:]  # 3: configs etc. not readable
    assert "groups could not be read" not in r.err, r.err[-2000:]
    series = {}
    for line in r.out.splitlines():
        if line.startswith("kafka_consumergroup_lag_sum{"):
            name, _, value = line.rpartition(" ")
            series[name] = float(value)
    want: dict[str, int] = {}
    for (t, _p), (o, e) in expected["llm-metrics"].items():
        want[t] = want.get(t, 0) + e - o
    assert series == {f'kafka_consumergroup_lag_sum{{consumergroup="llm-metrics",topic="{t}"}}': v
                      for t, v in want.items()}, series
