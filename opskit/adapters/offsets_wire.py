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
offset below log start never gives a wrong number.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from opskit.adapters.wire import API_FETCH, API_LIST_OFFSETS, Call, WireClient
from opskit.core.models import PartitionOffsets, TopicPartition

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1
#: bytes asked per partition in a fetch round, then per round after that
PARTITION_BYTES = (16 * 1024, 1024 * 1024)
RESPONSE_BYTES = 32 * 1024 * 1024
_TS_TYPES = {0: "create", 1: "log_append"}

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


def log_offsets(client: WireClient, tps: Iterable[TopicPartition],
                leaders: Mapping[TopicPartition, int]
                ) -> tuple[dict[TopicPartition, PartitionOffsets], list[TopicPartition]]:
    """(log start and end per partition, partitions to read another way)."""
    from kafka.protocol.consumer.offsets import (  # type: ignore[import-untyped]
        ListOffsetsRequest,
        ListOffsetsResponse,
    )

    deadline = time.monotonic() + client.timeout
    wanted = sorted(set(tps))
    groups, rest = _by_leader(wanted, leaders)
    if not groups:
        return {}, rest
    v = client.version(API_LIST_OFFSETS, 1, 5, deadline)
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition

    def request(topics: dict[str, list[int]], ts: int) -> Any:
        return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            T(name=t, partitions=[P(partition_index=p, current_leader_epoch=-1, timestamp=ts)
                                  for p in ps]) for t, ps in topics.items()])

    calls: list[Call] = []
    for leader, topics in sorted(groups.items()):
        calls.append((leader, request(topics, EARLIEST), v, ListOffsetsResponse))
        calls.append((leader, request(topics, LATEST), v, ListOffsetsResponse))
    answers = client.exchange(calls, deadline)
    start: dict[TopicPartition, int] = {}
    end: dict[TopicPartition, int] = {}
    for i, resp in enumerate(answers):
        into = start if i % 2 == 0 else end
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0 and p.offset >= 0:
                    into[TopicPartition(t.name, p.partition_index)] = p.offset
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
    skipped; a wanted offset past the last complete batch is left out."""
    from kafka.record import MemoryRecords  # type: ignore[import-untyped]

    found: dict[int, tuple[int, int, str]] = {}
    todo = sorted(offsets)
    if not records or not todo:
        return found
    mr = MemoryRecords(bytes(records))
    while todo and mr.has_next():
        batch = mr.next_batch()
        if batch is None:
            break
        if getattr(batch, "is_control_batch", False):
            continue
        last = getattr(batch, "last_offset", None)
        if last is not None and last < todo[0]:
            continue  # the whole batch is before the first wanted offset
        ts_type = _TS_TYPES.get(getattr(batch, "timestamp_type", -1) or 0, "create")
        if getattr(batch, "magic", 2) == 0:
            ts_type = "none"
        for rec in batch:
            while todo and rec.offset >= todo[0]:
                ts = rec.timestamp if rec.timestamp is not None else -1
                found[todo.pop(0)] = (rec.offset, int(ts), ts_type if ts >= 0 else "none")
            if not todo:
                break
    return found


def record_times(client: WireClient, positions: Iterable[Position],
                 leaders: Mapping[TopicPartition, int]
                 ) -> tuple[dict[Position, tuple[int, int, str]], list[Position]]:
    """(first record at or after each position, positions to read another way)."""
    from kafka.protocol.consumer.fetch import (  # type: ignore[import-untyped]
        FetchRequest,
        FetchResponse,
    )

    deadline = time.monotonic() + client.timeout
    want: dict[TopicPartition, list[int]] = {}
    for tp, off in set(positions):
        want.setdefault(tp, []).append(off)
    for offs in want.values():
        offs.sort()
    found: dict[Position, tuple[int, int, str]] = {}
    give_up: set[Position] = set()
    v = client.version(API_FETCH, 4, 11, deadline)
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    for round_no in range(8):
        pending = {tp: offs for tp, offs in want.items() if offs}
        if not pending or time.monotonic() >= deadline:
            break
        groups, no_leader = _by_leader(pending, leaders)
        for tp in no_leader:
            give_up.update((tp, o) for o in want.pop(tp))
        part_bytes = PARTITION_BYTES[min(round_no, 1)]
        calls: list[Call] = []
        for leader, topics in sorted(groups.items()):
            calls.append((leader, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=RESPONSE_BYTES,
                isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
                forgotten_topics_data=[],
                topics=[T(topic=t, partitions=[
                    P(partition=p, current_leader_epoch=-1, log_start_offset=-1,
                      fetch_offset=want[TopicPartition(t, p)][0], partition_max_bytes=part_bytes)
                    for p in ps]) for t, ps in topics.items()]), v, FetchResponse))
        if not calls:
            break
        progress = False
        for resp in client.exchange(calls, deadline):
            for t in resp.responses:
                for p in t.partitions:
                    tp = TopicPartition(t.topic, p.partition_index)
                    offs = want.get(tp) or []
                    if not offs:
                        continue
                    if p.error_code:
                        # offset out of range, not leader, ...: the slow path handles it
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
        if not progress and round_no >= 1:
            break
    for tp, offs in want.items():
        give_up.update((tp, o) for o in offs)
    # positions at the log end are "no record": neither found nor to retry
    return found, sorted(give_up)


def bootstrap_client(conn: Any, timeout: float) -> WireClient:
    """A client knowing only the first bootstrap server (as node -1) until :func:`leaders`."""
    from opskit.adapters.wire import Node

    host, _, port = conn.bootstrap.split(",")[0].strip().rpartition(":")
    return WireClient(conn, [Node(-1, host, int(port))], timeout)


def leaders(client: WireClient, topics: Iterable[str]) -> dict[TopicPartition, int]:
    """Leader of every partition of the topics (one Metadata request); learns the brokers."""
    from kafka.protocol.metadata.metadata import (  # type: ignore[import-untyped]
        MetadataRequest,
        MetadataResponse,
    )
    from opskit.adapters.wire import API_METADATA, Node

    deadline = time.monotonic() + client.timeout
    v = client.version(API_METADATA, 1, 8, deadline)
    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(set(topics))],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)
    (resp,) = client.exchange([(client.first_node, req, v, MetadataResponse)], deadline)
    for b in resp.brokers:
        client.nodes.setdefault(b.node_id, Node(b.node_id, b.host, b.port))
    out: dict[TopicPartition, int] = {}
    for t in resp.topics:
        if t.error_code:
            continue
        for p in t.partitions:
            out[TopicPartition(t.name, p.partition_index)] = p.leader_id if not p.error_code else -1
    return out
