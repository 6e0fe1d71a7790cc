"""Log offsets and record timestamps for many partitions, one request per leader.

* :func:`log_offsets`: ListOffsets for the earliest and the latest offset of
  every partition, two requests per leader, all in flight together.
* :func:`record_times`: the timestamp of the first record at or after each
  ``(partition, offset)``, from one Fetch per leader (``max_wait_ms`` 0, so the
  broker answers at once with what it has). A fetch from an offset returns the
  whole batch holding it, so several wanted offsets of one partition are often
  answered by one fetch; the rest are fetched in a next round.

Both return what they could not answer instead of guessing; the caller reads
those the slower way (librdkafka), so a missing codec, a leader change or an
offset below log start never gives a wrong number. Record batches are decoded
by :mod:`opskit.adapters.kafka.protocol.codec`: uncompressed and gzip here;
snappy, lz4, zstd and the old message formats (magic 0/1) go to librdkafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.client import (
    API_FETCH,
    API_LIST_OFFSETS,
    API_METADATA,
    Call,
    Node,
    WireClient,
)
from opskit.core.log_end import LogEndEvidence
from opskit.core.models import PartitionOffsets, TopicPartition

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1
#: bytes asked per partition in a fetch round, then per round after that
PARTITION_BYTES = (16 * 1024, 1024 * 1024)
RESPONSE_BYTES = 32 * 1024 * 1024
#: connections per broker for the heavy requests of a round (see WireClient.exchange);
#: a leader's Fetch is split into this many requests once it covers SPLIT_FROM partitions
#: (2,000 partitions on one broker: about 70 ms as one Fetch, 50 ms as four)
LANES = 4
SPLIT_FROM = 200
#: max wait of the one-off fetches: 1 ms, not 0 (with min bytes 0 Apache Kafka answers at
#: once either way; Tansu 0.6 answers a 0 ms fetch with no partitions at all)
FETCH_WAIT_MS = 1
#: the longest the log end cross-check waits for records a high watermark promises
RECHECK_WAIT_S = 0.5

Position = tuple[TopicPartition, int]


def _by_leader(tps: Iterable[TopicPartition], leaders: Mapping[TopicPartition, int]
               ) -> tuple[dict[int, dict[str, list[int]]], list[TopicPartition]]:
    out: dict[int, dict[str, list[int]]] = {}
    no_leader: list[TopicPartition] = []
    for tp in tps:
        leader = leaders.get(tp, -1)
        if leader < 0:
            no_leader.append(tp)
        else:
            out.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
    return out, no_leader


def _split(topics: dict[str, list[int]], parts: int) -> list[dict[str, list[int]]]:
    """A leader's partitions in up to ``parts`` requests of about equal size (one when
    there are fewer than SPLIT_FROM)."""
    flat = [(t, p) for t, ps in topics.items() for p in ps]
    if len(flat) < SPLIT_FROM or parts <= 1:
        return [topics]
    size = -(-len(flat) // parts)
    out: list[dict[str, list[int]]] = []
    for i in range(0, len(flat), size):
        chunk: dict[str, list[int]] = {}
        for t, p in flat[i:i + size]:
            chunk.setdefault(t, []).append(p)
        out.append(chunk)
    return out


def log_offsets(client: WireClient, tps: Iterable[TopicPartition],
                leaders: Mapping[TopicPartition, int]
                ) -> tuple[dict[TopicPartition, PartitionOffsets], list[TopicPartition]]:
    """(log start and end per partition, partitions to read another way)."""
    deadline = time.monotonic() + client.timeout
    wanted = sorted(set(tps))
    groups, rest = _by_leader(wanted, leaders)
    if not groups:
        return {}, rest
    v = client.version(API_LIST_OFFSETS, 1, 5, deadline)

    calls: list[Call] = []
    for leader, topics in sorted(groups.items()):
        calls.append((leader, kp.list_offsets(v, topics, EARLIEST)))
        calls.append((leader, kp.list_offsets(v, topics, LATEST)))
    answers = client.exchange(calls, deadline, lanes=2)  # earliest and latest in parallel
    start: dict[TopicPartition, int] = {}
    end: dict[TopicPartition, int] = {}
    for i, answer in enumerate(answers):
        into = start if i % 2 == 0 else end
        for topic, parts in answer:
            for partition, err, _ts, offset in parts:
                if err == 0 and offset >= 0:
                    into[TopicPartition(topic, partition)] = offset
    out: dict[TopicPartition, PartitionOffsets] = {}
    for tp in wanted:
        if tp in start and tp in end:
            out[tp] = PartitionOffsets(tp, start[tp], end[tp])
        elif tp not in rest:
            rest.append(tp)  # an error (leader moved, ...): ask librdkafka, which retries
    return out, sorted(set(rest))


def first_record_at_or_after(records: Any, offsets: list[int]) -> dict[int, tuple[int, int, str]]:
    """From fetched record data: for each wanted offset, (offset, timestamp ms, type) of
    the first data record at or after it. Control records (transaction markers) are
    skipped; a wanted offset past the last complete batch is left out.

    Raises :class:`~opskit.adapters.kafka.protocol.client.WireUnsupported` for record formats and
    codecs the codec lacks (magic 0/1; snappy, lz4, zstd)."""
    found: dict[int, tuple[int, int, str]] = {}
    todo = sorted(offsets)
    if not records or not todo:
        return found
    for batch in kp.record_batches(records):
        if batch.last_offset < todo[0] or batch.attributes & kp.CONTROL:
            continue  # before the first wanted offset, or transaction markers
        ts_type = "log_append" if batch.attributes & kp.TIMESTAMP_LOG_APPEND else "create"
        for offset, ts in kp.batch_records(records, batch):
            while offset >= todo[0]:
                found[todo.pop(0)] = (offset, ts, ts_type if ts >= 0 else "none")
                if not todo:
                    return found
    return found


#: what a fetch found: position -> (offset, timestamp ms, timestamp type)
Found = dict[Position, tuple[int, int, str]]


def wanted_offsets(positions: Iterable[Position]) -> dict[TopicPartition, list[int]]:
    """Partition -> its wanted offsets, each once, ascending. (No set of the positions:
    a lag report hands in one per group partition, tens of thousands, mostly repeats.)"""
    want: dict[TopicPartition, list[int]] = {}
    for tp, off in positions:
        offs = want.get(tp)
        if offs is None:
            want[tp] = [off]
        elif off not in offs:
            offs.append(off)
    for offs in want.values():
        if len(offs) > 1:
            offs.sort()
    return want


def fetch_calls(version: int, want: Mapping[TopicPartition, list[int]],
                leaders: Mapping[TopicPartition, int], part_bytes: int = PARTITION_BYTES[0],
                max_wait_ms: int = FETCH_WAIT_MS, min_bytes: int = 0
                ) -> tuple[list[Call], list[TopicPartition]]:
    """(one fetch round: each partition with wanted offsets at its first one, split per
    leader over LANES requests; the partitions without a leader)."""
    pending = [tp for tp, offs in want.items() if offs]
    groups, no_leader = _by_leader(pending, leaders)
    calls: list[Call] = [
        (leader, kp.fetch(version, {t: [(p, want[TopicPartition(t, p)][0], part_bytes) for p in ps]
                                    for t, ps in part.items()},
                          max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=RESPONSE_BYTES))
        for leader, topics in sorted(groups.items()) for part in _split(topics, LANES)]
    return calls, no_leader


#: partition errors of a Fetch that pass: a new topic whose leadership the broker has not
#: applied yet, a leader moving (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
#: NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, FENCED/UNKNOWN_LEADER_EPOCH,
#: OFFSET_NOT_AVAILABLE)
RETRIABLE_FETCH_ERRORS = frozenset({3, 5, 6, 9, 74, 75, 78})


def take_fetch(answers: Iterable[Any], want: dict[TopicPartition, list[int]], found: Found,
               give_up: set[Position], high_watermarks: dict[TopicPartition, int] | None = None,
               retry: set[TopicPartition] | None = None) -> bool:
    """Record what a fetch round answered into ``found``; a partition's offsets left
    unanswered stay in ``want`` (for a next round), or go to ``give_up`` on an error
    or a codec we lack. True when something was found. ``high_watermarks`` collects
    each answered partition's high watermark (a cross-check of ListOffsets)."""
    progress = False
    for answer in answers:
        for topic, parts in answer:
            for p in parts:
                tp = TopicPartition(topic, p.partition)
                if high_watermarks is not None and not p.error_code:
                    high_watermarks[tp] = p.high_watermark
                offs = want.get(tp) or []
                if not offs:
                    continue
                if p.error_code and retry is not None and \
                        p.error_code in RETRIABLE_FETCH_ERRORS:
                    retry.add(tp)  # asked again in the next round; kept in ``want``
                    continue
                if p.error_code:
                    # offset out of range, not leader, ...: the slow path handles it
                    log.debug("fetching %s at %s: error code %s; reading it another way",
                              tp, offs[0], p.error_code)
                    give_up.update((tp, o) for o in offs)
                    want[tp] = []
                    continue
                try:
                    got = first_record_at_or_after(p.records, offs)
                except Exception as e:  # noqa: BLE001 - a codec we lack, a corrupt batch
                    log.debug("decoding %s failed (%s); reading it another way", tp, e)
                    give_up.update((tp, o) for o in offs)
                    want[tp] = []
                    continue
                for o, rec in got.items():
                    found[(tp, o)] = rec
                if got:
                    progress = True
                left = [o for o in offs if o not in got]
                hw = p.high_watermark
                if left and hw >= 0 and left[0] >= hw:
                    # nothing at or after these offsets yet: known, not an error
                    want[tp] = []
                else:
                    want[tp] = left
    return progress


