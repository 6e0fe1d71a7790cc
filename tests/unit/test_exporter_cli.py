"""`opskit exporter` bad input: one line, documented exit code, no traceback (no Kafka)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.timeout(60)


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("opskit: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("args, code, needle", [
    (["--interval", "soon"], 2, "--interval"),
    (["--interval", "0s"], 2, "--interval"),
    (["--group-allow", "(unclosed"], 2, "--group-allow"),
    (["--topic-deny", "[a-"], 2, "--topic-deny"),
    (["--granularity", "broker"], 2, "granularity"),
    (["--web-user", "prom"], 2, "basic auth"),
    (["--web-user", "prom", "--web-password-file", "/nonexistent/pw"], 4, "--web-password-file"),
    (["--web-tls-cert", "/nonexistent/c.pem", "--web-tls-key", "/nonexistent/k.pem"], 4, "--web-tls-cert"),
    (["--web-tls-cert", "/etc/hostname"], 2, "HTTPS needs both"),
])
def test_bad_flags(args: list[str], code: int, needle: str):
    r = run_cli("exporter", "-b", "127.0.0.1:1", *args)
    assert r.code == code, r.err
    assert needle in _one_line_error(r.err)


def test_no_cluster_given(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("OPSKIT_CONFIG", str(tmp_path / "none.yaml"))
    r = run_cli("exporter")
    assert r.code == 2
    assert "no cluster given" in _one_line_error(r.err)


def test_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_cli("exporter", "-b", "127.0.0.1:1", "--listen", "127.0.0.1", "--port", str(port))
    assert r.code == 2
    assert f"--port {port}" in _one_line_error(r.err)


def test_once_against_unreachable_kafka_reports_down_and_exits_unknown():
    r = run_cli("exporter", "--bootstrap", "127.0.0.1:1", "--timeout", "1", "--once", "--no-log-dirs")
    assert r.code == 3
    assert "opskit_kafka_up 0.0" in r.out
    assert 'opskit_exporter_collection_errors_total{kind="unreachable"} 1.0' in r.out
    assert "kafka_brokers" not in r.out


def test_alignment_flag_is_accepted_both_ways():
    for flag in ("--no-align-to-scrapes", "--align-to-scrapes"):
        r = run_cli("exporter", "--bootstrap", "127.0.0.1:1", "--timeout", "1", "--once",
                    "--no-log-dirs", flag)
        assert r.code == 3 and "opskit_kafka_up 0.0" in r.out, r.err
