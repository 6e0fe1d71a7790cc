"""``opskit playbook status`` tells a journaled run whose process is gone (``kill -9``, a
reboot) from one still running: "interrupted (pid N gone): resume with <command>",
never "running". The run lock is the witness: the kernel drops it when its holder dies.

Here the holder is a real child process taking the run lock the way a scale-out does
(killed with SIGKILL); the whole path on a real sandbox (a scale-out killed by SIGKILL,
then resumed with the printed command) is ``tests/integration/test_racks_playbook_status.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli

from opskit.adapters.files.run_lock import RunLock, probe
from opskit.adapters.scaleout.journal import FileJournal
from opskit.core.scaleout.machine import Phase, RunState
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutRequest, plan_scale_out
from opskit.sandbox.cluster import Sandbox

ROOT = Path(__file__).resolve().parents[2]
RESUME = "opskit playbook resume --sandbox pbi --throttle 10MB --window 02:00-05:00Z"


def _journal(phase: Phase) -> Path:
    plan = plan_scale_out(ClusterFacts("3.7.2", 0, (0,), (0,), topic_rf={"t": 1}),
                          ScaleOutRequest(throttle_bytes_per_s=10**7))
    state = RunState("so-abcd1234", plan, phase, in_flight=plan.steps[0].key)
    run_dir = Sandbox("pbi").playbook_dir
    FileJournal(run_dir / "journal.json").save(state, None)
    return run_dir


def _hold_lock(lock: Path) -> subprocess.Popen[str]:
    """A child process holding the run lock as a scale-out does, until killed."""
    code = ("import sys, time; sys.path.insert(0, sys.argv[2]);"
            "from pathlib import Path; from opskit.adapters.files.run_lock import RunLock;"
            "l = RunLock(Path(sys.argv[1]), 'playbook scale-out so-abcd1234', resume=sys.argv[3]);"
            "l.__enter__(); print('held', flush=True); time.sleep(120)")
    child = subprocess.Popen([sys.executable, "-c", code, str(lock), str(ROOT), RESUME],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))


def test_running_while_the_holder_lives_interrupted_after_kill9() -> None:
    run_dir = _journal(Phase.RUNNING)
    child = _hold_lock(run_dir / "run.lock")
    try:
        live = run_cli("playbook", "status", "--sandbox", "pbi", "-o", "json")
        assert live.code == 0, live.err
        assert live.json()["process"]["state"] == "running"
        assert live.json()["process"]["pid"] == child.pid
        table = run_cli("playbook", "status", "--sandbox", "pbi")
        assert "scale-out so-abcd1234: running" in table.out, table.out
        assert "RUNNING" in table.out and "interrupted" not in table.out
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)

    gone = run_cli("playbook", "status", "--sandbox", "pbi", "-o", "json")
    assert gone.code == 0, gone.err
    assert gone.json()["phase"] == "running"  # the journal as written
    assert gone.json()["process"] == {"state": "interrupted", "pid": child.pid,
                                      "pid_gone": True, "resume_command": RESUME}
    table = run_cli("playbook", "status", "--sandbox", "pbi")
    assert (f"scale-out so-abcd1234: interrupted (pid {child.pid} gone): resume with {RESUME}"
            in table.out), table.out
    assert "INTERRUPTED" in table.out and "RUNNING" not in table.out
    # status only looked: the next run takes the lock at once
    with RunLock(run_dir / "run.lock", "next run"):
        assert probe(run_dir / "run.lock").held


def test_no_lock_file_is_interrupted_too() -> None:
    """A journal saying running with no lock file at all (removed, or written by an older
    opskit): nothing runs it; the default resume command is named."""
    _journal(Phase.RUNNING)
    r = run_cli("playbook", "status", "--sandbox", "pbi")
    assert r.code == 0, r.err
    assert ("interrupted (no process holds its run lock): resume with opskit playbook "
            "resume --sandbox pbi") in r.out, r.out


def test_a_pid_alive_but_not_holding_the_lock_is_not_called_gone() -> None:
    """The lock names a pid that exists (reused by another process, here this one) but
    the lock is free: interrupted, without claiming the pid is gone."""
    run_dir = _journal(Phase.PLANNED)
    (run_dir / "run.lock").write_text(
        f"pid {os.getpid()} on {os.uname().nodename} since 2026-01-01T00:00:00Z: x\n")
    r = run_cli("playbook", "status", "--sandbox", "pbi")
    assert f"interrupted (pid {os.getpid()} no longer holds its run lock)" in r.out, r.out


@pytest.mark.parametrize("phase", [Phase.HALTED, Phase.FAILED, Phase.DONE])
def test_runs_that_stopped_on_their_own_say_so(phase: Phase) -> None:
    _journal(phase)
    r = run_cli("playbook", "status", "--sandbox", "pbi", "-o", "json")
    assert r.code == 0, r.err
    assert r.json()["phase"] == phase.value and "process" not in r.json()


@pytest.mark.parametrize("phase", [Phase.HALTED, Phase.FAILED])
def test_a_run_stopped_inside_a_step_is_not_called_running(phase: Phase) -> None:
    """A run that halted or failed inside a step (it stays in flight, to be run again
    whole) is not running: status says it stopped there and how it resumes, in text and
    JSON (the JSON keys of before stay: ``phase``, ``in_flight``; no ``process``)."""
    run_dir = _journal(phase)
    lock = run_dir / "run.lock"
    with RunLock(lock, "playbook scale-out so-abcd1234", resume=RESUME):
        pass                                     # the run that stopped recorded its resume
    r = run_cli("playbook", "status", "--sandbox", "pbi")
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith(f"scale-out so-abcd1234: {phase.value} inside preflight "
                            "(nothing runs it now)"), first
    assert first.endswith(f"with {RESUME}"), first
    assert "RUNNING" not in r.out and f"{phase.value.upper()}  preflight" in r.out, r.out
    j = run_cli("playbook", "status", "--sandbox", "pbi", "-o", "json").json()
    assert j["phase"] == phase.value and j["in_flight"] == "preflight" and "process" not in j
    assert j["in_flight_state"] == phase.value and j["resume_command"] == RESUME


def test_the_in_flight_state_in_json_for_running_and_interrupted() -> None:
    """``in_flight_state`` says the same as the table for a live and a dead process."""
    run_dir = _journal(Phase.RUNNING)
    child = _hold_lock(run_dir / "run.lock")
    try:
        live = run_cli("playbook", "status", "--sandbox", "pbi", "-o", "json").json()
        assert live["in_flight_state"] == "running" and "resume_command" not in live
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    gone = run_cli("playbook", "status", "--sandbox", "pbi", "-o", "json").json()
    assert gone["in_flight_state"] == "interrupted"
