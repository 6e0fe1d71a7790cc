"""``opskit playbook status`` after a real scale-out was killed with SIGKILL (Kafka 3.7
and 4.x sandboxes, static quorum, 1 -> 3 brokers): "interrupted (pid N gone): resume with <command>", not
"running"; the printed command, run as printed, finishes the run, and status then says
done. (Without Kafka, the live holder and the other cases:
``tests/unit/test_playbook_status_interrupted.py``.)
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import cli_sandbox, run_cli

from opskit.adapters.scaleout.runner import KILL_AT_ENV

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("version", ["3.7", "4.x"])
def test_killed_scale_out_is_interrupted_and_the_printed_command_resumes_it(
        version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    name = f"pbkill-{uuid.uuid4().hex[:6]}"
    with cli_sandbox(name, "--kafka-version", version) as sb:
        plan = run_cli("playbook", "scale-out", "--sandbox", sb.name, "-o", "json")
        assert plan.code == 0, plan.err
        steps: list[str] = plan.json()["plan"]["steps"]
        kill_at = next(k for k in steps if k.startswith("add_node"))
        args = ["playbook", "scale-out", "--sandbox", sb.name, "--throttle", "20MiB",
                "--execute"]
        proc = subprocess.Popen([sys.executable, "-m", "opskit.cli.main", *args], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True,
                                env={**os.environ, KILL_AT_ENV: f"started:{kill_at}"})
        try:
            _, err = proc.communicate(timeout=900)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
        assert proc.returncode == -signal.SIGKILL, err.decode()[-800:]

        st = run_cli("playbook", "status", "--sandbox", sb.name)
        assert st.code == 0, st.err
        m = re.search(r"interrupted \(pid (\d+) gone\): resume with (.+)", st.out)
        assert m is not None, st.out
        assert int(m.group(1)) == proc.pid
        assert "running" not in st.out.splitlines()[0]
        command = shlex.split(m.group(2).strip())
        assert command[:3] == ["opskit", "playbook", "resume"]
        assert command[3:] == ["--sandbox", sb.name, "--throttle", "20MiB"], command

        done = subprocess.run([sys.executable, "-m", "opskit.cli.main", *command[1:]],
                              cwd=ROOT, capture_output=True, text=True, timeout=1500,
                              check=False)
        assert done.returncode == 0, done.stderr[-1500:]
        after = run_cli("playbook", "status", "--sandbox", sb.name, "-o", "json")
        assert after.json()["phase"] == "done" and "process" not in after.json()
        assert len(sb.require().nodes) == 3
