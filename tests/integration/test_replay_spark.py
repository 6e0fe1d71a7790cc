"""`opskit replay` end to end: Spark (local[2]) against a real Kafka 3.7 sandbox.

Each test builds its own topic and group. Records are HIP-30 envelopes made by
the sandbox load generator, plus malformed ones; the offsets and keys of every
record are taken from the producer's delivery reports, so "exactly once" is
checked record by record (key and offset), not by counting.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from tests.helpers import ActiveMember, commit_retrying, create_topic, run_cli
from tests.replay_helpers import (
    check_events_exactly_once,
    committed,
    log_ends,
    parquet_rows,
    produce_events,
    read_topic,
)

ROOT = Path(__file__).resolve().parents[2]


def test_backlog_replayed_to_parquet_exactly_once_then_committed(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    topic, group, dlq = f"replay_ev_{uniq}", f"replay-ev-{uniq}", f"replay_dlq_{uniq}"
    create_topic(kafka.bootstrap, topic, 3)
    create_topic(kafka.bootstrap, dlq, 1)
    not_json = b'{"schema": "hanzo.stream.v1", "id": "evt_broken"'
    no_type = (b'{"schema": "hanzo.stream.v1", "id": "e1", "source": "s", '
               b'"timestamp": "2026-11-17T00:00:00.000Z"}')
    bad = {1: [not_json, no_type]}
    produced = produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 120, 3, bad)
    # a lagging group: read some of p0, nothing of p1; never committed on p2
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 40, (topic, 1): 0})
    out = tmp_path / "replays"

    dry = run_cli("replay", "-g", group, "-t", topic, "-b", kafka.bootstrap,
                  "--output-dir", str(out), "-o", "json")
    assert dry.code == 0, dry.err
    plan = dry.json()
    assert plan["status"] == "planned"
    assert [(r["partition"], r["start"], r["end"]) for r in plan["ranges"]] == [
        (0, 40, 120), (1, 0, 122), (2, 0, 120)]
    assert committed(kafka, group, topic) == {0: 40, 1: 0}  # dry run changed nothing

    res = run_cli("replay", "-g", group, "-t", topic, "-b", kafka.bootstrap, "--output-dir",
                  str(out), "--dead-letter-topic", dlq, "--execute", "--yes", "-o", "json")
    assert res.code == 0, res.err
    m = res.json()
    assert m["status"] == "committed"
    rid = m["replay_id"]
    assert rid == plan["replay_id"]

    # every planned record exactly once, by (partition, offset) and key
    expected = {po: kv for po, kv in produced.items()
                if po[1] >= {0: 40, 1: 0, 2: 0}[po[0]]}
    data = out / rid / "data"
    _events, dead = check_events_exactly_once(out, rid, expected)
    # the bad records are dead letters with their reason, in Parquet and in Kafka
    assert sorted((r["partition"], r["key"]) for r in dead) == [(1, "bad0"), (1, "bad1")]
    reasons = {r["key"]: r["reason"] for r in dead}
    assert reasons["bad0"] == "not a JSON object"
    assert reasons["bad1"] == "missing field 'type'"
    dl = read_topic(kafka.bootstrap, dlq)
    assert len(dl) == 2
    for msg in dl:
        h = {k: v.decode() for k, v in msg.headers()}
        assert h["opskit-replay-id"] == rid and h["opskit-source-topic"] == topic
        body = json.loads(msg.value())
        assert body["type"] == "stream.dead_letter" and msg.key().decode() == topic
        assert int(h["opskit-source-offset"]) == body["data"]["source_offset"]
        assert body["data"]["reason"] in reasons.values()
    # Parquet is partitioned by event date and type
    dirs = {p.relative_to(data / "sink=events").parts[:2]
            for p in (data / "sink=events").rglob("*.parquet")}
    assert dirs == {(f"event_date={ev['timestamp'][:10]}", f"event_type={ev['type']}")
                    for _key, ev in expected.values() if ev is not None}

    # the group ends at the planned ends; a backup was written first
    assert committed(kafka, group, topic) == {0: 120, 1: 122, 2: 120} == log_ends(kafka, topic, 3)
    backup = json.loads(Path(m["events"][-1]["backup"]).read_text())
    assert backup["status"] == "applied"
    assert {(o["partition"], o["offset"]) for o in backup["backup"]["offsets"]} == {(0, 40), (1, 0)}

    # rerun: nothing changes (no job, no commit, same files)
    files_before = {p: p.stat().st_mtime_ns for p in data.rglob("*.parquet")}
    again = run_cli("replay", "-g", group, "-t", topic, "-b", kafka.bootstrap,
                    "--output-dir", str(out), "--execute", "--yes")
    assert again.code == 0, again.err
    assert "nothing to replay" in again.err
    same = run_cli("replay", "--manifest", str(out / rid / "manifest.json"), "-b",
                   kafka.bootstrap, "--execute", "--yes")
    assert same.code == 0 and "already committed" in same.err
    assert committed(kafka, group, topic) == {0: 120, 1: 122, 2: 120}
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*.parquet")} == files_before
    assert len(read_topic(kafka.bootstrap, dlq)) == 2


def test_group_active_during_job_is_not_committed(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    topic, group = f"replay_act_{uniq}", f"replay-act-{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 30, 1)
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 10})
    out = tmp_path / "replays"
    env = dict(os.environ, OPSKIT_TEST_PAUSE_BEFORE_COMMIT="25", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "opskit.cli.main", "replay", "-g", group, "-t", topic, "-b",
         kafka.bootstrap, "--output-dir", str(out), "--execute", "--yes"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err_lines = []
    for line in proc.stderr:
        err_lines.append(line)
        if "test hook" in line:
            break
    else:
        proc.wait(30)
        raise AssertionError("the job did not reach the commit: " + "".join(err_lines[-5:]))
    with ActiveMember(kafka.bootstrap, group, [topic]):
        _out, err_rest = proc.communicate(timeout=120)
    err = "".join(err_lines) + err_rest
    assert proc.returncode == 5, err
    assert "written but the group was not moved" in err
    assert "Stable" in err
    assert committed(kafka, group, topic) == {0: 10}
    manifest = next(out.glob("*/manifest.json"))
    m = json.loads(manifest.read_text())
    assert m["status"] == "not_committed"
    assert m["result"]["records"] == 20
    # the error is one line, and says how to retry
    assert next(ln for ln in err.splitlines() if ln.startswith("opskit: error")).count(
        "--manifest") == 1
    # once the member has left, retrying the commit needs no new job
    retry = run_cli("replay", "--manifest", str(manifest), "-b", kafka.bootstrap, "--execute",
                    "--yes")
    assert retry.code == 0, retry.err
    assert "submitting" not in retry.err
    assert committed(kafka, group, topic) == {0: 30}
    assert json.loads(manifest.read_text())["status"] == "committed"


def test_billing_replay_recomputes_hourly_usage_and_produces_billing_events(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    topic, group, billing = f"replay_llm_{uniq}", f"replay-bill-{uniq}", f"replay_bill_{uniq}"
    create_topic(kafka.bootstrap, topic, 2)
    create_topic(kafka.bootstrap, billing, 2)
    produced = produce_events(kafka.bootstrap, topic, "llm_usage", 80, 2,
                              {0: [b"[1, 2, 3]"]}, by_key=True)
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 0, (topic, 1): 0})
    out = tmp_path / "replays"
    res = run_cli("replay", "-g", group, "-t", topic, "--pipeline", "billing", "-b",
                  kafka.bootstrap, "--output-dir", str(out), "--billing-topic", billing,
                  "--execute", "--yes", "-o", "json")
    assert res.code == 0, res.err
    m = res.json()
    rid = m["replay_id"]
    want: dict[tuple[str, int], dict[str, float]] = defaultdict(
        lambda: {"requests": 0, "total_tokens": 0, "cost_usd": 0.0})
    for _key, ev in produced.values():
        if ev is None:
            continue
        ts = datetime.strptime(ev["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        hour = int(ts.timestamp()) // 3600
        w = want[(ev["team_id"], hour)]
        w["requests"] += 1
        w["total_tokens"] += ev["data"]["total_tokens"]
        w["cost_usd"] += ev["data"]["cost_usd"]
    rows = parquet_rows(out / rid / "billing_hourly",
                        ["team_id", "hour", "requests", "total_tokens", "cost_usd"])
    got = {}
    for r in rows:
        k = (r["team_id"], int(r["hour"].replace(tzinfo=UTC).timestamp()) // 3600)
        assert k not in got
        got[k] = r
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k]["requests"] == w["requests"]
        assert got[k]["total_tokens"] == w["total_tokens"]
        assert abs(got[k]["cost_usd"] - w["cost_usd"]) < 1e-6
    dead = parquet_rows(out / rid / "dead_letter", ["partition", "key", "reason"])
    assert [(d["partition"], d["key"], d["reason"]) for d in dead] == [
        (0, "bad0", "not a JSON object")]
    # billing_events: one per (team, hour), keyed by org, with source headers, per-key order
    msgs = read_topic(kafka.bootstrap, billing)
    assert len(msgs) == len(want)
    by_key: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for msg in msgs:
        h = {k: v.decode() for k, v in msg.headers()}
        assert h["opskit-replay-id"] == rid and h["opskit-source-topic"] == topic
        body = json.loads(msg.value())
        assert body["type"] == "billing.usage.hourly" and msg.key().decode() == body["org_id"]
        by_key[msg.key()].append((int(h["opskit-source-partition"]),
                                  int(h["opskit-source-offset"])))
    for seq in by_key.values():
        assert seq == sorted(seq)
    assert committed(kafka, group, topic) == log_ends(kafka, topic, 2)
