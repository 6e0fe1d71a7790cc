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
from typing import Any, Protocol

from opskit.adapters import capabilities as caps_mod
from opskit.adapters import cluster_wire, group_blind, offsets_wire
from opskit.adapters import kafka_protocol as kp
from opskit.adapters.group_wire import GroupWire
from opskit.adapters.kafka_admin import ClusterMeta, KafkaAdmin, OffsetsResult
from opskit.adapters.log_end_check import leaders_of, settle_log_ends, suspects, wire_client
from opskit.adapters.wire import API_METADATA, WireClient, WireUnsupported, usable
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
    KafkaUnavailableError,
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
    admin: KafkaAdmin,
    groups: Iterable[str] | None,
    topics: Iterable[str] | None = None,
    thresholds: Callable[[str], LagThresholds] | None = None,
    meta: ClusterMeta | None = None,
    prefetch: Prefetch | None = None,
    recheck: Iterable[TopicPartition] = (),
) -> LagReport:
    """Lag of the named groups (or of all groups when ``groups`` is None).

    At the protocol level, ``prefetch`` sends its requests as soon as the committed
    offsets are known and reads the answers once the lag is computed (see
    :class:`Prefetch`). ``recheck``: partitions whose log end is cross-checked whatever
    the answers look like (those a broker contradicted itself about in an earlier round)."""
    client: WireClient | None = None
    md = meta
    if md is None and usable(admin.conn):
        # metadata and the group list at the protocol level (librdkafka when that fails)
        client = _first_try_client(admin)
        try:
            md = cluster_wire.read_cluster(client)
            client.timeout = admin.timeout
        except (WireUnsupported, KafkaUnavailableError) as e:
            log.debug("metadata at the protocol level not available (%s); using librdkafka", e)
            client.close()
            client = None
    if md is None:
        md = admin.metadata()
    topic_list = sorted(set(topics)) if topics else None
    explicit = groups is not None
    try:
        for t in topic_list or []:
            if t not in md.topics:
                if _denied_by_name(admin, client, t):
                    # Kafka leaves a topic the principal may not describe out of the
                    # metadata: asked for by name, it says so (not "unknown")
                    raise NotAuthorisedError(
                        f"not authorised for describing topic {t!r} "
                        f"({admin.conn.principal} needs the Describe ACL on it; Kafka "
                        "answers the same for a topic that does not exist)")
                raise NotFoundError(f"unknown topic {t!r}")
        if groups is None:
            ids = _all_group_ids(admin, md, client)
        else:
            ids = sorted(set(groups))
            if not ids:
                raise UsageError("no group given: use --group NAME (repeatable) or --all-groups")
    except BaseException:
        if client is not None:
            client.close()
        raise
    client = client or wire_client(admin, md)
    sent = False
    notes: dict[str, str] = {}
    try:
        blind = group_blind.describe_unavailable(admin)
        if blind is None:
            try:
                descs, committed = read_groups(admin, ids, client)
            except UnsupportedError:
                # advertised, then closed or unanswered (Heraclitus): remembered by the admin
                blind = group_blind.describe_unavailable(admin)
                if blind is None:
                    raise
        if blind is None:
            ids = [g for g in ids if g in descs]  # a listed group the principal may not describe
            if explicit:
                group_blind.rescue_empty(admin, descs, committed, ids, md, topic_list)
        else:  # e.g. the Hanzo gateway: offsets of named partitions, state unknown
            descs = group_blind.undescribed(ids)
            committed = group_blind.committed_on(admin, ids,
                                                 group_blind.named_partitions(md, topic_list))
            notes = dict.fromkeys(ids, blind)
        unreadable = {gid: dict(admin.unreadable_commits.get(gid, {})) for gid in ids}
        if topic_list is None:
            _read_hidden_topics(admin, ids, descs, committed, unreadable, md)
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
        sent = prefetch is not None and client is not None and _send_prefetch(
            prefetch, client, md, committed, topic_list, admin.timeout)
        wanted: set[TopicPartition] = set()
        of_interest: dict[str, list[TopicPartition]] = {}
        for gid in ids:
            of_interest[gid] = partitions_of_interest(descs[gid], committed.get(gid, {}), counts,
                                                      topic_list, unreadable[gid])
            wanted.update(of_interest[gid])
        existing = {tp for tp in wanted if tp.partition < counts.get(tp.topic, 0)}
        leaders = leaders_of(md, {tp.topic for tp in existing})
        offs = read_log_offsets(admin, existing, client, leaders)
        th = thresholds or (lambda _g: LagThresholds())
        lags = [
            compute_group_lag(descs[gid], committed.get(gid, {}), offs.offsets, counts, th(gid),
                              topic_list, of_interest[gid], unreadable=unreadable[gid].keys())
            for gid in ids
        ]
        hws: Mapping[TopicPartition, int] = {}
        if sent:
            assert prefetch is not None
            prefetch.finish(time.monotonic() + admin.timeout)
            hws = prefetch.high_watermarks
        checks: dict[TopicPartition, LogEndVerdict] = {}
        if client is not None:
            checks = settle_log_ends(
                client, offs.offsets, suspects(lags, offs.offsets, hws) | set(recheck), leaders)
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
    finally:
        trips = client.round_trips if client is not None else 0
        if client is not None:
            client.close()
    if topic_list is not None and explicit:
        lags = [g for g in lags if g.partitions] or lags
    kept = {g.group_id for g in lags}
    return LagReport(admin.conn.bootstrap, md.cluster_id, lags, offs.errors, admin.round_trips + trips,
                     leaders, {b.node_id: (b.host, b.port) for b in md.brokers}, checks, notes,
                     {gid: errs for gid, errs in unreadable.items() if errs and gid in kept})


