"""What the admin's reads return: cluster metadata and log offsets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from opskit.core.models import PartitionOffsets, TopicPartition


@dataclass(frozen=True)
class PartitionMeta:
    partition: int
    leader: int  # -1 when there is no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class BrokerMeta:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class ClusterMeta:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerMeta, ...]
    topics: Mapping[str, tuple[PartitionMeta, ...]]
    #: topics asked for by name that the principal may not describe (no Describe ACL)
    denied_topics: tuple[str, ...] = ()

    @property
    def partition_counts(self) -> dict[str, int]:
        return {t: len(ps) for t, ps in self.topics.items()}


@dataclass
class OffsetsResult:
    offsets: dict[TopicPartition, PartitionOffsets] = field(default_factory=dict)
    errors: dict[TopicPartition, str] = field(default_factory=dict)
