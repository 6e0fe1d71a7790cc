"""The part of the CLI fuzz test that needs a live cluster (tests/unit/test_cli_fuzz.py
has the rest): odd but valid names reach the real clients, invalid ones are refused
before any client sees them, and a write that fails is a failure.

Each case runs ``opskit`` as a user would (``python -m opskit.cli.main``, a fresh
process): a crash inside librdkafka would show as a signal, a hang as the
subprocess timeout. Nothing here asserts on speed.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
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
