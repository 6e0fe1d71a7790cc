"""The reads of ``opskit offsets`` (and of replay's plans): a group's state and
commits, the log offsets, offsets by time checked against the records, record
timestamps: all through a reader session (:mod:`opskit.adapters.kafka.reader`), never the
admin client directly. The writes (commits, backups) are :mod:`.offsets_admin`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from opskit.adapters.kafka import group_blind
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka.reader import ClusterReader, GroupsRead, open_reader
from opskit.core.models import GroupDescription, GroupState, PartitionOffsets, TopicPartition
from opskit.core.offset_reset.plan import ResetPlan
from opskit.core.offset_reset.planner import (
    partitions_in_scope,
    plan_offset_reset,
    timestamp_lookups_needed,
    topics_to_describe,
)
from opskit.core.offset_reset.request import ResetRequest
from opskit.core.time_lookup import SeenRecord, contradiction, positions_to_read
from opskit.errors import (
    InconsistentStateError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotAuthorisedError,
    NotFoundError,
    UnsupportedError,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupOffsetsState:
    """A group's description and committed offsets, read together."""

    group: GroupDescription
    committed: dict[TopicPartition, int]
    #: why the group's state and members are unknown (a broker without DescribeGroups)
    state_note: str | None = None
    #: partitions whose commit the broker would not give, with its answer (never "no commit")
    unreadable: dict[TopicPartition, str] = field(default_factory=dict)

    @property
    def exists(self) -> bool:
        """False when the coordinator knows nothing of the group (no members, no offsets);
        on a broker that cannot describe groups, when it has no committed offset."""
        if self.state_note is not None:
            return bool(self.committed)
        return bool(self.committed) or self.group.state is not GroupState.DEAD


_COORDINATOR_LOADING = ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE",
                        "COORDINATOR_LOAD_IN_PROGRESS")


# --------------------------------------------------------------------------- reads
# Every read of a reset (and of restore and export) goes through a reader session
# (:mod:`opskit.adapters.kafka.reader`); the admin client keeps the writes.


@contextmanager
def reader_session(admin: KafkaAdmin) -> Iterator[ClusterReader]:
    """A read session on ``admin``'s connection (:func:`open_reader`), closed after use."""
    reader = open_reader(admin)
    try:
        yield reader
    finally:
        reader.close()


def read_group_state(reader: ClusterReader, group_id: str, wait: float = 20.0
                     ) -> GroupOffsetsState:
    """The group's description and committed offsets. On a broker that cannot describe
    groups (the Hanzo gateway, Heraclitus), its commits on every partition named, its
    state unknown with the reason. The description is retried while the coordinator is
    still being set up (a fresh cluster creates ``__consumer_offsets`` on first use)."""
    blind = reader.groups_blind()
    md = reader.metadata()
    if blind is None:
        try:
            got = _read_group_settled(reader, group_id, md, wait)
        except UnsupportedError:  # advertised, then closed or unanswered (Heraclitus)
            blind = reader.groups_blind()
            if blind is None:
                raise
    if blind is not None:  # e.g. the Hanzo gateway: offsets of named partitions only
        read = reader.committed_offsets([group_id], group_blind.named_partitions(md, None))
        return GroupOffsetsState(group_blind.undescribed([group_id])[group_id],
                                 _committed_of(reader, group_id, read.committed,
                                               read.unauthorised),
                                 f"{blind}: a reset cannot be checked to be safe",
                                 dict(read.unreadable.get(group_id, {})))
    if group_id not in got.descriptions:
        raise NotAuthorisedError(f"describing group {group_id}: refused to {reader.principal}")
    return GroupOffsetsState(got.descriptions[group_id],
                             _committed_of(reader, group_id, got.committed, frozenset()),
                             unreadable=dict(got.unreadable.get(group_id, {})))


