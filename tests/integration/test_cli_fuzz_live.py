"""The part of the CLI fuzz test that needs a live cluster (tests/unit/test_cli_fuzz.py
has the rest): odd but valid names reach the real clients, invalid ones are refused
before any client sees them, and a write that fails is a failure.

Each case runs ``opskit`` as a user would (``python -m opskit.cli.main``, a fresh
process): a crash inside librdkafka would show as a signal, a hang as the
subprocess timeout. Nothing here asserts on speed.

The last test, that every mutating command's invalid inputs fail before any request that
would change the cluster, runs its cases in-process (``run_cli``): they reach the broker
through the broker double of this process, which records every request's API key.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from opskit.cli import exits
from tests.helpers import commit_retrying, create_topic, produce

ROOT = Path(__file__).resolve().parents[2]


def _opskit(args: list[str], tmp: Path, fsize_limit: int | None = None,
            ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("KAFKA_BOOTSTRAP_SERVERS", "OPSKIT_CONTEXT")}
    env.update({"PYTHONPATH": str(ROOT), "OPSKIT_CONFIG": str(tmp / "config.yaml"),
                "OPSKIT_STATE": str(tmp / "state")})

    def limit() -> None:  # a full disk, as far as this process can tell
        if fsize_limit is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    return subprocess.run([sys.executable, "-m", "opskit.cli.main", *args], capture_output=True,
                          text=True, errors="backslashreplace", timeout=120, env=env,
                          preexec_fn=limit if fsize_limit is not None else None, check=False)


def _check(r: subprocess.CompletedProcess[str], *codes: int) -> None:
    assert r.returncode >= 0, f"killed by signal {-r.returncode}: {r.stderr[-500:]}"
    assert r.returncode in exits.DOCUMENTED and r.returncode != exits.INTERNAL, r.stderr
    assert "Traceback" not in r.stderr
    if codes:
        assert r.returncode in codes, (r.returncode, r.stderr)
    if r.returncode != exits.OK and r.stderr:
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("opskit: error: "), r.stderr


def test_names_at_the_edge_against_a_live_broker(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    topic = f"fuzz_live_{uniq}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: 5, 1: 5})
    odd_groups = [f"grüppe ü {uniq}", "g" * 1000 + uniq[:4], f"g/../{uniq}"]
    for g in odd_groups:
        commit_retrying(kafka.bootstrap, g, {(topic, 0): 2})
    b = ["-b", kafka.bootstrap, "--timeout", "10"]
    for g in odd_groups:  # valid names: the real clients get them, nothing crashes
        _check(_opskit(["lag", "-g", g, "-o", "json", *b], tmp_path), 0, 1, 2)
        _check(_opskit(["offsets", "export", "-g", g, *b], tmp_path), 0)
        _check(_opskit(["offsets", "reset", "-g", g, "-t", topic, "--to-earliest", *b],
                       tmp_path), 0)
    # names no client may see (the SIGSEGV / C assertion cases): refused, exit 2
    bad = [["offsets", "reset", "-g", "g\udcff", "--all-topics", "--to-earliest"],
           ["offsets", "export", "-g", "g\udcff"],
           ["offsets", "import", str(tmp_path / "x.csv"), "-g", "g\udcff"],
           ["replay", "-g", "g\udcff", "-t", topic],
           ["lag", "-g", "ok", "-t", "t" * 250],
           ["offsets", "reset", "-g", "", "--all-topics", "--to-earliest", "--execute"]]
    for args in bad:
        r = _opskit([*args, *b], tmp_path)
        _check(r, exits.USAGE)
    r = _opskit(["dlq", "watch", "--group", "", "--once", "--routing-key-file",
                 str(tmp_path / "k"), *b], tmp_path)
    _check(r, exits.USAGE)
    # an empty bootstrap or context never falls back to the current context
    for args in (["-b", ""], ["--context", ""]):
        r = _opskit(["offsets", "reset", "-g", odd_groups[0], "--all-topics", "--to-latest",
                     "--execute", "--yes", *args], tmp_path)
        _check(r, exits.USAGE)


def test_snapshot_write_failures_fail(kafka, tmp_path):  # type: ignore[no-untyped-def]
    b = ["-b", kafka.bootstrap, "--timeout", "10", "--no-time", "-o", "json"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = _opskit(["snapshot", "--file", str(fifo), *b], tmp_path)
    _check(r, exits.USAGE)
    assert "not a regular file" in r.stderr and fifo.is_fifo()
    # the disk fills while writing: exit 8, the previous snapshot is intact
    out = tmp_path / "snap.json"
    out.write_text("previous\n")
    r = _opskit(["snapshot", "--file", str(out), *b], tmp_path, fsize_limit=64)
    _check(r, exits.WRITE_FAILED)
    assert out.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".snap")) == []
    r = _opskit(["snapshot", "--file", str(out), *b], tmp_path)
    _check(r, exits.OK)
    assert out.read_text().startswith("{")


# --------------------------------------------------------------------------------------
# every mutating command: an invalid input fails before any request that changes anything

#: Kafka API keys of requests that change the cluster (or a group's state)
MUTATING_APIS = {0: "Produce", 8: "OffsetCommit", 11: "JoinGroup", 19: "CreateTopics",
                 20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
                 28: "TxnOffsetCommit", 30: "CreateAcls", 31: "DeleteAcls",
                 33: "AlterConfigs", 34: "AlterReplicaLogDirs", 37: "CreatePartitions",
                 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
                 45: "AlterPartitionReassignments", 47: "OffsetDelete", 57: "UpdateFeatures",
                 68: "ConsumerGroupHeartbeat"}


class _Listener:
    """A loopback TCP port standing in for PagerDuty: counts connections, closes each."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"https://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        import contextlib
        import socket

        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(5)


