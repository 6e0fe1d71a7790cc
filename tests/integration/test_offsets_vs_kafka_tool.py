"""`opskit offsets reset` dry-run plans must equal Kafka's own
``kafka-consumer-groups --reset-offsets --dry-run`` for the same scope, for every
strategy, on Kafka 3.7 and the newest 4.x.

One data set per cluster (built once):
- ``a_*``: 3 partitions with records at three known timestamps; partition 0's
  log start is raised to 5 with DeleteRecords (so "below start" clamps);
- ``b_*``: 2 partitions, the group has no commit on partition 1;
- ``c_*``: 2 partitions with records 3 h, 2 h and 1 h old (for --by-duration);
- group ``g1_*`` (Empty) with commits on a:0,1,2, b:0, c:0,1; group ``g2_*`` on a:0.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient

from tests.helpers import commit, create_topic, parse_describe, produce, run_cli

T0 = 1_714_557_600_000  # 2024-05-01T10:00:00.000Z
HOUR = 3_600_000


@dataclass
class Data:
    a: str
    b: str
    c: str
    g1: str
    g2: str


_DATA: dict[str, Data] = {}


def commit_retrying(bs: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """``commit``, retried while a freshly started broker loads its group coordinator."""
    for attempt in range(60):
        try:
            commit(bs, group, offsets)
            return
        except KafkaException as e:
            if attempt == 59 or "LOAD_IN_PROGRESS" not in str(e) and "COORDINATOR" not in str(e):
                raise
            time.sleep(0.5)


def _data(cluster) -> Data:  # type: ignore[no-untyped-def]
    if cluster.bootstrap in _DATA:
        return _DATA[cluster.bootstrap]
    bs, u = cluster.bootstrap, uuid.uuid4().hex[:8]
    d = Data(f"a_{u}", f"b_{u}", f"c_{u}", f"g1_{u}", f"g2_{u}")
    keep = {"retention.ms": "-1"}
    create_topic(bs, d.a, 3, config=keep)
    create_topic(bs, d.b, 2, config=keep)
    create_topic(bs, d.c, 2, config=keep)
    for i in range(3):  # a:0 30 records, a:1 20, a:2 10 at T0, T0+1h, T0+2h
        produce(bs, d.a, {p: 10 for p in range(3 - i)}, timestamp_ms=T0 + i * HOUR)
    produce(bs, d.b, {0: 8, 1: 8})
    now = int(time.time() * 1000)
    for hours_ago in (3, 2, 1):
        produce(bs, d.c, {0: 5, 1: 5}, timestamp_ms=now - hours_ago * HOUR)
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.delete_records([CkTP(d.a, 0, 5)], request_timeout=30).values():
        f.result(30)
    commit_retrying(bs, d.g1, {(d.a, 0): 12, (d.a, 1): 3, (d.a, 2): 10, (d.b, 0): 4, (d.c, 0): 2,
                      (d.c, 1): 15})
    commit_retrying(bs, d.g2, {(d.a, 0): 29})
    _DATA[cluster.bootstrap] = d
    return d


def _groups(d: Data, n: int) -> list[str]:
    return [x for g in ([d.g1, d.g2][:n]) for x in ("--group", g)]


def tool_plan(cluster, args: list[str]) -> dict[tuple[str, str, int], int]:  # type: ignore[no-untyped-def]
    dist = cluster.dist()
    proc = dist.run_tool(dist.consumer_groups_class, "--bootstrap-server", cluster.bootstrap,
                         "--reset-offsets", "--dry-run", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = parse_describe(proc.stdout)
    assert rows, proc.stdout + proc.stderr
    return {k: int(str(r["NEW-OFFSET"])) for k, r in rows.items()}


def our_plan(cluster, args: list[str]) -> dict[tuple[str, str, int], int]:  # type: ignore[no-untyped-def]
    res = run_cli("offsets", "reset", *args, "--dry-run", "--allow-noop", "--no-times",
                  "-o", "json", "--bootstrap-server", cluster.bootstrap)
    assert res.code == 0, res.err
    return {(g["group"], r["topic"], r["partition"]): r["target_offset"]
            for g in res.json()["groups"] for r in g["rows"]}


def _cases(d: Data, tmp: Path) -> dict[str, list[str]]:
    csv = tmp / "plan.csv"
    csv.write_text(f"{d.a},0,100\n{d.a},1,2\n{d.b},1,6\n{d.c},0,0\n")
    return {
        "earliest": [*_groups(d, 2), "--topic", d.a, "--to-earliest"],
        "latest": [*_groups(d, 1), "--all-topics", "--to-latest"],
        "current": [*_groups(d, 1), "--topic", d.a, "--topic", d.b, "--to-current"],
        "to_offset": [*_groups(d, 1), "--topic", f"{d.a}:1,2", "--to-offset", "7"],
        "to_offset_above_end": [*_groups(d, 2), "--topic", d.a, "--to-offset", "25"],
        "to_offset_below_start": [*_groups(d, 1), "--topic", f"{d.a}:0", "--to-offset", "2"],
        "shift_back_clamped": [*_groups(d, 1), "--all-topics", "--shift-by", "-8"],
        "shift_forward_clamped": [*_groups(d, 2), "--topic", f"{d.a}:0", "--shift-by", "15"],
        # T0+1h in +02:00; a:2 has nothing that new and falls back to its log end
        "to_datetime": [*_groups(d, 1), "--topic", d.a, "--to-datetime",
                        "2024-05-01T13:00:00.000+02:00"],
        "to_datetime_between": [*_groups(d, 2), "--topic", d.a, "--to-datetime",
                                "2024-05-01T10:30:00.000Z"],
        "by_duration": [*_groups(d, 1), "--topic", d.c, "--by-duration", "PT150M"],
        "by_duration_too_recent": [*_groups(d, 1), "--topic", d.c, "--by-duration", "PT30M"],
        "from_file": [*_groups(d, 1), "--from-file", str(csv)],
    }


CASES = ["earliest", "latest", "current", "to_offset", "to_offset_above_end",
         "to_offset_below_start", "shift_back_clamped", "shift_forward_clamped", "to_datetime",
         "to_datetime_between", "by_duration", "by_duration_too_recent", "from_file"]


@pytest.mark.parametrize("case", CASES)
def test_dry_run_plan_equals_kafka_tool(any_kafka, tmp_path, case):
    d = _data(any_kafka)
    args = _cases(d, tmp_path)[case]
    theirs = tool_plan(any_kafka, args)
    ours = our_plan(any_kafka, args)
    assert ours == theirs


def test_known_targets(kafka, tmp_path):
    """The data set exercises what it claims to (guards the comparison above)."""
    d = _data(kafka)
    cases = _cases(d, tmp_path)
    below = our_plan(kafka, cases["to_offset_below_start"])
    assert below[(d.g1, d.a, 0)] == 5  # clamped up to the log start
    above = our_plan(kafka, cases["to_offset_above_end"])
    assert above[(d.g1, d.a, 0)] == 25 and above[(d.g1, d.a, 1)] == 20
    assert above[(d.g1, d.a, 2)] == 10
    when = our_plan(kafka, cases["to_datetime"])
    assert when == {(d.g1, d.a, 0): 10, (d.g1, d.a, 1): 10, (d.g1, d.a, 2): 10}
    dur = our_plan(kafka, cases["by_duration"])
    assert dur == {(d.g1, d.c, 0): 5, (d.g1, d.c, 1): 5}
    cur = our_plan(kafka, cases["current"])
    assert cur[(d.g1, d.b, 1)] == 8  # no commit: the log end


@pytest.mark.parametrize("groups", [1, 2])
def test_export_csv_equals_kafka_tool(any_kafka, groups):
    d = _data(any_kafka)
    args = [*_groups(d, groups), "--topic", f"{d.a}:0", "--shift-by", "-1"]
    dist = any_kafka.dist()
    proc = dist.run_tool(dist.consumer_groups_class, "--bootstrap-server", any_kafka.bootstrap,
                         "--reset-offsets", "--dry-run", "--export", *args)
    assert proc.returncode == 0, proc.stderr
    ours = run_cli("offsets", "reset", *args, "--export", "--bootstrap-server",
                   any_kafka.bootstrap)
    assert ours.code == 0, ours.err
    # same lines (the tool prints them in hash-map order), same trailing blank line
    assert sorted(ours.out.splitlines()) == sorted(proc.stdout.splitlines())
    assert ours.out.endswith("\n\n") and proc.stdout.endswith("\n\n")