def record_times(client: WireClient, positions: Iterable[Position],
                 leaders: Mapping[TopicPartition, int]
                 ) -> tuple[Found, list[Position]]:
    """(first record at or after each position, positions to read another way)."""
    deadline = time.monotonic() + client.timeout
    want = wanted_offsets(positions)
    found: Found = {}
    give_up: set[Position] = set()
    v = client.version(API_FETCH, 4, 11, deadline)
    for round_no in range(8):
        if not any(want.values()) or time.monotonic() >= deadline:
            break
        calls, no_leader = fetch_calls(v, want, leaders, PARTITION_BYTES[min(round_no, 1)])
        for tp in no_leader:
            give_up.update((tp, o) for o in want.pop(tp))
        if not calls:
            break
        retry: set[TopicPartition] = set()
        progress = take_fetch(client.exchange(calls, deadline, lanes=LANES), want, found, give_up,
                              retry=retry)
        if retry:
            log.debug("fetch round %d: %d partition(s) answered a passing error; asking again",
                      round_no, len(retry))
            time.sleep(min(0.05 * (round_no + 1), max(0.0, deadline - time.monotonic())))
        elif not progress and round_no >= 1:
            break
    for tp, offs in want.items():
        give_up.update((tp, o) for o in offs)
    # positions at the log end are "no record": neither found nor to retry
    return found, sorted(give_up)


