"""The reader port through librdkafka (confluent-kafka's admin client).

Chosen for connections opskit's own protocol client cannot speak (SASL mechanisms
it lacks, e.g. GSSAPI or OAUTHBEARER); also the fallback the protocol-level reader
delegates to. Every read is :class:`~opskit.adapters.kafka.admin.client.KafkaAdmin`'s, but the
KRaft quorum and the reassignments (kafka-python's client) and record timestamps
(:class:`~opskit.adapters.kafka.record_times.RecordTimeReader`): see :mod:`.kept`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from opskit.adapters.kafka import group_blind
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin, OffsetsResult
from opskit.adapters.kafka.log_dirs import PartitionSizes, read_partition_sizes
from opskit.adapters.kafka.reader.kept import KafkaPythonReads, KeptClients
from opskit.adapters.kafka.reader.port import CommitsRead, GroupsRead, Prefetch, TopicConfigs
from opskit.adapters.kafka.record_times import Position, RecordTime
from opskit.core.health import QuorumInfo, Reassignment
from opskit.core.log_end import LogEndVerdict
from opskit.core.models import GroupDescription, PartitionOffsets, TopicPartition


class LibrdkafkaReader:
    """:class:`~opskit.adapters.kafka.reader.port.ClusterReader` through librdkafka."""

    def __init__(self, admin: KafkaAdmin, kept: KeptClients | None = None) -> None:
        self.admin = admin
        #: clients kept beyond the session (the caller's), else the session's own
        self._own_kept = kept is None
        self.kept = kept if kept is not None else KeptClients(admin.conn, admin.timeout)
        self._kafka_python = KafkaPythonReads(self.kept, admin.timeout)

    @property
    def bootstrap(self) -> str:
        return self.admin.conn.bootstrap

    @property
    def principal(self) -> str:
        return self.admin.conn.principal

    @property
    def timeout(self) -> float:
        return self.admin.timeout

    @property
    def round_trips(self) -> int:
        return self.admin.round_trips

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        return self.admin.metadata()

    def topic_denied(self, topic: str) -> bool:
        # librdkafka's Metadata request may create the topic (auto.create.topics.enable)
        return False

    def group_ids(self, md: ClusterMeta) -> list[str]:
        return sorted(self.admin.list_groups())

    def group_ids_everywhere(self, md: ClusterMeta) -> list[str]:
        return sorted(self.admin.list_groups())

    def groups_blind(self) -> str | None:
        return group_blind.describe_unavailable(self.admin)

    def read_groups(self, ids: Sequence[str], md: ClusterMeta) -> GroupsRead:
        return read_groups_per_group(self.admin, list(ids))

    def committed_offsets(self, ids: Sequence[str], partitions: Sequence[TopicPartition]
                          ) -> CommitsRead:
        return committed_on(self.admin, ids, partitions)

    def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
        return self.admin.log_offsets(sorted(set(tps)))

    def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                        suspects: Iterable[TopicPartition], md: ClusterMeta
                        ) -> dict[TopicPartition, LogEndVerdict]:
        return {}  # the cross-check needs Fetch at the protocol level

    def send_prefetch(self, prefetch: Prefetch,
                      committed: Mapping[str, Mapping[TopicPartition, int]],
                      topics: Sequence[str] | None, md: ClusterMeta) -> bool:
        return False  # the requests are protocol-level ones

    def unavailable(self, operation: str) -> list[str]:
        return self.admin.unavailable(operation)

    def topic_configs(self, topics: Iterable[str], keys: list[str] | None = None
                      ) -> TopicConfigs:
        wanted = sorted(set(topics))
        if not wanted:
            return {}
        self.admin.require("topic_configs", "reading topic configs")
        return self.admin.topic_configs(wanted)

    def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
        return self.admin.topic_configs(topics)

    def broker_configs(self, brokers: Iterable[int]) -> dict[int, dict[str, tuple[str | None, bool]]]:
        return self.admin.broker_configs(brokers)

    def partition_sizes(self, topics: Iterable[str],
                        leaders: Mapping[TopicPartition, int] | None = None) -> PartitionSizes:
        return read_partition_sizes(self.admin.conn, topics, leaders,
                                    timeout=min(self.admin.timeout, 5.0))

    def read_quorum(self) -> QuorumInfo:
        return self._kafka_python.quorum()

    def read_reassignments(self) -> tuple[Reassignment, ...]:
        return self._kafka_python.reassignments()

    def cached_record_time(self, position: Position) -> RecordTime | None:
        return self.kept.record_times().cached(*position)

    def cached_record_times(self, positions: Iterable[Position]) -> dict[Position, RecordTime]:
        return self.kept.record_times().cached_many(positions)

    def read_record_times(self, positions: Iterable[Position]
                          ) -> dict[Position, RecordTime | None]:
        return self.kept.record_times().read(positions)

    def close(self) -> None:
        self._kafka_python.done()
        if self._own_kept:
            self.kept.close()

    # offset resets
    def offsets_for_times(self, tps: Iterable[TopicPartition], ts_ms: int, md: ClusterMeta
                          ) -> dict[TopicPartition, int | None]:
        return self.admin.offsets_for_times(tps, ts_ms)

    # throughput/snapshot
    def require(self, operation: str, what: str | None = None) -> None:
        self.admin.require(operation, what)

    def describe_groups(self, ids: Iterable[str]) -> dict[str, GroupDescription]:
        return self.admin.describe_groups(ids)

    def unauthorised_groups(self) -> frozenset[str]:
        return frozenset(self.admin.unauthorised_groups)

    def remember_record_times(self, records: Mapping[Position, RecordTime]) -> None:
        self.kept.record_times().remember(records)

    def read_record_times_with_leaders(self, positions: Iterable[Position],
                                       leaders: Mapping[TopicPartition, int],
                                       brokers: Mapping[int, tuple[str, int]]
                                       ) -> dict[Position, RecordTime | None]:
        return self.kept.record_times().read(positions, leaders, brokers)

    def log_end_suspects(self) -> frozenset[TopicPartition]:
        return frozenset(self.kept.record_times().log_end_suspects)

    def add_log_end_suspects(self, tps: Iterable[TopicPartition]) -> None:
        self.kept.record_times().log_end_suspects.update(tps)

    def record_read_denied(self) -> frozenset[str]:
        return frozenset(self.kept.record_times().denied_topics)


def read_groups_per_group(admin: KafkaAdmin, ids: list[str]) -> GroupsRead:
    """Descriptions and committed offsets through librdkafka (several requests per
    group); a negative commit below -1 is kept in ``committed`` for the lag to flag."""
    out = GroupsRead()
    if not ids:
        return out
    out.descriptions.update(admin.describe_groups(ids))
    got = admin.committed_offsets(ids)
    out.committed.update(got)
    for gid in ids:
        if got.invalid.get(gid):
            out.committed.setdefault(gid, {}).update(got.invalid[gid])
        out.unreadable[gid] = dict(got.unreadable.get(gid, {}))
    return out


def committed_on(admin: KafkaAdmin, ids: Sequence[str], partitions: Sequence[TopicPartition]
                 ) -> CommitsRead:
    """librdkafka's OffsetFetch naming the partitions, with its per-partition outcomes."""
    got = group_blind.committed_on(admin, ids, partitions)
    return CommitsRead(got, {gid: dict(got.unreadable.get(gid, {})) for gid in ids},
                       frozenset(admin.unauthorised_groups & set(ids)))