def _mutating_commands() -> set[str]:
    import typer

    from opskit.cli.main import app, register_all

    register_all()

    def walk(cmd: object, path: list[str]) -> list[tuple[str, object]]:
        subs = getattr(cmd, "commands", None)
        if subs:
            return [x for n, sub in subs.items() for x in walk(sub, [*path, n])]
        return [(" ".join(path), cmd)]

    return {name for name, cmd in walk(typer.main.get_command(app), [])
            if any("--execute" in getattr(p, "opts", ()) for p in cmd.params)  # type: ignore[attr-defined]
            } | {"playbook resume"}   # resume acts without --execute


def _cases(t: str, g: str, tmp: Path, sandbox: str, pd_url: str,
           ) -> list[tuple[str, list[str], str]]:
    """(command, argv, words its one error line must hold): one or more invalid inputs
    of every mutating command, each with what makes the command act (--execute, --yes)."""
    import json

    key = tmp / "routing-key"
    key.write_text("0123456789abcdef0123456789abcdef\n")
    files = {
        "bad.csv": "topic,partition,offset\n" + f"{t},0,-7\n",
        "bad.json": "{ not json",
        "plan99.json": json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [99]}]}),
        "plan-ok.json": json.dumps({"version": 1, "partitions": [
            {"topic": t, "partition": 0, "replicas": [0]}]}),
        "reg-partitions0.yaml": f"topics:\n  - name: {t}_new\n    partitions: 0\n"
                                "    retention: 1d\n",
        "reg-acl-op.yaml": f"topics:\n  - {{name: {t}, partitions: 2, retention: 7d}}\n"
                           f"security:\n  principals:\n    - name: svc\n      topics: {{{t}: [FLY]}}\n",
        "not-pem.crt": "not a certificate\n",
        "short-key": "tooshort\n",
    }
    for name, text in files.items():
        (tmp / name).write_text(text)
    f = {name: str(tmp / name) for name in files}
    closed = f"{(time.gmtime().tm_hour + 2) % 24:02d}:00-{(time.gmtime().tm_hour + 3) % 24:02d}:00Z"
    sb = ["--sandbox", sandbox]
    return [
        ("offsets reset", ["offsets", "reset", "-g", g, "-t", t, "--to-datetime", "soon",
                           "--execute", "--yes"], "soon"),
        ("offsets reset", ["offsets", "reset", "-g", g, "-t", f"{t}:7", "--to-earliest",
                           "--execute", "--yes"], "7"),
        ("offsets reset", ["offsets", "reset", "-g", g, "--from-file", f["bad.csv"],
                           "--execute", "--yes"], "-7"),
        ("offsets reset", ["offsets", "reset", "-g", g, "-t", t, "--to-earliest", "--execute",
                           "--yes", "--backup-dir", "/proc/opskit-no-such-dir"], "backup"),
        ("offsets restore", ["offsets", "restore", f["bad.json"], "--execute", "--yes"],
         "JSON"),
        ("offsets restore", ["offsets", "restore", str(tmp / "missing.json"), "--execute",
                             "--yes"], "does not exist"),
        ("offsets import", ["offsets", "import", f["bad.csv"], "-g", g, "--execute", "--yes"],
         "-7"),
        ("topics apply", ["topics", "apply", f["reg-partitions0.yaml"], "--execute"],
         "partitions"),
        ("topics apply", ["topics", "apply", f["bad.json"], "--execute"], "YAML"),
        ("acls apply", ["acls", "apply", f["reg-acl-op.yaml"], "--execute"], "FLY"),
        ("acls restore", ["acls", "restore", f["bad.json"], "--execute"], "JSON"),
        ("reassign execute", ["reassign", "execute", f["plan99.json"], "--execute"], "99"),
        ("reassign execute", ["reassign", "execute", f["plan-ok.json"], "--throttle", "0",
                              "--execute"], "--throttle"),
        ("reassign cancel", ["reassign", "cancel", "--execute", "-o", "xml"], "xml"),
        ("reassign uncordon", ["reassign", "uncordon", "--brokers", "2,x", "--execute"],
         "broker ids"),
        ("dr restore", ["dr", "restore", f["bad.json"], "--execute", "--yes"], "JSON"),
        ("replay", ["replay", "-g", g, "-t", t, "--from-time", "soon", "--execute", "--yes"],
         "soon"),
        ("dlq watch", ["dlq", "watch", "--routing-key-file", f["short-key"], "--once",
                       "--events-url", pd_url, "--execute"], "routing key"),
        ("page trigger", ["page", "trigger", "--summary", "s", "--source", "x",
                          "--routing-key-file", str(key), "--severity", "bogus",
                          "--events-url", pd_url, "--execute"], "bogus"),
        ("page resolve", ["page", "resolve", "--dedup-key", "k", "--routing-key-file",
                          f["short-key"], "--events-url", pd_url, "--execute"], "routing key"),
        ("page acknowledge", ["page", "acknowledge", "--dedup-key", "k", "--routing-key-file",
                              str(key), "--events-url", "http://127.0.0.1:9", "--execute"],
         "https"),
        ("playbook scale-out", ["playbook", "scale-out", *sb, "--window", closed, "--registry",
                                str(tmp / "hip30.yml"), "--execute"], "registry"),
        ("playbook scale-out", ["playbook", "scale-out", *sb, "--window", closed,
                                "--routing-key-file", str(key), "--pagerduty-ca-file",
                                f["not-pem.crt"], "--execute"], "PEM"),
        ("playbook multi-rack", ["playbook", "multi-rack", *sb, "--racks", "0a", "--execute"],
         "NODE=RACK"),
        ("playbook multi-rack", ["playbook", "multi-rack", *sb, "--racks", "0=a,1=b",
                                 "--throttle", "0", "--execute"], "--throttle"),
        ("playbook resume", ["playbook", "resume", *sb, "--registry", str(tmp / "hip30.yml")],
         "registry"),
        ("playbook resume", ["playbook", "resume", *sb, "--throttle", "0"], "--throttle"),
        ("playbook abort", ["playbook", "abort", "--sandbox", "No Such", "--execute"],
         "sandbox name"),
        ("playbook upgrade-quorum", ["playbook", "upgrade-quorum", "--sandbox", "No Such",
                                     "--execute"], "sandbox name"),
    ]


