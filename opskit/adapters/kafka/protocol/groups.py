"""Batched group reads at the protocol level: few round trips for many groups.

librdkafka's admin API sends one FindCoordinator, one DescribeGroups and one
OffsetFetch per group (about 4 requests per group). Kafka 3.0+ accepts many
groups in each of those requests:

* FindCoordinator v4 takes a list of keys (all groups, one request);
* DescribeGroups takes a list of groups (one request per coordinator);
* OffsetFetch v8 takes a list of groups (one request per coordinator).

So reading the descriptions and committed offsets of N groups takes
1 + 2 x (number of coordinators) requests, in flight together. Requests and
answers go through opskit's own codec (:mod:`opskit.adapters.kafka.protocol.codec`);
the transport is a plain blocking socket per broker with one deadline, so
nothing waits longer than the caller's timeout.

Used only where it is safe: PLAINTEXT or SSL (SASL needs a handshake this
client does not do), and a broker that advertises FindCoordinator v4 and
OffsetFetch v8. Otherwise :class:`WireUnsupported` tells the caller to use the
librdkafka path, which gives the same answers with more requests.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterable, Sequence
from typing import Self

from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.client import (
    API_DESCRIBE_GROUPS,
    API_FIND_COORDINATOR,
    API_OFFSET_FETCH,
    Call,
    Node,
    WireClient,
    WireUnsupported,
    usable,
)
from opskit.core.connection import ConnectionConfig
from opskit.core.models import GroupDescription, GroupState, Member, TopicPartition
from opskit.errors import KafkaUnavailableError

__all__ = ["GroupWire", "Node", "WireUnsupported", "decode_assignment", "usable"]

log = logging.getLogger(__name__)

#: group-level errors worth asking again for (the coordinator moved or is loading)
_RETRY = {14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR"}
_GROUP_ID_NOT_FOUND = 69
#: names of the partition-level OffsetFetch errors worth naming (others: by code)
_PARTITION_ERRORS = {3: "UNKNOWN_TOPIC_OR_PARTITION", 29: "TOPIC_AUTHORIZATION_FAILED",
                     30: "GROUP_AUTHORIZATION_FAILED", 100: "UNKNOWN_TOPIC_ID"}
#: groups per DescribeGroups / OffsetFetch request (keeps requests and answers modest)
CHUNK = 500



def decode_assignment(data: bytes | None) -> tuple[TopicPartition, ...]:
    """A consumer-protocol member assignment (version, [topic, [partition]], user data)."""
    if not data or len(data) < 6:
        return ()
    pos = 2  # int16 version: every version starts with the same partition list
    (n_topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out: list[TopicPartition] = []
    for _ in range(max(n_topics, 0)):
        (tlen,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos:pos + tlen].decode("utf-8")
        pos += tlen
        (n_parts,) = struct.unpack_from(">i", data, pos)
        pos += 4
        parts = struct.unpack_from(f">{max(n_parts, 0)}i", data, pos)
        pos += 4 * max(n_parts, 0)
        out.extend(TopicPartition(topic, p) for p in parts)
    return tuple(sorted(out))


class GroupWire:
    """Reads group descriptions and committed offsets for many groups at once."""

    def __init__(self, conn: ConnectionConfig, nodes: Sequence[Node], timeout: float,
                 client: WireClient | None = None) -> None:
        self.client = client or WireClient(conn, nodes, timeout)
        self.conn = conn
        self.timeout = timeout
        #: group -> partition -> the error OffsetFetch answered for it in the last
        #: :meth:`read_groups` (TOPIC_AUTHORIZATION_FAILED...): its commit is not known
        self.unreadable: dict[str, dict[TopicPartition, str]] = {}

    @property
    def round_trips(self) -> int:
        return self.client.round_trips

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- the reads -----
    def coordinators(self, group_ids: Iterable[str], deadline: float) -> dict[str, int]:
        todo = sorted(set(group_ids))
        out: dict[str, int] = {}
        first = self.client.first_node
        v = self.client.version(API_FIND_COORDINATOR, 4, 4, deadline)
        last_err = ""
        while todo:
            batch: list[Call] = [(first, kp.find_coordinator(v, todo[i:i + CHUNK]))
                                 for i in range(0, len(todo), CHUNK)]
            retry: list[str] = []
            for coordinators in self.client.exchange(batch, deadline):
                for c in coordinators:
                    if c.error_code == 0:
                        out[c.key] = c.node_id
                        if c.node_id not in self.client.nodes:
                            self.client.nodes[c.node_id] = Node(c.node_id, c.host, c.port)
                    elif c.error_code in _RETRY:
                        retry.append(c.key)
                        last_err = _RETRY[c.error_code]
                    else:
                        raise WireUnsupported(f"FindCoordinator error {c.error_code} for {c.key}")
            todo = retry
            if todo:
                if time.monotonic() + 0.2 > deadline:
                    raise KafkaUnavailableError(
                        f"no group coordinator at {self.conn.bootstrap} within {self.timeout:g}s "
                        f"({last_err})")
                time.sleep(0.1)
        return out

    def read_groups(
        self, group_ids: Iterable[str]
    ) -> tuple[dict[str, GroupDescription], dict[str, dict[TopicPartition, int]], list[str]]:
        """(descriptions, committed offsets, groups to read another way).

        The last list holds groups DescribeGroups cannot describe (Kafka 4's
        new-protocol consumer groups answer GROUP_ID_NOT_FOUND there).
        """
        deadline = time.monotonic() + self.timeout
        ids = sorted(set(group_ids))
        self.unreadable = {}
        descs: dict[str, GroupDescription] = {}
        committed: dict[str, dict[TopicPartition, int]] = {}
        other: list[str] = []
        todo = ids
        while todo:
            coord = self.coordinators(todo, deadline)
            by_node: dict[int, list[str]] = {}
            for gid in todo:
                by_node.setdefault(coord[gid], []).append(gid)
            v_dg = self.client.version(API_DESCRIBE_GROUPS, 0, 5, deadline)
            v_of = self.client.version(API_OFFSET_FETCH, 8, 8, deadline)
            batch: list[Call] = []
            for node_id, gids in sorted(by_node.items()):
                for i in range(0, len(gids), CHUNK):
                    chunk = gids[i:i + CHUNK]
                    batch.append((node_id, kp.describe_groups(v_dg, chunk)))
                    batch.append((node_id, kp.offset_fetch(v_of, chunk)))
            retry: set[str] = set()
            # DescribeGroups and OffsetFetch of a coordinator on two connections: in parallel
            answers = self.client.exchange(batch, deadline, lanes=2)
            for (node_id, req), resp in zip(batch, answers, strict=True):
                if req.api_key == API_DESCRIBE_GROUPS:
                    for g in resp:
                        if g.error_code in _RETRY:
                            retry.add(g.group_id)
                        elif g.error_code == _GROUP_ID_NOT_FOUND:
                            other.append(g.group_id)
                        elif g.error_code:
                            raise WireUnsupported(f"DescribeGroups error {g.error_code} for {g.group_id}")
                        else:
                            descs[g.group_id] = _description(g, node_id)
                else:
                    for g in resp:
                        if g.error_code in _RETRY:
                            retry.add(g.group_id)
                        elif g.error_code and g.error_code != _GROUP_ID_NOT_FOUND:
                            raise WireUnsupported(f"OffsetFetch error {g.error_code} for {g.group_id}")
                        else:
                            committed[g.group_id], self.unreadable[g.group_id] = _offsets(g)
            todo = sorted(retry)
            if todo:
                if time.monotonic() + 0.2 > deadline:
                    raise KafkaUnavailableError(
                        f"group coordinator not ready at {self.conn.bootstrap} within {self.timeout:g}s")
                time.sleep(0.1)
        for gid in other:
            descs.pop(gid, None)
            committed.pop(gid, None)
            self.unreadable.pop(gid, None)
        return descs, committed, sorted(set(other))


def _description(g: kp.DescribedGroup, node_id: int) -> GroupDescription:
    consumer = g.protocol_type == "consumer"
    members = tuple(
        Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host.lstrip("/"),
            assignment=decode_assignment(m.assignment) if consumer else (),
        )
        for m in g.members
    )
    return GroupDescription(
        group_id=g.group_id,
        state=GroupState.parse(g.state),
        members=members,
        protocol_type=g.protocol_type or "simple",
        coordinator=node_id,
    )


def _error_label(code: int) -> str:
    return _PARTITION_ERRORS.get(code, f"error code {code}")


def _offsets(g: kp.GroupOffsets) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    """(committed offsets, partition -> the error answered instead of its offset): a
    partition with an error is not a partition without a commit."""
    out: dict[TopicPartition, int] = {}
    errors: dict[TopicPartition, str] = {}
    for topic, parts in g.topics:
        for partition, offset, err in parts:
            if err:
                log.debug("group %s %s:%s offset error code %s", g.group_id, topic, partition, err)
                errors[TopicPartition(topic, partition)] = _error_label(err)
                continue
            if offset != -1:  # -1: no offset; other negatives are kept for the lag to flag
                out[TopicPartition(topic, partition)] = offset
    return out, errors
