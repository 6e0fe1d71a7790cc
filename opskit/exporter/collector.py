"""Collection against a live cluster: broker answers -> CycleInputs, family by family.

Each cycle reads the *fast* families, in this order (see
``opskit.adapters.lag_source``): metadata; the consumer groups and their committed
offsets; then log offsets, so lag is never negative. The *slow* families -- topic
configs (retention, min.insync.replicas, throttled replicas), the brokers'
replication throttle rates, record timestamps for lag in seconds, partition sizes
(DescribeLogDirs), the KRaft quorum and reassignments (kafka-python) -- change
rarely or cost more, so:

* in the served exporter (:meth:`KafkaSource.start_background`) they are read by a
  thread of their own, each on its own schedule (``refresh_s``), and a cycle uses
  what they last got: a slow or silent broker answering DescribeLogDirs or
  DescribeConfigs never delays the lag. Record timestamps for new positions are
  read there too (largest lag first, ``lag_time_budget`` per pass); a cycle uses
  the ones already read and estimates the rest from the log-end timeline;
* in a single cycle run directly (``--once``, tests) everything is read inline, as
  one consistent cycle.

Every family's outcome is recorded as a :class:`~opskit.exporter.freshness.FamilyRead`
(ok or the error's kind, how old its data is, how long the read took); a family
that could not be read is never served as if it were fine. A failed metadata
read fails the whole cycle (nothing else can be read without it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opskit.adapters.cluster_health import (
    describe_quorum,
    list_reassignments,
    min_isr_value,
)
from opskit.adapters.kafka_admin import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka_python import kafka_python_config
from opskit.adapters.lag_sampler import RetentionConfig
from opskit.adapters.lag_source import LagReport, collect_lag
from opskit.adapters.reader import ClusterReader, open_reader
from opskit.adapters.record_times import RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.models import GroupLag, LagThresholds, PartitionOffsets, TopicPartition
from opskit.errors import (
    AuthenticationError,
    KafkaOperationError,
    NotFoundError,
    UnsupportedError,
)
from opskit.exporter.assemble import ClusterExtras, CycleInputs, Position, lag_time_positions
from opskit.exporter.freshness import FamilyRead, error_kind, first_line
from opskit.exporter.options import ExporterOptions, literal_name
from opskit.exporter.snapshot import BrokerSnap, PartitionSnap
from opskit.exporter.throttles import broker_rates, topic_replica_lists

log = logging.getLogger(__name__)

#: slow families read every this many intervals in the background (configs: see
#: ``ExporterOptions.config_refresh_cycles``; record times: every pass)
SLOW_EVERY = {"log_dirs": 4, "quorum": 4, "reassignments": 4, "record_times": 1}


@dataclass(frozen=True)
class _SlowInput:
    """What the latest cycle saw, for the background reads."""

    md: ClusterMeta
    topics: list[str]
    groups: list[GroupLag]


class KafkaSource:
    """Reads one cycle's inputs. Long-lived: clients and caches survive between cycles."""

    def __init__(self, conn: ConnectionConfig, options: ExporterOptions,
                 thresholds: Callable[[str], LagThresholds] | None = None,
                 open_reader: Callable[[KafkaAdmin], ClusterReader] = open_reader) -> None:
        self.conn = conn.with_client_id("opskit-exporter")
        self.options = options
        self.thresholds = thresholds
        #: every Kafka read goes through a session of the reader port on the admin
        self._open_reader = open_reader
        self._admin: KafkaAdmin | None = None
        self._reader: RecordTimeReader | None = None
        self._kp_client: Any = None
        #: topic -> ((retention.ms, retention.bytes), min.insync.replicas, throttled replicas)
        self._configs: dict[str, tuple[tuple[int, int], int | None, dict[str, str]]] = {}
        self._cycles_since_configs = 0
        self._warned_unlisted = False
        #: broker id -> {direction: bytes/s}; brokers whose configs could not be read are absent
        self._throttles: dict[int, dict[str, int]] = {}
        self._throttle_brokers: frozenset[int] = frozenset()
        self._sizes: dict[TopicPartition, int] | None = None
        self._extras = ClusterExtras()
        #: the outcome of each family's latest read
        self._families: dict[str, FamilyRead] = {}
        #: guards what the background thread writes and a cycle reads
        self._lock = threading.Lock()
        self._background = False
        self._slow_thread: threading.Thread | None = None
        self._slow_wake = threading.Event()
        self._slow_stop = threading.Event()
        self._slow_input: _SlowInput | None = None
        self._due: dict[str, float] = {}

    # ----- clients -----
    def admin(self) -> KafkaAdmin:
        with self._lock:
            return self._make_admin()

    def _make_admin(self) -> KafkaAdmin:
        if self._admin is None:
            self._admin = KafkaAdmin(self.conn, timeout=self.options.kafka_timeout_s)
            # served: an API is taken for not served only when seen so in two cycles
            self._admin.confirmations = 2 if self._background else 1
            # a group the principal may not describe (a HIP-30 monitor has Describe on the
            # registered groups only) is left out, not the whole collection (logged once)
            self._admin.skip_unauthorised_groups = True
        return self._admin

    def reader(self) -> RecordTimeReader:
        with self._lock:  # the cycle and the background reads share one reader and its cache
            if self._reader is None:
                self._reader = RecordTimeReader(self.conn,
                                                timeout=min(self.options.kafka_timeout_s, 5.0))
            return self._reader

    def close(self) -> None:
        self._slow_stop.set()
        self._slow_wake.set()
        t = self._slow_thread
        if t is not None and t is not threading.current_thread():
            t.join(self.options.kafka_timeout_s + 5)
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

    # ----- family outcomes -----
    def _refresh_s(self, name: str) -> float:
        i = self.options.interval_s
        if name in ("topic_configs", "broker_configs"):
            return i * self.options.config_refresh_cycles
        return i * SLOW_EVERY.get(name, 1)

    def _ran(self, name: str, started: float, error: BaseException | None,
             keep_data: bool = True) -> None:
        """Record one read of a family: ``keep_data`` when data of an earlier read is
        still served after a failure (configs, sizes), not for groups or offsets."""
        with self._lock:
            prev = self._families.get(name)
            attempt = (prev.attempt if prev else 0) + 1
            took = time.monotonic() - started
            if error is None:
                r = FamilyRead(True, time.time(), None, None, took, self._refresh_s(name), attempt)
            else:
                held = prev.data_at_s if prev is not None and keep_data else None
                r = FamilyRead(False, held, error_kind(error), first_line(error), took,
                               self._refresh_s(name), attempt)
                log.warning("could not read %s: %s", name.replace("_", " "), r.message)
            self._families[name] = r

    def families(self) -> dict[str, FamilyRead]:
        with self._lock:
            return dict(self._families)

    # ----- the cycle -----
    def start_background(self) -> None:
        """Read the slow families on a thread of their own from now on."""
        if self._slow_thread is not None:
            return
        self._background = True
        with self._lock:
            if self._admin is not None:
                self._admin.confirmations = 2
        self._slow_thread = threading.Thread(target=self._slow_loop, name="opskit-exporter-slow",
                                             daemon=True)
        self._slow_thread.start()

    def collect(self) -> tuple[CycleInputs, int]:
        """Inputs of one cycle and the instant (epoch ms) they describe."""
        opts = self.options
        admin = self.admin()
        admin.new_round()
        t0 = time.monotonic()
        try:
            with _session(self._open_reader(admin)) as r:
                md = r.metadata(protocol_first=False)
        except BaseException as e:
            self._ran("metadata", t0, e, keep_data=False)
            raise
        self._ran("metadata", t0, None)
        topics = sorted(t for t in md.topics if opts.topics.keep(t))
        t0 = time.monotonic()
        groups: list[GroupLag] = []
        offset_errors: dict[TopicPartition, str] = {}
        try:
            report = self._lag(admin, md, topics)
            groups = report.groups
            offset_errors = dict(report.offset_errors)
            if opts.topics.active:
                groups = [g for g in groups if g.partitions]
            self._ran("groups", t0, None)
        except AuthenticationError:
            raise
        except Exception as e:  # noqa: BLE001 - recorded as the family's error, never hidden
            self._ran("groups", t0, e, keep_data=False)
        t0 = time.monotonic()
        offsets, off_error = self._offsets(admin, md, topics, groups, offset_errors)
        self._ran("offsets", t0, off_error)
        if self._background:
            with self._lock:
                self._slow_input = _SlowInput(md, topics, groups)
            self._slow_wake.set()
            record_ts, skipped = self._cached_record_times(groups) if opts.lag_time else ({}, 0)
        else:
            self._read_slow(_SlowInput(md, topics, groups), inline=True)
            record_ts, skipped = ({}, 0)
            if opts.lag_time:
                t0 = time.monotonic()
                try:
                    record_ts, skipped = self._record_times(groups)
                    self._ran("record_times", t0, None)
                except AuthenticationError:
                    raise
                except Exception as e:  # noqa: BLE001 - lag in seconds is then estimated
                    self._ran("record_times", t0, e)
        with self._lock:
            configs = dict(self._configs)
            current = {b.node_id for b in md.brokers}
            broker_throttles = {b: r for b, r in self._throttles.items() if r and b in current}
            kept = set(topics)
            sizes = ({tp: n for tp, n in self._sizes.items() if tp.topic in kept}
                     if self._sizes is not None else None)
            extras = self._extras
            families = dict(self._families)
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
            retention={t: c[0] for t, c in configs.items() if t in kept},
            min_isr={t: c[1] for t, c in configs.items() if t in kept and c[1] is not None},
            sizes=sizes,
            extras=extras,
            expected_brokers=opts.expected_brokers,
            lag_time_skipped=skipped,
            broker_throttles=broker_throttles,
            topic_throttles={t: c[2] for t, c in configs.items() if c[2] and t in kept},
            families=families,
        )
        return inputs, now_ms

    # ----- fast families -----
    def _list_groups(self, admin: KafkaAdmin, md: ClusterMeta) -> list[str]:
        """Every group of the cluster, asking every broker; a broker that fails or closes
        the connection fails the listing (it is not "no groups")."""
        with _session(self._open_reader(admin)) as r:
            return r.group_ids_everywhere(md)

    def _lag(self, admin: KafkaAdmin, md: ClusterMeta, topics: list[str]) -> LagReport:
        opts = self.options
        topic_arg = topics if opts.topics.active else None
        with _session(self._open_reader(admin)) as r:
            unlisted = bool(r.unavailable("list_groups"))  # not advertised, or seen not served
        if unlisted:
            return self._lag_unlisted(admin, md, topic_arg)
        for attempt in range(2):
            try:
                listed = self._list_groups(admin, md)
            except UnsupportedError:
                with _session(self._open_reader(admin)) as r:
                    if not r.unavailable("list_groups"):
                        raise  # not (yet) evidence enough: this cycle failed, the next one asks
                # advertised but not served (Heraclitus closes it): remembered by the admin,
                # the groups named in --group-allow are read as on a broker without it
                return self._lag_unlisted(admin, md, topic_arg)
            ids = [g for g in listed if opts.groups.keep(g)]
            if not ids:
                return LagReport(admin.conn.bootstrap, md.cluster_id, [])
            try:
                return self._collect_lag(admin, ids, topic_arg, md)
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
            raise UnsupportedError("the broker cannot list consumer groups (no ListGroups): "
                                   "name them with --group-allow NAME to export their lag")
        try:
            return self._collect_lag(admin, ids, topic_arg, md)
        except NotFoundError:
            pass
        reports: list[LagReport] = []
        for gid in ids:
            try:
                reports.append(self._collect_lag(admin, [gid], topic_arg, md))
            except NotFoundError as e:
                log.warning("%s", e)
        out = LagReport(admin.conn.bootstrap, md.cluster_id,
                        [g for r in reports for g in r.groups])
        for r in reports:
            out.group_notes.update(r.group_notes)
            out.offset_errors.update(r.offset_errors)
        return out

    def _collect_lag(self, admin: KafkaAdmin, ids: list[str], topic_arg: list[str] | None,
                     md: ClusterMeta) -> LagReport:
        with _session(self._open_reader(admin)) as r:
            return collect_lag(admin, ids, topic_arg, self.thresholds, meta=md, reader=r)

    def _offsets(self, admin: KafkaAdmin, md: ClusterMeta, topics: list[str],
                 groups: list[GroupLag], errors: Mapping[TopicPartition, str]
                 ) -> tuple[dict[TopicPartition, PartitionOffsets], BaseException | None]:
        """Log offsets of every kept partition (those the groups' report read, plus the
        rest) and, when some partition with a leader has none, the error to record."""
        out: dict[TopicPartition, PartitionOffsets] = {}
        for g in groups:
            for p in g.partitions:
                if p.log_start is not None and p.log_end is not None and p.tp not in out:
                    out[p.tp] = PartitionOffsets(p.tp, p.log_start, p.log_end)
        led = [TopicPartition(t, p.partition) for t in topics for p in md.topics[t] if p.leader >= 0]
        missing = [tp for tp in led if tp not in out]
        failed: dict[TopicPartition, str] = {}
        error: BaseException | None = None
        if missing:
            # batched ListOffsets per leader at the protocol level (librdkafka for the rest)
            try:
                with _session(self._open_reader(admin)) as r:
                    res = r.log_offsets(missing, md)
                out.update(res.offsets)
                failed.update(res.errors)
            except AuthenticationError:
                raise
            except Exception as e:  # noqa: BLE001 - recorded as the family's error
                error = e
        if error is None:
            failed.update({tp: e for tp, e in errors.items() if tp not in out})
            lost = sorted(tp for tp in led if tp not in out)
            if lost:
                tp = lost[0]
                error = KafkaOperationError(
                    f"log offsets of {len(lost)} partition(s) with a leader could not be read "
                    f"(first: {tp}: {failed.get(tp, 'no answer')})")
        return out, error

    # ----- slow families -----
    def _slow_loop(self) -> None:
        while not self._slow_stop.is_set():
            self._slow_wake.wait()
            self._slow_wake.clear()
            if self._slow_stop.is_set():
                break
            with self._lock:
                inp = self._slow_input
            if inp is None:
                continue
            try:
                self._read_slow(inp, inline=False)
            except Exception:  # each family records its own errors
                log.warning("background read failed", exc_info=True)

    def _is_due(self, name: str, inline: bool) -> bool:
        if inline:
            return True
        now = time.monotonic()
        if now < self._due.get(name, 0.0):
            return False
        # a little early rather than a whole pass late
        self._due[name] = now + self._refresh_s(name) - self.options.interval_s / 2
        return True

    def _read_slow(self, inp: _SlowInput, inline: bool) -> None:
        """Read the slow families that are due (all of them ``inline``)."""
        opts = self.options
        admin = self.admin()
        topics = inp.topics
        t0 = time.monotonic()
        err: BaseException | None = None
        try:
            stale = self._topic_configs(admin, topics, inline)
        except AuthenticationError:
            raise
        except Exception as e:  # noqa: BLE001 - configs are served from the last read
            err, stale = e, False
        if err is not None or stale:
            self._ran("topic_configs", t0, err)
        brokers = [b.node_id for b in inp.md.brokers]
        if stale or frozenset(brokers) != self._throttle_brokers \
                or "broker_configs" not in self._families:
            t0 = time.monotonic()
            self._ran("broker_configs", t0, self._broker_throttles(admin, brokers))
        if opts.lag_time and not inline and self._is_due("record_times", inline):
            t0 = time.monotonic()
            try:
                self._record_times(inp.groups)
                self._ran("record_times", t0, None)
            except Exception as e:  # noqa: BLE001 - lag in seconds is then estimated
                self._ran("record_times", t0, e)
        if opts.log_dirs and topics and self._is_due("log_dirs", inline):
            t0 = time.monotonic()
            leaders = {TopicPartition(t, p.partition): p.leader
                       for t in topics for p in inp.md.topics[t]}
            try:
                with _session(self._open_reader(admin)) as r:
                    ps = r.partition_sizes(topics, leaders)
                if ps.unavailable is not None:
                    raise UnsupportedError(ps.unavailable)
                with self._lock:
                    self._sizes = dict(ps.sizes)
                self._ran("log_dirs", t0, None)
            except Exception as e:  # noqa: BLE001 - sizes are extra information
                with self._lock:
                    self._sizes = None  # bytes/s and size are left out, never guessed
                self._ran("log_dirs", t0, e, keep_data=False)
        if opts.kafka_python and self._is_due("quorum", inline):
            t0 = time.monotonic()
            extras = self._read_extras()
            with self._lock:
                self._extras = extras
            for name, msg in (("quorum", extras.quorum_error), ("reassignments",
                                                                 extras.reassignments_error)):
                err = None if msg is None else (
                    UnsupportedError(msg) if "does not support" in msg else KafkaOperationError(msg))
                self._ran(name, t0, err, keep_data=False)

    def _topic_configs(self, admin: KafkaAdmin, topics: list[str], inline: bool) -> bool:
        """Read configs of new topics, and of every topic when due; True when every
        topic's configs were (re-)read. Raises when the read failed."""
        self._cycles_since_configs += 1
        new = [t for t in topics if t not in self._configs]
        stale = self._cycles_since_configs >= self.options.config_refresh_cycles \
            or "topic_configs" not in self._families
        wanted = topics if stale else new
        keep = set(topics)
        if wanted:
            got: dict[str, tuple[tuple[int, int], int | None, dict[str, str]]] = {}
            with _session(self._open_reader(admin)) as r:
                got_cfgs = r.all_topic_configs(wanted)
            for t, cfg in got_cfgs.items():
                rc = RetentionConfig.from_topic_config(cfg)
                got[t] = ((rc.retention_ms, rc.retention_bytes), min_isr_value(t, cfg),
                          topic_replica_lists(cfg))
            with self._lock:
                self._configs.update(got)
            if stale:
                self._cycles_since_configs = 0
        with self._lock:
            for gone in set(self._configs) - keep:
                del self._configs[gone]
        return stale

    def _broker_throttles(self, admin: KafkaAdmin, brokers: list[int]) -> BaseException | None:
        """Replication throttle rates per broker; unreadable brokers are left out and
        make the family's read an error."""
        self._throttle_brokers = frozenset(brokers)
        try:
            with _session(self._open_reader(admin)) as r:
                got = r.broker_configs(brokers)
        except AuthenticationError:
            raise
        except Exception as e:  # noqa: BLE001 - throttles are extra information
            with self._lock:
                self._throttles = {}
            return e
        with self._lock:
            self._throttles = {b: broker_rates(cfg) for b, cfg in got.items()}
        missing = sorted(set(brokers) - set(got))
        if missing:
            return KafkaOperationError(f"configs of broker(s) {missing} could not be read")
        return None

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

    def _cached_record_times(self, groups: list[GroupLag]) -> tuple[dict[Position, int | None], int]:
        """Record timestamps already read (by the background reads); the others count as
        skipped and are estimated from the timeline this cycle."""
        positions = lag_time_positions(groups)
        if not positions:
            return {}, 0
        reader = self.reader()
        out: dict[Position, int | None] = {}
        skipped = 0
        for pos in positions:
            hit = reader.cached(*pos)
            if hit is None:
                skipped += 1
            else:
                out[pos] = hit.timestamp_ms if hit.timestamp_ms >= 0 else None
        return out, skipped

    def _read_extras(self) -> ClusterExtras:
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


@contextmanager
def _session(reader: ClusterReader) -> Iterator[ClusterReader]:
    """One read session of the reader port, closed when the read is done."""
    try:
        yield reader
    finally:
        reader.close()


def offsets_of(groups: list[GroupLag]) -> Mapping[TopicPartition, PartitionOffsets]:
    """Log offsets already read for the groups (used by tests and benchmarks)."""
    out: dict[TopicPartition, PartitionOffsets] = {}
    for g in groups:
        for p in g.partitions:
            if p.log_start is not None and p.log_end is not None:
                out.setdefault(p.tp, PartitionOffsets(p.tp, p.log_start, p.log_end))
    return out
