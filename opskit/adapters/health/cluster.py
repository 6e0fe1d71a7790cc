"""Gather the inputs of ``opskit.core.health`` from a live cluster.

Everything is read through the reader port (a session of
:func:`opskit.adapters.kafka.reader.open_reader`): metadata (librdkafka's view) and topic
configs, and the KRaft quorum and the reassignments in progress (``read_quorum``,
``read_reassignments``: kafka-python's client, confluent-kafka has neither API).
The session's kafka-python connect and reads are bounded by the command's timeout
plus 2 s, and a failed connect names the bootstrap servers (:func:`kafka_python_read`).
When the broker (or the installed client) cannot answer the quorum or the
reassignments, that check becomes UNKNOWN with a one-line reason; the rest of the
report still stands.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import closing
from typing import TypeVar

from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka.kafka_python import KAFKA_PYTHON_GRACE_S
from opskit.adapters.kafka.kafka_python_reads import reason
from opskit.adapters.kafka.reader import ClusterReader, KeptClients, open_reader
from opskit.adapters.kafka.reader.kept import KafkaPythonConnectError
from opskit.core.health import (
    ClusterHealthInput,
    PartitionState,
    QuorumInfo,
    Reassignment,
)
from opskit.errors import NotAuthorisedError, OpskitError, UnsupportedError

log = logging.getLogger(__name__)

T = TypeVar("T")


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
    from opskit.adapters.acls.admin import limited_principal

    return limited_principal(admin)


def gather_health_input(admin: KafkaAdmin, expected_brokers: int | None = None,
                        kafka_python: bool = True, reader: ClusterReader | None = None
                        ) -> ClusterHealthInput:
    """Read everything the health checks need. Raises opskit errors only for metadata/configs.
    Everything is read through ``reader`` (else a session opened on ``admin``, its
    kafka-python connect and reads bounded by the timeout plus KAFKA_PYTHON_GRACE_S,
    closed here)."""
    if reader is None:
        kept = KeptClients(admin.conn, admin.timeout,
                           wait_s=admin.timeout + KAFKA_PYTHON_GRACE_S)
        with closing(kept), closing(open_reader(admin, kept)) as r:
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
        quorum, q_err = kafka_python_read(r.read_quorum)
        reassignments, r_err = kafka_python_read(r.read_reassignments)
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


def kafka_python_read(read: Callable[[], T]) -> tuple[T | None, str | None]:
    """The outcome of one of the session's kafka-python reads: the value, or None and
    the one-line reason health shows (a failed connect names the bootstrap servers)."""
    try:
        return read(), None
    except KafkaPythonConnectError as e:
        if isinstance(e.cause, ImportError):  # pragma: no cover - a declared dependency
            return None, "kafka-python is not installed"
        return None, f"kafka-python could not connect to {e.bootstrap}: {reason(e.cause)}"
    except OpskitError as e:  # the port's message is the reason (never "nothing there")
        return None, str(e)
