"""The command-line checks of cli/validate.py, one rule at a time (the CLI fuzz
test runs them through every command)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opskit.cli import exits
from opskit.cli.validate import DAY, HOUR, parse_duration_option
from opskit.errors import UsageError
from tests.helpers import run_cli


@pytest.mark.parametrize("text, seconds", [
    ("500ms", 0.5), ("5s", 5.0), ("5", 5.0), (" 10m ", 600.0), ("1.5h", 5400.0), ("1d", DAY),
    ("1w", 7 * DAY),
])
def test_durations_within_bounds(text: str, seconds: float) -> None:
    assert parse_duration_option(text, "--x", 7 * DAY) == seconds


def test_zero_only_where_allowed() -> None:
    assert parse_duration_option("0s", "--quiet-period", DAY, minimum=0) == 0
    with pytest.raises(UsageError, match="positive"):
        parse_duration_option("0s", "--interval", DAY)


@pytest.mark.parametrize("text, needle", [
    ("99999999999999999999s", "at most 1h"), ("2h", "at most 1h"), ("0", "positive"),
    ("0.01s", "at least 0.1s"), ("nan", "use e.g."), ("-5s", "use e.g."), ("1e9", "use e.g."),
    ("5 parsecs", "use e.g."), ("٣s", "use e.g."),
])
def test_bad_durations(text: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        parse_duration_option(text, "--interval", HOUR, minimum=0.1)


@pytest.mark.parametrize("args, needle", [
    (["lag", "-b", "127.0.0.1:1", "--timeout", "nan", "-g", "g"], "not a finite number"),
    (["lag", "-b", "127.0.0.1:1", "--warn", "1" * 30, "-g", "g"], "too large"),
    (["lag", "-b", "127.0.0.1:1", "-g", "g\udcff"], "not valid UTF-8"),
    (["lag", "-b", "127.0.0.1:1", "-g", "a\x00b"], "NUL"),
    (["lag", "-b", "127.0.0.1:1", "-g", " "], "is empty"),
    (["lag", "-b", "127.0.0.1:1", "-g", "a\nb"], "control characters"),
    (["lag", "-b", "127.0.0.1:1", "-g", "g", "-t", "t" * 250], "longer than 249"),
    (["lag", "-b", "", "-g", "g"], "is empty"),
    (["lag", "--context", "", "-g", "g"], "is empty"),
    (["lag", "-b", "127.0.0.1:1", "-g", "g", "--window", "99999999999999999999s"], "at most 1d"),
    (["throughput", "-b", "127.0.0.1:1", "--interval", "1000000000s"], "at most 1h"),
    (["context", "set", "x", "-b", "h:1", "--sasl-mechanism", "bogus"], "SASL mechanism"),
    (["context", "set", "x", "-b", "h:1", "--security-protocol", "bogus"], "security protocol"),
])
def test_bad_values_are_usage_errors(args: list[str], needle: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_CONFIG", str(tmp_path / "config.yaml"))
    r = run_cli(*args)
    assert r.code == exits.USAGE, r.err
    assert r.err.count("\n") == 1 and r.err.startswith("opskit: error: ") and needle in r.err
    assert not (tmp_path / "config.yaml").exists()  # nothing was written


def test_odd_but_valid_values_pass_the_checks(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_CONFIG", str(tmp_path / "config.yaml"))
    r = run_cli("context", "set", "grüße", "-b", "h:1", "--sasl-mechanism", "scram-sha-512",
                "--security-protocol", "sasl_ssl", "--username", "ü", "--password-file",
                str(tmp_path / "pw"))
    assert r.code == exits.NOT_FOUND and "pw" in r.err  # past the checks, to the file
