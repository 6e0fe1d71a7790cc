"""The reader port: every read a lag report and the exporter's cycle make of a cluster.

A :class:`ClusterReader` is one read session on one connection. It is opened by
:func:`opskit.adapters.kafka.reader.open_reader`, which picks the implementation once
(opskit's own protocol client where the connection allows it, else librdkafka);
callers read in order (metadata, groups and their commits, then log offsets) and
close it. Callers never ask which implementation they hold: every outcome a read
can have (a partition whose commit the broker would not give, a group the
principal may not describe) comes back in the result, never in a side channel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from opskit.core.log_end import LogEndVerdict
from opskit.core.models import GroupDescription, PartitionOffsets, TopicPartition

if TYPE_CHECKING:
    from opskit.adapters.kafka.admin.client import ClusterMeta, OffsetsResult
    from opskit.adapters.kafka.log_dirs import PartitionSizes
    from opskit.adapters.kafka.protocol.client import WireClient
    from opskit.adapters.kafka.record_times import Position, RecordTime
    from opskit.core.health import QuorumInfo, Reassignment

#: topic -> {config: (value, is_default)}
TopicConfigs = dict[str, dict[str, tuple[str | None, bool]]]


@dataclass
class GroupsRead:
    """Descriptions and committed offsets of the groups a read could describe.

    ``committed`` holds a negative commit below -1 as it is (the lag flags it);
    ``unreadable``: group -> partition -> the error the broker answered instead of the
    committed offset (the lag flags those rows committed_unreadable: never "no commit")."""

    descriptions: dict[str, GroupDescription] = field(default_factory=dict)
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    unreadable: dict[str, dict[TopicPartition, str]] = field(default_factory=dict)


@dataclass
class CommitsRead:
    """Committed offsets of groups on named partitions (OffsetFetch with a list).

    ``unreadable`` as in :class:`GroupsRead`; ``unauthorised``: the asked groups the
    principal may not read the commits of (left out of ``committed``)."""

    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    unreadable: dict[str, dict[TopicPartition, str]] = field(default_factory=dict)
    unauthorised: frozenset[str] = frozenset()


class Prefetch(Protocol):
    """Requests that need only the committed offsets (lag in time: the records at the
    committed offsets, the topics' configs). ``collect_lag`` hands them to the reader
    as soon as it has the committed offsets; they go on connections of their own and
    their answers are read after the lag is computed: the broker works on them meanwhile.
    Only a protocol-level reader sends them (the librdkafka one declines)."""

    def send(self, client: WireClient, committed: Mapping[TopicPartition, list[int]],
             leaders: Mapping[TopicPartition, int], deadline: float) -> bool:
        """Send the requests, given each partition of the report and the offsets its
        groups committed (ascending), on lanes PREFETCH_LANE and up; False when nothing
        was sent. Errors are the prefetch's own: it logs them and reads its way later."""
        ...

    def finish(self, deadline: float) -> None:
        """Read the answers (called only when :meth:`send` sent something)."""
        ...

    @property
    def high_watermarks(self) -> Mapping[TopicPartition, int]:
        """The high watermark of each partition a fetch answered (after :meth:`finish`):
        the lag report cross-checks ListOffsets with it."""
        ...


#: the first connection lane of a broker that a prefetch may use (lower lanes carry
#: the report's own rounds, whose answers are read first)
PREFETCH_LANE = 2


class ClusterReader(Protocol):
    """One read session on one connection (see the module docstring). Errors are
    opskit's (:class:`~opskit.errors.OpskitError` subclasses); a listing that failed
    raises, it never comes back empty."""

    @property
    def bootstrap(self) -> str:
        """The connection's bootstrap servers, as configured."""
        ...

    @property
    def principal(self) -> str:
        """Who the reads authenticate as (for messages)."""
        ...

    @property
    def timeout(self) -> float:
        """Seconds one read may take."""
        ...

    @property
    def round_trips(self) -> int:
        """Requests this session (and the connection's librdkafka client) made so far."""
        ...

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        """Brokers, controller, cluster id, every topic's partitions. ``protocol_first``
        False: read the way the exporter's cycle always has (librdkafka's view)."""
        ...

    def topic_denied(self, topic: str) -> bool:
        """Whether Kafka, asked for ``topic`` by name, says the principal may not describe
        it (False when that cannot be asked without risking the topic's creation)."""
        ...

    def group_ids(self, md: ClusterMeta) -> list[str]:
        """Every consumer group of the cluster (sorted)."""
        ...

    def group_ids_everywhere(self, md: ClusterMeta) -> list[str]:
        """Every consumer group, asking every broker; a broker that fails or closes the
        connection fails the listing, and a broker seen not to serve ListGroups is
        remembered as such (the exporter's cycle)."""
        ...

    def groups_blind(self) -> str | None:
        """Why group state and members cannot be read from this broker (None: they can)."""
        ...

    def read_groups(self, ids: Sequence[str], md: ClusterMeta) -> GroupsRead:
        """Descriptions and committed offsets of the groups (all of their partitions)."""
        ...

    def committed_offsets(self, ids: Sequence[str], partitions: Sequence[TopicPartition]
                          ) -> CommitsRead:
        """Committed offsets of the groups on the named partitions."""
        ...

    def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
        """Log start and end offsets; a partition that could not be read is in ``errors``."""
        ...

    def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                        suspects: Iterable[TopicPartition], md: ClusterMeta
                        ) -> dict[TopicPartition, LogEndVerdict]:
        """Cross-check the suspects' log end (updating ``offsets``); the verdicts where the
        broker's answers disagreed. Nothing when the reader cannot cross-check."""
        ...

    def send_prefetch(self, prefetch: Prefetch,
                      committed: Mapping[str, Mapping[TopicPartition, int]],
                      topics: Sequence[str] | None, md: ClusterMeta) -> bool:
        """Hand ``prefetch`` the committed offsets of every partition the report covers
        that exists (of ``topics`` when given); False when nothing was sent (then
        :meth:`Prefetch.finish` is not called)."""
        ...

    def unavailable(self, operation: str) -> list[str]:
        """The APIs ``operation`` needs that the broker lacks or was seen not to serve."""
        ...

    def topic_configs(self, topics: Iterable[str], keys: list[str] | None = None
                      ) -> TopicConfigs:
        """topic -> {config: (value, is_default)} (at least ``keys`` when given)."""
        ...

    def all_topic_configs(self, topics: Iterable[str]) -> TopicConfigs:
        """Every config of the topics (librdkafka's DescribeConfigs, as the exporter reads)."""
        ...

    def broker_configs(self, brokers: Iterable[int]) -> dict[int, dict[str, tuple[str | None, bool]]]:
        """broker id -> {config: (value, is_default)}; unreadable brokers are absent."""
        ...

    def partition_sizes(self, topics: Iterable[str],
                        leaders: Mapping[TopicPartition, int] | None = None) -> PartitionSizes:
        """Bytes of each partition's leader replica (DescribeLogDirs); what made them
        unknown in ``unavailable``, never a size of 0."""
        ...

    def read_quorum(self) -> QuorumInfo:
        """The KRaft quorum (DescribeQuorum, through kafka-python's client). Raises
        UnsupportedError when the broker or the installed client lacks the API, else
        KafkaOperationError, with the one-line reason (never an empty quorum)."""
        ...

    def read_reassignments(self) -> tuple[Reassignment, ...]:
        """Partition reassignments in progress (ListPartitionReassignments, through
        kafka-python's client); raises as :meth:`read_quorum` (never "none" on failure)."""
        ...

    def cached_record_time(self, position: Position) -> RecordTime | None:
        """The record at or after ``position`` when an earlier read found it (no I/O)."""
        ...

    def cached_record_times(self, positions: Iterable[Position]) -> dict[Position, RecordTime]:
        """:meth:`cached_record_time` of many positions at once, looked up in the given
        order (each hit counts as a use of its cache entry, in that order); positions
        not found are left out (no I/O)."""
        ...

    def read_record_times(self, positions: Iterable[Position]
                          ) -> dict[Position, RecordTime | None]:
        """The first record at or after each position (None: unknown: at the log end,
        no answer in time, a fetch error); raises when no reader could be made."""
        ...

    def close(self) -> None:
        """Close the session's connections (the connection's admin stays open)."""
        ...

    # offset resets
    def offsets_for_times(self, tps: Iterable[TopicPartition], ts_ms: int, md: ClusterMeta
                          ) -> dict[TopicPartition, int | None]:
        """The earliest offset whose record's timestamp is at or after ``ts_ms``, per
        partition (ListOffsets by timestamp; None: no such record). A lookup that failed
        raises (UnsupportedError, KafkaUnavailableError, KafkaOperationError), never None."""
        ...

    # throughput/snapshot
    def require(self, operation: str, what: str | None = None) -> None:
        """Raise UnsupportedError when the broker lacks an API ``operation`` needs (or was
        seen not to serve one it advertises), naming the broker and ``what`` it is for."""
        ...

    def describe_groups(self, ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Descriptions only (state, members with their assignments, coordinator), as
        DescribeGroups answers them; a group the principal may not describe is left out
        (in :meth:`unauthorised_groups`) when the connection's admin skips those."""
        ...

    def unauthorised_groups(self) -> frozenset[str]:
        """The groups the connection's reads left out so far because the principal may
        not describe them or read their commits (their admin skips those)."""
        ...

    def remember_record_times(self, records: Mapping[Position, RecordTime]) -> None:
        """Keep records read for the session elsewhere (the lag-in-time prefetch) with
        the record times already read: later reads (and :meth:`cached_record_time`) find them."""
        ...

    def read_record_times_with_leaders(self, positions: Iterable[Position],
                                       leaders: Mapping[TopicPartition, int],
                                       brokers: Mapping[int, tuple[str, int]]
                                       ) -> dict[Position, RecordTime | None]:
        """:meth:`read_record_times`, given each partition's leader and the brokers'
        addresses from metadata just read (saves a Metadata request of its own)."""
        ...

    def log_end_suspects(self) -> frozenset[TopicPartition]:
        """Partitions whose log end a broker contradicted itself about in an earlier
        read of this connection (kept with the record times: cross-check them again)."""
        ...

    def add_log_end_suspects(self, tps: Iterable[TopicPartition]) -> None:
        """Remember partitions for :meth:`log_end_suspects`."""
        ...

    def record_read_denied(self) -> frozenset[str]:
        """Topics a record-time read was refused on for want of a Read ACL (so far)."""
        ...
