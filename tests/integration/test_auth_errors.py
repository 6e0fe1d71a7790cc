"""Authentication and TLS mistakes against the real secured sandbox: one line naming the
cause, exit 9 (AUTH), at most one failed login on the broker, and no wait for the
timeout. Each case runs the protocol-level command (`lag`), a librdkafka one
(`health`) and `throughput`.

The time each command took is printed (run with ``-s`` to see it); the test only
bounds it well below the 10 s timeout (no timing assertion beyond "did not wait it out").
"""

from __future__ import annotations

import secrets
import subprocess
import time
from pathlib import Path

import pytest

from opskit.cli import exits
from tests.helpers import run_cli

COMMANDS = (("lag", "--all-groups"), ("health",), ("throughput", "--interval", "1s"))
#: far below the 10 s default timeout the old behaviour waited out
HANG_BOUND_S = 6.0


def _failed_logins(cluster) -> int:  # type: ignore[no-untyped-def]
    log = Path(cluster.state.nodes[0].log_path)
    return log.read_text(errors="replace").count("Failed authentication with")


def _context(name: str, bootstrap: str, protocol: str, user: str | None = None,
             mechanism: str | None = None, password_file: str | None = None,
             ca: str | None = None) -> str:
    args = ["context", "set", name, "-b", bootstrap, "--security-protocol", protocol]
    if mechanism:
        args += ["--sasl-mechanism", mechanism, "--username", user or "", "--password-file",
                 password_file or ""]
    if ca:
        args += ["--ca", ca]
    r = run_cli(*args)
    assert r.code == 0, r.err
    return name


def _wrong_password_file(tmp_path: Path) -> str:
    p = tmp_path / "wrong.password"
    p.write_text(secrets.token_hex(12) + "\n")
    p.chmod(0o600)
    return str(p)


def _check(ctx_or_args: list[str], expect: str, label: str, cluster=None,  # type: ignore[no-untyped-def]
           logins: int | None = None) -> None:
    for cmd in COMMANDS:
        before = _failed_logins(cluster) if cluster is not None else 0
        t0 = time.monotonic()
        r = run_cli(*cmd, *ctx_or_args)
        took = time.monotonic() - t0
        print(f"{label:<28} {cmd[0]:<11} exit {r.code} in {took:.2f}s: {r.err.strip()}")
        assert r.code == exits.AUTH, (cmd, r.err)
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("opskit: error: ") and expect in lines[0], r.err
        assert took < HANG_BOUND_S
        if cluster is not None and logins is not None:
            time.sleep(0.3)  # the broker logs the failure as it closes the connection
            assert _failed_logins(cluster) - before == logins, cmd


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_wrong_password(kafka_sasl_ssl, mechanism, tmp_path, uniq):
    c = kafka_sasl_ssl
    ctx = _context(f"pw-{uniq}", c.bootstrap, "SASL_SSL", "monitor", mechanism,
                   _wrong_password_file(tmp_path), c.ca_file)
    _check(["--context", ctx], f"authentication failed for user 'monitor' with mechanism {mechanism}",
           f"wrong password {mechanism}", c, logins=1)


def test_unknown_user(kafka_sasl_plaintext, tmp_path, uniq):
    c = kafka_sasl_plaintext
    ctx = _context(f"nouser-{uniq}", c.bootstrap, "SASL_PLAINTEXT", "nobody", "PLAIN",
                   _wrong_password_file(tmp_path))
    _check(["--context", ctx], "authentication failed for user 'nobody' with mechanism PLAIN",
           "unknown user", c, logins=1)


def test_missing_and_wrong_ca(kafka_sasl_ssl, tmp_path, uniq):
    c = kafka_sasl_ssl
    pw = c.password_file("monitor")
    missing = _context(f"noca-{uniq}", c.bootstrap, "SASL_SSL", "monitor", "PLAIN", pw)
    # the broker logs the one handshake the client gave up as a failed authentication
    _check(["--context", missing], "TLS certificate verify failed", "missing CA", c, logins=1)
    # a CA of its own, which did not sign the broker's certificate
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    str(tmp_path / "other.key"), "-out", str(tmp_path / "other.pem"), "-days", "2",
                    "-subj", "/CN=another CA"], check=True, capture_output=True)
    wrong = _context(f"wrongca-{uniq}", c.bootstrap, "SASL_SSL", "monitor", "PLAIN", pw,
                     str(tmp_path / "other.pem"))
    _check(["--context", wrong], "TLS certificate verify failed", "wrong CA", c, logins=1)
    r = run_cli("lag", "--all-groups", "--context", wrong)
    assert "self-signed certificate in certificate chain" in r.err or "unable to get" in r.err


def test_tls_to_a_plaintext_port(kafka_sasl_plaintext, uniq):
    c = kafka_sasl_plaintext
    ctx = _context(f"tls2plain-{uniq}", c.bootstrap, "SASL_SSL", "admin", "PLAIN",
                   c.password_file("admin"))
    _check(["--context", ctx], "does not speak TLS", "TLS to a plaintext port")


def test_plaintext_to_a_tls_port(kafka_sasl_ssl, uniq):
    c = kafka_sasl_ssl
    _check(["-b", c.bootstrap], "speaks TLS but the connection is configured for PLAINTEXT",
           "PLAINTEXT to a TLS port")
    ctx = _context(f"plain2tls-{uniq}", c.bootstrap, "SASL_PLAINTEXT", "admin", "PLAIN",
                   c.password_file("admin"))
    _check(["--context", ctx], "speaks TLS", "SASL_PLAINTEXT to a TLS port")


def test_no_sasl_on_a_sasl_listener_and_the_reverse(kafka_sasl_plaintext, kafka, uniq):
    _check(["-b", kafka_sasl_plaintext.bootstrap], "requires SASL", "PLAINTEXT to SASL")
    ctx = _context(f"sasl2plain-{uniq}", kafka.bootstrap, "SASL_PLAINTEXT", "admin", "PLAIN",
                   kafka_sasl_plaintext.password_file("admin"))
    _check(["--context", ctx], "does not use SASL", "SASL to a PLAINTEXT listener")
