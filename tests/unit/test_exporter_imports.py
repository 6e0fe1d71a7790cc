"""The exporter's processes import nothing they do not use (no dashboards library, no
Kubernetes client, no Spark): memory and start-up time a long-running exporter pays for
nothing.

``python -X importtime`` logs every import of the interpreter to stderr, and so does its
forked collector process (same interpreter, same stderr), so the served exporter is
checked as it runs: both the HTTP process and the collector child. No Kafka is needed:
the collector's modules are all imported before its first read.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: third-party packages the exporter must never load
FORBIDDEN = {"grafanalib", "kubernetes", "pyspark", "py4j", "jinja2", "hypothesis", "pytest",
             "numpy", "pandas"}
#: the only opskit packages and modules it may load
ALLOWED_OPSKIT = ("opskit.core", "opskit.adapters", "opskit.exporter", "opskit.errors",
                  "opskit.paths", "opskit.redact", "opskit.cli.main", "opskit.cli.common",
                  "opskit.cli.exits", "opskit.cli.exporter", "opskit.cli.validate")


def imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    return {m.group(1).strip() for m in re.finditer(r"^import time:[^|]*\|[^|]*\|\s*(\S+)",
                                                    stderr, re.MULTILINE)}


def check(mods: set[str]) -> None:
    tops = {m.split(".")[0] for m in mods}
    assert not tops & FORBIDDEN, sorted(tops & FORBIDDEN)
    ours = {m for m in mods if m == "opskit" or m.startswith("opskit.")} - {"opskit", "opskit.cli"}
    stray = sorted(m for m in ours if not m.startswith(ALLOWED_OPSKIT))
    assert not stray, stray


def test_check_catches_a_forbidden_import() -> None:
    # the check can fail: a dashboards import or another command's module is caught
    with pytest.raises(AssertionError):
        check({"opskit.exporter.engine", "grafanalib.core"})
    with pytest.raises(AssertionError):
        check({"opskit.exporter.engine", "opskit.cli.replay"})


def test_once_imports_only_what_it_uses() -> None:
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "opskit.cli.main", "exporter", "--once",
         "-b", "127.0.0.1:1", "--timeout", "1"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 3, r.stderr[-2000:]
    mods = imported(r.stderr)
    assert "opskit.exporter.collector" in mods and "prometheus_client" in mods  # it did run
    check(mods)


def test_served_exporter_and_its_collector_import_only_what_they_use(tmp_path: Path) -> None:
    err = tmp_path / "stderr"
    with err.open("w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "opskit.cli.main", "exporter",
             "-b", "127.0.0.1:1", "--timeout", "1", "--interval", "1s", "--port", "0",
             "--listen", "127.0.0.1"],
            stdout=subprocess.DEVNULL, stderr=f, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.time() + 90
            # the child's first cycle fails (nothing listens there) and is logged
            while time.time() < deadline and "collection failed" not in err.read_text():
                assert proc.poll() is None, err.read_text()[-2000:]
                time.sleep(0.5)
            assert "collection failed" in err.read_text(), err.read_text()[-2000:]
        finally:
            proc.terminate()
            proc.wait(30)
    mods = imported(err.read_text())
    # the collector's modules were imported (in the child: the parent serves only)
    assert {"opskit.exporter.collector", "opskit.exporter.server"} <= mods
    check(mods)
