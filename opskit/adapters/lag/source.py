"""Collect everything a lag report needs from a cluster, in the right order.

Order: metadata, then group descriptions and committed offsets, and only then
log offsets. A consumer that commits between the two reads can only make the
lag look a little larger, never negative (the bug of exporters that read the
log end first).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opskit.adapters.kafka import group_blind
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka.log_end_check import leaders_of, suspects
from opskit.adapters.kafka.reader import ClusterReader, Prefetch, open_reader
from opskit.core.lag import compute_group_lag, partitions_of_interest, worst
from opskit.core.log_end import LogEndSource, LogEndVerdict
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupLag,
    GroupState,
    LagThresholds,
    Severity,
    TopicPartition,
)
from opskit.errors import (
    NotAuthorisedError,
    NotFoundError,
    OpskitError,
    UnsupportedError,
    UsageError,
)

log = logging.getLogger(__name__)


@dataclass
class LagReport:
    bootstrap: str
    cluster_id: str | None
    groups: list[GroupLag]
    offset_errors: dict[TopicPartition, str] = field(default_factory=dict)
    round_trips: int = 0
    #: partition -> leader broker id from the metadata this report was read with
    #: (lets the record-timestamp read skip a Metadata request of its own)
    leaders: dict[TopicPartition, int] = field(default_factory=dict, repr=False)
    #: broker id -> (host, port) from the same metadata
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict, repr=False)
    #: partitions whose log end the broker's answers disagreed about: how it was settled
    log_end_checks: dict[TopicPartition, LogEndVerdict] = field(default_factory=dict)
    #: group -> why its state and members are unknown (a broker without DescribeGroups)
    group_notes: dict[str, str] = field(default_factory=dict)
    #: group -> partition -> the error the broker answered instead of its committed offset
    #: (those rows are flagged committed_unreadable: lag unknown, the group UNKNOWN)
    commit_errors: dict[str, dict[TopicPartition, str]] = field(default_factory=dict)

    @property
    def severity(self) -> Severity:
        return worst(g.severity for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        groups = [g.to_dict() for g in self.groups]
        if self.group_notes:
            for gd in groups:
                note = self.group_notes.get(gd["group"])
                gd["state_note"] = note
                if note is not None:
                    gd["members"] = None  # unknown, not zero
        out: dict[str, Any] = {
            "cluster": {"bootstrap": self.bootstrap, "cluster_id": self.cluster_id},
            "severity": self.severity.value,
            "groups": groups,
            "offset_errors": {str(tp): e for tp, e in sorted(self.offset_errors.items())},
            "log_end_checks": {str(tp): {"log_end": v.log_end, "source": v.source.value,
                                         "detail": v.detail}
                               for tp, v in sorted(self.log_end_checks.items())},
        }
        if self.commit_errors:
            out["commit_errors"] = {gid: {str(tp): e for tp, e in sorted(errs.items())}
                                    for gid, errs in sorted(self.commit_errors.items()) if errs}
        return out


def collect_lag(
    admin: KafkaAdmin | None,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None = None,
    thresholds: Callable[[str], LagThresholds] | None = None,
    meta: ClusterMeta | None = None,
    prefetch: Prefetch | None = None,
    recheck: Iterable[TopicPartition] = (),
    reader: ClusterReader | None = None,
) -> LagReport:
    """Lag of the named groups (or of all groups when ``groups`` is None).

    Every read goes through ``reader`` (else a session opened on ``admin`` and closed
    here). ``prefetch`` is handed the committed offsets as soon as they are known and
    its answers are read once the lag is computed (see :class:`Prefetch`). ``recheck``:
    partitions whose log end is cross-checked whatever the answers look like (those a
    broker contradicted itself about in an earlier round)."""
    owned = reader is None
    if reader is None:
        if admin is None:
            raise TypeError("collect_lag needs an admin or a reader")
        reader = open_reader(admin)
    try:
        return _collect(reader, groups, topics, thresholds, meta, prefetch, recheck)
    finally:
        if owned:
            reader.close()


def _collect(
    reader: ClusterReader,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None,
    thresholds: Callable[[str], LagThresholds] | None,
    meta: ClusterMeta | None,
    prefetch: Prefetch | None,
    recheck: Iterable[TopicPartition],
) -> LagReport:
    md = meta if meta is not None else reader.metadata()
    topic_list = sorted(set(topics)) if topics else None
    explicit = groups is not None
    for t in topic_list or []:
        if t not in md.topics:
            if reader.topic_denied(t):
                # Kafka leaves a topic the principal may not describe out of the
                # metadata: asked for by name, it says so (not "unknown")
                raise NotAuthorisedError(
                    f"not authorised for describing topic {t!r} "
                    f"({reader.principal} needs the Describe ACL on it; Kafka "
                    "answers the same for a topic that does not exist)")
            raise NotFoundError(f"unknown topic {t!r}")
    if groups is None:
        ids = reader.group_ids(md)
    else:
        ids = sorted(set(groups))
        if not ids:
            raise UsageError("no group given: use --group NAME (repeatable) or --all-groups")
    notes: dict[str, str] = {}
    blind = reader.groups_blind()
    if blind is None:
        try:
            read = reader.read_groups(ids, md)
        except UnsupportedError:
            # advertised, then closed or unanswered (Heraclitus): remembered by the admin
            blind = reader.groups_blind()
            if blind is None:
                raise
    if blind is None:
        descs, committed = read.descriptions, read.committed
        ids = [g for g in ids if g in descs]  # a listed group the principal may not describe
        unreadable = {gid: dict(read.unreadable.get(gid, {})) for gid in ids}
        if explicit:
            group_blind.rescue_empty(reader.committed_offsets, descs, committed, unreadable, ids,
                                     md, topic_list)
    else:  # e.g. the Hanzo gateway: offsets of named partitions, state unknown
        descs = group_blind.undescribed(ids)
        got = reader.committed_offsets(ids, group_blind.named_partitions(md, topic_list))
        committed = got.committed
        unreadable = {gid: dict(got.unreadable.get(gid, {})) for gid in ids}
        notes = dict.fromkeys(ids, blind)
    if topic_list is None:
        _read_hidden_topics(reader, ids, descs, committed, unreadable, md)
    if explicit:
        for gid in ids:
            d = descs[gid]
            if (d.state in (GroupState.DEAD, GroupState.UNKNOWN) and not d.members
                    and not committed.get(gid) and not unreadable[gid]):
                raise NotFoundError(
                    f"consumer group {gid!r} does not exist" if blind is None else
                    f"consumer group {gid!r} has no committed offset on "
                    f"{'the topics given' if topic_list else 'any topic'} ({blind}, so a "
                    "group that never committed cannot be told from none)")
    counts = md.partition_counts
    sent = prefetch is not None and reader.send_prefetch(prefetch, committed, topic_list, md)
    wanted: set[TopicPartition] = set()
    of_interest: dict[str, list[TopicPartition]] = {}
    for gid in ids:
        of_interest[gid] = partitions_of_interest(descs[gid], committed.get(gid, {}), counts,
                                                  topic_list, unreadable[gid])
        wanted.update(of_interest[gid])
    existing = {tp for tp in wanted if tp.partition < counts.get(tp.topic, 0)}
    leaders = leaders_of(md, {tp.topic for tp in existing})
    offs = reader.log_offsets(existing, md)
    th = thresholds or (lambda _g: LagThresholds())
    lags = [
        compute_group_lag(descs[gid], committed.get(gid, {}), offs.offsets, counts, th(gid),
                          topic_list, of_interest[gid], unreadable=unreadable[gid].keys())
        for gid in ids
    ]
    hws: Mapping[TopicPartition, int] = {}
    if sent:
        assert prefetch is not None
        prefetch.finish(time.monotonic() + reader.timeout)
        hws = prefetch.high_watermarks
    checks = reader.settle_log_ends(offs.offsets, suspects(lags, offs.offsets, hws) | set(recheck),
                                    md)
    if checks:
        disputed = {tp: (Anomaly.LOG_END_FROM_FETCH if v.log_end is not None
                         else Anomaly.LOG_END_LOST
                         if v.source is LogEndSource.RECORDS_PAST_END
                         else Anomaly.LOG_END_INCONSISTENT)
                    for tp, v in checks.items() if v.source is not LogEndSource.LIST_OFFSETS}
        lags = [
            compute_group_lag(descs[gid], committed.get(gid, {}), offs.offsets, counts,
                              th(gid), topic_list, of_interest[gid], disputed,
                              unreadable[gid].keys())
            for gid in ids
        ]
    if topic_list is not None and explicit:
        lags = [g for g in lags if g.partitions] or lags
    kept = {g.group_id for g in lags}
    return LagReport(reader.bootstrap, md.cluster_id, lags, offs.errors, reader.round_trips,
                     leaders, {b.node_id: (b.host, b.port) for b in md.brokers}, checks, notes,
                     {gid: errs for gid, errs in unreadable.items() if errs and gid in kept})


def _read_hidden_topics(reader: ClusterReader, ids: Iterable[str],
                        descs: Mapping[str, GroupDescription],
                        committed: dict[str, dict[TopicPartition, int]],
                        unreadable: dict[str, dict[TopicPartition, str]], md: ClusterMeta) -> None:
    """Partitions assigned to a group's members on topics the metadata does not show.

    Kafka 3.7 leaves a topic the principal may not describe out of an OffsetFetch for
    all of a group's partitions (no error) and out of the metadata, while DescribeGroups
    still names it in the members' assignments. Asked for by name, OffsetFetch answers
    TOPIC_AUTHORIZATION_FAILED per partition: those become ``unreadable`` (a topic
    deleted under a live member gives no commit instead: the row stays partition_missing).
    One OffsetFetch per such group, all in flight at once; costs nothing otherwise."""
    hidden: dict[str, set[TopicPartition]] = {}
    for gid in ids:
        d = descs.get(gid)
        if d is None:
            continue
        tps = {tp for m in d.members for tp in m.assignment
               if tp.topic not in md.topics and tp not in committed.get(gid, {})
               and tp not in unreadable[gid]}
        if tps:
            hidden[gid] = tps
    if not hidden:
        return
    wanted = sorted(set().union(*hidden.values()))
    try:
        got = reader.committed_offsets(sorted(hidden), wanted)
    except OpskitError as e:  # the commits asked for were not read: not "none"
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        for gid, tps in hidden.items():
            unreadable[gid].update(dict.fromkeys(tps, why))
        return
    for gid, tps in hidden.items():
        committed.setdefault(gid, {}).update(
            {tp: o for tp, o in got.committed.get(gid, {}).items() if tp in tps})
        unreadable[gid].update(
            {tp: e for tp, e in got.unreadable.get(gid, {}).items() if tp in tps})
        if gid in got.unauthorised:
            unreadable[gid].update(dict.fromkeys(tps - committed[gid].keys(),
                                                 "GROUP_AUTHORIZATION_FAILED"))
