"""The reader port through opskit's own protocol client, librdkafka where it falls short.

Chosen when opskit's client can speak the connection's security settings
(:func:`opskit.adapters.kafka.protocol.client.usable`). Metadata, the group list, the groups'
descriptions and commits, log offsets and topic configs are read in batched
rounds; each read falls back to librdkafka (:class:`LibrdkafkaReader`) by the
rules below, so callers never do:

* metadata and the group list start from the first bootstrap server, bounded by
  ``FIRST_TRY_S``: an unreachable or slow first server leaves them to librdkafka,
  which tries every bootstrap server;
* groups the batched read cannot describe, partitions it cannot list offsets of,
  and DescribeConfigs it cannot send go through librdkafka; a DescribeConfigs the
  broker ignores while it answers ApiVersions is reported as unsupported at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence

from opskit.adapters.kafka import capabilities as caps_mod
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin, OffsetsResult
from opskit.adapters.kafka.log_end_check import leaders_of, settle_log_ends, wire_client
from opskit.adapters.kafka.protocol import cluster as cluster_wire
from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.client import API_METADATA, WireClient, WireUnsupported, usable
from opskit.adapters.kafka.protocol.codec import WireErrorCode
from opskit.adapters.kafka.protocol.groups import GroupWire
from opskit.adapters.kafka.reader.kept import KeptClients
from opskit.adapters.kafka.reader.librdkafka_reader import LibrdkafkaReader, read_groups_per_group
from opskit.adapters.kafka.reader.port import GroupsRead, Prefetch, TopicConfigs
from opskit.core.log_end import LogEndVerdict
from opskit.core.models import PartitionOffsets, TopicPartition
from opskit.errors import (
    KafkaOperationError,
    KafkaUnavailableError,
    OpskitError,
    UnsupportedError,
)

log = logging.getLogger(__name__)

#: how long a protocol-level read that starts from the bootstrap server may take
#: before librdkafka is asked instead
FIRST_TRY_S = 3.0

#: Metadata's topic-level error for a topic the principal may not describe
_TOPIC_AUTHORIZATION_FAILED = 29


class WireReader(LibrdkafkaReader):
    """:class:`~opskit.adapters.kafka.reader.port.ClusterReader` at the protocol level.

    The session's client: the one that answered :meth:`metadata` from the bootstrap
    server, else one made from the metadata on the first read that needs it."""

    def __init__(self, admin: KafkaAdmin, kept: KeptClients | None = None) -> None:
        super().__init__(admin, kept)
        self._first: WireClient | None = None
        self._client: WireClient | None = None
        self._bound = False

    def _session(self, md: ClusterMeta) -> WireClient | None:
        if not self._bound:
            self._client = self._first or wire_client(self.admin, md)
            self._bound = True
        return self._client

    @property
    def round_trips(self) -> int:
        c = self._client if self._bound else self._first
        return self.admin.round_trips + (c.round_trips if c is not None else 0)

    def close(self) -> None:
        for c in {id(c): c for c in (self._first, self._client) if c is not None}.values():
            c.close()
        super().close()

    def metadata(self, protocol_first: bool = True) -> ClusterMeta:
        if protocol_first and self._first is None and usable(self.admin.conn):
            client = first_try_client(self.admin)
            try:
                md = cluster_wire.read_cluster(client)
                client.timeout = self.admin.timeout
                self._first = client
                return md
            except (WireUnsupported, KafkaUnavailableError) as e:
                log.debug("metadata at the protocol level not available (%s); using librdkafka", e)
                client.close()
        return self.admin.metadata()

    def topic_denied(self, topic: str) -> bool:
        """Asked at the protocol level only, where the request says never to create a
        topic; False when that client cannot be used or the answer is anything else."""
        if not usable(self.admin.conn):
            return False
        own = self._first is None
        c = first_try_client(self.admin) if self._first is None else self._first
        try:
            deadline = time.monotonic() + c.timeout
            v = c.version(API_METADATA, 1, 8, deadline)
            (md,) = c.exchange([(c.first_node, kp.metadata(v, [topic], replicas=True))], deadline)
            return any(t.name == topic and t.error_code == _TOPIC_AUTHORIZATION_FAILED
                       for t in md.topics)
        except (WireUnsupported, OpskitError, OSError) as e:
            log.debug("metadata of %s by name not read (%s)", topic, e)
            return False
        finally:
            if own:
                c.close()

    def group_ids(self, md: ClusterMeta) -> list[str]:
        if self._first is not None:
            try:
                return sorted(cluster_wire.list_groups(self._first, [b.node_id for b in md.brokers]))
            except (WireUnsupported, KafkaUnavailableError) as e:
                # metadata was just answered: librdkafka says what is wrong with ListGroups
                log.debug("ListGroups at the protocol level not available (%s); using librdkafka",
                          e)
        return sorted(self.admin.list_groups())

    def group_ids_everywhere(self, md: ClusterMeta) -> list[str]:
        admin = self.admin
        client = wire_client(admin, md)
        wire_error: BaseException | None = None
        if client is not None:
            try:
                listed = sorted(cluster_wire.list_groups(client, [b.node_id for b in md.brokers]))
                admin.served("list_groups")
                return listed
            except (WireUnsupported, KafkaUnavailableError) as e:
                log.debug("ListGroups at the protocol level failed (%s); trying librdkafka", e)
                wire_error = e
            finally:
                client.close()
        try:
            return sorted(admin.list_groups())
        except (KafkaOperationError, KafkaUnavailableError) as e:
            if wire_error is None or not _not_served(wire_error):
                # an error code is an answer (a starting group coordinator), a timeout or
                # a broker down is no proof either: this read failed, the next one asks
                # (librdkafka's own evidence, a connection closed, is counted by the admin)
                raise
            # opskit's own client saw the connection closed or the answer garbled while
            # Metadata was answered, and librdkafka failed too: evidence against the
            # broker's ListGroups (remembered once seen in enough rounds: the admin)
            admin.observe_not_served("list_groups", (
                f"the broker answered Metadata but not ListGroups: {_first_line(wire_error)}"))
            if isinstance(e, UnsupportedError):
                raise
            raise UnsupportedError(
                f"the broker answered Metadata but not ListGroups (listing consumer groups): "
                f"{_first_line(wire_error)}; librdkafka: {_first_line(e)}") from e

    def read_groups(self, ids: Sequence[str], md: ClusterMeta) -> GroupsRead:
        """Batched (one FindCoordinator, one DescribeGroups and one OffsetFetch per
        coordinator for all groups); librdkafka for the groups that cannot be."""
        admin = self.admin
        client = self._session(md)
        rest = list(ids)
        out = GroupsRead()
        if client is not None and rest:
            try:
                wire = GroupWire(admin.conn, (), admin.timeout, client)
                descs, committed, rest = wire.read_groups(rest)
                out = GroupsRead(descs, committed,
                                 {gid: dict(wire.unreadable.get(gid, {})) for gid in descs})
                if descs:
                    admin.served("describe_groups")
            except WireUnsupported as e:
                log.debug("batched group read not available (%s); using per-group requests", e)
                out, rest = GroupsRead(), list(ids)
        if rest:
            more = read_groups_per_group(admin, rest)
            out.descriptions.update(more.descriptions)
            out.committed.update(more.committed)
            out.unreadable.update(more.unreadable)
        return out

    def log_offsets(self, tps: Iterable[TopicPartition], md: ClusterMeta) -> OffsetsResult:
        """One ListOffsets pair per leader; librdkafka for the rest."""
        wanted = sorted(set(tps))
        client = self._session(md)
        if client is None or not wanted:
            return self.admin.log_offsets(wanted)
        try:
            got, rest = offsets_wire.log_offsets(client, wanted,
                                                 leaders_of(md, {tp.topic for tp in wanted}))
        except WireUnsupported as e:
            log.debug("batched ListOffsets not available (%s); using librdkafka", e)
            got, rest = {}, wanted
        res = self.admin.log_offsets(rest) if rest else OffsetsResult()
        res.offsets.update(got)
        return res

    def settle_log_ends(self, offsets: dict[TopicPartition, PartitionOffsets],
                        suspects: Iterable[TopicPartition], md: ClusterMeta
                        ) -> dict[TopicPartition, LogEndVerdict]:
        client = self._session(md)
        if client is None:
            return {}
        return settle_log_ends(client, offsets, suspects,
                               leaders_of(md, {tp.topic for tp in offsets}))

    def send_prefetch(self, prefetch: Prefetch,
                      committed: Mapping[str, Mapping[TopicPartition, int]],
                      topics: Sequence[str] | None, md: ClusterMeta) -> bool:
        client = self._session(md)
        if client is None:
            return False
        counts = md.partition_counts
        only = set(topics) if topics is not None else None
        at = offsets_wire.wanted_offsets(
            (tp, o) for cm in committed.values() for tp, o in cm.items()
            if o >= 0 and tp.partition < counts.get(tp.topic, 0)
            and (only is None or tp.topic in only))
        if not at:
            return False
        leaders = leaders_of(md, {tp.topic for tp in at})
        return prefetch.send(client, at, leaders, time.monotonic() + self.admin.timeout)

    def topic_configs(self, topics: Iterable[str], keys: list[str] | None = None
                      ) -> TopicConfigs:
        """One DescribeConfigs (only ``keys`` when given), else librdkafka's (all configs)."""
        admin = self.admin
        wanted = sorted(set(topics))
        if not wanted:
            return {}
        admin.require("topic_configs", "reading topic configs")  # (a broker seen not to answer it)
        if usable(admin.conn):
            client = first_try_client(admin)
            try:
                return cluster_wire.topic_configs(client, wanted, keys)
            except WireUnsupported as e:
                log.debug("DescribeConfigs at the protocol level not available (%s); using "
                          "librdkafka", e)
            except KafkaUnavailableError as e:
                _raise_if_api_silent(admin, client, "DescribeConfigs",
                                     f"describing configs of topic {wanted[0]}", e)
                log.debug("DescribeConfigs at the protocol level: %s; using librdkafka", e)
            finally:
                client.close()
        return admin.topic_configs(wanted)

    # offset resets
    def offsets_for_times(self, tps: Iterable[TopicPartition], ts_ms: int, md: ClusterMeta
                          ) -> dict[TopicPartition, int | None]:
        """Through librdkafka: a reset checks each answer against the records
        (:mod:`opskit.core.time_lookup`), and its errors (a request the broker failed,
        an API it lacks) are the ones those checks and the exit codes were written for."""
        return super().offsets_for_times(tps, ts_ms, md)

    # throughput/snapshot: require, describe_groups, unauthorised_groups and the record-time
    # reads added with them are LibrdkafkaReader's (inherited; the record-time reader itself
    # fetches at the protocol level where it can)


