"""Reassignment and the Spark replay on HIP-30's production listener, and no password leaks.

One secured 3-broker sandbox (SASL_SSL, TLS with the sandbox CA, StandardAuthorizer)
for the module; the contexts log in with SCRAM-SHA-512 (kafka-python's SCRAM over TLS
for the reassignment APIs, Spark's ScramLoginModule for the replay). Every command runs
as a real process with ``--debug`` (text and json logs), and everything is searched for
every sandbox password, as ``test_secret_grep`` does for the other commands: stdout and
stderr, every file opskit wrote (state directory, plans, the replay's manifests and
Parquet), and the command line and environment of every process the replay starts
(spark-submit, the JVM, the Python driver and workers), read from /proc while it runs.

* ``reassign plan --replication-factor 3``, ``execute --throttle --execute`` while an
  idempotent acks=all producer runs, ``status``, ``verify``; ``cancel`` (dry run, then
  ``--execute``) of a second, slow move in flight, as admin;
* as ``monitor`` (Describe only), ``execute --execute`` and ``cancel --execute`` are
  refused in one line naming the missing ACLs, exit 6, and change nothing;
* ``replay`` dry run and ``--execute`` in Spark local mode: the job logs in over SASL_SSL
  with the CA as a PEM truststore, the password handed over a pipe.

Controls (so the search can fail): with opskit's log filter disabled, ``reassign status
--debug`` prints the admin password (kafka-python logs its configuration); a password put
on the job's command line the old way (``--kafka-option sasl.jaas.config=...``) is found by
the /proc scan of the Spark processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Self

import pytest
from confluent_kafka import Producer
from secured_scenario import (
    COMMITTED,
    PARTITIONS,
    RECORDS,
    Scenario,
    build,
    descendants,
    leaks,
    proc_text,
    secrets,
    written_files,
)

from tests.helpers import commit, create_topic, produce

REPO = Path(__file__).resolve().parents[2]
MECHANISM = "SCRAM-SHA-512"
#: run opskit with its log filter disabled (the control: the grep must then find the password)
NO_FILTER = ("import opskit.redact as r; r.RedactingFilter.filter = lambda self, rec: True; "
             "from opskit.cli.main import run; run()")


@pytest.fixture(scope="module")
def secured(kafka3_sasl_ssl: Any, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    from opskit.sandbox.security import write_contexts

    c = kafka3_sasl_ssl
    write_contexts(c.sandbox.name, c.bootstrap, c.sandbox.security(c.state), MECHANISM)
    return build(c, tmp_path_factory.mktemp("secured-reassign"))


def _argv(argv: list[str], log_format: str | None) -> list[str]:
    flags = [] if log_format is None else ["--debug"] + (
        ["--log-format", "json"] if log_format == "json" else [])
    return [sys.executable, "-m", "opskit.cli.main", *flags, *argv]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def run(argv: list[str], log_format: str | None = "text",
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """opskit ``argv`` as a real process (``log_format`` None: no --debug)."""
    return subprocess.run(_argv(argv, log_format), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, env=_env(), check=False)


class Outputs:
    """Everything the processes printed, searched at the end of each test."""

    def __init__(self, forms: dict[str, list[str]]) -> None:
        self.forms = forms
        self.found: list[str] = []
        self.runs = 0

    def check(self, argv: list[str], p: subprocess.CompletedProcess[str]) -> None:
        self.runs += 1
        assert p.returncode != 70, f"{argv}: internal error: {p.stderr[-800:]}"
        for where, text in (("stdout", p.stdout), ("stderr", p.stderr)):
            self.found += [f"{' '.join(argv)} {where}: {w}" for w in leaks(text, self.forms)]

    def run(self, argv: list[str], log_format: str | None = "text",
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        p = run(argv, log_format, timeout)
        self.check(argv, p)
        return p

    def files(self, extra: list[Path]) -> list[Path]:
        files = list(written_files(extra))
        for f in files:
            try:
                text = f.read_text(errors="replace")
            except OSError:
                continue
            self.found += [f"file {f}: {w}" for w in leaks(text, self.forms)]
        return files

    def assert_clean(self) -> None:
        assert not self.found, "\n".join(self.found[:20])


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


def _cluster_state(s: Scenario, topics: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(replicas of every partition of ``topics``, throttle configs set on brokers and
    topics): what a refused command must leave as it was."""
    from opskit.adapters.reassign.admin import ReassignAdmin

    with ReassignAdmin(s.cluster.conn("admin", MECHANISM), timeout=15) as a:
        reps, _isr, brokers = a.assignment()
        found = a.throttle_configs(brokers, topics)
    throttles = {f"{k}:{n}": {key: v for key, (v, src) in e.items()
                              if "throttled" in key and src in (1, 2)}
                 for (k, n), e in found.items()}
    return ({f"{tp.topic}:{tp.partition}": r for tp, r in reps.items() if tp.topic in topics},
            throttles)


