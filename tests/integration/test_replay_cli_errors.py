"""`opskit replay` refusals and bad input: one-line errors, documented exit codes, no Spark."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import ActiveMember, commit_retrying, create_topic, produce, run_cli


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("opskit: error")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_active_group_is_refused_before_the_job(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    topic, group = f"replay_err_{uniq}", f"replay-err-{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    produce(kafka.bootstrap, topic, {0: 10})
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 2})
    with ActiveMember(kafka.bootstrap, group, [topic]):
        res = run_cli("replay", "-g", group, "-b", kafka.bootstrap, "--output-dir",
                      str(tmp_path), "--execute", "--yes")
    assert res.code == 5
    assert "stop its consumers" in one_line_error(res.err)
    assert list(tmp_path.rglob("_result")) == []  # no job ran


def test_unknown_group_unknown_topic_bad_time_missing_manifest(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    res = run_cli("replay", "-g", f"nobody-{uniq}", "-b", kafka.bootstrap,
                  "--output-dir", str(tmp_path))
    assert res.code == 4 and "no committed offsets" in one_line_error(res.err)
    res = run_cli("replay", "-g", f"nobody-{uniq}", "-t", f"missing_{uniq}", "-b",
                  kafka.bootstrap, "--output-dir", str(tmp_path))
    assert res.code == 4 and "does not exist" in one_line_error(res.err)
    res = run_cli("replay", "-g", "g", "-t", "t", "--from-time", "yesterday-ish", "-b",
                  kafka.bootstrap)
    assert res.code == 2
    one_line_error(res.err)
    res = run_cli("replay", "--manifest", str(tmp_path / "nope.json"), "-b", kafka.bootstrap)
    assert res.code == 4 and "does not exist" in one_line_error(res.err)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "x"}')
    res = run_cli("replay", "--manifest", str(bad), "-b", kafka.bootstrap)
    assert res.code == 2
    one_line_error(res.err)
    res = run_cli("replay", "-b", kafka.bootstrap)
    assert res.code == 2 and "--group" in one_line_error(res.err)
    res = run_cli("replay", "-g", "g", "--result", str(bad), "-b", kafka.bootstrap)
    assert res.code == 2 and "--result needs --manifest" in one_line_error(res.err)


def test_unreachable_broker_exits_3(tmp_path: Path) -> None:
    res = run_cli("replay", "-g", "g", "-t", "t", "-b", "127.0.0.1:1", "--timeout", "2",
                  "--output-dir", str(tmp_path))
    assert res.code == 3
    one_line_error(res.err)


def test_result_that_does_not_match_the_plan_is_not_committed(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    topic, group = f"replay_res_{uniq}", f"replay-res-{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    produce(kafka.bootstrap, topic, {0: 10})
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 4})
    plan = run_cli("replay", "-g", group, "-b", kafka.bootstrap, "--output-dir", str(tmp_path),
                   "-o", "json")
    assert plan.code == 0, plan.err
    rid = plan.json()["replay_id"]
    manifest = tmp_path / rid / "manifest.json"
    # a job that claims a record outside [4, 10) and lost one row on the way
    forged = {"replay_id": rid, "verified_rows": 5, "partitions": [
        {"topic": topic, "partition": 0, "records": 6, "min_offset": 3, "max_offset": 9,
         "written": 5, "dead_letters": 0}]}
    result = tmp_path / "result.txt"
    result.write_text("OPSKIT_RESULT " + json.dumps(forged))
    res = run_cli("replay", "--manifest", str(manifest), "--result", str(result), "-b",
                  kafka.bootstrap, "--execute", "--yes")
    assert res.code == 3
    assert "does not match the plan" in one_line_error(res.err)
    assert json.loads(manifest.read_text())["status"] == "failed"
    with kafka.admin() as admin:
        offs = admin.committed_offsets([group])[group]
    assert {tp.partition: o for tp, o in offs.items()} == {0: 4}
    # the honest result commits, and a second run is a no-op
    good = dict(forged, verified_rows=6, partitions=[dict(forged["partitions"][0], min_offset=4,
                                                         written=6)])
    result.write_text(json.dumps(good))
    res = run_cli("replay", "--manifest", str(manifest), "--result", str(result), "-b",
                  kafka.bootstrap, "--execute", "--yes")
    assert res.code == 0, res.err
    with kafka.admin() as admin:
        offs = admin.committed_offsets([group])[group]
    assert {tp.partition: o for tp, o in offs.items()} == {0: 10}
    again = run_cli("replay", "--manifest", str(manifest), "-b", kafka.bootstrap, "--execute",
                    "--yes")
    assert again.code == 0 and "already committed" in again.err
