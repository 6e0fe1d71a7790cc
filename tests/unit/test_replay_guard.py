"""The guard that ties ``spark-submit`` to opskit (opskit/adapters/spark/guard.py),
with a stand-in command (``sleep``) instead of Spark: no broker, no JVM.

- opskit's end (the guard's stdin closed): the command is stopped, the guard exits 143;
- the guard itself killed with SIGKILL (it runs no code): the kernel's parent-death
  signal (PR_SET_PDEATHSIG) still ends the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _state(pid: int) -> str | None:
    """The process state letter, or None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()[0].decode()


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        if int(stat[stat.rfind(b")") + 2:].split()[1]) == pid:
            out.append(int(name))
    return out


def _start_guard(marker: str) -> tuple[subprocess.Popen[bytes], int]:
    guard = subprocess.Popen([sys.executable, "-m", "opskit.adapters.spark.guard", "--",
                              "sleep", marker], cwd=ROOT, stdin=subprocess.PIPE,
                             start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        kids = [k for k in _children(guard.pid) if _state(k) not in (None, "Z")]
        if kids:
            return guard, kids[0]
        time.sleep(0.05)
    guard.kill()
    raise AssertionError("the guard did not start its command")


def _gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _state(pid) in (None, "Z"):
            return True
        time.sleep(0.05)
    return False


def test_closed_pipe_stops_the_command() -> None:
    guard, child = _start_guard("301")
    try:
        assert guard.stdin is not None
        guard.stdin.close()  # what the kernel does when opskit ends, however it ends
        assert guard.wait(30) == 143
        assert _gone(child)
    finally:
        if _state(child) not in (None, "Z"):
            os.kill(child, signal.SIGKILL)


def test_guard_killed_the_command_gets_the_parent_death_signal() -> None:
    guard, child = _start_guard("302")
    try:
        os.kill(guard.pid, signal.SIGKILL)  # the guard runs no code: only the kernel acts
        guard.wait(30)
        assert _gone(child), f"the command outlived its SIGKILLed guard: {_state(child)}"
    finally:
        if guard.stdin is not None:
            guard.stdin.close()
        if _state(child) not in (None, "Z"):
            os.kill(child, signal.SIGKILL)