def _read_group_settled(reader: ClusterReader, group_id: str, md: ClusterMeta, wait: float
                        ) -> GroupsRead:
    deadline = time.monotonic() + wait
    while True:
        try:
            return reader.read_groups([group_id], md)
        except KafkaUnavailableError as e:
            transient = any(c in str(e) for c in _COORDINATOR_LOADING)
            if not transient or time.monotonic() > deadline:
                raise
            log.debug("group coordinator not ready, retrying: %s", e)
            time.sleep(0.5)


def _committed_of(reader: ClusterReader, group_id: str,
                  committed: Mapping[str, dict[TopicPartition, int]],
                  unauthorised: frozenset[str]) -> dict[TopicPartition, int]:
    """The group's commits in a read; a group whose commits were refused is not a group
    without commits. A negative commit below -1 (which the port hands on for the lag to
    flag) is no offset: left out, as the admin's reads always left it."""
    if group_id in unauthorised or group_id not in committed:
        raise NotAuthorisedError(
            f"reading committed offsets of group {group_id}: refused to {reader.principal}")
    return {tp: off for tp, off in committed[group_id].items() if off >= 0}


def read_log_offsets_of_topics(
    reader: ClusterReader, topics: Iterable[str]
) -> tuple[dict[TopicPartition, PartitionOffsets], str | None]:
    """Log start and end of every partition of ``topics`` (missing topics are simply
    absent), and the cluster id."""
    offsets, md = _checked_log_offsets(reader, topics)
    return offsets, md.cluster_id


def _checked_log_offsets(reader: ClusterReader, topics: Iterable[str]
                         ) -> tuple[dict[TopicPartition, PartitionOffsets], ClusterMeta]:
    """Every log end cross-checked against the broker's Fetch high watermark where the
    reader can (not over SASL mechanisms opskit's own client lacks): a reset acts on it."""
    wanted = set(topics)
    md = reader.metadata()
    tps = [TopicPartition(t, p.partition) for t, parts in md.topics.items() if t in wanted
           for p in parts]
    res = reader.log_offsets(tps, md)
    if res.errors:
        tp, msg = min(res.errors.items())
        raise KafkaOperationError(
            f"cannot read log offsets of {len(res.errors)} partitions (e.g. {tp}: {msg}); "
            "is a partition offline?"
        )
    checks = (reader.settle_log_ends(res.offsets, list(res.offsets), md)
              if res.offsets and md.brokers else {})
    bad = sorted(tp for tp, v in checks.items() if v.log_end is None)
    if bad:
        raise InconsistentStateError(
            f"the broker's answers about the log end of {bad[0]} contradict each other "
            f"({checks[bad[0]].detail}): refusing to plan on them")
    return res.offsets, md


def plan_reset(reader: ClusterReader, admin: KafkaAdmin, request: ResetRequest,
               state: GroupOffsetsState, now_ms: int) -> tuple[ResetPlan, str | None]:
    """Read the log offsets (and offsets by time) the request needs and plan it.
    ``admin``: the run's record of what its brokers were seen to do wrong."""
    topics = topics_to_describe(request, state.committed)
    log_offsets, md = _checked_log_offsets(reader, topics)
    # --all-topics covers the topics of the unreadable commits too
    every = {**state.committed, **dict.fromkeys(state.unreadable, -1)}
    refuse_unreadable_commits(request.group_id, state,
                              set(topics_to_describe(request, every))
                              | {tp.topic for tp in log_offsets})
    by_time: dict[TopicPartition, int | None] = {}
    ts = timestamp_lookups_needed(request, now_ms)
    if ts is not None:
        tps = partitions_in_scope(request, state.committed, log_offsets)
        by_time = checked_offsets_for_times(reader, admin, tps, ts, log_offsets, md) if tps else {}
    plan = plan_offset_reset(request, state.group, state.committed, log_offsets, by_time, now_ms)
    return plan, md.cluster_id


