"""Read the timestamp of the record at an offset, cheaply, for lag in time.

First at the protocol level: one Fetch per leader for every partition asked
for, at its offset, answered at once (``max_wait_ms`` 0); see
:mod:`opskit.adapters.kafka.protocol.offsets`. What that cannot answer (SASL, a codec we
lack, an offset below log start, a leader change) is read as before:

One assign-only consumer (never joins a group, never commits) is assigned to
every partition asked for at once, each at its offset, with tiny fetch sizes;
the first record returned per partition is kept and the partition paused. The
whole read is bounded by one timeout: partitions that did not answer in time
are reported as unknown, never waited on.

Offsets may have gaps (compaction, transaction markers): the first record at
or after the offset is returned with its real offset, and it *is* the oldest
unconsumed record. An offset below log start (records deleted) is reset to the
earliest record by the consumer; :attr:`RecordTime.offset` tells the caller.
Records are read with ``isolation.level=read_uncommitted``
(:data:`ISOLATION_LEVEL`, also used by ``offsets reset``'s record times): the
time of the record at an offset is a fact of the log, whatever its transaction
became. read_committed stops at the last stable offset, so behind an open
transaction it would find nothing until the transaction ends (a wait for the
whole timeout, then "unknown"), and after an aborted one it would answer the
next committed record's time: lag and reset would disagree on the same offset.

Results are kept in an LRU cache keyed by ``(topic, partition, offset)``: a
record's timestamp does not change, so watch mode and the exporter read each
committed offset's record once. Misses (no record yet, timeout) are not cached.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.client import WireClient, WireUnsupported, usable
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from opskit.errors import KafkaOperationError, OpskitError

#: the one isolation level opskit reads record times with (lag, offsets reset, dr)
ISOLATION_LEVEL = "read_uncommitted"

log = logging.getLogger(__name__)
rdlog = logging.getLogger("opskit.librdkafka")

DEFAULT_CACHE_SIZE = 50_000
PEEK_GROUP = "opskit-peek"

Position = tuple[TopicPartition, int]


@dataclass(frozen=True)
class RecordTime:
    """The first record at or after a requested offset."""

    #: offset of the record actually read (>= the requested one, unless reset)
    offset: int
    #: epoch ms; -1 when the record carries no timestamp
    timestamp_ms: int
    #: "create", "log_append" or "none"
    timestamp_type: str


_TS_TYPES = {0: "none", 1: "create", 2: "log_append"}


class RecordTimeReader:
    """Reads record timestamps with one reusable consumer. Not for concurrent use
    from several threads at once (calls are serialised by a lock)."""

    def __init__(
        self,
        conn: ConnectionConfig,
        timeout: float = 5.0,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.conn = conn
        self.timeout = timeout
        self.cache_size = cache_size
        self._cache: OrderedDict[Position, RecordTime] = OrderedDict()
        self._lock = threading.Lock()
        self._consumer: Any = None
        self._wire: WireClient | None = None
        #: records actually fetched from Kafka (cache misses that were answered)
        self.reads = 0
        #: partitions whose log end the broker contradicted itself about in an earlier
        #: collection: cross-checked again in every later one (their records are cached,
        #: so no Fetch of the lag-in-time prefetch would show the contradiction again)
        self.log_end_suspects: set[TopicPartition] = set()
        #: topics a read was refused on for want of a Read ACL (lag in time is then omitted)
        self.denied_topics: set[str] = set()

    # ----- lifecycle -----
    def _client(self) -> Any:
        if self._consumer is None:
            conf = self.conn.to_librdkafka()
            conf.update({
                "group.id": PEEK_GROUP,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "isolation.level": ISOLATION_LEVEL,
                "message.max.bytes": 64 * 1024,
                "fetch.max.bytes": 256 * 1024,
                "max.partition.fetch.bytes": 1024,
                "fetch.wait.max.ms": 50,
                # no queued.min.messages=1: it starves partitions (25 of 50 unread after 5 s)
                "socket.timeout.ms": int(max(self.timeout, 1) * 1000),
                "logger": rdlog,
            })
            try:
                self._consumer = ck.Consumer(conf)
            except ck.KafkaException as e:
                raise KafkaOperationError(f"cannot create a record reader: {e}") from e
        return self._consumer

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None
        c, self._consumer = self._consumer, None
        if c is not None:
            try:
                c.close()
            except (ck.KafkaException, RuntimeError):  # pragma: no cover - closing anyway
                pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- cache -----
    def cached(self, tp: TopicPartition, offset: int) -> RecordTime | None:
        with self._lock:
            return self._cache_get((tp, offset))

    def cached_many(self, positions: Iterable[Position]) -> dict[Position, RecordTime]:
        """The cached records of ``positions`` (the others left out), looked up in the
        given order under one lock: each hit moves to the LRU's end as :meth:`cached`
        moves it, in the same order."""
        out: dict[Position, RecordTime] = {}
        with self._lock:
            cache = self._cache
            get, to_end = cache.get, cache.move_to_end
            for pos in positions:
                hit = get(pos)
                if hit is not None:
                    to_end(pos)
                    out[pos] = hit
        return out

    def uncached_offsets(self, offsets: Mapping[TopicPartition, list[int]]
                         ) -> dict[TopicPartition, list[int]]:
        """Of partition -> offsets, those whose record is not in the cache."""
        with self._lock:
            cache = self._cache
            if not cache:
                return dict(offsets)
            out: dict[TopicPartition, list[int]] = {}
            for tp, offs in offsets.items():
                left = [o for o in offs if (tp, o) not in cache]
                if left:
                    out[tp] = left
            return out

    def remember(self, records: Mapping[Position, RecordTime]) -> None:
        """Cache records read for this reader elsewhere (each the first record at or
        after its position); they count in :attr:`reads`."""
        with self._lock:
            for pos, rt in records.items():
                if pos not in self._cache:
                    self.reads += 1
                self._cache_put(pos, rt)

    def _cache_get(self, key: Position) -> RecordTime | None:
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
        return hit

    def _cache_put(self, key: Position, value: RecordTime) -> None:
        self._cache[key] = value
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # ----- reads -----
    def read(self, positions: Iterable[Position],
             leaders: Mapping[TopicPartition, int] | None = None,
             brokers: Mapping[int, tuple[str, int]] | None = None,
             ) -> dict[Position, RecordTime | None]:
        """The first record at or after each ``(partition, offset)``; None when unknown.

        ``leaders`` (partition -> leader id) and ``brokers`` (id -> host, port), from
        metadata the caller has just read, save a Metadata request; without them, or
        when a partition or its leader is missing from them, the leaders are read here.

        Unknown: no record at or after the offset (at the log end), the
        partition's leader did not answer within the timeout, or a fetch error.
        """
        wanted = sorted(set(positions))
        out: dict[Position, RecordTime | None] = {}
        with self._lock:
            todo: list[Position] = []
            for pos in wanted:
                hit = self._cache_get(pos)
                out[pos] = hit
                if hit is None:
                    todo.append(pos)
            if not todo:
                return out
            deadline = time.monotonic() + self.timeout
            todo = self._read_wire(todo, out, leaders, brokers)
            # one offset per partition per round: a partition is assigned once
            rounds: list[list[Position]] = []
            per_tp: dict[TopicPartition, int] = {}
            for pos in todo:
                k = per_tp.get(pos[0], 0)
                per_tp[pos[0]] = k + 1
                if k == len(rounds):
                    rounds.append([])
                rounds[k].append(pos)
            for batch in rounds:
                if time.monotonic() >= deadline:
                    break
                for pos, rt in self._read_round(batch, deadline).items():
                    out[pos] = rt
                    if rt is not None and rt.offset >= pos[1]:
                        # a reset (offset out of range) is not the record at pos: not cached
                        self._cache_put(pos, rt)
        return out

    def _read_wire(self, todo: list[Position], out: dict[Position, RecordTime | None],
                   leaders: Mapping[TopicPartition, int] | None = None,
                   brokers: Mapping[int, tuple[str, int]] | None = None) -> list[Position]:
        """Fetch at the protocol level (one Fetch per leader for all partitions); returns
        the positions left for the consumer (errors, codecs we lack, SASL, ...)."""
        if not usable(self.conn):
            return todo
        try:
            if self._wire is None:
                self._wire = offsets_wire.bootstrap_client(self.conn, self.timeout)
            if (leaders is not None and brokers is not None
                    and all(leaders.get(tp, -1) in brokers for tp, _ in todo)):
                lead: Mapping[TopicPartition, int] = leaders
                self._wire.learn((node_id, host, port) for node_id, (host, port) in brokers.items())
            else:
                lead = offsets_wire.leaders(self._wire, {tp.topic for tp, _ in todo})
            found, rest = offsets_wire.record_times(self._wire, todo, lead)
        except (WireUnsupported, OpskitError) as e:
            log.debug("batched record read not available (%s); using the consumer", e)
            if self._wire is not None:
                self._wire.close()
                self._wire = None
            return todo
        for pos in todo:
            if pos in found:
                off, ts, ts_type = found[pos]
                rt = RecordTime(off, ts, ts_type)
                out[pos] = rt
                self._cache_put(pos, rt)
                self.reads += 1
        return rest

    def _read_round(self, batch: list[Position], deadline: float) -> dict[Position, RecordTime | None]:
        c = self._client()
        by_tp = {tp: off for tp, off in batch}
        found: dict[Position, RecordTime | None] = {pos: None for pos in batch}
        pending = set(by_tp)
        try:
            parts = [ck.TopicPartition(tp.topic, tp.partition, off) for tp, off in batch]
            c.assign(parts)
            c.resume(parts)  # paused in an earlier round
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                msgs = c.consume(num_messages=max(1, len(pending)), timeout=min(left, 0.5))
                done: list[TopicPartition] = []
                for m in msgs:
                    tp = TopicPartition(m.topic(), m.partition())
                    if tp not in pending or tp in done:
                        continue  # only the first record per partition counts
                    err = m.error()
                    if err is not None:
                        if err.code() == ck.KafkaError._PARTITION_EOF:
                            done.append(tp)  # nothing at or after the offset
                        elif err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
                            self.denied_topics.add(tp.topic)  # no Read ACL: not a timeout
                            done.append(tp)
                        else:
                            log.debug("reading %s at %s: %s", tp, by_tp[tp], err)
                            if err.fatal() or not err.retriable():
                                done.append(tp)
                        continue
                    ts_type, ts = m.timestamp()
                    found[(tp, by_tp[tp])] = RecordTime(
                        int(m.offset()), int(ts), _TS_TYPES.get(ts_type, "none")
                    )
                    self.reads += 1
                    done.append(tp)
                if done:
                    pending.difference_update(done)
                    c.pause([ck.TopicPartition(tp.topic, tp.partition) for tp in done])
            if pending:
                log.debug("no record read in time for %d partition(s)", len(pending))
        except ck.KafkaException as e:
            log.warning("reading record timestamps failed: %s", e)
        finally:
            try:
                c.unassign()
            except ck.KafkaException:  # pragma: no cover
                pass
        return found
