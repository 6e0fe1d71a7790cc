"""opskit's protocol-level client logs in (SaslHandshake + SaslAuthenticate) with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512, over SASL_PLAINTEXT and SASL_SSL, against the real
secured sandbox: `lag` stays on the batched reads (librdkafka is never started) and
gives the numbers that were committed."""

from __future__ import annotations

import pytest

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.cluster import read_cluster
from opskit.adapters.kafka.protocol.connect import open_connection
from opskit.adapters.kafka.protocol.sasl import MECHANISMS
from opskit.cli import exits
from tests.helpers import commit, create_topic, produce, run_cli


def _topic_with_lag(cluster, topic: str, group: str) -> None:  # type: ignore[no-untyped-def]
    """3 partitions of 10 records; ``group`` committed 4 on each (as admin)."""
    conf = cluster.conn().to_librdkafka()
    create_topic(conf, topic, 3)
    produce(conf, topic, {0: 10, 1: 10, 2: 10})
    commit(conf, group, {(topic, p): 4 for p in range(3)})


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_lag_stays_on_the_protocol_level(any_secured_kafka, mechanism, uniq, monkeypatch):
    topic, group = f"ws_{uniq}", f"ws-{uniq}"
    _topic_with_lag(any_secured_kafka, topic, group)

    def no_librdkafka(*_a, **_k):  # type: ignore[no-untyped-def]
        raise AssertionError("the librdkafka admin client was started")

    monkeypatch.setattr(ck, "AdminClient", no_librdkafka, raising=False)
    conn = any_secured_kafka.conn("admin", mechanism)
    # through the CLI, with a context of this mechanism (written by `opskit context set`)
    ctx = f"ws-{uniq}"
    set_ctx = run_cli("context", "set", ctx, "-b", conn.bootstrap, "--security-protocol",
                      conn.security_protocol, "--sasl-mechanism", mechanism, "--username", "admin",
                      "--password-file", any_secured_kafka.password_file("admin"),
                      *(["--ca", conn.ca_file] if conn.ca_file else []))
    assert set_ctx.code == 0, set_ctx.err
    try:
        r = run_cli("lag", "--group", group, "--context", ctx, "-o", "json")
    finally:
        run_cli("context", "delete", ctx)
    assert r.code == exits.OK, r.err
    g = r.json()["groups"][0]
    assert g["total_lag"] == 18
    assert sorted((p["partition"], p["committed_offset"], p["log_end_offset"])
                  for p in g["partitions"]) == \
        [(0, 4, 10), (1, 4, 10), (2, 4, 10)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wire_client_reads_metadata_as_each_principal(kafka_sasl_ssl, mechanism):
    for user in ("admin", "monitor", "billing-aggregator"):
        conn = kafka_sasl_ssl.conn(user, mechanism)
        with offsets_wire.bootstrap_client(conn, 10) as client:
            md = read_cluster(client)
        assert [b.port for b in md.brokers] == [kafka_sasl_ssl.state.nodes[0].port]


def test_scram_login_checks_the_brokers_signature(kafka_sasl_plaintext):
    """A completed SCRAM login verified the broker's proof of the password."""
    import time

    conn = kafka_sasl_plaintext.conn("monitor", "SCRAM-SHA-512")
    host, port = conn.bootstrap.split(":")
    sock = open_connection(host, int(port), conn, time.monotonic() + 10)
    sock.close()
