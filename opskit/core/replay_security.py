"""The Kafka security settings of the Spark replay job, from opskit's connection (pure).

The job's Kafka source and sinks (Spark's Kafka connector, the Java client) get the
connection's protocol, SASL mechanism and CA as ``kafka.*`` options: all of them are
safe to show on a command line. The password never is: :func:`spark_kafka_login` says
who logs in, and the caller hands the password over a pipe (``--kafka-password-file``).
"""

from __future__ import annotations

import re

from opskit.core.connection import ConnectionConfig
from opskit.errors import UsageError

#: a Java Kafka client property name (``ssl.keystore.location``, ``sasl.jaas.config``)
_KEY = re.compile(r"[a-z][a-z0-9]*([._-][a-z0-9]+)*")


def check_kafka_options(given: list[str]) -> None:
    """Each ``--kafka-option`` is ``KEY=VALUE`` with a Kafka client property name as KEY."""
    for item in given:
        key, eq, _value = item.partition("=")
        if not eq or _KEY.fullmatch(key) is None:
            raise UsageError(f"--kafka-option {item[:80]!r} is not KEY=VALUE (e.g. "
                             "ssl.keystore.location=FILE)")


def spark_kafka_options(conn: ConnectionConfig, given: list[str]) -> list[str]:
    """``KEY=VALUE`` settings of the Java Kafka client for ``conn``, none of them secret.
    The operator's own ``--kafka-option`` items (``given``) come after, so they win."""
    proto = conn.security_protocol.upper()
    out = [] if proto == "PLAINTEXT" else [f"security.protocol={proto}"]
    if conn.sasl_mechanism and proto.startswith("SASL"):
        out.append(f"sasl.mechanism={conn.sasl_mechanism.upper()}")
    if conn.ca_file and proto in ("SSL", "SASL_SSL"):
        # KIP-651: the Java client reads a PEM file as its truststore
        out += ["ssl.truststore.type=PEM", f"ssl.truststore.location={conn.ca_file}"]
    if not conn.verify_hostname and proto in ("SSL", "SASL_SSL"):
        out.append("ssl.endpoint.identification.algorithm=")
    keys = {item.partition("=")[0] for item in given}
    if conn.cert_file and "ssl.keystore.location" not in keys:
        raise UsageError("the context uses a TLS client certificate, which opskit does not pass "
                         "to Spark's Kafka client: give --kafka-option ssl.keystore.type=PEM "
                         "--kafka-option ssl.keystore.location=FILE (key and certificate in one "
                         "PEM file)")
    return [*out, *given]


def spark_kafka_login(conn: ConnectionConfig) -> str | None:
    """The SASL user the job logs in as (None: no SASL, or no password to hand over)."""
    if conn.security_protocol.upper().startswith("SASL") and conn.username \
            and conn.password is not None:
        return conn.username
    return None
