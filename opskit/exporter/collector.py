"""One collection cycle against a live cluster: broker answers -> CycleInputs.

Order of reads (see ``opskit.adapters.lag_source``): metadata, groups and their
committed offsets, then log offsets, so lag is never negative. Requests are
batched by the adapters; the rest of the cycle adds:

* log offsets of partitions no group covers (one more pair of batched ListOffsets);
* topic configs (retention, min.insync.replicas, throttled replicas): one
  DescribeConfigs for all topics, repeated every ``config_refresh_cycles`` cycles
  or when topics appear;
* replication throttle rates of the brokers, on the same schedule (and when
  brokers appear): one DescribeConfigs per broker, all in flight at once -- a
  broker answers only for itself, so they cannot be merged into one request;
* record timestamps for lag in seconds, through the cached
  :class:`~opskit.adapters.record_times.RecordTimeReader`: positions already read
  (same partition, same committed offset) cost nothing; at most
  ``lag_time_budget`` new positions are read per cycle, largest lag first; the
  others fall back to the log-end timeline estimate (or are absent);
* partition sizes (DescribeLogDirs) and the KRaft quorum / reassignments
  (kafka-python), each bounded by the Kafka timeout and optional: when they fail
  the cycle still succeeds without them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from opskit.adapters.capabilities import missing_for
from opskit.adapters.cluster_health import describe_quorum, kafka_python_config, list_reassignments
from opskit.adapters.kafka_admin import ClusterMeta, KafkaAdmin
from opskit.adapters.lag_sampler import RetentionConfig
from opskit.adapters.lag_source import LagReport, collect_lag
from opskit.adapters.log_dirs import read_partition_sizes
from opskit.adapters.record_times import RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.models import GroupLag, LagThresholds, PartitionOffsets, TopicPartition
from opskit.errors import NotFoundError
from opskit.exporter.assemble import ClusterExtras, CycleInputs, Position, lag_time_positions
from opskit.exporter.options import ExporterOptions, literal_name
from opskit.exporter.snapshot import BrokerSnap, PartitionSnap
from opskit.exporter.throttles import broker_rates, topic_replica_lists

log = logging.getLogger(__name__)


class KafkaSource:
    """Reads one cycle's inputs. Long-lived: clients and caches survive between cycles."""

    def __init__(self, conn: ConnectionConfig, options: ExporterOptions,
                 thresholds: Callable[[str], LagThresholds] | None = None) -> None:
        self.conn = conn.with_client_id("opskit-exporter")
        self.options = options
        self.thresholds = thresholds
        self._admin: KafkaAdmin | None = None
        self._reader: RecordTimeReader | None = None
        self._kp_client: Any = None
        #: topic -> ((retention.ms, retention.bytes), min.insync.replicas, throttled replicas)
        self._configs: dict[str, tuple[tuple[int, int], int, dict[str, str]]] = {}
        self._cycles_since_configs = 0
        self._warned_unlisted = False
        #: broker id -> {direction: bytes/s}; brokers whose configs could not be read are absent
        self._throttles: dict[int, dict[str, int]] = {}
        self._throttle_brokers: frozenset[int] = frozenset()

    # ----- clients -----
    def admin(self) -> KafkaAdmin:
        if self._admin is None:
            self._admin = KafkaAdmin(self.conn, timeout=self.options.kafka_timeout_s)
            # a group the principal may not describe (a HIP-30 monitor has Describe on the
            # registered groups only) is left out, not the whole collection (logged once)
            self._admin.skip_unauthorised_groups = True
        return self._admin

    def reader(self) -> RecordTimeReader:
        if self._reader is None:
            self._reader = RecordTimeReader(self.conn, timeout=min(self.options.kafka_timeout_s, 5.0))
        return self._reader

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        self._close_kp()

    def _close_kp(self) -> None:
        c, self._kp_client = self._kp_client, None
        if c is not None:
            try:
                c.close()
            except Exception:
                log.debug("closing kafka-python client failed", exc_info=True)

    # ----- the cycle -----
    def collect(self) -> tuple[CycleInputs, int]:
        """Inputs of one cycle and the instant (epoch ms) they describe."""
        opts = self.options
        admin = self.admin()
        md = admin.metadata()
        topics = sorted(t for t in md.topics if opts.topics.keep(t))
        report = self._lag(admin, md, topics)
        groups = report.groups
        if opts.topics.active:
            groups = [g for g in groups if g.partitions]
        offsets = self._offsets(admin, md, topics, groups)
        stale = self._cycles_since_configs + 1 >= opts.config_refresh_cycles
        retention, min_isr, topic_throttles = self._topic_configs(admin, topics)
        broker_throttles = self._broker_throttles(admin, [b.node_id for b in md.brokers], stale)
        record_ts, skipped = self._record_times(groups) if opts.lag_time else ({}, 0)
        leaders = {TopicPartition(t, p.partition): p.leader for t in topics for p in md.topics[t]}
        sizes = None
        if opts.log_dirs and topics:
            ps = read_partition_sizes(self.conn, topics, leaders,
                                      timeout=min(opts.kafka_timeout_s, 5.0))
            sizes = ps.sizes if ps.unavailable is None else None
        extras = self._extras() if opts.kafka_python else ClusterExtras()
        now_ms = int(time.time() * 1000)
        inputs = CycleInputs(
            cluster_id=md.cluster_id,
            controller_id=md.controller_id,
            brokers=tuple(BrokerSnap(b.node_id, f"{b.host}:{b.port}") for b in md.brokers),
            partitions=tuple(
                PartitionSnap(t, p.partition, p.leader, tuple(p.replicas), tuple(p.isr))
                for t in topics for p in md.topics[t]
            ),
            groups=groups,
            offsets=offsets,
            record_ts=record_ts,
            retention=retention,
            min_isr=min_isr,
            sizes=sizes,
            extras=extras,
            expected_brokers=opts.expected_brokers,
            lag_time_skipped=skipped,
            broker_throttles=broker_throttles,
            topic_throttles=topic_throttles,
        )
        return inputs, now_ms

    def _lag(self, admin: KafkaAdmin, md: ClusterMeta, topics: list[str]) -> LagReport:
        opts = self.options
        topic_arg = topics if opts.topics.active else None
        if missing_for(admin.capabilities, "list_groups"):
            return self._lag_unlisted(admin, md, topic_arg)
        if not opts.groups.active:
            return collect_lag(admin, None, topic_arg, self.thresholds, meta=md)
        for attempt in range(2):
            ids = sorted(g for g in admin.list_groups() if opts.groups.keep(g))
            if not ids:
                return LagReport(admin.conn.bootstrap, md.cluster_id, [])
            try:
                return collect_lag(admin, ids, topic_arg, self.thresholds, meta=md)
            except NotFoundError:
                if attempt:  # a group vanished between listing and describing, twice
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _lag_unlisted(self, admin: KafkaAdmin, md: ClusterMeta, topic_arg: list[str] | None
                      ) -> LagReport:
        """A broker without ListGroups (the Hanzo gateway): the groups named in
        --group-allow (patterns that are plain names), each read on its own so that one
        without commits does not hide the others; none named: no group series."""
        ids = sorted(n for n in (literal_name(p.pattern) for p in self.options.groups.allow)
                     if n is not None and self.options.groups.keep(n))
        if not ids:
            if not self._warned_unlisted:
                log.warning("the broker cannot list consumer groups (no ListGroups): name them "
                            "with --group-allow NAME to export their lag")
                self._warned_unlisted = True
            return LagReport(admin.conn.bootstrap, md.cluster_id, [])
        try:
            return collect_lag(admin, ids, topic_arg, self.thresholds, meta=md)
        except NotFoundError:
            pass
        reports: list[LagReport] = []
        for gid in ids:
            try:
                reports.append(collect_lag(admin, [gid], topic_arg, self.thresholds, meta=md))
            except NotFoundError as e:
                log.warning("%s", e)
        out = LagReport(admin.conn.bootstrap, md.cluster_id,
                        [g for r in reports for g in r.groups])
        for r in reports:
            out.group_notes.update(r.group_notes)
            out.offset_errors.update(r.offset_errors)
        return out

    def _offsets(self, admin: KafkaAdmin, md: ClusterMeta, topics: list[str],
                 groups: list[GroupLag]) -> dict[TopicPartition, PartitionOffsets]:
        out: dict[TopicPartition, PartitionOffsets] = {}
        for g in groups:
            for p in g.partitions:
                if p.log_start is not None and p.log_end is not None and p.tp not in out:
                    out[p.tp] = PartitionOffsets(p.tp, p.log_start, p.log_end)
        missing = [TopicPartition(t, p.partition) for t in topics for p in md.topics[t]
                   if TopicPartition(t, p.partition) not in out]
        if missing:
            res = admin.log_offsets(missing)
            out.update(res.offsets)
        return out

    def _topic_configs(self, admin: KafkaAdmin, topics: list[str]
                       ) -> tuple[dict[str, tuple[int, int]], dict[str, int], dict[str, dict[str, str]]]:
        self._cycles_since_configs += 1
        new = [t for t in topics if t not in self._configs]
        stale = self._cycles_since_configs >= self.options.config_refresh_cycles
        wanted = topics if stale else new
        if wanted:
            try:
                for t, cfg in admin.topic_configs(wanted).items():
                    rc = RetentionConfig.from_topic_config(cfg)
                    raw = cfg.get("min.insync.replicas", (None, True))[0]
                    mi = int(raw) if raw is not None and raw.isdigit() else 1
                    self._configs[t] = ((rc.retention_ms, rc.retention_bytes), mi,
                                        topic_replica_lists(cfg))
                if stale:
                    self._cycles_since_configs = 0
            except Exception as e:  # noqa: BLE001 - configs are extra information
                log.warning("could not read topic configs: %s", e)
        keep = set(topics)
        for gone in set(self._configs) - keep:
            del self._configs[gone]
        return ({t: c[0] for t, c in self._configs.items()},
                {t: c[1] for t, c in self._configs.items()},
                {t: c[2] for t, c in self._configs.items() if c[2]})

    def _broker_throttles(self, admin: KafkaAdmin, brokers: list[int], refresh: bool
                          ) -> dict[int, dict[str, int]]:
        """Replication throttle rates per broker, re-read with the topic configs
        or when the set of brokers changes; unreadable brokers are left out."""
        current = frozenset(brokers)
        if refresh or current != self._throttle_brokers:
            self._throttle_brokers = current
            try:
                self._throttles = {b: broker_rates(cfg)
                                   for b, cfg in describe_broker_configs(admin, brokers).items()}
            except Exception as e:  # noqa: BLE001 - throttles are extra information
                log.warning("could not read broker configs: %s", e)
                self._throttles = {}
        return {b: r for b, r in self._throttles.items() if r and b in current}

    def _record_times(self, groups: list[GroupLag]) -> tuple[dict[Position, int | None], int]:
        positions = lag_time_positions(groups)
        if not positions:
            return {}, 0
        reader = self.reader()
        out: dict[Position, int | None] = {}
        todo: list[Position] = []
        for pos in positions:
            hit = reader.cached(*pos)
            if hit is not None:
                out[pos] = hit.timestamp_ms if hit.timestamp_ms >= 0 else None
            else:
                todo.append(pos)
        budget = self.options.lag_time_budget
        batch, skipped = todo[:budget], max(0, len(todo) - budget)
        if batch:
            for pos, rt in reader.read(batch).items():
                ok = rt is not None and rt.offset >= pos[1] and rt.timestamp_ms >= 0
                out[pos] = rt.timestamp_ms if ok and rt is not None else None
        return out, skipped

    def _extras(self) -> ClusterExtras:
        t = self.options.kafka_timeout_s
        if self._kp_client is None:
            try:
                from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

                self._kp_client = KafkaAdminClient(**kafka_python_config(self.conn, t))
            except Exception as e:  # noqa: BLE001 - quorum and reassignments become unknown
                msg = f"kafka-python could not connect: {type(e).__name__}: {e}"
                return ClusterExtras(None, msg, None, msg)
        quorum, q_err = describe_quorum(self._kp_client, t)
        reassign, r_err = list_reassignments(self._kp_client, t)
        if quorum is None and reassign is None:
            self._close_kp()  # reconnect next cycle
        return ClusterExtras(quorum, q_err, reassign, r_err)


def describe_broker_configs(admin: KafkaAdmin, brokers: list[int]
                            ) -> dict[int, dict[str, tuple[str | None, bool]]]:
    """broker id -> {config: (value, is_default)}; see :meth:`KafkaAdmin.broker_configs`."""
    return admin.broker_configs(brokers)


def offsets_of(groups: list[GroupLag]) -> Mapping[TopicPartition, PartitionOffsets]:
    """Log offsets already read for the groups (used by tests and benchmarks)."""
    out: dict[TopicPartition, PartitionOffsets] = {}
    for g in groups:
        for p in g.partitions:
            if p.log_start is not None and p.log_end is not None:
                out.setdefault(p.tp, PartitionOffsets(p.tp, p.log_start, p.log_end))
    return out
