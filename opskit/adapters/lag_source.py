"""Collect everything a lag report needs from a cluster, in the right order.

Order: metadata, then group descriptions and committed offsets, and only then
log offsets. A consumer that commits between the two reads can only make the
lag look a little larger, never negative (the bug of exporters that read the
log end first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opskit.adapters.kafka_admin import ClusterMeta, KafkaAdmin
from opskit.core.lag import compute_group_lag, partitions_of_interest, worst
from opskit.core.models import GroupLag, GroupState, LagThresholds, Severity, TopicPartition
from opskit.errors import NotFoundError, UsageError


@dataclass
class LagReport:
    bootstrap: str
    cluster_id: str | None
    groups: list[GroupLag]
    offset_errors: dict[TopicPartition, str] = field(default_factory=dict)
    round_trips: int = 0

    @property
    def severity(self) -> Severity:
        return worst(g.severity for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": {"bootstrap": self.bootstrap, "cluster_id": self.cluster_id},
            "severity": self.severity.value,
            "groups": [g.to_dict() for g in self.groups],
            "offset_errors": {str(tp): e for tp, e in sorted(self.offset_errors.items())},
        }


def collect_lag(
    admin: KafkaAdmin,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None = None,
    thresholds: Callable[[str], LagThresholds] | None = None,
    meta: ClusterMeta | None = None,
) -> LagReport:
    """Lag of the named groups (or of all groups when ``groups`` is None)."""
    md = meta or admin.metadata()
    topic_list = sorted(set(topics)) if topics else None
    for t in topic_list or []:
        if t not in md.topics:
            raise NotFoundError(f"unknown topic {t!r}")
    explicit = groups is not None
    if groups is None:
        ids = sorted(admin.list_groups())
    else:
        ids = sorted(set(groups))
        if not ids:
            raise UsageError("no group given: use --group NAME (repeatable) or --all-groups")
    descs = admin.describe_groups(ids)
    committed = admin.committed_offsets(ids)
    if explicit:
        for gid in ids:
            d = descs[gid]
            if d.state in (GroupState.DEAD, GroupState.UNKNOWN) and not d.members and not committed.get(gid):
                raise NotFoundError(f"consumer group {gid!r} does not exist")
    counts = md.partition_counts
    wanted: set[TopicPartition] = set()
    for gid in ids:
        wanted.update(partitions_of_interest(descs[gid], committed.get(gid, {}), counts, topic_list))
    existing = {tp for tp in wanted if tp.partition < counts.get(tp.topic, 0)}
    offs = admin.log_offsets(existing)
    th = thresholds or (lambda _g: LagThresholds())
    lags = [
        compute_group_lag(descs[gid], committed.get(gid, {}), offs.offsets, counts, th(gid), topic_list)
        for gid in ids
    ]
    if topic_list is not None and explicit:
        lags = [g for g in lags if g.partitions] or lags
    return LagReport(admin.conn.bootstrap, md.cluster_id, lags, offs.errors, admin.round_trips)
