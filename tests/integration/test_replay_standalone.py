"""`opskit replay` on a real Spark standalone cluster (master + 2 workers from the
installed PySpark, fixture ``spark_standalone``) against a real Kafka 3.7 sandbox.

- client deploy mode: the driver runs where opskit runs, the tasks on the
  workers' executors; the connector jars reach the executors from the local
  jar cache (``--jars``), output exactly once, guarded commit;
- cluster deploy mode: Spark itself refuses Python applications on standalone
  masters; shown with spark-submit, and opskit refuses it up front (exit 2);
- a worker killed (SIGKILL, with its executor) while its task runs: Spark
  retries the task on the other worker, the output is still exactly once and
  the group is committed once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opskit.adapters.spark.submit import (
    STANDALONE_PYTHON_CLUSTER_REFUSAL,
    SubmitOptions,
    build_command,
    ensure_spark_jars,
    run_spark_submit,
)
from tests.helpers import commit_retrying, create_topic, run_cli
from tests.replay_helpers import (
    check_events_exactly_once,
    committed,
    log_ends,
    produce_events,
    read_topic,
)
from tests.spark_cluster import SparkStandalone

ROOT = Path(__file__).resolve().parents[2]
#: loopback driver, small executors, and both executors registered before the first
#: task (so both workers run tasks)
CLUSTER_CONF = ("spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
                "spark.executor.memory=512m", "spark.cores.max=2",
                "spark.scheduler.minRegisteredResourcesRatio=1.0")


def conf_args(*extra: str) -> list[str]:
    out: list[str] = []
    for item in (*CLUSTER_CONF, *extra):
        out += ["--conf", item]
    return out


def executor_dirs(spark: SparkStandalone) -> dict[int, set[Path]]:
    return {i: set(spark.executor_dirs(i)) for i in range(spark.workers)}


def ran_tasks(executor_dir: Path) -> bool:
    err = executor_dir / "stderr"
    return err.exists() and "Running task" in err.read_text(errors="replace")


def one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("opskit: error")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_client_mode_runs_on_the_workers_exactly_once_then_commits(  # type: ignore[no-untyped-def]
        kafka, spark_standalone, uniq, tmp_path):
    spark: SparkStandalone = spark_standalone
    topic, group, dlq = f"sa_ev_{uniq}", f"sa-ev-{uniq}", f"sa_dlq_{uniq}"
    create_topic(kafka.bootstrap, topic, 4)
    create_topic(kafka.bootstrap, dlq, 1)
    bad = {2: [b'{"schema": "hanzo.stream.v1", "id": "evt_broken"', b"[1, 2]"]}
    produced = produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 150, 4, bad)
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 30, (topic, 1): 0, (topic, 2): 0,
                                             (topic, 3): 149})
    out = tmp_path / "replays"
    before = executor_dirs(spark)

    res = run_cli("replay", "-g", group, "-t", topic, "-b", kafka.bootstrap, "--output-dir",
                  str(out), "--master", spark.url, "--deploy-mode", "client",
                  *conf_args(), "--dead-letter-topic", dlq, "--execute", "--yes", "-o", "json")
    assert res.code == 0, res.err
    m = res.json()
    assert m["status"] == "committed"
    assert f"submitting the Spark job ({spark.url})" in res.err
    rid = m["replay_id"]

    starts = {0: 30, 1: 0, 2: 0, 3: 149}
    expected = {po: kv for po, kv in produced.items() if po[1] >= starts[po[0]]}
    _events, dead = check_events_exactly_once(out, rid, expected)
    assert sorted(r["reason"] for r in dead) == ["not a JSON object", "not a JSON object"]
    assert len(read_topic(kafka.bootstrap, dlq)) == 2  # produced by the executors
    assert m["result"]["records"] == len(expected)
    assert committed(kafka, group, topic) == log_ends(kafka, topic, 4) == {
        0: 150, 1: 150, 2: 152, 3: 150}

    # the tasks ran in executors on both workers, and each of those executors had
    # fetched exactly the cached connector jars (from the driver: no Maven, no Ivy)
    jars = {j.name for j in ensure_spark_jars().jars}
    new = {i: executor_dirs(spark)[i] - before[i] for i in before}
    worked = {i: [d for d in dirs if ran_tasks(d)] for i, dirs in new.items()}
    assert all(worked.values()), f"not every worker ran a task: {worked}"
    for dirs in worked.values():
        for d in dirs:
            assert jars <= {p.name for p in d.glob("*.jar")}, d
    apps = [a for a in spark.state()["completedapps"]
            if a["name"] == f"opskit-lag-replay-{rid}"]
    assert [a["state"] for a in apps] == ["FINISHED"], spark.state()["completedapps"]


def test_cluster_deploy_mode_is_refused_by_spark_and_by_opskit(  # type: ignore[no-untyped-def]
        kafka, spark_standalone, uniq, tmp_path):
    spark: SparkStandalone = spark_standalone
    topic, group = f"sa_cl_{uniq}", f"sa-cl-{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 20, 1)
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 5})
    spec = {"replay_id": f"rp-{uniq}", "group": group, "pipeline": "events",
            "ranges": [[topic, 0, 5, 20]]}

    # spark-submit itself (the command opskit would run, with --deploy-mode cluster)
    cmd = build_command(ensure_spark_jars(),
                        SubmitOptions(master=spark.url, deploy_mode="cluster"),
                        ["--spec", json.dumps(spec), "--bootstrap", kafka.bootstrap,
                         "--output", str(tmp_path / "direct")])
    res = run_spark_submit(cmd, lambda _m: None, timeout=300)
    assert res.returncode != 0
    assert STANDALONE_PYTHON_CLUSTER_REFUSAL in res.tail
    st = spark.state()
    assert st["activedrivers"] == [] and st["completeddrivers"] == []  # nothing submitted
    assert not (tmp_path / "direct").exists()

    # opskit: one line, exit 2, before planning (no manifest, offsets untouched)
    out = tmp_path / "replays"
    for flags in (["--deploy-mode", "cluster"], ["--conf", "spark.submit.deployMode=cluster"]):
        got = run_cli("replay", "-g", group, "-t", topic, "-b", kafka.bootstrap,
                      "--output-dir", str(out), "--master", spark.url, *flags, "--execute",
                      "--yes")
        assert got.code == 2, got.err
        line = one_line_error(got.err)
        assert "standalone" in line and "--deploy-mode client" in line
        assert "submitting" not in got.err
    assert not out.exists()
    assert committed(kafka, group, topic) == {0: 5}


def _task_ends(event_log_dir: Path) -> list[dict[str, Any]]:
    ends = []
    for f in sorted(p for p in event_log_dir.rglob("events_*") if p.is_file()):
        for line in f.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("Event") == "SparkListenerTaskEnd":
                ends.append(ev)
    return ends


def test_worker_killed_mid_job_task_retried_output_exactly_once_commit_once(  # type: ignore[no-untyped-def]
        kafka, spark_standalone, uniq, tmp_path):
    spark: SparkStandalone = spark_standalone
    topic, group = f"sa_kill_{uniq}", f"sa-kill-{uniq}"
    create_topic(kafka.bootstrap, topic, 4)
    # batches of 10 records, so the slow fetches below return a few records each
    produced = produce_events(kafka.bootstrap, topic, "events_plugin_ingestion", 300, 4,
                              batch_records=10)
    commit_retrying(kafka.bootstrap, group, {(topic, p): 0 for p in range(4)})
    out, backups, events = tmp_path / "replays", tmp_path / "backups", tmp_path / "events"
    events.mkdir()
    before = executor_dirs(spark)
    # slow reads, so that a task is still running when its worker dies: every fetch
    # waits for 1 GB it never gets (100 ms) and returns at most 4 KB per partition
    slow = ["--kafka-option", "fetch.min.bytes=1000000000", "--kafka-option",
            "fetch.max.wait.ms=100", "--kafka-option", "max.partition.fetch.bytes=4096"]
    cmd = [sys.executable, "-m", "opskit.cli.main", "replay", "-g", group, "-t", topic, "-b",
           kafka.bootstrap, "--output-dir", str(out), "--backup-dir", str(backups),
           "--master", spark.url, *conf_args("spark.eventLog.enabled=true",
                                             "spark.eventLog.compress=false",
                                             f"spark.eventLog.dir=file://{events}"),
           *slow, "--execute", "--yes", "-o", "json"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 240
        victim: Path | None = None
        while victim is None and proc.poll() is None and time.monotonic() < deadline:
            victim = next((d for d in spark.executor_dirs(1) if d not in before[1]
                           and ran_tasks(d)), None)
            time.sleep(0.1)
        assert victim is not None, "worker 1 never ran a task: " + proc.communicate()[1][-2000:]
        spark.kill_worker(1)  # the worker and its executor, while the task reads
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        spark.restart_worker(1)
    assert proc.returncode == 0, stderr
    m = json.loads(stdout)
    assert m["status"] == "committed"

    # Spark lost the task with the executor and ran it again elsewhere
    ends = _task_ends(events)
    lost = [e for e in ends if e["Task End Reason"]["Reason"] == "ExecutorLostFailure"]
    assert lost, "no task was lost with the killed worker"
    done = {(e["Stage ID"], e["Task Info"]["Index"]) for e in ends
            if e["Task End Reason"]["Reason"] == "Success"}
    for e in lost:
        assert (e["Stage ID"], e["Task Info"]["Index"]) in done

    # still every record exactly once, counted right, committed once
    check_events_exactly_once(out, m["replay_id"], produced)
    assert m["result"]["records"] == len(produced) == 1200
    assert committed(kafka, group, topic) == log_ends(kafka, topic, 4) == {
        p: 300 for p in range(4)}
    assert [e["event"] for e in m["events"]].count("committed") == 1
    saved = [json.loads(p.read_text()) for p in backups.rglob("*.json")]
    assert [b["status"] for b in saved] == ["applied"]
