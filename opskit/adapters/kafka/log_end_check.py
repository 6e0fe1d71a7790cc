"""Cross-checking the log end a broker reports, at the protocol level (see
:mod:`opskit.core.log_end` for the rules).

A lag report cross-checks only the partitions whose answers already look wrong
(:func:`suspects`): a group committed past the listed log end, log start past it,
or a Fetch at hand that saw a higher high watermark. Commands that act on the log
end (throughput, offset-reset planning) check every partition they read
(:func:`checked_log_offsets`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin, OffsetsResult
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.client import Node, WireClient, WireUnsupported, usable
from opskit.core.log_end import LogEndVerdict, judge_log_end
from opskit.core.models import Anomaly, GroupLag, PartitionOffsets, TopicPartition
from opskit.errors import KafkaUnavailableError

log = logging.getLogger(__name__)


def leaders_of(md: ClusterMeta, topics: Iterable[str]) -> dict[TopicPartition, int]:
    """Partition -> leader id (-1: none) of the given topics."""
    return {TopicPartition(t, p.partition): p.leader
            for t in topics for p in md.topics.get(t, ())}


def wire_client(admin: KafkaAdmin, md: ClusterMeta) -> WireClient | None:
    """A protocol-level client for batched reads, when the connection allows one."""
    if not usable(admin.conn) or not md.brokers:
        return None
    return WireClient(admin.conn, [Node(b.node_id, b.host, b.port) for b in md.brokers], admin.timeout)


#: anomalies that may be a broker contradicting itself rather than a real log event
_SUSPECT = (Anomaly.COMMITTED_BEYOND_LOG_END, Anomaly.LOG_START_BEYOND_LOG_END)


def suspects(lags: Iterable[GroupLag], offsets: Mapping[TopicPartition, PartitionOffsets],
              high_watermarks: Mapping[TopicPartition, int]) -> set[TopicPartition]:
    """Partitions whose log end is worth a cross-check: a group committed past it, log
    start past it, or a Fetch (sent before ListOffsets) saw a higher high watermark."""
    out = {p.tp for g in lags for p in g.partitions
           if p.anomalies and any(a in _SUSPECT for a in p.anomalies)}
    for tp, hw in high_watermarks.items():
        o = offsets.get(tp)
        if o is not None and hw > o.log_end:
            out.add(tp)
    return out


def settle_log_ends(client: WireClient, offsets: dict[TopicPartition, PartitionOffsets],
                    suspects: Iterable[TopicPartition], leaders: Mapping[TopicPartition, int]
                    ) -> dict[TopicPartition, LogEndVerdict]:
    """Cross-check the suspects' log end (:func:`offsets_wire.check_log_ends`) and settle
    it (:func:`opskit.core.log_end.judge_log_end`): ``offsets`` is updated in place with
    the log end to use; the verdicts where the answers disagreed are returned (a
    verdict with log_end None: unknown). Nothing when the check itself cannot run."""
    wanted = {tp: offsets[tp] for tp in sorted(set(suspects)) if tp in offsets}
    if not wanted:
        return {}
    try:
        evidence = offsets_wire.check_log_ends(client, wanted, leaders)
    except (WireUnsupported, KafkaUnavailableError) as e:
        log.debug("log end cross-check not available (%s)", e)
        return {}
    out: dict[TopicPartition, LogEndVerdict] = {}
    for tp, ev in evidence.items():
        v = judge_log_end(ev)
        if not v.detail:
            continue
        out[tp] = v
        if v.log_end is not None:
            offsets[tp] = offsets[tp]._replace(log_end=v.log_end)
        log.warning("log end of %s: %s", tp, v.detail)
    return out


def checked_log_offsets(admin: KafkaAdmin, tps: Iterable[TopicPartition], md: ClusterMeta
                        ) -> tuple[OffsetsResult, dict[TopicPartition, LogEndVerdict]]:
    """``admin.log_offsets(tps)`` with every partition's log end cross-checked against the
    broker's Fetch high watermark (:func:`settle_log_ends`): for commands that act on
    the log end (offset resets, throughput), not only on the suspicious ones. The
    result's offsets hold the settled log ends; a verdict with log_end None means the
    broker contradicted itself (the caller decides: refuse, or report unknown).
    Without a protocol-level connection (SASL) the answers are used unchecked."""
    res = admin.log_offsets(tps)
    if not res.offsets or not usable(admin.conn) or not md.brokers:
        return res, {}
    client = wire_client(admin, md)
    if client is None:
        return res, {}
    with client:
        checks = settle_log_ends(client, res.offsets, list(res.offsets),
                                 leaders_of(md, {tp.topic for tp in res.offsets}))
    return res, checks
