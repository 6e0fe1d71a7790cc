"""The examples of issue #16 ("no crash, no hang, no silent success on bad input"),
each with the exit code and message it must now give. None needs a live broker:
every one is refused before a client would connect, or meets 127.0.0.1:1."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from opskit.cli import exits
from tests.helpers import CliResult, run_cli

U = ["-b", "127.0.0.1:1", "--timeout", "0.5"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_CONFIG", str(tmp_path / "config.yaml"))
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)


def _one_line(r: CliResult, code: int, needle: str) -> None:
    assert r.code == code, r.err
    assert r.err.count("\n") == 1 and r.err.startswith("opskit: error: "), r.err
    assert needle in r.err, r.err


def test_numbers_and_durations() -> None:
    _one_line(run_cli("lag", "-g", "g", "-b", "127.0.0.1:1", "--timeout", "nan"), 2, "finite")
    _one_line(run_cli("lag", "-g", "g", *U, "--interval", "99999999999999999999s"), 2,
              "--interval must be at most 1h")
    _one_line(run_cli("lag", "-g", "g", *U, "--window", "99999999999999999999s"), 2,
              "--window must be at most 1d")
    _one_line(run_cli("throughput", *U, "--interval", "1000000000s"), 2, "at most 1h")


def test_empty_cluster_never_means_the_current_one(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "current-context: prod\ncontexts:\n  prod: {bootstrap: 'prod:9092'}\n")
    for flag in ("--bootstrap-server", "--context"):
        r = run_cli("offsets", "reset", "-g", "g", "--all-topics", "--to-latest", "--execute",
                    "--yes", flag, "")
        _one_line(r, 2, "is empty")
        assert "prod" not in r.err


def test_snapshot_refuses_a_device_and_writes_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node needs root")
    dev = tmp_path / "full"  # like /dev/full, inside tmp
    os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    for cmd in (["snapshot"], ["dr", "snapshot"]):
        r = run_cli(*cmd, "--file", str(dev), *U)
        _one_line(r, 2, "not a regular file")
        assert stat.S_ISCHR(dev.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]


def test_sandbox_load_against_nothing_fails() -> None:
    _one_line(run_cli("sandbox", "load", "-b", "127.0.0.1:1", "--timeout", "0.5",
                      "--duration", "1"), exits.UNKNOWN, "cannot reach Kafka")


def test_context_set_refuses_unknown_security_settings(tmp_path: Path) -> None:
    _one_line(run_cli("context", "set", "x", "-b", "h:1", "--sasl-mechanism", "bogus"), 2,
              "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    _one_line(run_cli("context", "set", "x", "-b", "h:1", "--security-protocol", "TLS"), 2,
              "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")
    assert not (tmp_path / "config.yaml").exists()


def test_exporter_refuses_an_empty_password_and_bad_thresholds(tmp_path: Path) -> None:
    empty = tmp_path / "pw"
    empty.write_text("\n")
    _one_line(run_cli("exporter", *U, "--once", "--web-user", "u", "--web-password-file",
                      str(empty)), 2, "is empty")
    (tmp_path / "config.yaml").write_text("thresholds:\n  default: {lag_warn: .inf}\n")
    _one_line(run_cli("exporter", *U, "--once"), 2, "lag_warn must be a whole number")


def test_replay_bad_result_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "result.json"
    bad.write_bytes(b"\xff\xfe{\x00")
    manifest = tmp_path / "manifest.json"
    manifest.write_text("{}")
    _one_line(run_cli("replay", "--manifest", str(manifest), "--result", str(bad), *U,
                      "--execute", "--yes"), 2, "result file")