def first_try_client(admin: KafkaAdmin) -> WireClient:
    """A protocol-level client on the first bootstrap server only, bounded by FIRST_TRY_S."""
    return offsets_wire.bootstrap_client(admin.conn, min(admin.timeout, FIRST_TRY_S))


def _not_served(wire_error: BaseException) -> bool:
    """Whether opskit's own client's failure is evidence that the broker does not serve
    the request: the connection closed on it or the answer did not parse. An error code
    is an answer; a timeout or an unreachable broker says nothing about the API."""
    return isinstance(wire_error, WireUnsupported) and not isinstance(wire_error, WireErrorCode)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _raise_if_api_silent(admin: KafkaAdmin, client: WireClient, api: str, what: str,
                         err: KafkaUnavailableError) -> None:
    """After a protocol-level request got no answer: when the same broker answers a fresh
    ApiVersions at once, it is up and ignores this API (the Hanzo gateway with
    DescribeConfigs): say so now instead of waiting for librdkafka to time out too."""
    node = client.nodes[client.first_node]
    try:
        caps_mod.api_versions(node.host, node.port, min(admin.timeout, FIRST_TRY_S), admin.conn)
    except (OSError, ValueError, OpskitError):
        return  # the broker itself is gone (or refuses us): librdkafka tries and says why
    remembered = admin.note_silent(
        api, f"{node.host}:{node.port}",
        f"no answer within {client.timeout:g}s while still answering ApiVersions")
    raise UnsupportedError(
        f"the broker at {node.host}:{node.port} answers ApiVersions but not {api}, needed for "
        f"{what} (no usable answer within {client.timeout:g}s); " + (
            "treating it as unsupported by this broker" if remembered else
            "a broker that ignores it, or one too slow to answer in time")) from err
