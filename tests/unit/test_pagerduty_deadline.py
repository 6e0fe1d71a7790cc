"""An Events API endpoint that accepts connections and never answers cannot hang
``opskit page``: every HTTP call has a timeout, every event a deadline, and the
only thing on stderr is opskit's one error line (not the package's retry lines).

The server is a local TCP listener on a free port that accepts and then holds
each connection without reading or writing (a TLS handshake never completes).
pytest-timeout is the hang detector; nothing here asserts on speed.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from opskit.adapters.paging.pagerduty import (
    PagerDutyEvents,
    PagerDutySettings,
    PagerDutyUnavailableError,
)
from opskit.cli import exits
from tests.helpers import SilentServer

KEY = "0123456789abcdef0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def silent_server() -> Iterator[str]:
    with SilentServer() as srv:
        yield f"https://{srv.address}"


@pytest.mark.timeout(60)
def test_event_gives_up_at_its_deadline(silent_server: str) -> None:
    s = PagerDutySettings(KEY, base_url=silent_server, timeout=0.5, deadline=2.0,
                          max_retries=10, backoff=0.05)
    with PagerDutyEvents(s) as pd, pytest.raises(PagerDutyUnavailableError) as ei:
        pd.trigger("lag high", "opskit")
    assert "\n" not in str(ei.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("action", ["trigger", "resolve", "acknowledge"])
def test_page_cli_against_a_silent_endpoint(silent_server: str, tmp_path: Path,
                                            action: str) -> None:
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    args = [sys.executable, "-m", "opskit.cli.main", "page", action,
            "--routing-key-file", str(key), "--events-url", silent_server,
            "--timeout", "0.5", "--max-retries", "2", "--execute"]
    args += ["--summary", "s"] if action == "trigger" else ["--dedup-key", "k"]
    # the subprocess timeout is the hang detector
    r = subprocess.run(args, capture_output=True, text=True, timeout=45, cwd=ROOT, check=False,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
                            "HOME": str(tmp_path)})
    assert r.returncode == exits.UNKNOWN, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opskit: error: "), r.stderr
    assert "PagerDuty" in lines[0]