def _conf(s: Scenario) -> dict[str, Any]:
    """The test clients' settings: the admin's login."""
    return dict(s.cluster.conn("admin", MECHANISM).to_librdkafka())


def _make_topic(s: Scenario, partitions: int, records: int, size: int) -> str:
    name = f"slow_{uuid.uuid4().hex[:8]}"
    create_topic(_conf(s), name, partitions)
    produce(_conf(s), name, dict.fromkeys(range(partitions), records // partitions),
            value=b"r" * size)
    # every record must be there: a move of a topic that lost its records on the way in
    # finishes at once, and the cancel below would then race its end
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**_conf(s), "group.id": f"{name}-check"})
    try:
        for part in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(name, part), timeout=30)
            assert high - low == records // partitions, (name, part, low, high)
    finally:
        c.close()
    return name


class _Producing:
    """An idempotent acks=all producer writing to a topic until stopped."""

    def __init__(self, s: Scenario, topic: str) -> None:
        self.p = Producer({**_conf(s), "acks": "all", "enable.idempotence": True,
                           "linger.ms": 5})
        self.topic, self.acked, self.errors = topic, 0, 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._loop, daemon=True)

    def _done(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors += 1

    def _loop(self) -> None:
        i = 0
        while not self.stop.is_set():
            self.p.produce(self.topic, value=b"v" * 200, key=str(i % 50).encode(),
                           on_delivery=self._done)
            self.p.poll(0)
            i += 1
            time.sleep(0.005)

    def __enter__(self) -> Self:
        self.t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.t.join(10)
        assert self.p.flush(60) == 0


def _in_flight(s: Scenario, topic: str) -> list[str]:
    p = run(["reassign", "status", "-o", "json", *s.args("admin")], None)
    assert p.returncode == 0, p.stderr
    return [f["partition"] for f in json.loads(p.stdout)["in_flight"]
            if f["partition"].startswith(f"{topic}:")]


@pytest.mark.timeout(900)
def test_reassign_on_sasl_ssl(secured: Scenario, tmp_path: Path) -> None:
    s = secured
    out = Outputs(secrets(s.cluster))
    admin, monitor = s.args("admin"), s.args("monitor")
    plan = tmp_path / "rf3.json"

    # plan RF 1 -> 3 (kafka-python DescribeLogDirs, confluent-kafka configs), both log formats
    p = out.run(["reassign", "plan", "--replication-factor", "3", "--topic", s.topic,
                 "--write-plan", str(plan), *admin])
    assert p.returncode == 0, p.stderr
    p = out.run(["reassign", "plan", "--replication-factor", "3", "--topic", s.topic,
                 "-o", "json", *admin], "json")
    assert p.returncode == 0, p.stderr
    parts = json.loads(p.stdout)["partitions"]
    assert len(parts) == PARTITIONS and all(len(x["replicas"]) == 3 for x in parts)

    # the monitor (Describe only) is refused before any change: one line, exit 6, the ACLs named
    before = _cluster_state(s, [s.topic])
    p = run(["reassign", "execute", str(plan), "--throttle", "5MB", "--execute", *monitor], None)
    assert p.returncode == 6, p.stderr
    assert len(_error_lines(p.stderr)) == 1 and p.stderr.startswith("opskit: error:"), p.stderr
    assert "User:monitor lacks Alter on the cluster" in p.stderr
    assert f"AlterConfigs on topic {s.topic}" in p.stderr and "nothing changed" in p.stderr
    for fmt in ("text", "json"):
        p = out.run(["reassign", "execute", str(plan), "--throttle", "5MB", "--execute",
                     *monitor], fmt)
        assert p.returncode == 6, p.stderr
    assert _cluster_state(s, [s.topic]) == before

    # dry run, then the execution while an idempotent acks=all producer writes to the topic
    p = out.run(["reassign", "execute", str(plan), "--throttle", "5MB", *admin], "json")
    assert p.returncode == 0 and "dry run" in p.stdout, p.stderr
    assert _cluster_state(s, [s.topic]) == before
    with _Producing(s, s.topic) as prod:
        time.sleep(1)
        p = out.run(["reassign", "execute", str(plan), "--throttle", "5MB", "--execute",
                     "--rate-interval", "1", *admin])
        assert p.returncode == 0, p.stderr
    assert prod.errors == 0 and prod.acked > 0
    reps, throttles = _cluster_state(s, [s.topic])
    assert all(len(r) == 3 for r in reps.values()) and len(reps) == PARTITIONS
    assert not any(throttles.values()), throttles
    for fmt in ("text", "json"):
        p = out.run(["reassign", "verify", str(plan), *admin], fmt)
        assert p.returncode == 0 and "no throttle left" in p.stdout, p.stdout + p.stderr
        p = out.run(["reassign", "status", *admin], fmt)
        assert p.returncode == 0 and "0 reassignment(s) in flight" in p.stdout, p.stderr
    # Describe on the cluster suffices; the broker throttles are left out, said once
    p = out.run(["reassign", "status", *monitor], None)
    assert p.returncode == 0 and "0 reassignment(s) in flight" in p.stdout, p.stderr
    assert p.stderr.count("lacks DescribeConfigs on the cluster") == 1, p.stderr
    p = out.run(["reassign", "status", *monitor], "json")
    assert p.returncode == 0, p.stderr

    # cancel: a second topic, a slow move in flight (10 kB/s for 4 MB per new replica)
    slow = _make_topic(s, 2, 4000, 2000)
    plan2 = tmp_path / "slow.json"
    assert out.run(["reassign", "plan", "--replication-factor", "3", "--topic", slow,
                    "--write-plan", str(plan2), *admin]).returncode == 0
    base = _cluster_state(s, [slow])[0]
    log = tmp_path / "slow-execute.log"
    with log.open("w") as f:
        bg = subprocess.Popen(_argv(["reassign", "execute", str(plan2), "--throttle", "10KB",
                                     "--execute", "--rate-interval", "0", *admin], "json"),
                              stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=_env())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _in_flight(s, slow):
            assert bg.poll() is None, log.read_text()[-1500:]
            time.sleep(0.5)
        moving = _in_flight(s, slow)
        assert moving, log.read_text()[-1500:]
        for fmt in ("text", "json"):  # dry run: lists them, cancels nothing
            p = out.run(["reassign", "cancel", *admin], fmt)
            assert p.returncode == 0 and "would cancel" in p.stdout, p.stdout + p.stderr
        # the monitor may not cancel: refused in one line, the moves go on
        p = run(["reassign", "cancel", "--execute", *monitor], None)
        assert p.returncode == 6 and len(_error_lines(p.stderr)) == 1, p.stderr
        assert "lacks Alter on the cluster" in p.stderr
        out.check(["reassign", "cancel", "--execute", "(monitor)"], p)
        assert _in_flight(s, slow) == moving
        p = out.run(["reassign", "cancel", "--execute", *admin])
        assert p.returncode == 0 and "cancelled" in p.stdout, p.stdout + p.stderr
        # opskit's execution sees its moves reverted: it stops them, cleans up, exit 6
        assert bg.wait(120) == 6, log.read_text()[-1500:]
    finally:
        if bg.poll() is None:
            bg.kill()
            bg.wait(10)
    text = log.read_text()
    out.found += [f"background execute: {w}" for w in leaks(text, out.forms)]
    assert "cancelled?" in text
    reps, throttles = _cluster_state(s, [slow])
    assert moving and all(reps[tp] == base[tp] for tp in moving), (moving, reps, base)
    assert not any(throttles.values()), throttles
    p = out.run(["reassign", "verify", str(plan2), *admin], "json")
    assert p.returncode == 2 and "no throttle left" in p.stdout, p.stdout + p.stderr

    assert out.runs >= 15
    files = out.files([tmp_path])
    assert any(f.name == "rf3.json" for f in files)
    assert any("reassign" in f.parts for f in files), "no journal searched"
    out.assert_clean()


@pytest.mark.timeout(300)
def test_control_unfiltered_debug_log_leaks(secured: Scenario) -> None:
    """The search can fail: with opskit's log filter disabled, kafka-python's debug line
    "Starting KafkaAdminClient with configuration" carries the admin password."""
    argv = ["--debug", "reassign", "status", *secured.args("admin")]
    p = subprocess.run([sys.executable, "-c", NO_FILTER, *argv], capture_output=True, text=True,
                       timeout=120, cwd=REPO, env=_env(), check=False)
    assert p.returncode == 0, p.stderr[-800:]
    assert "admin's password" in leaks(p.stdout + p.stderr, secrets(secured.cluster))


@pytest.mark.timeout(900)
def test_replay_on_sasl_ssl(secured: Scenario, tmp_path: Path) -> None:
    """The Spark job (local mode) reads the backlog over SASL_SSL and commits; no password
    on any command line or in any environment of the processes it starts."""
    s = secured
    out = Outputs(secrets(s.cluster))
    admin = s.args("admin")
    group = f"replay-sec-{uuid.uuid4().hex[:8]}"
    commit(_conf(s), group, {(s.topic, p): COMMITTED for p in range(PARTITIONS)})
    outdir = tmp_path / "replays"
    base = ["replay", "-g", group, "-t", s.topic, "--output-dir", str(outdir)]
    # records written by the other test's producer make the topic longer: read the plan
    for fmt in ("text", "json"):
        p = out.run([*base, "-o", "json", *admin], fmt)
        assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    assert [r["start"] for r in plan["ranges"]] == [COMMITTED] * PARTITIONS
    ends = {r["partition"]: r["end"] for r in plan["ranges"]}
    assert all(e >= RECORDS for e in ends.values())
    # the monitor plans too (Describe on its registered group and the topic)
    p = out.run(["replay", "-g", s.group, "-t", s.topic, "--output-dir", str(outdir), "-o",
                 "json", *s.args("monitor")], "json")
    assert p.returncode == 0, p.stderr

    # --execute: scan every descendant's command line and environment while it runs
    log = tmp_path / "replay.log"
    seen: dict[int, tuple[str, str]] = {}
    with log.open("w") as f:
        proc = subprocess.Popen(_argv([*base, "--execute", "--yes", "-o", "json", *admin],
                                      "json"),
                                stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=_env())
    try:
        while proc.poll() is None:
            for k in descendants(proc.pid):
                cmd, env = proc_text(k, "cmdline"), proc_text(k, "environ")
                if cmd is not None and env is not None:
                    seen[k] = (cmd, env)
            time.sleep(0.1)
        rc = proc.wait(600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = log.read_text()
    assert rc == 0, text[-2000:]
    out.found += [f"replay --execute output: {w}" for w in leaks(text, out.forms)]
    for k, (cmd, env) in seen.items():
        out.found += [f"child {k} cmdline: {w}" for w in leaks(cmd, out.forms)]
        out.found += [f"child {k} environ: {w}" for w in leaks(env, out.forms)]
    # the scan saw the JVM and the job's arguments (it would have seen a password there)
    cmds = [c for c, _ in seen.values()]
    assert any("java" in c for c in cmds), cmds
    job = [c for c in cmds if "lag_replay.py" in c and "--kafka-password-file" in c]
    assert job, cmds
    assert "security.protocol=SASL_SSL" in job[0] and f"sasl.mechanism={MECHANISM}" in job[0]
    assert "ssl.truststore.type=PEM" in job[0] and "--kafka-username admin" in job[0]

    # what the job did: every planned record read, all dead letters (not HIP-30 JSON),
    # the group moved to the ends
    manifest = json.loads((outdir / plan["replay_id"] / "manifest.json").read_text())
    assert manifest["status"] == "committed"
    expected = sum(e - COMMITTED for e in ends.values())
    written = next(h for h in manifest["events"] if h["event"] == "written")
    assert written["records"] == expected and written["dead_letters"] == expected
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.core.models import TopicPartition

    with KafkaAdmin(s.cluster.conn("admin", MECHANISM), timeout=15) as a:
        got = a.committed_offsets([group])[group]
    assert got == {TopicPartition(s.topic, p): e for p, e in ends.items()}

    files = out.files([tmp_path])
    assert any(f.suffix == ".parquet" for f in files), "no Parquet searched"
    assert any(f.name == "manifest.json" for f in files)
    out.assert_clean()


@pytest.mark.timeout(300)
def test_control_password_on_the_job_command_line_is_seen(secured: Scenario,
                                                          tmp_path: Path) -> None:
    """The search can fail for the replay too: a password given the old way, inside a
    ``--kafka-option sasl.jaas.config=...``, is found on a Spark process's command line by
    the same /proc scan (the run is stopped as soon as it is)."""
    s = secured
    forms = secrets(s.cluster)
    group = f"replay-ctl-{uuid.uuid4().hex[:8]}"
    commit(_conf(s), group, {(s.topic, p): COMMITTED for p in range(PARTITIONS)})
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="admin" password="{s.cluster.password("admin")}";')
    proc = subprocess.Popen(
        _argv(["replay", "-g", group, "-t", s.topic, "--output-dir", str(tmp_path), "--execute",
               "--yes", "--kafka-option", f"sasl.jaas.config={jaas}", *s.args("admin")], None),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO, env=_env())
    found: list[str] = []
    kids: set[int] = set()
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and not found:
            for k in descendants(proc.pid):
                kids.add(k)
                found += [f"child {k}: {w}" for w in leaks(proc_text(k, "cmdline") or "", forms)]
            time.sleep(0.1)
    finally:
        for k in kids | set(descendants(proc.pid)):  # spark-submit runs in its own session
            try:
                os.kill(k, 9)
            except ProcessLookupError:
                pass
        proc.kill()
        proc.wait(30)
    assert "admin's password" in " ".join(found), "the scan missed a password on a command line"
