"""Consumer groups on brokers that cannot describe them, or list all of their offsets.

The Hanzo Stream gateway (docs/compat-notes.md) routes 14 Kafka APIs: no
DescribeGroups, no ListGroups, and an OffsetFetch for "all partitions of the
group" (topics null) returns nothing. It does answer an OffsetFetch that names
the partitions. So on such a broker a group's lag is still known: its committed
offsets on named partitions (the topics the user gave, else every topic in the
metadata), the log offsets by ListOffsets. Its state and members are not known;
the reports say so, with the reason.

The same named-partition read rescues a group that a broker's whole-group
OffsetFetch returns empty for, before opskit calls the group missing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from opskit.adapters.kafka import capabilities as caps_mod
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka.admin.groups import CommittedOffsets
from opskit.core.models import GroupDescription, GroupState, TopicPartition

if TYPE_CHECKING:
    from opskit.adapters.kafka.reader.port import CommitsRead

log = logging.getLogger(__name__)

#: Kafka's own bookkeeping topics: no consumer group reads them
_INTERNAL = ("__consumer_offsets", "__transaction_state")


def describe_unavailable(admin: KafkaAdmin) -> str | None:
    """Why group state and members cannot be read from this broker (None: they can)."""
    missing = caps_mod.missing_for(admin.capabilities, "describe_groups")
    where = admin.capabilities.broker or admin.conn.bootstrap
    if missing:
        return (f"group state and members unknown: the broker at {where} does not support "
                f"{' and '.join(missing)}")
    dead = admin.not_served("describe_groups")  # e.g. Heraclitus: advertised, connection closed
    if dead:
        return (f"group state and members unknown: the broker at {where} advertises but does "
                f"not serve {' and '.join(dead)}")
    return None


def named_partitions(md: ClusterMeta, topics: Iterable[str] | None) -> list[TopicPartition]:
    """The partitions to name in OffsetFetch: those of ``topics``, else of every topic in
    the metadata but Kafka's internal ones."""
    wanted = sorted(set(topics)) if topics is not None else sorted(
        t for t in md.topics if t not in _INTERNAL)
    return [TopicPartition(t, p.partition) for t in wanted for p in md.topics.get(t, ())]


def undescribed(ids: Sequence[str]) -> dict[str, GroupDescription]:
    """Descriptions of groups whose state and members cannot be read."""
    return {gid: GroupDescription(gid, GroupState.UNKNOWN, protocol_type="unknown") for gid in ids}


def committed_on(admin: KafkaAdmin, ids: Sequence[str], partitions: Sequence[TopicPartition]
                 ) -> CommittedOffsets:
    """Committed offsets of the groups on the named partitions (librdkafka's OffsetFetch
    with a partition list, which the gateway answers), with the read's outcomes."""
    if not ids:
        return CommittedOffsets()
    if not partitions:
        return CommittedOffsets({gid: {} for gid in ids})
    return admin.committed_offsets(ids, partitions)


def rescue_empty(read: Callable[[Sequence[str], Sequence[TopicPartition]], CommitsRead],
                 descs: Mapping[str, GroupDescription],
                 committed: dict[str, dict[TopicPartition, int]],
                 unreadable: dict[str, dict[TopicPartition, str]], ids: Sequence[str],
                 md: ClusterMeta, topics: Iterable[str] | None) -> None:
    """Groups with no members whose whole-group OffsetFetch came back empty: ask again
    naming the partitions with ``read`` (updates ``committed``, and ``unreadable`` with
    that read's outcome). Costs a request only for such groups, which on Apache Kafka
    are groups that do not exist."""
    empty = [gid for gid in ids if not committed.get(gid) and not descs[gid].members]
    named = named_partitions(md, topics) if empty else []
    if not named:  # no such group, or no partition to name: the whole-group read stands
        return
    got = read(empty, named)
    for gid in empty:
        unreadable[gid] = dict(got.unreadable.get(gid, {}))
    for gid, offs in got.committed.items():
        if offs:
            log.warning("group %s: the broker returned no offsets for the whole group but %d "
                        "for its partitions named one by one", gid, len(offs))
            committed[gid] = offs
