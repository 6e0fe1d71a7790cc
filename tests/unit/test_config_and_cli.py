"""Contexts, connection precedence and CLI error handling (no broker needed)."""

import pytest

from opskit.adapters.files.config_file import OpskitConfig, resolve_connection
from opskit.cli import exits
from opskit.core.connection import ConnectionConfig
from opskit.errors import ConfigError, NotFoundError, UsageError
from tests.helpers import run_cli


@pytest.fixture
def cfgfile(tmp_path, monkeypatch):
    p = tmp_path / "config.yaml"
    monkeypatch.setenv("OPSKIT_CONFIG", str(p))
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.delenv("OPSKIT_CONTEXT", raising=False)
    return p


def test_connection_validation():
    assert ConnectionConfig("a:9092,b:9093").validate() == []
    assert ConnectionConfig("nohost").validate()
    bad = ConnectionConfig("a:1", security_protocol="SASL_SSL", sasl_mechanism="PLAIN")
    assert any("username" in e for e in bad.validate())
    assert ConnectionConfig("a:1", security_protocol="TLS").validate()
    scram = ConnectionConfig("a:1", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                             username="u", password="secret", ca_file="/ca.pem")
    conf = scram.to_librdkafka()
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512" and conf["ssl.ca.location"] == "/ca.pem"
    assert scram.masked()["password"] == "********"


def test_precedence(cfgfile, monkeypatch, tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    cfg = OpskitConfig.load()
    cfg.set_context("prod", "p:9092", security={"protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
                                                "username": "opskit", "password_file": str(pw)})
    cfg.set_context("stg", "s:9092")
    cfg.current_context = "prod"
    cfg.save()
    assert resolve_connection(None, None).bootstrap == "p:9092"
    assert resolve_connection(None, None).password == "s3cret"
    monkeypatch.setenv("OPSKIT_CONTEXT", "stg")
    assert resolve_connection(None, None).bootstrap == "s:9092"
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "env:1")
    assert resolve_connection(None, None).bootstrap == "env:1"
    assert resolve_connection(None, "prod").bootstrap == "p:9092"
    assert resolve_connection("flag:2", "prod").bootstrap == "flag:2"
    with pytest.raises(NotFoundError):
        resolve_connection(None, "nope")


def test_no_cluster_given_is_usage_error(cfgfile):
    with pytest.raises(UsageError):
        resolve_connection(None, None)


def test_malformed_config_file(cfgfile):
    cfgfile.write_text("contexts: [1, 2\n")
    with pytest.raises(ConfigError):
        OpskitConfig.load()


def test_context_cli_masks_secrets(cfgfile, tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("hunter2")
    r = run_cli("context", "set", "prod", "-b", "k:9092", "--security-protocol", "SASL_PLAINTEXT",
                "--sasl-mechanism", "SCRAM-SHA-256", "--username", "u", "--password-file", str(pw))
    assert r.code == 0, r.err
    r = run_cli("context", "show", "prod", "-o", "json")
    assert r.code == 0 and r.json()["password"] == "********" and "hunter2" not in r.out
    assert run_cli("context", "list", "-o", "json").json()[0]["current"] is True
    assert run_cli("context", "use", "missing").code == exits.NOT_FOUND
    assert run_cli("context", "delete", "prod").code == 0
    assert run_cli("context", "list", "-o", "json").json() == []


@pytest.mark.parametrize("args,code,fragment", [
    (["lag", "-g", "x", "--bogus"], exits.USAGE, "No such option"),
    (["lag", "-g", "x", "-o", "xml"], exits.USAGE, "--output"),
    (["lag"], exits.USAGE, "no group given"),
    (["lag", "-g", "a", "--all-groups", "-b", "h:1"], exits.USAGE, "not both"),
    (["lag", "-g", "x", "-b", "nonsense"], exits.USAGE, "not host:port"),
    (["lag", "-g", "x", "--context", "nope"], exits.NOT_FOUND, "unknown context"),
    (["lag", "-g", "x", "-b", "127.0.0.1:1", "--timeout", "2"], exits.UNKNOWN, "cannot reach Kafka"),
    (["lag", "-g", "x", "-b", "h:1", "--warn", "10", "--crit", "5"], exits.UNKNOWN, ""),
    (["sandbox", "up", "--brokers", "2"], exits.USAGE, "--brokers must be 1 or 3"),
    (["sandbox", "up", "--kafka-version", "2.8"], exits.USAGE, "not supported"),
    (["sandbox", "status", "--name", "nosuch"], exits.NOT_FOUND, "no sandbox"),
    (["sandbox", "up", "--name", "Bad Name"], exits.USAGE, "invalid sandbox name"),
    (["topics", "diff", "/nonexistent/registry.yaml"], exits.NOT_FOUND, "does not exist"),
])
def test_cli_errors_are_one_line_with_documented_codes(cfgfile, args, code, fragment):
    r = run_cli(*args)
    assert r.code == code, (r.code, r.err)
    assert "Traceback" not in r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    if fragment:
        assert len(lines) == 1 and lines[0].startswith("opskit: error:") and fragment in lines[0], r.err


def test_version():
    from opskit import __version__

    r = run_cli("--version")
    assert r.code == 0 and __version__ in r.out


def test_write_json_keys_and_values_orjson_leaves_to_fallbacks(capsys) -> None:  # type: ignore[no-untyped-def]
    """String keys go the fast way; integer keys, integers beyond 64 bits and dates are
    still written (keys as strings, dates through str), one document per line."""
    import datetime
    import json

    from opskit.cli.common import write_json

    docs = [{"a": 1, "b": [1, None]}, {1: "x", "b": 2}, {"big": 2**70},
            {"t": datetime.datetime(2020, 1, 1)}]
    for d in docs:
        write_json(d)
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"a": 1, "b": [1, None]}, {"1": "x", "b": 2}, {"big": 2**70}, {"t": "2020-01-01 00:00:00"}]
