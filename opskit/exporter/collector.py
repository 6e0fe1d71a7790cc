"""Collection against a live cluster: broker answers -> CycleInputs, family by family.

Each cycle reads the *fast* families, in this order (see
``opskit.adapters.lag.source``): metadata; the consumer groups and their committed
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
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TypeVar

from opskit.adapters.health.cluster import min_isr_value
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka.kafka_python import KAFKA_PYTHON_GRACE_S
from opskit.adapters.kafka.reader import ClusterReader, KeptClients, open_reader
from opskit.adapters.lag.sampler import RetentionConfig
from opskit.core.connection import ConnectionConfig
from opskit.core.models import GroupLag, LagThresholds, PartitionOffsets, TopicPartition
from opskit.errors import AuthenticationError, KafkaOperationError, UnsupportedError
from opskit.exporter.assemble import (
    ClusterExtras,
    CycleInputs,
    Position,
    most_lagging_first,
    read_positions,
)
from opskit.exporter.freshness import FamilyRead, error_kind, first_line
from opskit.exporter.group_reads import GroupReads
from opskit.exporter.options import ExporterOptions
from opskit.exporter.snapshot import BrokerSnap, PartitionSnap
from opskit.exporter.throttles import broker_rates, topic_replica_lists

log = logging.getLogger(__name__)

T = TypeVar("T")

#: slow families read every this many intervals in the background (configs: see
#: ``ExporterOptions.config_refresh_cycles``; record times: every pass)
SLOW_EVERY = {"log_dirs": 4, "quorum": 4, "reassignments": 4, "record_times": 1}


@dataclass(frozen=True)
class _SlowInput:
    """What the latest cycle saw, for the background reads."""

    md: ClusterMeta
    topics: list[str]
    #: the cycle's groups, for a pass that looks up their record times itself (only
    #: with ``missing`` None)
    groups: list[GroupLag]
    #: read positions whose record time the cycle did not find in the cache, with
    #: their largest lag (None: not looked up, e.g. a single cycle run directly)
    missing: dict[Position, int] | None = None


class KafkaSource:
    """Reads one cycle's inputs. Long-lived: clients and caches survive between cycles."""

    def __init__(self, conn: ConnectionConfig, options: ExporterOptions,
                 thresholds: Callable[[str], LagThresholds] | None = None,
                 open_reader: Callable[[KafkaAdmin, KeptClients], ClusterReader] = open_reader
                 ) -> None:
        self.conn = conn.with_client_id("opskit-exporter")
        self.options = options
        self.thresholds = thresholds
        #: every Kafka read goes through a session of the reader port on the admin: one
        #: per cycle, one per slow-family round (its own thread), never shared by threads
        self._open_reader = open_reader
        self._admin: KafkaAdmin | None = None
        #: kafka-python's client and the record-time reader (its cache), kept by the
        #: sessions from one cycle to the next; kafka-python's connect waits at most the
        #: timeout + 2 s (then quorum and reassignments are not read that round)
        self._kept = KeptClients(self.conn, options.kafka_timeout_s,
                                 connect_s=options.kafka_timeout_s + KAFKA_PYTHON_GRACE_S)
        self._groups = GroupReads(options, thresholds)
        #: topic -> ((retention.ms, retention.bytes), min.insync.replicas, throttled replicas)
        self._configs: dict[str, tuple[tuple[int, int], int | None, dict[str, str]]] = {}
        self._cycles_since_configs = 0
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

    def _open(self) -> ClusterReader:
        return self._open_reader(self.admin(), self._kept)

    def close(self) -> None:
        self._slow_stop.set()
        self._slow_wake.set()
        t = self._slow_thread
        if t is not None and t is not threading.current_thread():
            t.join(self.options.kafka_timeout_s + 5)
        self._kept.close()
        if self._admin is not None:
            self._admin.close()
            self._admin = None

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
        """Inputs of one cycle and the instant (epoch ms) they describe. The cycle's reads
        share one session of the reader port, a fresh one each cycle (a connection that
        broke does not outlive its cycle)."""
        self.admin().new_round()
        t0 = time.monotonic()
        with ExitStack() as stack:
            try:
                r = stack.enter_context(_session(self._open()))
                md = r.metadata(protocol_first=False)
            except BaseException as e:
                self._ran("metadata", t0, e, keep_data=False)
                raise
            self._ran("metadata", t0, None)
            return self._cycle(r, md)

    def _cycle(self, r: ClusterReader, md: ClusterMeta) -> tuple[CycleInputs, int]:
        opts = self.options
        topics = sorted(t for t in md.topics if opts.topics.keep(t))
        t0 = time.monotonic()
        groups: list[GroupLag] = []
        offset_errors: dict[TopicPartition, str] = {}
        try:
            report = self._groups.lag(r, md, topics)
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
        offsets, off_error = self._groups.offsets(r, md, topics, groups, offset_errors)
        self._ran("offsets", t0, off_error)
        if self._background:
            record_ts: dict[Position, int | None] = {}
            missing: dict[Position, int] = {}
            skipped = 0
            if opts.lag_time:
                record_ts, missing = self._cached_record_times(r, groups)
                skipped = len(missing)
            with self._lock:
                # the groups only serve a pass without ``missing``: not kept for it (they
                # would live on beside the next cycle's, ~10 MB at 50,000 group partitions)
                self._slow_input = _SlowInput(md, topics, [], missing)
            self._slow_wake.set()
        else:
            self._read_slow(r, _SlowInput(md, topics, groups), inline=True)
            record_ts, skipped = {}, 0
            if opts.lag_time:
                t0 = time.monotonic()
                try:
                    record_ts, skipped = self._record_times(r, groups)
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
                with _session(self._open()) as r:  # one session per round, of this thread
                    self._read_slow(r, inp, inline=False)
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

    def _read_slow(self, r: ClusterReader, inp: _SlowInput, inline: bool) -> None:
        """Read the slow families that are due (all of them ``inline``) on session ``r``."""
        opts = self.options
        topics = inp.topics
        t0 = time.monotonic()
        err: BaseException | None = None
        try:
            stale = self._topic_configs(r, topics, inline)
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
            self._ran("broker_configs", t0, self._broker_throttles(r, brokers))
        if opts.lag_time and not inline and self._is_due("record_times", inline):
            t0 = time.monotonic()
            try:
                if inp.missing is None:
                    self._record_times(r, inp.groups)
                else:
                    self._read_missing_record_times(r, inp.missing)
                self._ran("record_times", t0, None)
            except Exception as e:  # noqa: BLE001 - lag in seconds is then estimated
                self._ran("record_times", t0, e)
        if opts.log_dirs and topics and self._is_due("log_dirs", inline):
            t0 = time.monotonic()
            leaders = {TopicPartition(t, p.partition): p.leader
                       for t in topics for p in inp.md.topics[t]}
            try:
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
            quorum, q_err = _attempt(r.read_quorum)
            reassign, r_err = _attempt(r.read_reassignments)
            with self._lock:
                self._extras = ClusterExtras(quorum, _message(q_err), reassign, _message(r_err))
            self._ran("quorum", t0, q_err, keep_data=False)
            self._ran("reassignments", t0, r_err, keep_data=False)

    def _topic_configs(self, r: ClusterReader, topics: list[str], inline: bool) -> bool:
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
            for t, cfg in r.all_topic_configs(wanted).items():
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

    def _broker_throttles(self, r: ClusterReader, brokers: list[int]) -> BaseException | None:
        """Replication throttle rates per broker; unreadable brokers are left out and
        make the family's read an error."""
        self._throttle_brokers = frozenset(brokers)
        try:
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

    def _record_times(self, r: ClusterReader, groups: list[GroupLag]
                      ) -> tuple[dict[Position, int | None], int]:
        best = read_positions(groups)
        if not best:
            return {}, 0
        out: dict[Position, int | None] = {}
        todo: list[Position] = []
        hits = r.cached_record_times(order := self._touch_order(best))
        for pos in order:
            if (hit := hits.get(pos)) is not None:
                out[pos] = hit.timestamp_ms if hit.timestamp_ms >= 0 else None
            else:
                todo.append(pos)
        # the budget goes to the most lagging positions not read yet (only those sorted)
        todo = most_lagging_first(best, todo)
        budget = self.options.lag_time_budget
        batch, skipped = todo[:budget], max(0, len(todo) - budget)
        if batch:
            for pos, rt in r.read_record_times(batch).items():
                ok = rt is not None and rt.offset >= pos[1] and rt.timestamp_ms >= 0
                out[pos] = rt.timestamp_ms if ok and rt is not None else None
        return out, skipped

    def _touch_order(self, best: dict[Position, int]) -> Collection[Position]:
        """The order to look positions up in the reader's cache: any, when they and a
        pass's reads all fit in it (a lookup moves an entry to the end of the LRU, so
        the order then decides nothing); else most lagging first, as they are read (the
        order then decides which entries the next reads evict). The cache is the kept
        record-time reader's, whose size is what counts."""
        if len(best) + self.options.lag_time_budget <= self._kept.record_cache_size:
            return best
        return most_lagging_first(best)

    def _read_missing_record_times(self, r: ClusterReader, missing: dict[Position, int]) -> None:
        """The background pass: read (into the reader's cache) the record times the cycle
        did not find there, most lagging first, ``lag_time_budget`` of them -- what
        :meth:`_record_times` reads, without looking every position up again (the cycle
        just did, in the same order)."""
        hits = r.cached_record_times(order := most_lagging_first(missing))
        todo = [pos for pos in order if pos not in hits]
        batch = todo[:self.options.lag_time_budget]
        if batch:
            r.read_record_times(batch)

    def _cached_record_times(self, r: ClusterReader, groups: list[GroupLag]
                             ) -> tuple[dict[Position, int | None], dict[Position, int]]:
        """Record timestamps already read (by the background reads), and the positions
        not read yet with their lag: these count as skipped and are estimated from the
        timeline this cycle; the background pass reads them."""
        positions = read_positions(groups)
        out: dict[Position, int | None] = {}
        missing: dict[Position, int] = {}
        order = self._touch_order(positions)
        hits = r.cached_record_times(order)  # one lookup of them all, in this order
        for pos in order:
            hit = hits.get(pos)
            if hit is None:
                missing[pos] = positions[pos]
            else:
                out[pos] = hit.timestamp_ms if hit.timestamp_ms >= 0 else None
        return out, missing


def _attempt(read: Callable[[], T]) -> tuple[T | None, BaseException | None]:
    """A read whose failure is the family's (recorded, never "nothing there")."""
    try:
        return read(), None
    except AuthenticationError:
        raise
    except Exception as e:  # noqa: BLE001 - recorded as the family's error
        return None, e


def _message(err: BaseException | None) -> str | None:
    return None if err is None else str(err)


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
