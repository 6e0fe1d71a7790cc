"""A killed `opskit replay --execute` leaves no Spark process and commits nothing.

Spark (local[2]) against the Kafka 3.7 sandbox. The CLI is started as a process,
and once Spark's driver runs (its JVM and the Python driver of the job are seen in
/proc) the CLI is ended by Ctrl-C (SIGINT), SIGTERM or SIGKILL. Afterwards no process
of the job may remain -- none in its process group and none naming its output
directory -- and the group's committed offsets are those from before.
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

from tests.helpers import commit_retrying, create_topic, stop_process
from tests.replay_helpers import committed, produce_events

ROOT = Path(__file__).resolve().parents[2]


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (process group, command line) of every live process."""
    out: dict[int, tuple[int, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2:].split()
        if rest and rest[0] == b"Z":
            continue
        out[int(name)] = (int(rest[2]), cmd)
    return out


def _job_processes(marker: str, groups: set[int], cli: int) -> dict[int, str]:
    return {pid: cmd for pid, (pgid, cmd) in _processes().items()
            if pid != cli and (marker in cmd or pgid in groups)}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["ctrl-c", "sigterm", "sigkill"])
def test_killed_replay_leaves_no_spark_and_no_commit(kafka, uniq, tmp_path, sig):  # type: ignore[no-untyped-def]
    topic, group = f"replay_kill_{uniq}", f"replay-kill-{uniq}"
    create_topic(kafka.bootstrap, topic, 2)
    produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 400, 2, {})
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 10, (topic, 1): 20})
    before = committed(kafka, group, topic)
    out = tmp_path / "replays"
    # a test run started in the background inherits SIGINT ignored, and an ignored signal
    # stays ignored across exec; a caught one is reset to the default, which lets the CLI
    # install Python's Ctrl-C handler as it does on a terminal
    old_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cli = subprocess.Popen(
            [sys.executable, "-m", "opskit.cli.main", "replay", "-g", group, "-t", topic,
             "-b", kafka.bootstrap, "--output-dir", str(out), "--execute", "--yes"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, old_handler)
    marker = str(out)
    groups: set[int] = set()
    try:
        # wait until Spark's driver runs: the JVM (SparkSubmit) and the job's Python driver
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and cli.poll() is None:
            job = {pid: (pgid, cmd) for pid, (pgid, cmd) in _processes().items()
                   if marker in cmd and pid != cli.pid}
            jvm = [p for p, (_, c) in job.items() if "SparkSubmit" in c]
            driver = [p for p, (_, c) in job.items() if "lag_replay.py" in c and "java" not in c]
            if jvm and driver:
                groups = {pgid for pgid, _ in job.values()}
                break
            time.sleep(0.2)
        assert groups, (f"Spark's driver never started (exit {cli.poll()}): "
                        f"{cli.stderr.read() if cli.poll() is not None else ''}")
        assert os.getpgid(cli.pid) not in groups  # the job runs in a group of its own
        cli.send_signal(sig)
        code = cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            stop_process(cli)
    err = cli.stderr.read() if cli.stderr else ""
    if sig == signal.SIGINT:
        assert code == 130, err  # the documented code for an interrupted command
        assert "Traceback" not in err
    else:
        assert code == -sig
    # nothing of the job outlives the CLI (the guard's grace period is 10 s)
    deadline = time.monotonic() + 45
    left = _job_processes(marker, groups, cli.pid)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _job_processes(marker, groups, cli.pid)
    assert not left, f"left running after {sig.name}: {left}"
    # nothing committed: the result was never verified
    assert committed(kafka, group, topic) == before
    manifests = list(out.glob("*/manifest.json"))
    assert manifests and all(json.loads(m.read_text())["status"] != "committed"
                             for m in manifests)
