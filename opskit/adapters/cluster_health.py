"""Gather the inputs of ``opskit.core.health`` from a live cluster.

Metadata and topic configs are read through the reader port (a session of
:func:`opskit.adapters.reader.open_reader`, librdkafka's view of the metadata).
confluent-kafka has no DescribeQuorum or ListPartitionReassignments call, so
those two come from kafka-python's ``KafkaAdminClient``
(:mod:`opskit.adapters.kafka_python_reads`), with every wait bounded by the
command's timeout. When the broker (or the installed client) cannot answer one
of them, that check becomes UNKNOWN with a one-line reason; the rest of the
report still stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import closing

from opskit.adapters.kafka_admin import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka_python import kafka_python_config
from opskit.adapters.kafka_python_reads import bounded, describe_quorum, list_reassignments, reason
from opskit.adapters.reader import ClusterReader, open_reader
from opskit.core.connection import ConnectionConfig
from opskit.core.health import (
    ClusterHealthInput,
    PartitionState,
    QuorumInfo,
    Reassignment,
)
from opskit.errors import NotAuthorisedError, UnsupportedError

log = logging.getLogger(__name__)



def partitions_of(meta: ClusterMeta) -> tuple[PartitionState, ...]:
    return tuple(
        PartitionState(topic, p.partition, p.leader, tuple(p.replicas), tuple(p.isr))
        for topic, parts in sorted(meta.topics.items())
        for p in parts
    )


def min_isr_value(topic: str, cfg: Mapping[str, tuple[str | None, bool]]) -> int | None:
    """A topic's min.insync.replicas from its DescribeConfigs answer; None when the answer
    lacks it (Tansu answers without any entry) or holds no number: unknown, never 1."""
    raw = cfg.get("min.insync.replicas", (None, True))[0]
    if raw is not None and raw.strip().isdigit():
        return int(raw)
    if raw is not None:
        log.warning("topic %s has a non-numeric min.insync.replicas %r", topic, raw)
    return None


def min_isr_of(r: ClusterReader, topics: list[str]) -> dict[str, int]:
    """Each topic's min.insync.replicas as the broker answers it; a topic without a value
    (:func:`min_isr_value`) is left out."""
    out: dict[str, int] = {}
    for topic, cfg in r.all_topic_configs(topics).items():
        mi = min_isr_value(topic, cfg)
        if mi is not None:
            out[topic] = mi
    return out


def _limited(admin: KafkaAdmin) -> bool:
    from opskit.adapters.acls_admin import limited_principal

    return limited_principal(admin)


def gather_health_input(admin: KafkaAdmin, expected_brokers: int | None = None,
                        kafka_python: bool = True, reader: ClusterReader | None = None
                        ) -> ClusterHealthInput:
    """Read everything the health checks need. Raises opskit errors only for metadata/configs.
    Metadata and configs are read through ``reader`` (else a session opened on ``admin``
    and closed here)."""
    if reader is None:
        with closing(open_reader(admin)) as r:
            return _gather(admin, r, expected_brokers, kafka_python)
    return _gather(admin, reader, expected_brokers, kafka_python)


def _gather(admin: KafkaAdmin, r: ClusterReader, expected_brokers: int | None,
            kafka_python: bool) -> ClusterHealthInput:
    meta = r.metadata(protocol_first=False)  # unreachable: KafkaUnavailableError in the timeout
    partitions = partitions_of(meta)
    min_isr_unknown: str | None = None
    try:
        min_isr = min_isr_of(r, sorted(meta.topics))
    except NotAuthorisedError:
        min_isr = {}
        min_isr_unknown = (f"min.insync.replicas not readable: {r.principal} has no "
                           "DescribeConfigs ACL on the topics")
    except UnsupportedError as e:  # a broker without (a working) DescribeConfigs
        min_isr = {}
        min_isr_unknown = f"min.insync.replicas not readable: {e}"
    missing = set(meta.topics) - set(min_isr)
    if missing and min_isr_unknown is None:
        min_isr_unknown = (f"min.insync.replicas not readable: the broker's DescribeConfigs answer "
                           f"holds no value for {len(missing)} topic(s)")
    invisible = None
    if not meta.topics and _limited(admin):
        invisible = (f"no topic is visible to {r.principal}: the cluster has none, or the "
                     "principal lacks the Describe ACL on topics (health cannot judge partitions "
                     "it cannot see)")
    quorum: QuorumInfo | None = None
    reassignments: tuple[Reassignment, ...] | None = None
    q_err: str | None = "not asked"
    r_err: str | None = "not asked"
    if kafka_python:
        quorum, q_err, reassignments, r_err = _kafka_python_part(admin.conn, admin.timeout)
    return ClusterHealthInput(
        brokers=tuple(b.node_id for b in meta.brokers),
        controller_id=meta.controller_id,
        partitions=partitions,
        min_isr=min_isr,
        expected_brokers=expected_brokers,
        quorum=quorum, quorum_error=q_err,
        reassignments=reassignments, reassignments_error=r_err,
        min_isr_unknown=min_isr_unknown, topics_invisible=invisible,
    )


def _kafka_python_part(conn: ConnectionConfig, timeout: float
                       ) -> tuple[QuorumInfo | None, str | None,
                                  tuple[Reassignment, ...] | None, str | None]:
    try:
        from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
    except ImportError:  # pragma: no cover - a declared dependency
        msg = "kafka-python is not installed"
        return None, msg, None, msg
    try:
        client = bounded(lambda: KafkaAdminClient(**kafka_python_config(conn, timeout)), timeout + 2)
    except Exception as e:  # noqa: BLE001 - both checks become UNKNOWN
        msg = f"kafka-python could not connect to {conn.bootstrap}: {reason(e)}"
        return None, msg, None, msg
    try:
        quorum, q_err = describe_quorum(client, timeout + 2)
        reassignments, r_err = list_reassignments(client, timeout)
    finally:
        try:
            client.close()
        except Exception:  # closing is best effort
            log.debug("closing kafka-python client failed", exc_info=True)
    return quorum, q_err, reassignments, r_err
