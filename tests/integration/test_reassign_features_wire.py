"""The reads of ``reassign plan`` on real brokers, after they were made lighter (issue #24):

* the finalized features from opskit's own ApiVersions v3 (no kafka-python client) equal
  kafka-python's ``describe_features`` on Kafka 3.7 and 4.3, and over SASL_SSL;
* the cordon look says what it said with kafka-python's client: on 3.7 a drain is not
  protected (no ``cordoned.log.dirs``), on 4.3 ``reassign execute`` cordons; a 4.3 broker
  cordoned with ``*`` is named by ``reassign plan``;
* the size read given the brokers and partitions of librdkafka's Metadata (no Metadata
  of its own) gives the sizes and disks it gives after its own Metadata.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import create_topic, produce, run_cli

from opskit.adapters.kafka.protocol.features import read_features
from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.cli.reassign.plan import _cordon_note
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from opskit.core.reassign.cordon import MIN_METADATA_LEVEL, CordonSupport


def _kafka_pythons(conn: ConnectionConfig) -> dict[str, Any]:
    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

    from opskit.adapters.kafka.kafka_python import kafka_python_config

    client = KafkaAdminClient(**kafka_python_config(conn, 15))
    try:
        return client.describe_features()  # type: ignore[no-any-return]
    finally:
        client.close()


def _finalized(theirs: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {name: tuple(f["finalized"]) for name, f in theirs.items()  # type: ignore[misc]
            if "finalized" in f}


def test_features_and_cordon_look_as_kafka_pythons(any_kafka: Any) -> None:
    conn = ConnectionConfig(any_kafka.bootstrap)
    ours = read_features(conn, 15)
    theirs = _kafka_pythons(conn)
    assert ours.finalized == _finalized(theirs) and "metadata.version" in ours.finalized
    level = theirs["metadata.version"]["finalized"][1]
    with ReassignAdmin(conn, timeout=15) as ra:
        assert ra.metadata_level() == level
        support = ra.cordon_support([0])
        note = _cordon_note((0,), {0}, ra)
        cordoned = ra.fully_cordoned([0])
        assert ra._kp is None  # no kafka-python client was opened
    assert cordoned == set()
    if any_kafka.version.startswith("3.7"):
        assert level < MIN_METADATA_LEVEL
        assert support == CordonSupport(False, "no cordoned.log.dirs on broker(s) 0: "
                                               "KIP-1066 needs Kafka 4.3+")
        assert note == ("warning: broker(s) 0 not cordoned (no cordoned.log.dirs on broker(s) 0: "
                        "KIP-1066 needs Kafka 4.3+): until the drain ends, a topic or partition "
                        "created meanwhile can still get replicas there")
    else:
        assert any_kafka.version.startswith("4.3") and level >= MIN_METADATA_LEVEL
        assert support == CordonSupport(True)
        assert note == ("reassign execute cordons broker(s) 0 before the first move (KIP-1066: "
                        "no new replica is placed there) and leaves them cordoned when the "
                        "drain ends")


def test_cordoned_broker_named_by_plan_on_43(kafka4: Any) -> None:
    boot = kafka4.bootstrap
    topic = f"fw_{uuid.uuid4().hex[:6]}"
    create_topic(boot, topic, 2)  # broker 0 holds replicas: it is kept, and said so
    conn = ConnectionConfig(boot)
    with ReassignAdmin(conn, timeout=15) as ra:
        prior = ra.read_cordon([0])
        ra.set_cordon([0])
        try:
            assert ReassignAdmin(conn, timeout=15).fully_cordoned([0]) == {0}
            r = run_cli("reassign", "plan", "--rebalance", "-o", "json", "-b", boot)
        finally:
            assert ra.restore_cordon(prior) == []
    assert r.code == 0, r.err
    assert ("opskit: note: broker(s) 0 are cordoned but hold replicas: the plan may still "
            "move replicas onto them") in r.err, r.err


def test_features_over_sasl_ssl(kafka_sasl_ssl: Any) -> None:
    conn = kafka_sasl_ssl.conn("monitor", "SCRAM-SHA-512")
    assert read_features(conn, 15).finalized == _finalized(_kafka_pythons(conn))
    with ReassignAdmin(conn, timeout=15) as ra:
        assert ra.metadata_level() is not None and ra._kp is None


def test_sizes_from_known_metadata_equal_their_own(kafka3: Any) -> None:
    from opskit.adapters.kafka import log_dirs

    boot = kafka3.bootstrap
    t = f"fw_sizes_{uuid.uuid4().hex[:6]}"
    create_topic(boot, t, 4, rf=3)
    produce(boot, t, {0: 50, 1: 10, 2: 0, 3: 200})
    admin = kafka3.admin()
    meta = admin.metadata()
    leaders = {TopicPartition(t, p.partition): p.leader for p in meta.topics[t]}
    known = log_dirs.KnownCluster(tuple((b.node_id, b.host, b.port) for b in meta.brokers),
                                  dict(leaders))
    deadline = time.monotonic() + 60
    while True:  # the followers catch up before every broker reports the same
        own = log_dirs.read_partition_sizes(admin.conn, [t], leaders, timeout=15)
        given = log_dirs.read_partition_sizes(admin.conn, [t], leaders, timeout=15, known=known)
        if own.sizes == given.sizes or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert own.unavailable is None and given.unavailable is None
    assert given.sizes == own.sizes and set(given.sizes) == set(leaders)
    assert set(given.disks) == {0, 1, 2}
    assert given.sizes[TopicPartition(t, 3)] > given.sizes[TopicPartition(t, 1)] > 0
