"""``opskit playbook multi-rack`` refuses bad input and the Kubernetes platform in one line,
before it reads a cluster or writes anything (no Kafka needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli


@pytest.mark.parametrize(("args", "code", "text"), [
    (["--racks", "0=a,1=b", "--platform", "kubernetes"], 3,
     "not built: playbook multi-rack --platform kubernetes"),
    (["--racks", "0=a,1=b", "--platform", "aws"], 2, "--platform 'aws'"),
    (["--racks", "0=a,1"], 2, "--racks: '1' is not NODE=RACK"),
    (["--racks", "0=a,1=b", "--add-brokers", "3=a b"], 2, "--add-brokers"),
    (["--racks", "0=a,1=b", "--throttle", "fast"], 2, "throttle"),
    (["--racks", "0=a,1=b", "--window", "25:00-26:00Z"], 2, "window"),
    (["--racks", "0=a,1=b", "--sandbox", "nothere"], 4, "no sandbox named"),
])
def test_refused_in_one_line_and_nothing_written(args: list[str], code: int, text: str,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    r = run_cli("playbook", "multi-rack", *args, "--execute")
    assert r.code == code, (r.code, r.err)
    assert r.err.startswith("opskit: error:") and r.err.count("\n") == 1, r.err
    assert text in r.err, r.err
    assert not (tmp_path / "playbooks").exists()


def test_status_resume_abort_without_a_run_are_not_found(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    for cmd in (["status"], ["resume"], ["abort", "--execute"]):
        r = run_cli("playbook", *cmd, "--sandbox", "nothere")
        assert r.code == 4 and "playbook run" in r.err, (cmd, r.err)
