"""A killed `opskit replay --execute` on a Spark standalone cluster leaves no Spark
application, no Spark process and no commit.

A real master and two workers (fixture ``spark_standalone``), client deploy mode,
against the Kafka 3.7 sandbox. Reads are slowed (as in test_replay_standalone.py's
worker-loss test) so the executors are certainly still reading when the CLI is ended
by SIGTERM or SIGKILL. Afterwards: no process naming the replay's output directory
(spark-submit, the driver JVM, the job's Python driver) or its application id (the
executors) is left, the master lists the application as finished and none as
active, and the group's committed offsets are those from before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import commit_retrying, create_topic, stop_process
from tests.replay_helpers import committed, produce_events
from tests.spark_cluster import SparkStandalone

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_CONF = ("spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
                "spark.executor.memory=512m", "spark.cores.max=2",
                "spark.scheduler.minRegisteredResourcesRatio=1.0")
#: every fetch waits for 1 GB it never gets (100 ms) and returns at most 4 KB per partition
SLOW = ("fetch.min.bytes=1000000000", "fetch.max.wait.ms=100", "max.partition.fetch.bytes=4096")


def _cmdlines() -> dict[int, str]:
    """pid -> command line of every live (not zombie) process."""
    out: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            cmd = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2:].split()[0] == b"Z":
            continue
        out[int(name)] = cmd.replace(b"\0", b" ").decode(errors="replace")
    return out


def _apps(spark: SparkStandalone, name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    st = spark.state()
    return ([a for a in st["activeapps"] if a["name"] == name],
            [a for a in st["completedapps"] if a["name"] == name])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_killed_replay_on_standalone_leaves_no_application_and_no_commit(  # type: ignore[no-untyped-def]
        kafka, spark_standalone, uniq, tmp_path, sig):
    spark: SparkStandalone = spark_standalone
    topic, group = f"sa_killcli_{uniq}", f"sa-killcli-{uniq}"
    create_topic(kafka.bootstrap, topic, 4)
    produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 300, 4, batch_records=10)
    commit_retrying(kafka.bootstrap, group, {(topic, p): 0 for p in range(4)})
    before = committed(kafka, group, topic)
    out = tmp_path / "replays"
    cmd = [sys.executable, "-m", "opskit.cli.main", "replay", "-g", group, "-t", topic, "-b",
           kafka.bootstrap, "--output-dir", str(out), "--master", spark.url]
    for item in CLUSTER_CONF:
        cmd += ["--conf", item]
    for item in SLOW:
        cmd += ["--kafka-option", item]
    cli = subprocess.Popen([*cmd, "--execute", "--yes"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    marker = str(out)
    app_id = name = ""
    try:
        # wait until the application runs on the master and an executor runs a task
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and cli.poll() is None:
            manifests = list(out.glob("*/manifest.json"))
            if manifests and not name:
                name = f"opskit-lag-replay-{json.loads(manifests[0].read_text())['replay_id']}"
            active = _apps(spark, name)[0] if name else []
            if active:
                app_id = active[0]["id"]
                work = [d for i in range(spark.workers) for d in spark.executor_dirs(i)
                        if d.parent.name == app_id]
                if any("Running task" in (d / "stderr").read_text(errors="replace")
                       for d in work if (d / "stderr").exists()):
                    break
            time.sleep(0.2)
        else:
            raise AssertionError(f"no task ran (exit {cli.poll()}): "
                                 + (cli.communicate()[1][-2000:] if cli.poll() is not None
                                    else "timed out"))
        procs = _cmdlines()
        # the check below can fail: the job's local processes and its executors are there now
        assert any(marker in c and "SparkSubmit" in c for c in procs.values()), procs
        assert any(app_id in c and "CoarseGrainedExecutorBackend" in c
                   for c in procs.values()), procs
        cli.send_signal(sig)
        code = cli.wait(timeout=60)
    finally:
        if cli.poll() is None:
            stop_process(cli)
    assert code == -sig

    # nothing of the replay outlives the CLI: not spark-submit, the driver JVM or the
    # job's Python driver (they name the output directory), not an executor (it names
    # the application id); the master has ended the application
    deadline = time.monotonic() + 60
    while True:
        left = {p: c for p, c in _cmdlines().items()
                if p != cli.pid and (marker in c or app_id in c)}
        active, done = _apps(spark, name)
        if (not left and not active) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not left, f"left running after {sig.name}: {left}"
    assert active == [], f"the master still runs the application: {active}"
    assert [a["id"] for a in done] == [app_id]
    assert done[0]["state"] in ("FINISHED", "KILLED", "FAILED"), done

    # nothing committed: the result was never verified
    assert committed(kafka, group, topic) == before
    manifests = list(out.glob("*/manifest.json"))
    assert manifests and all(json.loads(m.read_text())["status"] != "committed"
                             for m in manifests)
