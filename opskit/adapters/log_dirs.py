"""Partition sizes on disk, from DescribeLogDirs.

confluent-kafka has no DescribeLogDirs call, so this uses kafka-python's
``KafkaAdminClient.describe_log_dirs``. Sizes are *extra* information (byte
rates in ``opskit throughput``, byte-based retention headroom in ``opskit
lag``): every failure -- an unadvertised API (checked first with the
ApiVersions probe of :mod:`opskit.adapters.capabilities`), an error, a broker
that does not answer within the timeout -- becomes ``PartitionSizes.unavailable``
with a one-line reason, never an exception, and nothing waits longer than
``timeout + 2`` seconds.

A partition's size is the leader replica's when the leader is known, else the
largest replica's (replicas of one partition differ only by replication lag).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from opskit.adapters import capabilities
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition

__all__ = ["PartitionSizes", "read_partition_sizes"]


@dataclass(frozen=True)
class PartitionSizes:
    """Bytes on disk per partition (the leader's replica when known, else the largest)."""

    sizes: dict[TopicPartition, int]
    #: why sizes are missing (None when they were read)
    unavailable: str | None = None


def read_partition_sizes(
    conn: ConnectionConfig,
    topics: Iterable[str],
    leaders: Mapping[TopicPartition, int] | None = None,
    timeout: float = 5.0,
) -> PartitionSizes:
    """Partition sizes from DescribeLogDirs (kafka-python: confluent-kafka lacks it).

    Bounded by ``timeout`` whatever the client does; every failure is reported
    as ``unavailable`` with the reason, never raised: sizes are extra data.
    """
    names = sorted(set(topics))
    if not names:
        return PartitionSizes({})
    missing = capabilities.missing_for(capabilities.probe(conn, timeout), "log_dirs")
    if missing:
        return PartitionSizes({}, f"the broker does not support {missing[0]}")
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
    wanted = set(names)
    for broker in box.get("result") or []:
        node = int(broker.get("broker", -1))
        for d in broker.get("log_dirs", []):
            if d.get("error_code", 0) != 0:
                continue
            for t in d.get("topics", []):
                if t.get("name") not in wanted:
                    continue
                for p in t.get("partitions", []):
                    if p.get("is_future_key"):
                        continue  # a replica being moved between dirs: not the live one
                    tp = TopicPartition(t["name"], int(p["partition_index"]))
                    per_replica.setdefault(tp, {})[node] = int(p["partition_size"])
    sizes: dict[TopicPartition, int] = {}
    for tp, by_node in per_replica.items():
        leader = (leaders or {}).get(tp)
        sizes[tp] = by_node[leader] if leader in by_node else max(by_node.values())
    if not sizes:
        return PartitionSizes({}, "DescribeLogDirs returned no partition sizes")
    return PartitionSizes(sizes)
