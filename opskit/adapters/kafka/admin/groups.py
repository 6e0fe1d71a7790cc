"""Consumer groups through the admin: the list, the descriptions, committed offsets.

One DescribeGroups for all groups, and one OffsetFetch per group, all in flight at
once (confluent-kafka accepts one group per OffsetFetch call)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Any

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.errors import UNPARSEABLE, error_name, error_text, parse_failure
from opskit.adapters.kafka.admin.session import AdminSession
from opskit.core.models import GroupDescription, GroupState, Member, TopicPartition
from opskit.errors import NotAuthorisedError

log = logging.getLogger("opskit.adapters.kafka.admin.client")

_STATE_MAP = {
    "STABLE": GroupState.STABLE,
    "EMPTY": GroupState.EMPTY,
    "DEAD": GroupState.DEAD,
    "PREPARING_REBALANCING": GroupState.PREPARING_REBALANCE,
    "COMPLETING_REBALANCING": GroupState.COMPLETING_REBALANCE,
    "ASSIGNING": GroupState.ASSIGNING,
    "RECONCILING": GroupState.RECONCILING,
}

#: librdkafka's answer for a partition asked for by name that has no committed offset
_LIBRDKAFKA_NO_OFFSET = -1001


def _merge_committed(into: dict[TopicPartition, int], gid: str, res: Any,
                     invalid: dict[TopicPartition, int], unreadable: dict[TopicPartition, str]
                     ) -> None:
    for tp in res.topic_partitions or []:
        if tp.error is not None:
            # an error is not "no commit" (TOPIC_AUTHORIZATION_FAILED on a topic named
            # without the Describe ACL): kept apart, for the lag to flag
            log.debug("group %s %s:%s offset error %s", gid, tp.topic, tp.partition, tp.error)
            unreadable[TopicPartition(tp.topic, tp.partition)] = (
                tp.error.name() if isinstance(tp.error, ck.KafkaError) else str(tp.error))
            continue
        if tp.offset >= 0:
            into[TopicPartition(tp.topic, tp.partition)] = tp.offset
        elif tp.offset not in (-1, _LIBRDKAFKA_NO_OFFSET):
            # not an offset, and neither Kafka's "none" (-1) nor librdkafka's (-1001, what it
            # answers for a partition asked for by name without a commit): kept apart, for
            # the lag to flag
            invalid[TopicPartition(tp.topic, tp.partition)] = tp.offset


class CommittedOffsets(dict[str, dict[TopicPartition, int]]):
    """One read of committed offsets: group -> partition -> committed offset (a mapping,
    as callers that want only the offsets use it), and per group of the read the
    partitions left out of it, for the lag to flag:

    * :attr:`invalid`: a negative committed offset below -1 (not an offset, not "none");
    * :attr:`unreadable`: the error OffsetFetch answered instead of the committed offset
      (TOPIC_AUTHORIZATION_FAILED...)."""

    def __init__(self, committed: Mapping[str, dict[TopicPartition, int]] | None = None) -> None:
        super().__init__(committed or {})
        self.invalid: dict[str, dict[TopicPartition, int]] = {}
        self.unreadable: dict[str, dict[TopicPartition, str]] = {}


class GroupReads(AdminSession):
    """The group reads of :class:`~opskit.adapters.kafka.admin.client.KafkaAdmin`."""

    def list_groups(self) -> dict[str, GroupState]:
        self.require("list_groups", "listing consumer groups")
        res = self._result(self._admin.list_consumer_groups(**self._kw()), "listing consumer groups",
                           "list_groups")
        if res.errors:
            # a broker that could not list its groups is not a broker without groups: the
            # list is incomplete, and "no groups" (or some) would be a false answer
            first = res.errors[0]
            exc = first if isinstance(first, BaseException) else ck.KafkaException(first)
            raise self.translate(exc, "listing consumer groups", "list_groups")
        self.served("list_groups")
        return {g.group_id: _STATE_MAP.get(g.state.name, GroupState.UNKNOWN) for g in res.valid}

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        ids = sorted(set(group_ids))
        if not ids:
            return {}
        self.require("describe_groups", "describing consumer groups")
        futs = self._admin.describe_consumer_groups(ids, **self._kw())
        out: dict[str, GroupDescription] = {}
        for gid, fut in futs.items():
            try:
                d = self._result(fut, f"describing group {gid}", "describe_groups")
            except NotAuthorisedError:
                if not self.skip_unauthorised_groups:
                    raise
                self.unauthorised_groups.add(gid)
                continue
            self.served("describe_groups")
            members = tuple(
                Member(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.host.lstrip("/"),
                    assignment=tuple(sorted(
                        TopicPartition(tp.topic, tp.partition)
                        for tp in (m.assignment.topic_partitions if m.assignment else [])
                    )),
                )
                for m in d.members
            )
            state = d.state
            st = _STATE_MAP.get(state.name if isinstance(state, ck.ConsumerGroupState) else str(state),
                                GroupState.UNKNOWN)
            out[gid] = GroupDescription(
                group_id=gid, state=st, members=members,
                protocol_type="consumer" if not d.is_simple_consumer_group else "simple",
                coordinator=d.coordinator.id if d.coordinator is not None else None,
            )
        return out

    def committed_offsets(self, group_ids: Iterable[str],
                          partitions: Iterable[TopicPartition] | None = None,
                          ) -> CommittedOffsets:
        """Committed offsets per group: on all partitions the group committed on, or
        only on ``partitions`` (an explicit list, which some Kafka-compatible brokers
        answer where they return nothing for "all partitions of the group"). The
        partitions this read found no offset for, with why, are in the result too
        (:class:`CommittedOffsets`).

        A named list that spans several topics goes in one request per group, unless
        the broker answered such a request with something librdkafka cannot parse (the
        Hanzo gateway): then, and for the rest of the run, one request per topic."""
        ids = sorted(set(group_ids))
        if ids:
            self.require("committed_offsets", "reading committed offsets")
        explicit = None if partitions is None else sorted(set(partitions))
        out = CommittedOffsets()
        if explicit is not None and not explicit:
            return out
        chunks = self._offset_fetch_chunks(explicit)
        for gid in ids:
            out.invalid[gid] = {}
            out.unreadable[gid] = {}
        # one group per request (confluent-kafka's limit); all in flight at once
        futs = [(gid, chunk, self._submit_offset_fetch(gid, chunk)) for gid in ids for chunk in chunks]
        denied: set[str] = set()
        again: list[str] = []
        for gid, chunk, fut in futs:
            what = f"reading committed offsets of group {gid}"
            self.round_trips += 1
            try:
                res = fut.result(timeout=self.timeout + 2)
            except BaseException as e:
                if chunk is not None and len({tp.topic for tp in chunk}) > 1 and (
                        error_name(e) in UNPARSEABLE or parse_failure(e)):
                    self.quirks.note_offset_fetch_per_topic(
                        self.capabilities.broker or self.conn.bootstrap,
                        f"an OffsetFetch naming {len({tp.topic for tp in chunk})} topics got an "
                        f"answer librdkafka cannot parse ({error_text(e)})")
                    again.append(gid)
                    continue
                err = self.translate(e, what, "committed_offsets")
                if not (isinstance(err, NotAuthorisedError) and self.skip_unauthorised_groups):
                    raise err from e
                denied.add(gid)
                continue
            _merge_committed(out.setdefault(gid, {}), gid, res,
                             out.invalid.setdefault(gid, {}), out.unreadable.setdefault(gid, {}))
        if again:  # the same groups, one topic per request this time
            more = self.committed_offsets(again, explicit)
            for gid, offs in more.items():
                out.setdefault(gid, {}).update(offs)
            out.invalid.update(more.invalid)
            out.unreadable.update(more.unreadable)
            denied |= self.unauthorised_groups & set(again)
        for gid in denied:
            self.unauthorised_groups.add(gid)
            out.pop(gid, None)
        return out

    def _offset_fetch_chunks(self, explicit: list[TopicPartition] | None
                             ) -> list[list[TopicPartition] | None]:
        """The partition lists of a group's OffsetFetch requests: all in one, or one
        list per topic on a broker that cannot answer several topics at once."""
        if explicit is None or self.quirks.offset_fetch_per_topic is None:
            return [explicit]
        by_topic: dict[str, list[TopicPartition]] = {}
        for tp in explicit:
            by_topic.setdefault(tp.topic, []).append(tp)
        return [by_topic[t] for t in sorted(by_topic)]

    def _submit_offset_fetch(self, gid: str, chunk: list[TopicPartition] | None) -> Future[Any]:
        tps = None if chunk is None else [ck.TopicPartition(tp.topic, tp.partition) for tp in chunk]
        futs = self._admin.list_consumer_group_offsets(
            [ck.ConsumerGroupTopicPartitions(gid, tps)], **self._kw())
        return next(iter(futs.values()))
