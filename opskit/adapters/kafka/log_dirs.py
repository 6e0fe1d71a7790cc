"""Partition sizes on disk, from DescribeLogDirs.

confluent-kafka has no DescribeLogDirs call. This asks every broker at the
protocol level (opskit's own codec, :mod:`opskit.adapters.kafka.protocol.codec`: one
Metadata request for the partitions and brokers, unless the caller passes what its own
Metadata read learned (:class:`KnownCluster`), then one DescribeLogDirs per
broker, all in flight together); with SASL, or when that fails, kafka-python's
``KafkaAdminClient.describe_log_dirs`` (its import alone costs about 0.15 s).
Sizes are *extra* information (byte
rates in ``opskit throughput``, byte-based retention headroom in ``opskit
lag``): every failure -- an unadvertised API (checked first with the
ApiVersions probe of :mod:`opskit.adapters.kafka.capabilities`), an error, a broker
that does not answer within the timeout -- becomes ``PartitionSizes.unavailable``
with a one-line reason, never an exception, and nothing waits longer than
``timeout + 2`` seconds.

A partition's size is the leader replica's when the leader is known, else the
largest replica's (replicas of one partition differ only by replication lag).

Disk space per broker (``PartitionSizes.disks``): DescribeLogDirs v4+ (Kafka 3.3+)
reports each log directory's volume, total and usable bytes; a broker's space is the sum
over its online log directories, a volume reported twice with the same figures (two
log directories on one file system) counted once. Missing (older brokers, the
kafka-python path when its answer lacks the fields) for a broker: absent from ``disks``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opskit.adapters.kafka import capabilities
from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.client import Node, WireClient, WireUnsupported, usable
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from opskit.errors import KafkaUnavailableError

log = logging.getLogger(__name__)

__all__ = ["KnownCluster", "PartitionSizes", "read_partition_sizes"]


@dataclass(frozen=True)
class KnownCluster:
    """What a Metadata read of the caller already learned, so the size read does not ask
    for it again: the brokers (id, host, port) and every partition of the topics with its
    leader (-1: none)."""

    brokers: tuple[tuple[int, str, int], ...]
    partitions: Mapping[TopicPartition, int]


@dataclass(frozen=True)
class PartitionSizes:
    """Bytes on disk per partition (the leader's replica when known, else the largest)."""

    sizes: dict[TopicPartition, int]
    #: why sizes are missing (None when they were read)
    unavailable: str | None = None
    #: broker -> (total, usable) bytes of its log directories' volumes, where reported
    disks: dict[int, tuple[int, int]] = field(default_factory=dict)


def read_partition_sizes(
    conn: ConnectionConfig,
    topics: Iterable[str],
    leaders: Mapping[TopicPartition, int] | None = None,
    timeout: float = 5.0,
    known: KnownCluster | None = None,
) -> PartitionSizes:
    """Partition sizes from DescribeLogDirs (confluent-kafka lacks it).

    Bounded by ``timeout`` whatever the client does; every failure is reported
    as ``unavailable`` with the reason, never raised: sizes are extra data. ``known``:
    the brokers and partitions from the caller's own Metadata read (the protocol-level
    path then sends no Metadata request of its own).
    """
    names = sorted(set(topics))
    if not names:
        return PartitionSizes({})
    missing = capabilities.missing_for(capabilities.probe(conn, timeout), "log_dirs")
    if missing:
        return PartitionSizes({}, f"the broker does not support {missing[0]}")
    if usable(conn):
        try:
            wire_sizes, wire_leaders, disks = _read_wire(conn, names, timeout, known)
            return _sizes(wire_sizes, wire_leaders, names, leaders, disks)
        except (WireUnsupported, KafkaUnavailableError) as e:
            log.debug("DescribeLogDirs at the protocol level not available (%s); "
                      "using kafka-python", e)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

            kw = conn.to_kafka_python(int(timeout * 1000))
            client = KafkaAdminClient(**kw)
            try:
                box["result"] = client.describe_log_dirs(names)
            finally:
                client.close()
        except Exception as e:  # noqa: BLE001 - translated into "unavailable" below
            box["error"] = f"{type(e).__name__}: {e}"

    th = threading.Thread(target=work, name="opskit-log-dirs", daemon=True)
    th.start()
    th.join(timeout + 2)
    if th.is_alive():
        return PartitionSizes({}, f"DescribeLogDirs did not answer within {timeout:g}s")
    if "error" in box:
        return PartitionSizes({}, f"DescribeLogDirs failed: {box['error']}")
    per_replica: dict[TopicPartition, dict[int, int]] = {}
    volumes: dict[int, set[tuple[int, int]]] = {}
    for broker in box.get("result") or []:
        node = int(broker.get("broker", -1))
        for d in broker.get("log_dirs", []):
            if d.get("error_code", 0) != 0:
                continue
            total, free = d.get("total_bytes", -1), d.get("usable_bytes", -1)
            if isinstance(total, int) and isinstance(free, int) and total >= 0 and free >= 0:
                volumes.setdefault(node, set()).add((total, free))
            for t in d.get("topics", []):
                for p in t.get("partitions", []):
                    if p.get("is_future_key"):
                        continue  # a replica being moved between dirs: not the live one
                    tp = TopicPartition(t["name"], int(p["partition_index"]))
                    per_replica.setdefault(tp, {})[node] = int(p["partition_size"])
    return _sizes(per_replica, {}, names, leaders, _disks(volumes))


def _disks(volumes: Mapping[int, set[tuple[int, int]]]) -> dict[int, tuple[int, int]]:
    return {node: (sum(t for t, _ in vs), sum(u for _, u in vs)) for node, vs in volumes.items()}


def _read_wire(conn: ConnectionConfig, topics: list[str], timeout: float,
               known: KnownCluster | None = None
               ) -> tuple[dict[TopicPartition, dict[int, int]], dict[TopicPartition, int],
                          dict[int, tuple[int, int]]]:
    """(partition -> broker -> size, partition -> leader, broker -> disk space), asking
    every broker in one round at the protocol level (after one Metadata request for the
    brokers and partitions, unless ``known`` gives them)."""
    if known is not None:
        if not known.brokers:
            raise WireUnsupported("no broker in the metadata")
        wanted_topics = set(topics)
        client = WireClient(conn, [Node(*b) for b in known.brokers], timeout)
        leaders = {tp: leader for tp, leader in known.partitions.items()
                   if tp.topic in wanted_topics}
    else:
        client = offsets_wire.bootstrap_client(conn, timeout)
    with client:
        if known is None:
            leaders = offsets_wire.leaders(client, topics)  # teaches the client every broker
        deadline = time.monotonic() + timeout
        v = client.version(kp.API_DESCRIBE_LOG_DIRS, 1, 5, deadline)
        wanted: dict[str, list[int]] = {}
        for tp in sorted(leaders):
            wanted.setdefault(tp.topic, []).append(tp.partition)
        brokers = sorted(n for n in client.nodes if n >= 0)
        if not brokers or not wanted:
            raise WireUnsupported("no broker or partition in the metadata")
        answers = client.exchange([(b, kp.describe_log_dirs(v, wanted)) for b in brokers],
                                  deadline)
    per_replica: dict[TopicPartition, dict[int, int]] = {}
    volumes: dict[int, set[tuple[int, int]]] = {}
    for node, (err, dirs) in zip(brokers, answers, strict=True):
        if err:
            raise WireUnsupported(f"DescribeLogDirs error {err} from broker {node}")
        for d in dirs:
            if d.error_code:
                continue  # an offline log directory: its replicas are not counted
            if d.total_bytes >= 0 and d.usable_bytes >= 0:
                volumes.setdefault(node, set()).add((d.total_bytes, d.usable_bytes))
            for topic, parts in d.topics:
                for p in parts:
                    if not p.is_future:  # a replica being moved between dirs: not the live one
                        tp = TopicPartition(topic, p.partition)
                        per_replica.setdefault(tp, {})[node] = p.size
    return per_replica, leaders, _disks(volumes)


def _sizes(per_replica: Mapping[TopicPartition, Mapping[int, int]],
           metadata_leaders: Mapping[TopicPartition, int], names: list[str],
           leaders: Mapping[TopicPartition, int] | None,
           disks: dict[int, tuple[int, int]] | None = None) -> PartitionSizes:
    """Each partition's size: its leader's replica when the leader is known, else the
    largest replica."""
    wanted = set(names)
    lead = leaders if leaders is not None else metadata_leaders
    sizes: dict[TopicPartition, int] = {}
    for tp, by_node in per_replica.items():
        if tp.topic not in wanted or not by_node:
            continue
        leader = lead.get(tp, -1)
        sizes[tp] = by_node[leader] if leader in by_node else max(by_node.values())
    if not sizes:
        return PartitionSizes({}, "DescribeLogDirs returned no partition sizes", disks or {})
    return PartitionSizes(sizes, disks=disks or {})