def refuse_unreadable_commits(group_id: str, state: GroupOffsetsState,
                              topics: Iterable[str]) -> None:
    """A partition in the reset's topics whose commit the broker would not give (e.g.
    TOPIC_AUTHORIZATION_FAILED) is not a partition without a commit: the plan, its
    backup and its undo would be wrong. Refused: NotAuthorisedError when the broker
    refused the principal, else KafkaOperationError."""
    scope = set(topics)
    bad = sorted((tp, why) for tp, why in state.unreadable.items() if tp.topic in scope)
    if not bad:
        return
    shown = ", ".join(f"{tp.topic}-{tp.partition}: {why}" for tp, why in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    msg = (f"reading committed offsets of group {group_id}: the broker would not give "
           f"{len(bad)} partition(s) in the reset's topics ({shown}{more}); a reset needs "
           f"every current commit for its plan, backup and undo")
    if any("AUTHORIZATION" in why for _, why in bad):
        raise NotAuthorisedError(msg)
    raise KafkaOperationError(msg)


def checked_offsets_for_times(reader: ClusterReader, admin: KafkaAdmin,
                              tps: Iterable[TopicPartition], ts_ms: int,
                              log_offsets: Mapping[TopicPartition, PartitionOffsets],
                              md: ClusterMeta) -> dict[TopicPartition, int | None]:
    """Offsets for ``ts_ms``, every answer checked against the records at and before it
    (:mod:`opskit.core.time_lookup`): a broker whose answer a record disproves (the
    Hanzo gateway answers 0, Heraclitus the log end, whatever the time) is remembered
    in ``admin.quirks`` for the run and refused with InconsistentStateError (exit 3).
    Records that cannot be read in time settle nothing."""
    def where() -> str:
        return admin.capabilities.broker or admin.conn.bootstrap

    seen_before = admin.quirks.untrusted_time_lookups
    if seen_before is not None:
        raise InconsistentStateError(_untrusted_times(where(), seen_before.detail))
    answers = reader.offsets_for_times(tps, ts_ms, md)
    positions = [(tp, off) for tp, ans in answers.items() if tp in log_offsets
                 for off in positions_to_read(ans, log_offsets[tp].log_start,
                                              log_offsets[tp].log_end)]
    if not positions:
        return answers
    seen = reader.read_record_times(positions)

    def record(tp: TopicPartition, off: int) -> SeenRecord | None:
        rt = seen.get((tp, off))
        return None if rt is None else SeenRecord(rt.offset, rt.timestamp_ms)

    for tp, ans in sorted(answers.items()):
        lo = log_offsets.get(tp)
        if lo is None:
            continue
        at = lo.log_end if ans is None else ans
        why = contradiction(tp, ts_ms, ans, lo.log_start, lo.log_end, record(tp, at),
                            record(tp, at - 1))
        if why is not None:
            broker = where()
            admin.quirks.note_untrusted_time_lookups(broker, why)
            raise InconsistentStateError(_untrusted_times(broker, why))
    return answers


def read_record_timestamps(reader: ClusterReader, positions: Iterable[tuple[TopicPartition, int]]
                           ) -> dict[tuple[TopicPartition, int], int | None]:
    """Timestamp (ms) of the first record at or after each position: None where no
    record was read in time, the principal may not read, or the record has no time."""
    seen = reader.read_record_times(sorted(set(positions)))
    return {pos: (None if rt is None or rt.timestamp_type == "none" or rt.timestamp_ms < 0
                  else rt.timestamp_ms) for pos, rt in seen.items()}


def _untrusted_times(where: str, why: str) -> str:
    return (f"the broker at {where} cannot be trusted with offsets by time: {why}; refusing "
            "to plan from its lookups by time (nothing was changed)")


def ensure_group_exists(group_id: str, state: GroupOffsetsState) -> None:
    if not state.exists:
        raise NotFoundError(f"consumer group {group_id!r} does not exist (no members, no offsets)")
