"""A small protocol-level Kafka client for batched reads, with one deadline.

librdkafka's admin API answers per group and per partition, which costs
requests (about four per group) and Python-side futures (one per partition).
For the reads a lag report needs, Kafka accepts whole batches in one request:
many groups per FindCoordinator (v4), DescribeGroups and OffsetFetch (v8), all
partitions of a leader per ListOffsets and Fetch. This module sends such
requests over plain blocking sockets, one per broker, pipelined: every request
of a round is sent before any answer is read, so a round costs one network
round trip whatever the number of brokers.

Requests are encoded and answers decoded by opskit's own small codec
(:mod:`opskit.adapters.kafka.protocol.codec`), which reads the answers straight
into tuples; the transport is ours too, so every wait is bounded by the
caller's deadline.

Every security protocol: each connection is opened by
:func:`~opskit.adapters.kafka.protocol.connect.open_connection` (TLS for SSL and
SASL_SSL; a SaslHandshake + SaslAuthenticate login with PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512 for SASL_*), so a secured cluster gets the same batched reads
as a PLAINTEXT one, at the cost of the login's requests per connection. A
refused login or a TLS mistake raises
:class:`~opskit.errors.AuthenticationError` (no fallback: librdkafka would
fail the same way, only slower). A broker that lacks a needed
API version, drops the connection or sends what we cannot decode also raises
:class:`WireUnsupported`; an unreachable or silent broker raises
:class:`~opskit.errors.KafkaUnavailableError`.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Self

from opskit.adapters.kafka.capabilities import probe
from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.codec import (
    API_DESCRIBE_GROUPS,
    API_FETCH,
    API_FIND_COORDINATOR,
    API_LIST_OFFSETS,
    API_METADATA,
    API_OFFSET_FETCH,
    Request,
    WireUnsupported,
)
from opskit.adapters.kafka.protocol.connect import open_connection
from opskit.adapters.kafka.protocol.sasl import MECHANISMS
from opskit.core.connection import ConnectionConfig
from opskit.errors import KafkaUnavailableError

__all__ = ["API_DESCRIBE_GROUPS", "API_FETCH", "API_FIND_COORDINATOR", "API_LIST_OFFSETS",
           "API_METADATA", "API_OFFSET_FETCH", "Call", "Node", "WireClient", "WireUnsupported",
           "usable"]

#: answers larger than this are not a Kafka answer to our requests
_MAX_FRAME = 1 << 30


@dataclass(frozen=True)
class Node:
    node_id: int
    host: str
    port: int


#: one request of a round: (broker id, request)
Call = tuple[int, Request]


def usable(conn: ConnectionConfig) -> bool:
    """Can this client speak ``conn``'s security settings? (all four protocols, the
    SASL mechanisms PLAIN and SCRAM-SHA-256/512)"""
    proto = conn.security_protocol.upper()
    if proto in ("PLAINTEXT", "SSL"):
        return True
    return proto in ("SASL_PLAINTEXT", "SASL_SSL") and \
        (conn.sasl_mechanism or "").upper() in MECHANISMS


class _Conn:
    """One blocking socket to one broker; requests pipelined, answers read in order."""

    def __init__(self, node: Node, conn: ConnectionConfig, deadline: float) -> None:
        self.node = node
        self._next_cid = 1
        self._pending: list[tuple[int, Request]] = []
        try:
            sock = open_connection(node.host, node.port, conn, max(deadline, time.monotonic() + 0.01))
        except OSError as e:
            if isinstance(e, ConnectionError) and not isinstance(e, ConnectionRefusedError):
                raise  # dropped during the login: the caller falls back to librdkafka
            raise KafkaUnavailableError(
                f"cannot reach broker {node.node_id} at {node.host}:{node.port}: {e}") from e
        self.sock = sock
        self.client_id = conn.client_id

    def send(self, req: Request) -> None:
        cid = self._next_cid
        self._next_cid += 1
        self.sock.sendall(kp.encode_request(req, cid, self.client_id))
        self._pending.append((cid, req))

    def _read_exact(self, n: int, deadline: float) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("connection closed by the broker")
            got += k
        return buf

    def receive(self, deadline: float) -> Any:
        cid, req = self._pending.pop(0)
        (size,) = struct.unpack(">i", self._read_exact(4, deadline))
        if not 4 <= size <= _MAX_FRAME:
            raise ValueError(f"implausible answer size {size}")
        got, answer = kp.decode_response(req, self._read_exact(size, deadline))
        if got != cid:
            raise ConnectionError(f"answer out of order (correlation id {got}, expected {cid})")
        return answer

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:  # pragma: no cover
            pass


class InFlight:
    """Requests sent by :meth:`WireClient.send`, whose answers are still to be read."""

    def __init__(self, client: WireClient, route: list[tuple[int, int]]) -> None:
        self._client = client
        self._route = route

    def receive(self, deadline: float) -> list[Any]:
        """Every answer, in the order the requests were given."""
        c = self._client
        try:
            if any(key not in c._conns for key in self._route):
                # a later round failed and closed every connection, these with them
                raise WireUnsupported("the connections of these requests were closed after "
                                      "another request failed")
            conns = [c._conns[key] for key in self._route]
            return [conn.receive(deadline) for conn in conns]
        except BaseException as e:
            err = c._failed(e)
            if err is e:
                raise
            raise err from e


class WireClient:
    """Connections to the brokers of one cluster, and rounds of pipelined requests."""

    def __init__(self, conn: ConnectionConfig, nodes: Sequence[Node], timeout: float) -> None:
        if not usable(conn):
            raise WireUnsupported(f"{conn.security_protocol} needs the librdkafka path")
        if not nodes:
            raise WireUnsupported("no broker in the metadata")
        self.conn = conn
        self.nodes = {n.node_id: n for n in nodes}
        self.timeout = timeout
        self._conns: dict[tuple[int, int], _Conn] = {}
        self._versions: dict[int, tuple[int, int]] | None = None
        self.round_trips = 0

    def close(self) -> None:
        for c in self._conns.values():
            c.close()
        self._conns.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def learn(self, brokers: Iterable[tuple[int, str, int]]) -> None:
        """Add brokers (id, host, port) from metadata; known ones are kept."""
        for node_id, host, port in brokers:
            self.nodes.setdefault(node_id, Node(node_id, host, port))

    @property
    def first_node(self) -> int:
        """A broker to ask cluster-wide questions (a bootstrap server counts as -1)."""
        return min(self.nodes)

    def _conn(self, node_id: int, lane: int, deadline: float) -> _Conn:
        c = self._conns.get((node_id, lane))
        if c is None:
            node = self.nodes.get(node_id)
            if node is None:
                raise WireUnsupported(f"broker {node_id} is not in the metadata")
            c = self._conns[(node_id, lane)] = _Conn(node, self.conn, deadline)
        return c

    def exchange(self, calls: list[Call], deadline: float, lanes: int = 1) -> list[Any]:
        """Send every request, then read every answer (in the same order).

        A broker handles the requests of one connection one at a time, in order. With
        ``lanes`` > 1 the requests of this round to the same broker are spread over up
        to that many connections, so the broker works on them in parallel (its I/O
        threads): worth it for heavy requests (a Fetch or ListOffsets over thousands of
        partitions), not for small ones, since each lane is a connection of its own
        (and a TLS handshake with SSL)."""
        return self.send(calls, deadline, lanes).receive(deadline)

    def send(self, calls: list[Call], deadline: float, lanes: int = 1,
             first_lane: int = 0) -> InFlight:
        """Send every request now; read the answers later with :meth:`InFlight.receive`
        (the broker works on them meanwhile). Requests go on lanes ``first_lane`` to
        ``first_lane + lanes - 1`` of each broker: requests sent earlier and still
        unanswered on a lane are answered before these, so a caller that means to
        read another round's answers first sends this one on lanes of its own."""
        route: list[tuple[int, int]] = []
        try:
            per_node: dict[int, int] = {}
            for node_id, req in calls:
                k = per_node.get(node_id, 0)
                per_node[node_id] = k + 1
                key = (node_id, first_lane + k % max(lanes, 1))
                self._conn(*key, deadline).send(req)
                route.append(key)
                self.round_trips += 1
        except BaseException as e:
            err = self._failed(e)
            if err is e:
                raise
            raise err from e
        return InFlight(self, route)

    def _failed(self, e: BaseException) -> BaseException:
        """The error to raise for a failed round, with every connection closed (answers
        may be left unread: these connections are done)."""
        self.close()
        if isinstance(e, KafkaUnavailableError | WireUnsupported):
            return e
        if isinstance(e, TimeoutError | socket.timeout):
            return KafkaUnavailableError(
                f"cannot reach Kafka at {self.conn.bootstrap} (no answer within "
                f"timeout {self.timeout:g}s)")
        if isinstance(e, OSError | ConnectionError | ValueError | struct.error):
            # a dropped connection or an answer we cannot decode: the caller falls back
            return WireUnsupported(f"batched read failed: {e}")
        return e

    def version(self, api: int, lowest: int, highest: int, deadline: float) -> int:
        """The highest version <= ``highest`` the broker speaks, at least ``lowest``.

        From the ApiVersions answer opskit's capability probe already has (cached per
        bootstrap), so the batched path normally costs no ApiVersions request of its
        own; only when the probe got no answer does the client ask itself (and then
        fails as an unreachable or silent broker should).
        """
        if self._versions is None:
            caps = probe(self.conn, max(deadline - time.monotonic(), 0.5))
            self._versions = dict(caps.apis) if caps.known else self._ask_versions(deadline)
        lo, hi = self._versions.get(api, (0, -1))
        v = min(hi, highest)
        if v < lowest or v < lo:
            raise WireUnsupported(f"broker lacks API {api} v{lowest}+ (speaks v{lo}-v{hi})")
        return v

    def _ask_versions(self, deadline: float) -> dict[int, tuple[int, int]]:
        ((_err, apis),) = self.exchange([(self.first_node, kp.api_versions())], deadline)
        return dict(apis)