def _read_hidden_topics(admin: KafkaAdmin, ids: Iterable[str],
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
        got = admin.committed_offsets(sorted(hidden), wanted)
    except OpskitError as e:  # the commits asked for were not read: not "none"
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        for gid, tps in hidden.items():
            unreadable[gid].update(dict.fromkeys(tps, why))
        return
    for gid, tps in hidden.items():
        committed.setdefault(gid, {}).update(
            {tp: o for tp, o in got.get(gid, {}).items() if tp in tps})
        unreadable[gid].update(
            {tp: e for tp, e in admin.unreadable_commits.get(gid, {}).items() if tp in tps})
        if gid in admin.unauthorised_groups:
            unreadable[gid].update(dict.fromkeys(tps - committed[gid].keys(),
                                                 "GROUP_AUTHORIZATION_FAILED"))


#: Metadata's topic-level error for a topic the principal may not describe
_TOPIC_AUTHORIZATION_FAILED = 29


def _denied_by_name(admin: KafkaAdmin, client: WireClient | None, topic: str) -> bool:
    """Whether Kafka, asked for ``topic`` by name, answers TOPIC_AUTHORIZATION_FAILED.
    Asked at the protocol level only, where the request says never to create a topic
    (a broker with auto.create.topics.enable must not create one for a read); False
    when that client cannot be used or the answer is anything else."""
    if not usable(admin.conn):
        return False
    own = client is None
    c = _first_try_client(admin) if client is None else client
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


class Prefetch(Protocol):
    """Requests that need only the committed offsets (lag in time: the records at the
    committed offsets, the topics' configs). :func:`collect_lag` sends them as soon
    as it has the committed offsets, on connections of their own, and reads their
    answers after computing the lag: the broker works on them meanwhile."""

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


def _send_prefetch(prefetch: Prefetch, client: WireClient, md: ClusterMeta,
                   committed: Mapping[str, Mapping[TopicPartition, int]],
                   topic_list: list[str] | None, timeout: float) -> bool:
    """Hand ``prefetch`` the committed offsets of every partition the report covers
    that exists (as partitions_of_interest with read_log_offsets' filter)."""
    counts = md.partition_counts
    only = set(topic_list) if topic_list is not None else None
    at = offsets_wire.wanted_offsets(
        (tp, o) for cm in committed.values() for tp, o in cm.items()
        if o >= 0 and tp.partition < counts.get(tp.topic, 0) and (only is None or tp.topic in only))
    if not at:
        return False
    leaders = leaders_of(md, {tp.topic for tp in at})
    return prefetch.send(client, at, leaders, time.monotonic() + timeout)


#: how long a protocol-level read that starts from the bootstrap server may take
#: before librdkafka is asked instead
FIRST_TRY_S = 3.0


def _first_try_client(admin: KafkaAdmin) -> WireClient:
    """A protocol-level client on the first bootstrap server only, bounded by
    FIRST_TRY_S: an unreachable or slow first server leaves the read to librdkafka,
    which tries every bootstrap server."""
    return offsets_wire.bootstrap_client(admin.conn, min(admin.timeout, FIRST_TRY_S))


def _all_group_ids(admin: KafkaAdmin, md: ClusterMeta, client: WireClient | None) -> list[str]:
    if client is not None:
        try:
            return sorted(cluster_wire.list_groups(client, [b.node_id for b in md.brokers]))
        except (WireUnsupported, KafkaUnavailableError) as e:
            # metadata was just answered: librdkafka says what is wrong with ListGroups
            log.debug("ListGroups at the protocol level not available (%s); using librdkafka", e)
    return sorted(admin.list_groups())


def read_groups(
    admin: KafkaAdmin, ids: list[str], client: WireClient | None
) -> tuple[dict[str, GroupDescription], dict[str, dict[TopicPartition, int]]]:
    """Descriptions and committed offsets of the groups.

    Batched at the protocol level (one FindCoordinator, one DescribeGroups and
    one OffsetFetch per coordinator for all groups) when ``client`` is given;
    otherwise, and for the groups the batched path cannot describe, through
    librdkafka (several requests per group).
    """
    rest = ids
    descs: dict[str, GroupDescription] = {}
    committed: dict[str, dict[TopicPartition, int]] = {}
    if client is not None and ids:
        try:
            wire = GroupWire(admin.conn, (), admin.timeout, client)
            descs, committed, rest = wire.read_groups(ids)
            # the partitions answered with an error, kept where the librdkafka path keeps them
            admin.unreadable_commits.update({gid: wire.unreadable.get(gid, {}) for gid in descs})
            if descs:
                admin.served("describe_groups")
        except WireUnsupported as e:
            log.debug("batched group read not available (%s); using per-group requests", e)
            descs, committed, rest = {}, {}, ids
    if rest:
        descs.update(admin.describe_groups(rest))
        committed.update(admin.committed_offsets(rest))
        for gid in rest:  # negative commits: in the lag, to be flagged (core.lag)
            if admin.invalid_commits.get(gid):
                committed.setdefault(gid, {}).update(admin.invalid_commits[gid])
    return descs, committed


def read_log_offsets(admin: KafkaAdmin, tps: Iterable[TopicPartition], client: WireClient | None,
                     leaders: Mapping[TopicPartition, int]) -> OffsetsResult:
    """Log start and end offsets: one ListOffsets pair per leader when ``client`` is
    given, librdkafka for the rest (and for every partition without ``client``)."""
    wanted = sorted(set(tps))
    if client is None or not wanted:
        return admin.log_offsets(wanted)
    try:
        got, rest = offsets_wire.log_offsets(client, wanted, leaders)
    except WireUnsupported as e:
        log.debug("batched ListOffsets not available (%s); using librdkafka", e)
        got, rest = {}, wanted
    res = admin.log_offsets(rest) if rest else OffsetsResult()
    res.offsets.update(got)
    return res


def read_topic_configs(admin: KafkaAdmin, topics: Iterable[str], keys: list[str] | None = None
                       ) -> dict[str, dict[str, tuple[str | None, bool]]]:
    """topic -> {config: (value, is_default)}: one DescribeConfigs at the protocol level
    when the connection allows (only ``keys`` when given), else librdkafka's
    ``describe_configs`` (all configs)."""
    wanted = sorted(set(topics))
    if not wanted:
        return {}
    admin.require("topic_configs", "reading topic configs")  # (a broker seen not to answer it)
    if usable(admin.conn):
        client = _first_try_client(admin)
        try:
            return cluster_wire.topic_configs(client, wanted, keys)
        except WireUnsupported as e:
            log.debug("DescribeConfigs at the protocol level not available (%s); using librdkafka", e)
        except KafkaUnavailableError as e:
            _raise_if_api_silent(admin, client, "DescribeConfigs",
                                 f"describing configs of topic {wanted[0]}", e)
            log.debug("DescribeConfigs at the protocol level: %s; using librdkafka", e)
        finally:
            client.close()
    return admin.topic_configs(wanted)


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
