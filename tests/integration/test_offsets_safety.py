"""Safety of `opskit offsets reset --execute`: refusal, backup, undo, crash, races.

Each test builds its own topic and group (Empty unless said otherwise):
topic with 2 partitions of 20 records, group committed at {0: 5, 1: 7}.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ActiveMember, commit, commit_retrying, create_topic, produce, run_cli

ROOT = Path(__file__).resolve().parents[2]
BEFORE = {0: 5, 1: 7}


def setup(cluster, uniq: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    topic, group = f"safety_{uniq}", f"safety-{uniq}"
    create_topic(cluster.bootstrap, topic, 2)
    produce(cluster.bootstrap, topic, {0: 20, 1: 20})
    commit_retrying(cluster.bootstrap, group, {(topic, p): o for p, o in BEFORE.items()})
    return topic, group


def committed(cluster, group: str, topic: str) -> dict[int, int]:  # type: ignore[no-untyped-def]
    with cluster.admin() as admin:
        offs = admin.committed_offsets([group])[group]
    return {tp.partition: o for tp, o in offs.items() if tp.topic == topic}


def one_line_error(err: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("opskit: error: "), err
    assert "Traceback" not in err


def start_cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "opskit.cli.main", *args], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **env},
    )


def wait_for(cond, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def backups(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*.json"))


def status_of(path: Path) -> str:
    return str(json.loads(path.read_text())["status"])


def test_active_group_is_refused_and_nothing_changes(kafka, uniq, tmp_path):
    topic, group = setup(kafka, uniq)
    with ActiveMember(kafka.bootstrap, group, [topic]):
        for mode in ([], ["--execute", "--yes"]):
            res = run_cli("offsets", "reset", "--group", group, "--topic", topic, "--to-latest",
                          *mode, "--backup-dir", str(tmp_path), "-b", kafka.bootstrap)
            assert res.code == 5, res.err
            assert "refused" in res.err and "Stable" in res.err
            assert committed(kafka, group, topic) == BEFORE
    assert backups(tmp_path) == []


def test_execute_backs_up_and_restore_undoes_exactly(any_kafka, uniq, tmp_path):
    topic, group = setup(any_kafka, uniq)
    bs = any_kafka.bootstrap
    res = run_cli("offsets", "reset", "--group", group, "--all-topics", "--to-earliest",
                  "--execute", "--yes", "-o", "json", "--backup-dir", str(tmp_path), "-b", bs)
    assert res.code == 0, res.err
    out = res.json()
    assert out["executed"] is True and out["groups"][0]["applied"] is True
    backup = Path(out["groups"][0]["backup"])
    assert backup.parent.parent == tmp_path and str(backup) in res.err
    assert status_of(backup) == "applied"
    assert committed(any_kafka, group, topic) == {0: 0, 1: 0}
    row = {r["partition"]: r for r in out["groups"][0]["rows"]}
    assert row[0]["records_replayed"] == 5 and row[1]["records_replayed"] == 7
    assert row[0]["first_record_ts_ms"] is not None and row[0]["last_record_ts_ms"] is not None

    # nothing to change now: exit 1, or 0 with --allow-noop; never a backup
    again = ["offsets", "reset", "--group", group, "--all-topics", "--to-earliest", "--execute",
             "--yes", "--backup-dir", str(tmp_path), "-b", bs]
    assert run_cli(*again).code == 1
    assert run_cli(*again, "--allow-noop").code == 0
    assert backups(tmp_path) == [backup]

    dry = run_cli("offsets", "restore", str(backup), "-o", "json", "-b", bs)
    assert dry.code == 0, dry.err
    assert {r["partition"]: r["target_offset"] for r in dry.json()["groups"][0]["rows"]} == BEFORE
    assert committed(any_kafka, group, topic) == {0: 0, 1: 0}

    undo = run_cli("offsets", "restore", str(backup), "--execute", "--yes",
                   "--backup-dir", str(tmp_path), "-b", bs)
    assert undo.code == 0, undo.err
    assert committed(any_kafka, group, topic) == BEFORE
    assert len(backups(tmp_path)) == 2  # the restore backed up what it replaced


@pytest.mark.parametrize("hook", ["OPSKIT_TEST_PAUSE_BEFORE_COMMIT",
                                  "OPSKIT_TEST_PAUSE_AFTER_COMMIT"])
def test_killed_mid_reset_then_restore_gives_previous_offsets(kafka, uniq, tmp_path, hook):
    topic, group = setup(kafka, uniq)
    proc = start_cli("offsets", "reset", "--group", group, "--topic", topic, "--to-latest",
                     "--execute", "--yes", "--no-times", "--backup-dir", str(tmp_path),
                     "-b", kafka.bootstrap, env={hook: "60"})
    try:
        wait_for(lambda: backups(tmp_path), "the backup file")
        if hook.endswith("AFTER_COMMIT"):
            wait_for(lambda: committed(kafka, group, topic) == {0: 20, 1: 20}, "the commit")
        else:
            time.sleep(0.5)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    [backup] = backups(tmp_path)
    assert status_of(backup) == "pending"
    res = run_cli("offsets", "restore", str(backup), "--execute", "--yes",
                  "--backup-dir", str(tmp_path / "undo"), "-b", kafka.bootstrap)
    assert res.code == 0, res.err
    assert "status: pending" in res.err
    assert committed(kafka, group, topic) == BEFORE


def test_offsets_moved_after_planning_are_refused(kafka, uniq, tmp_path):
    topic, group = setup(kafka, uniq)
    proc = start_cli("offsets", "reset", "--group", group, "--topic", topic, "--to-latest",
                     "--execute", "--yes", "--no-times", "--backup-dir", str(tmp_path),
                     "-b", kafka.bootstrap, env={"OPSKIT_TEST_PAUSE_BEFORE_COMMIT": "4"})
    wait_for(lambda: backups(tmp_path), "the backup file")
    commit(kafka.bootstrap, group, {(topic, 0): 9})  # someone else moves an offset
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5, err
    assert "changed since planning" in err and "Traceback" not in err
    assert committed(kafka, group, topic) == {0: 9, 1: 7}
    [backup] = backups(tmp_path)
    assert status_of(backup) == "aborted"


def test_bad_inputs_give_one_line_errors_and_change_nothing(kafka, uniq, tmp_path):
    topic, group = setup(kafka, uniq)
    bs = kafka.bootstrap
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text(f"{topic},0,5\n{topic},zero,3\n")
    cases: list[tuple[list[str], int]] = [
        (["reset", "--group", group, "--from-file", str(bad_csv), "--execute", "--yes"], 2),
        (["import", str(bad_csv), "--group", group, "--execute", "--yes"], 2),
        (["reset", "--group", group, "--from-file", str(tmp_path / "nope.csv"), "--execute",
          "--yes"], 4),
        (["reset", "--group", f"no-such-{uniq}", "--all-topics", "--to-earliest", "--execute",
          "--yes"], 4),
        (["reset", "--group", group, "--topic", f"no_such_{uniq}", "--to-earliest",
          "--execute", "--yes"], 4),  # not found, as the README's exit-code table says
        (["reset", "--group", group, "--topic", topic, "--to-earliest", "--to-latest"], 2),
        (["reset", "--group", group, "--topic", topic, "--to-datetime", "yesterday"], 2),
        (["export", "--group", f"no-such-{uniq}"], 4),
        (["restore", str(tmp_path / "missing.json")], 4),
    ]
    for text in ("{not json", json.dumps({"format": "something-else"}),
                 json.dumps({"format": "opskit/offsets-backup-file", "version": 1,
                             "status": "applied", "backup": {"group": group}})):
        f = tmp_path / f"bad{len(cases)}.json"
        f.write_text(text)
        cases.append((["restore", str(f), "--execute", "--yes"], 2))
    for args, code in cases:
        res = run_cli("offsets", *args, "--backup-dir", str(tmp_path / "b"), "-b", bs) \
            if args[0] != "export" else run_cli("offsets", *args, "-b", bs)
        assert res.code == code, (args, res.err)
        one_line_error(res.err)
    assert committed(kafka, group, topic) == BEFORE
    assert not (tmp_path / "b").exists()


def test_export_then_import_round_trip(kafka, uniq, tmp_path):
    topic, group = setup(kafka, uniq)
    bs = kafka.bootstrap
    exported = run_cli("offsets", "export", "--group", group, "-b", bs)
    assert exported.code == 0, exported.err
    assert exported.out == f"{topic},0,5\n{topic},1,7\n"
    f = tmp_path / "saved.csv"
    f.write_text(exported.out)
    run_cli("offsets", "reset", "--group", group, "--all-topics", "--to-latest", "--execute",
            "--yes", "--backup-dir", str(tmp_path), "-b", bs)
    assert committed(kafka, group, topic) == {0: 20, 1: 20}
    dry = run_cli("offsets", "import", str(f), "--group", group, "-b", bs)
    assert dry.code == 0 and committed(kafka, group, topic) == {0: 20, 1: 20}
    res = run_cli("offsets", "import", str(f), "--group", group, "--execute", "--yes",
                  "--backup-dir", str(tmp_path), "-b", bs)
    assert res.code == 0, res.err
    assert committed(kafka, group, topic) == BEFORE
    js = run_cli("offsets", "export", "--group", group, "-o", "json", "-b", bs).json()
    assert js["state"] == "Empty" and len(js["offsets"]) == 2
