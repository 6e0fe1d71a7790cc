"""``scripts/demo.sh`` as a newcomer runs it: from a fresh clone with a fresh virtual
environment, it installs only the demo layer (one line per piece) and ends with the lag
table of ``analytics-ingest``. opskit's cache starts empty; to keep CI short the package
registries' own caches (pip's downloads, Maven's ~/.m2) are reused (the cold timing is in
the README); the sandbox and the venv are the clone's own and removed afterwards."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(1800)
def test_demo_from_a_fresh_clone(tmp_path: Path) -> None:
    from opskit.sandbox.ports import free_port_block

    clone = tmp_path / "opskit"
    if (ROOT / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    else:  # a source tree without git: what a fresh clone would hold
        shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(
            ".venv", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache"))
    assert not (clone / ".venv").exists()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "OPSKIT_VENV")}
    # opskit's own cache empty (the Kafka distribution is assembled again); the package
    # registries' caches (pip's, Maven's ~/.m2) are kept, as the issue allows
    env |= {"OPSKIT_DEMO_PORT": str(free_port_block(1)), "OPSKIT_DEMO_WAIT": "10",
            "OPSKIT_CACHE": str(tmp_path / "cache")}
    opskit = clone / ".venv" / "bin" / "opskit"
    try:
        r = subprocess.run(["./scripts/demo.sh"], cwd=clone, env=env, capture_output=True,
                           text=True, timeout=1700, check=False)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        progress = [ln for ln in r.stderr.splitlines() if ln.startswith("install.sh: [")]
        done = [ln for ln in progress if ln.endswith(" s)")]
        # the demo layer only: four pieces, each with its seconds; nothing of the tests' layer
        assert sorted(ln.split("]")[0] for ln in done) == [
            f"install.sh: [{i}/4" for i in (1, 2, 3, 4)], progress
        assert not any(w in r.stdout + r.stderr for w in ("pyspark", "kube-apiserver",
                                                          "Prometheus", "pytest"))
        lines = r.stdout.splitlines()
        head = [i for i, ln in enumerate(lines) if ln.startswith("analytics-ingest  state=")]
        assert head, r.stdout[-3000:]
        table = lines[head[0] + 1].split()
        assert table[:6] == ["TOPIC", "PARTITION", "COMMITTED", "LOG-START", "LOG-END", "LAG"]
        assert any(ln.startswith("events_plugin_ingestion ") for ln in lines[head[0] + 2:])
        assert re.search(r"opskit lag exited [012] ", r.stdout), r.stdout[-2000:]
        assert (clone / ".venv" / "bin" / "python").exists()
    finally:
        if opskit.exists():
            subprocess.run([str(opskit), "sandbox", "down", "--name", "demo"], env=env,
                           capture_output=True, timeout=300, check=False)
