"""Cordon, cancel and uncordon of a log-directory drain on a secured Kafka 4.3.1.

One single-broker Kafka 4.x sandbox on SASL_SSL (TLS with the sandbox CA, StandardAuthorizer)
with 2 log directories; opskit logs in through its SCRAM-SHA-512 contexts (kafka-python's
SCRAM over TLS for DescribeLogDirs and AlterReplicaLogDirs, confluent-kafka for the configs).
As admin, with ``--debug``:

1. ``reassign plan --remove-log-dirs`` says the execution cordons the directory;
2. a slow ``execute --execute``: while a copy runs, the directory is cordoned (the broker's
   DescribeLogDirs says so and ``cordoned.log.dirs`` is a dynamic per-broker value);
3. ``reassign cancel --execute``: the copies are dropped and the value found before (none)
   is put back;
4. the same plan run to the end keeps the cordon, ``verify`` exit 0 names it;
5. as ``monitor`` (no DescribeConfigs or AlterConfigs), ``reassign uncordon --execute`` is
   refused (exit 6) and the cordon stays; as admin it is lifted.

No password (in any form a leak could take) appears in any output, the plan file or the
journal. The PLAINTEXT siblings are in test_reassign_log_dirs_exec.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from secured_scenario import SecuredJbod, leaks, secrets, secured_jbod_sandbox, written_files

from tests.helpers import create_topic, produce

REPO = Path(__file__).resolve().parents[2]
CORDON = "cordoned.log.dirs"


class _Secured(SecuredJbod):
    def dirs(self) -> dict[str, dict[str, Any]]:
        """log dir -> {"cordoned": bool|None, "replicas": {(topic, p, is_future)}}."""
        from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

        k = KafkaAdminClient(**self.sb.connection("admin", "PLAIN").to_kafka_python(30_000))
        try:
            res = k.describe_log_dirs(None, brokers=[0])
        finally:
            k.close()
        return {d["log_dir"]: {"cordoned": d.get("is_cordoned"),
                               "replicas": {(t["name"], p["partition_index"], p["is_future_key"])
                                            for t in d["topics"] for p in t["partitions"]}}
                for d in res[0]["log_dirs"]}

    def futures(self) -> list[tuple[str, int, bool]]:
        return [r for d in self.dirs().values() for r in d["replicas"] if r[2]]

    def cordon(self) -> tuple[str | None, int]:
        """(value, source) of the broker's cordoned.log.dirs; source 2 = dynamic per broker."""
        admin = AdminClient(self.where())
        for f in admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")],
                                        request_timeout=60).values():
            e = f.result(60).get(CORDON)
            return (None, -1) if e is None else (e.value, int(e.source))
        return None, -1


@pytest.fixture
def secured43(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Secured]:
    with secured_jbod_sandbox(monkeypatch, "cdsec", "4.x", _Secured) as c:
        yield c


