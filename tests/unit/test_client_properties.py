"""Kafka client properties (``--command-config``): the parser, the JAAS line, the
translation, and the CLI's handling of bad files (one line, exit 2, nothing printed
that is secret)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opskit.core.client_properties import (
    PLAIN_MODULE,
    SCRAM_MODULE,
    client_settings,
    parse_jaas,
    parse_properties,
)
from tests.helpers import run_cli

SECRET = "s3cr3t-Pa55word"

#: the way Kafka's documentation writes a SASL_SSL client configuration (SCRAM)
DOC_SCRAM = f"""\
# client.properties
bootstrap.servers=kafka-0:9093,kafka-1:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config={SCRAM_MODULE} required \\
    username="alice" \\
    password="{SECRET}";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
"""


def test_java_properties_syntax() -> None:
    text = ("! a comment\n  # another\n\nkey1=v1\nkey2 : v2\nkey3 v3\n"
            "key4=a\\\n    b\\\n    c\nkey\\ 5=\\u0041\\tB\nempty=\nlast=1\nlast=2\n")
    assert parse_properties(text) == {
        "key1": "v1", "key2": "v2", "key3": "v3", "key4": "abc", "key 5": "A\tB",
        "empty": "", "last": "2"}


@pytest.mark.parametrize("bad", ["=value", "a=\\u12x4", "a=b\x00"])
def test_malformed_properties(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_properties(bad)


def test_documented_scram_file() -> None:
    s = client_settings(parse_properties(DOC_SCRAM))
    assert (s.bootstrap, s.security_protocol, s.sasl_mechanism, s.username, s.password) == (
        "kafka-0:9093,kafka-1:9093", "SASL_SSL", "SCRAM-SHA-512", "alice", SECRET)
    assert (s.truststore_type, s.truststore_location, s.verify_hostname) == (
        "PEM", "/etc/kafka/ca.pem", True)
    assert s.ignored == ()


def test_jaas_forms() -> None:
    login = parse_jaas(f"{PLAIN_MODULE} required username=bob password='p w;x';")
    assert (login.module, login.flag, login.options) == (
        PLAIN_MODULE, "required", {"username": "bob", "password": "p w;x"})
    for bad in (f"{PLAIN_MODULE} required username=\"a\" password=\"b\"",  # no ';'
                f"{PLAIN_MODULE} always username=\"a\";",
                f"{PLAIN_MODULE} required username;",
                f"{PLAIN_MODULE} required username=\"a\"; {PLAIN_MODULE} required;",
                f"{PLAIN_MODULE} required password=\"{SECRET}"):
        with pytest.raises(ValueError) as e:
            parse_jaas(bad)
        assert SECRET not in str(e.value)


def test_what_opskit_cannot_honour_is_refused_or_named() -> None:
    def settings(text: str):  # type: ignore[no-untyped-def]
        return client_settings(parse_properties(text))

    with pytest.raises(ValueError, match="needs sasl.jaas.config"):
        settings("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    with pytest.raises(ValueError, match="not supported"):
        settings("sasl.mechanism=GSSAPI\nsasl.jaas.config=com.sun.security.auth.module."
                 "Krb5LoginModule required useKeyTab=true;\n")
    with pytest.raises(ValueError, match="sasl.mechanism is PLAIN"):
        settings(f"sasl.mechanism=PLAIN\nsasl.jaas.config={SCRAM_MODULE} required "
                 "username=\"a\" password=\"b\";\n")
    # Kafka's default truststore type is JKS, which none of opskit's clients reads
    for text in ("ssl.truststore.location=/x.jks\n",
                 "ssl.truststore.type=PKCS12\nssl.truststore.location=/x.p12\n"):
        with pytest.raises(ValueError, match="keytool -exportcert"):
            settings(text)
    s = settings("ssl.endpoint.identification.algorithm=\nrequest.timeout.ms=5000\n"
                 "ssl.keystore.location=/k.p12\nsecurity.protocol=SSL\n")
    assert s.verify_hostname is False
    assert s.ignored == ("request.timeout.ms", "ssl.keystore.location")


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "client.properties"
    p.write_text(text)
    return p


def test_cli_malformed_file_is_one_line_exit_2(tmp_path: Path) -> None:
    p = _write(tmp_path, f"sasl.jaas.config={PLAIN_MODULE} required password=\"{SECRET}\n")
    r = run_cli("lag", "--all-groups", "--command-config", str(p), "--timeout", "1")
    assert r.code == 2, r.err
    assert r.err.startswith("opskit: error: --command-config file ") and r.err.count("\n") == 1
    assert SECRET not in r.out + r.err
    missing = run_cli("health", "--command-config", str(tmp_path / "nope.properties"))
    assert missing.code == 4 and missing.err.count("\n") == 1, missing.err


def test_cli_unknown_properties_one_warning(tmp_path: Path) -> None:
    # a dead bootstrap: the command fails after the warning (exit 3), nothing else said
    p = _write(tmp_path, "bootstrap.servers=127.0.0.1:1\nrequest.timeout.ms=5000\n"
                         "sasl.login.callback.handler.class=x.Y\n")
    r = run_cli("lag", "--all-groups", "--command-config", str(p), "--timeout", "1")
    warnings = [ln for ln in r.err.splitlines() if "warning" in ln]
    assert warnings == [(f"opskit: warning: --command-config {p}: not used by opskit: "
                         "request.timeout.ms, sasl.login.callback.handler.class")]
    assert r.code == 3, r.err


def test_cli_command_config_with_context_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, "bootstrap.servers=127.0.0.1:1\n")
    r = run_cli("health", "--command-config", str(p), "--context", "x")
    assert r.code == 2 and "not both" in r.err, r.err
    nob = _write(tmp_path, "security.protocol=PLAINTEXT\n")
    r = run_cli("health", "--command-config", str(nob))
    assert r.code == 2 and "has no bootstrap.servers" in r.err, r.err