def bootstrap_client(conn: Any, timeout: float) -> WireClient:
    """A client knowing only the first bootstrap server (as node -1) until :func:`leaders`."""
    host, _, port = conn.bootstrap.split(",")[0].strip().rpartition(":")
    return WireClient(conn, [Node(-1, host, int(port))], timeout)


def leaders(client: WireClient, topics: Iterable[str]) -> dict[TopicPartition, int]:
    """Leader of every partition of the topics (one Metadata request); learns the brokers."""
    deadline = time.monotonic() + client.timeout
    v = client.version(API_METADATA, 1, 8, deadline)
    req = kp.metadata(v, sorted(set(topics)))
    ((brokers, topic_mds),) = client.exchange([(client.first_node, req)], deadline)
    client.learn(brokers)
    out: dict[TopicPartition, int] = {}
    for t in topic_mds:
        if t.error_code:
            continue
        for err, partition, leader in t.partitions:
            out[TopicPartition(t.name, partition)] = leader if not err else -1
    return out


def check_log_ends(client: WireClient, offsets: Mapping[TopicPartition, PartitionOffsets],
                   leaders: Mapping[TopicPartition, int]) -> dict[TopicPartition, LogEndEvidence]:
    """Cross-check ListOffsets (latest) of the given partitions with the broker's other
    answers (see :mod:`opskit.core.log_end`): one Fetch per leader at each listed log
    end, then, for the partitions whose high watermark differs, ListOffsets (latest)
    again. Partitions without a leader or a usable answer get no Fetch evidence."""
    deadline = time.monotonic() + client.timeout
    want = {tp: [max(o.log_end, o.log_start, 0)] for tp, o in offsets.items()}
    v = client.version(API_FETCH, 4, 11, deadline)
    hw: dict[TopicPartition, int] = {}
    last: dict[TopicPartition, int] = {}

    def take(calls: list[Call]) -> None:
        for answer in client.exchange(calls, deadline, lanes=LANES) if calls else ():
            for topic, parts in answer:
                for p in parts:
                    tp = TopicPartition(topic, p.partition)
                    if p.error_code or tp not in offsets:
                        continue
                    hw[tp] = p.high_watermark
                    try:
                        batches = list(kp.record_batches(p.records)) if p.records else []
                    except Exception as e:  # noqa: BLE001 - an undecodable batch settles nothing
                        log.debug("log end check of %s: records not decoded (%s)", tp, e)
                        batches = []
                    if batches:
                        last[tp] = batches[-1].last_offset

    take(fetch_calls(v, want, leaders, PARTITION_BYTES[0])[0])
    # A high watermark past the listed end with no records in the answer: the broker may
    # not have read them within the 1 ms the first Fetch allows (Tansu on a loaded
    # machine). Ask once more, waiting for at least one byte, so the records can settle it.
    unsettled = {tp: want[tp] for tp, h in hw.items() if h > want[tp][0] and tp not in last}
    if unsettled:
        wait_ms = int(max(0.0, min(RECHECK_WAIT_S, deadline - time.monotonic())) * 1000)
        take(fetch_calls(v, unsettled, leaders, PARTITION_BYTES[0],
                         max_wait_ms=wait_ms, min_bytes=1)[0])
    differ = sorted(tp for tp, h in hw.items() if h != offsets[tp].log_end)
    relisted: dict[TopicPartition, int] = {}
    if differ:
        groups, _ = _by_leader(differ, leaders)
        lv = client.version(API_LIST_OFFSETS, 1, 5, deadline)
        lcalls: list[Call] = [(leader, kp.list_offsets(lv, topics, LATEST))
                              for leader, topics in sorted(groups.items())]
        for answer in client.exchange(lcalls, deadline):
            for topic, parts in answer:
                for partition, err, _ts, offset in parts:
                    if err == 0 and offset >= 0:
                        relisted[TopicPartition(topic, partition)] = offset
    return {tp: LogEndEvidence(o.log_end, hw.get(tp), last.get(tp), relisted.get(tp))
            for tp, o in offsets.items()}