def test_invalid_input_fails_before_any_mutating_request(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    """For every command that changes something (those with --execute, and playbook
    resume), invalid inputs end in one error line before any request that would change
    the cluster: the Kafka clients talk to the real broker through the broker double,
    which records each request's API key; PagerDuty is a port that counts connections;
    the playbook's sandbox keeps one node and no journal. A valid control of each kind
    shows the counting sees a change when one is made."""
    from tests.broker_double import Behaviour, BrokerDouble
    from tests.helpers import run_cli

    t, g = f"fuzz_mut_{uniq}", f"fuzz-mut-{uniq}"
    create_topic(kafka.bootstrap, t, 2)
    produce(kafka.bootstrap, t, {0: 5, 1: 5})
    commit_retrying(kafka.bootstrap, g, {(t, 0): 3, (t, 1): 3})
    journal = kafka.sandbox.playbook_dir / "journal.json"
    had_run_dir = kafka.sandbox.playbook_dir.exists()
    nodes = len(kafka.sandbox.require().nodes)
    pd = _Listener()
    cases = _cases(t, g, tmp_path, kafka.sandbox.name, pd.url)
    assert {c for c, _, _ in cases} >= _mutating_commands(), "a mutating command has no case"
    try:
        with BrokerDouble(kafka.bootstrap, Behaviour()) as double:
            b = ["-b", double.bootstrap, "--timeout", "15"]
            for command, argv, words in cases:
                kafka_args = [] if argv[0] in ("page", "playbook") else b
                seen = len(double.requests)
                r = run_cli(*argv, *kafka_args)
                assert r.code not in (exits.OK, exits.INTERNAL), (argv, r.code, r.err)
                assert r.code in exits.DOCUMENTED, (argv, r.code)
                lines = r.err.splitlines()
                assert len(lines) == 1 and lines[-1].startswith("opskit: error: "), (argv, r.err)
                assert words in lines[-1], (argv, words, r.err)
                mutating = [MUTATING_APIS[api] for api, _v, _a in double.requests[seen:]
                            if api in MUTATING_APIS]
                assert mutating == [], (argv, mutating)
                assert pd.connections == 0, argv
                assert not journal.exists() and len(kafka.sandbox.require().nodes) == nodes, argv
            # the controls: valid inputs do send the changes the double counts
            seen = len(double.requests)
            r = run_cli("offsets", "reset", "-g", g, "-t", t, "--to-earliest", "--execute",
                        "--yes", "--backup-dir", str(tmp_path / "backups"), *b)
            assert r.code == 0, r.err
            reg = tmp_path / "reg-ok.yaml"
            reg.write_text(f"topics:\n  - {{name: {t}_made, partitions: 1, retention: 1d}}\n")
            r = run_cli("topics", "apply", str(reg), "--execute", *b)
            assert r.code == 0, r.err
            made = {MUTATING_APIS[api] for api, _v, _a in double.requests[seen:]
                    if api in MUTATING_APIS}
            assert {"OffsetCommit", "CreateTopics"} <= made, made
    finally:
        pd.close()
        if not had_run_dir:     # a failing case journaled a run: not left to the session
            import shutil

            shutil.rmtree(kafka.sandbox.playbook_dir, ignore_errors=True)


def test_wrong_code_or_shape_against_a_live_broker(kafka, uniq, tmp_path):  # type: ignore[no-untyped-def]
    """Issue 28's 'wrong code or shape' and 'offsets restore skipping' cases on a real
    broker: the README's exit code, one 'opskit: error:' line, nothing changed."""
    import json

    topic, group = f"fuzz_shape_{uniq}", f"fuzz_shape_g_{uniq}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: 5, 1: 5})
    commit_retrying(kafka.bootstrap, group, {(topic, 0): 2, (topic, 1): 2})
    b = ["-b", kafka.bootstrap, "--timeout", "20"]
    # an unknown topic is 'not found' (4), as README says; it was 2
    r = _opskit(["offsets", "reset", "-g", group, "-t", f"nosuch_{uniq}", "--to-earliest", *b],
                tmp_path)
    _check(r, exits.NOT_FOUND)
    assert "does not exist" in r.stderr
    # a backup to restore, with an entry for a partition that no longer exists
    bdir = tmp_path / "backups"
    r = _opskit(["offsets", "reset", "-g", group, "-t", topic, "--to-latest", "--execute",
                 "--yes", "--backup-dir", str(bdir), *b], tmp_path)
    _check(r, exits.OK)
    saved = next(bdir.rglob("*.json"))
    data = json.loads(saved.read_text())
    data["backup"]["offsets"].append({"topic": f"gone_{uniq}", "partition": 0, "offset": 1})
    backup = tmp_path / "backup-with-gone.json"
    backup.write_text(json.dumps(data))
    restore = ["offsets", "restore", str(backup), "--execute", "--yes", *b]
    r = _opskit(restore, tmp_path)  # skipped silently with exit 0 before
    _check(r, exits.NOT_FOUND)
    assert "--skip-missing" in r.stderr
    r = _opskit(["offsets", "export", "-g", group, *b], tmp_path)
    assert f"{topic},0,5" in r.stdout and f"{topic},1,5" in r.stdout  # nothing restored
    # --backup-dir that is a file: one line (the backup's status line came first before)
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    r = _opskit([*restore, "--skip-missing", "--backup-dir", str(a_file)], tmp_path)
    _check(r, exits.USAGE)
    r = _opskit([*restore, "--skip-missing", "--backup-dir", str(bdir)], tmp_path)
    _check(r, exits.OK)  # asked to skip: the rest is restored
    assert "gone_" in r.stderr
    # topics apply refusing to reduce partitions: its one line is an error line
    reg = tmp_path / "registry.yaml"
    reg.write_text(f"topics:\n  - name: {topic}\n    partitions: 1\n    retention: 7d\n")
    r = _opskit(["topics", "apply", str(reg), *b], tmp_path)
    _check(r, exits.REFUSED)
    assert r.stderr.startswith("opskit: error: topic ") and "reduce" in r.stderr
    # a snapshot file that cannot be written: one line, not the ACL note first
    r = _opskit(["dr", "snapshot", "--file", "/proc/version", *b], tmp_path)
    _check(r, exits.WRITE_FAILED)