def _argv(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", "--debug", *args]


_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _wait(what: str, cond: Callable[[], bool], deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.kafka4
def test_cordon_cancel_and_uncordon_on_sasl_ssl_43(secured43: _Secured, tmp_path: Path) -> None:
    c = secured43
    assert c.state.version.startswith("4."), c.state.version
    admin = ["--context", f"sandbox-{c.sb.name}-admin"]
    monitor = ["--context", f"sandbox-{c.sb.name}-monitor"]
    forms = secrets(c)
    found: list[str] = []

    def scan(argv: list[str], *texts: str) -> None:
        found.extend(f"{' '.join(argv)}: {w}" for t in texts for w in leaks(t, forms))

    def run(args: list[str]) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(_argv(args), capture_output=True, text=True, timeout=300, cwd=REPO,
                           env=_ENV, check=False)
        assert p.returncode != 70, p.stderr[-800:]
        scan(args, p.stdout, p.stderr)
        return p

    topic = f"cdsec_{uuid.uuid4().hex[:6]}"
    create_topic(c.where(), topic, 6)
    produce(c.where(), topic, dict.fromkeys(range(6), 600), value=b"c" * 1000)  # 0.6 MB each
    node = c.state.nodes[0]
    data, other = str(node.dir / "data"), str(node.dir / "data-1")
    before = c.dirs()
    on_data = {(t, p) for t, p, _f in before[data]["replicas"] if t == topic}
    assert on_data, before  # Kafka spread the topic over both directories

    # 1. the plan says it cordons
    plan = tmp_path / "cordon.json"
    p = run(["reassign", "plan", "--remove-log-dirs", f"0:{data}", "--write-plan", str(plan),
             *admin])
    assert p.returncode == 0, p.stderr[-1500:]
    assert f"cordons 0:{data} before the first move" in p.stderr, p.stderr[-1500:]
    doc = json.loads(plan.read_text())
    assert {(q["topic"], q["partition"]) for q in doc["partitions"]} >= on_data
    assert all(q["log_dirs"] == [other] for q in doc["partitions"])

    # 2. a slow drain: the directory is cordoned while the copies run
    slow = ["reassign", "execute", str(plan), "--throttle", "20KB", "--execute", *admin]
    # --debug writes far more than a pipe holds: the run's output goes to files, never to
    # pipes nobody reads while it runs
    out_f, err_f = tmp_path / "slow.out", tmp_path / "slow.err"
    with out_f.open("w") as o, err_f.open("w") as e:
        proc = subprocess.Popen(_argv(slow), stdout=o, stderr=e, text=True, cwd=REPO, env=_ENV)
    try:
        _wait("a copy", lambda: bool(c.futures()) or proc.poll() is not None)
        assert proc.poll() is None, f"ended early: {proc.returncode} {out_f.read_text()}"
        dirs = c.dirs()
        assert dirs[data]["cordoned"] is True and dirs[other]["cordoned"] is False, dirs
        assert c.cordon() == (data, 2)

        # 3. cancel: the copies dropped, the value found before (none) put back
        cancel = run(["reassign", "cancel", "--execute", *admin])
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr[-1500:]
        assert "cordon values put back" in cancel.stdout, cancel.stdout
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, err = out_f.read_text(), err_f.read_text()
    scan(slow, out, err)
    assert proc.returncode == 6 and "cancelled" in err, out + err[-1500:]
    assert c.futures() == []
    assert c.cordon()[1] != 2
    assert c.dirs()[data]["cordoned"] is False

    # 4. the same plan to the end: the directory emptied, the cordon kept
    fin = run(["reassign", "execute", str(plan), "--throttle", "5MB", "--execute", *admin])
    assert fin.returncode == 0, fin.stdout + fin.stderr[-1500:]
    assert "stay cordoned" in fin.stdout, fin.stdout
    after = c.dirs()
    assert {r for r in after[data]["replicas"] if r[0] == topic} == set(), after
    assert {(t, q) for t, q, _f in after[other]["replicas"] if t == topic} == \
        {(topic, q) for q in range(6)}
    assert after[data]["cordoned"] is True and c.cordon() == (data, 2)
    v = run(["reassign", "verify", str(plan), "-o", "json", *admin])
    assert v.returncode == 0, v.stdout + v.stderr[-1500:]
    vd = json.loads(v.stdout)
    assert {r["state"] for r in vd["replicas"]} == {"done"} and vd["throttles_left"] == []
    assert [(d["broker"], d["dir"], d["cordoned"]) for d in vd["log_dirs"]] == [(0, data, True)]

    # 5. monitor may not lift it (and changes nothing); admin does
    refused = run(["reassign", "uncordon", "--brokers", "0", "--execute", *monitor])
    assert refused.returncode == 6, refused.stdout + refused.stderr[-1500:]
    assert c.cordon() == (data, 2)
    u = run(["reassign", "uncordon", "--brokers", "0", "--execute", *admin])
    assert u.returncode == 0, u.stdout + u.stderr[-1500:]
    assert c.cordon()[1] != 2 and c.dirs()[data]["cordoned"] is False

    for f in written_files([tmp_path]):
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        found.extend(f"file {f}: {w}" for w in leaks(text, forms))
    assert not found, "\n".join(found[:20])
