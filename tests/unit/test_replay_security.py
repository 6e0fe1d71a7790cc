"""The replay job's Kafka security settings (pure), the secret pipe, and the ACL check of a
reassignment (pure): what reaches a command line, and what does not."""

from __future__ import annotations

import importlib.util
import os
import stat
import threading
from pathlib import Path

import pytest

from opskit.adapters.spark.secret_pipe import served_secret
from opskit.core.acl_needs import missing_acls
from opskit.core.connection import ConnectionConfig
from opskit.core.replay_security import spark_kafka_login, spark_kafka_options
from opskit.errors import UsageError

_spec = importlib.util.spec_from_file_location(
    "lag_replay", Path(__file__).resolve().parents[2] / "spark_jobs" / "lag_replay.py")
assert _spec and _spec.loader
lag_replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lag_replay)

PW = "s3cr3t-\"quoted\"-pässword"
SASL_SSL = ConnectionConfig("h:9093", security_protocol="SASL_SSL", sasl_mechanism="scram-sha-512",
                            username="svc", password=PW, ca_file="/etc/ca.pem")


def test_secured_connection_gives_every_setting_but_the_password() -> None:
    opts = spark_kafka_options(SASL_SSL, [])
    assert opts == ["security.protocol=SASL_SSL", "sasl.mechanism=SCRAM-SHA-512",
                    "ssl.truststore.type=PEM", "ssl.truststore.location=/etc/ca.pem"]
    assert not any(PW in o for o in opts)
    assert spark_kafka_login(SASL_SSL) == "svc"


def test_plaintext_gives_nothing_and_operator_options_come_last() -> None:
    plain = ConnectionConfig("h:9092")
    assert spark_kafka_options(plain, ["a=b"]) == ["a=b"]
    assert spark_kafka_login(plain) is None
    # later items win in the job (a dict): the operator's override the context's
    opts = spark_kafka_options(SASL_SSL, ["ssl.truststore.location=/other.pem"])
    assert opts[-1] == "ssl.truststore.location=/other.pem"


def test_sasl_plaintext_has_no_truststore() -> None:
    c = ConnectionConfig("h:9092", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                         username="u", password="p", ca_file="/etc/ca.pem")
    assert spark_kafka_options(c, []) == ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN"]


def test_client_certificate_needs_an_explicit_keystore() -> None:
    c = ConnectionConfig("h:9093", security_protocol="SSL", ca_file="/ca", cert_file="/c",
                         key_file="/k")
    with pytest.raises(UsageError, match="ssl.keystore.location"):
        spark_kafka_options(c, [])
    assert spark_kafka_options(c, ["ssl.keystore.location=/both.pem"])[-1].endswith("/both.pem")


def test_secret_pipe_serves_each_reader_then_disappears() -> None:
    with served_secret(PW) as path:
        assert stat.S_ISFIFO(os.stat(path).st_mode)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
        for _ in range(2):  # the job reads it once per Kafka source or sink
            assert path.read_text(encoding="utf-8") == PW
    assert not path.exists() and not path.parent.exists()


def test_secret_pipe_without_reader_does_not_hang() -> None:
    before = threading.active_count()
    with served_secret(PW):
        pass
    assert threading.active_count() <= before


def test_job_reads_the_password_from_the_pipe() -> None:
    with served_secret(PW) as path:
        args = lag_replay.parse_args(["--spec", "{}", "--bootstrap", "h:9093", "--output", "/o",
                                      "--kafka-option", "sasl.mechanism=SCRAM-SHA-512",
                                      "--kafka-username", "svc",
                                      "--kafka-password-file", str(path)])
        opts = lag_replay.kafka_options(args)
    jaas = opts["kafka.sasl.jaas.config"]
    assert jaas.startswith("org.apache.kafka.common.security.scram.ScramLoginModule required")
    assert 'password="s3cr3t-\\"quoted\\"-pässword"' in jaas


def test_missing_acls_of_a_reassignment() -> None:
    monitor = frozenset({"DESCRIBE"})
    got = missing_acls("reassign execute --execute", monitor, {"t": monitor, "u": None})
    assert got == ["Alter on the cluster", "DescribeConfigs on the cluster",
                   "AlterConfigs on the cluster", "DescribeConfigs on topic t",
                   "AlterConfigs on topic t"]  # u: not told, not judged
    admin = frozenset({"DESCRIBE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"})
    assert missing_acls("reassign execute --execute", admin, {"t": admin}) == []
    assert missing_acls("reassign cancel --execute", monitor, {}) == ["Alter on the cluster"]
    assert missing_acls("reassign execute --execute", None, {}) == []
