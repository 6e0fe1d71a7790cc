"""``sandbox down`` removes the sandbox's playbook run with it.

The scale-out journal describes one cluster. A later sandbox of the same name is a new
cluster (new cluster id): it must not find the old journal and resume a run (or be told
a run is active) that belonged to the cluster that was removed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.state import SandboxState


def test_down_removes_the_playbook_run_and_keep_does_not(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    for keep in (True, False):
        sb = Sandbox("pbgone")
        sb.save(SandboxState("pbgone", "3.7.2", "cid", 1, 2))   # no nodes: nothing to stop
        sb.playbook_dir.mkdir(parents=True, exist_ok=True)
        (sb.playbook_dir / "journal.json").write_text("{}")
        sb.down(keep=keep)
        assert (sb.playbook_dir / "journal.json").exists() is keep
    assert str(Sandbox("pbgone").playbook_dir).startswith(str(tmp_path))
