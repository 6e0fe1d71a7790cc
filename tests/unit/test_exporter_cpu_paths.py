"""The exporter's per-row code written for less CPU (issue #22) against the code it
replaced, kept here as the oracle: the same answers on generated inputs.

* :func:`compute_group_lag` (the usual row built inline, each topic's row in one pass)
  against rows from :func:`partition_lag` and the topic sums as they were;
* :func:`read_positions` (the oldest unconsumed offset inline) against its loop as it was;
* :func:`_timeline_estimate` (the packed timeline read in place) against its list form;
* the reader's bulk cache lookup against one lookup per position: the same hits and the
  same LRU order afterwards.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterable, Mapping, Sequence

import pytest

from opskit.adapters.kafka.record_times import RecordTime, RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.lag import (
    UNKNOWN_LAG,
    compute_group_lag,
    oldest_unconsumed_offset,
    partition_lag,
    partitions_of_interest,
    severity_for,
)
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupLag,
    GroupState,
    LagThresholds,
    Member,
    PartitionLag,
    PartitionOffsets,
    Severity,
    TopicLag,
    TopicPartition,
)
from opskit.exporter.assemble import Position, _timeline_estimate, read_positions

# ----------------------------------------------------------------- the oracles (as they were)


def _old_group_lag(group: GroupDescription, committed: Mapping[TopicPartition, int],
                   log_offsets: Mapping[TopicPartition, PartitionOffsets],
                   counts: Mapping[str, int], th: LagThresholds,
                   unreadable: Sequence[TopicPartition]) -> GroupLag:
    from opskit.core.lag import _disputed_row  # noqa: F401 - no disputes here

    owner: dict[TopicPartition, Member] = {}
    for m in group.members:
        for tp in m.assignment:
            owner.setdefault(tp, m)
    rows = [
        partition_lag(tp, committed.get(tp), offs, owner.get(tp),
                      exists=offs is None and tp.partition < counts.get(tp.topic, 0),
                      unreadable=tp in unreadable)
        for tp in partitions_of_interest(group, committed, counts, None, unreadable)
        for offs in (log_offsets.get(tp),)
    ]

    def unknown(r: PartitionLag) -> bool:
        return any(a in UNKNOWN_LAG for a in r.anomalies)

    per_topic: dict[str, list[PartitionLag]] = {}
    for r in rows:
        per_topic.setdefault(r.tp.topic, []).append(r)
    topic_lags = tuple(
        TopicLag(topic=t, lag=sum(r.lag or 0 for r in rs), partitions=len(rs),
                 partitions_without_commit=sum(1 for r in rs if r.committed is None
                                               and not unknown(r)),
                 partitions_lag_unknown=sum(1 for r in rs if unknown(r)))
        for t, rs in sorted(per_topic.items()))
    total = sum(t.lag for t in topic_lags)
    severity = severity_for(total, th)
    if severity is not Severity.CRITICAL and any(
            a in UNKNOWN_LAG for r in rows for a in r.anomalies):
        severity = Severity.UNKNOWN
    return GroupLag(group_id=group.group_id, state=group.state, partitions=tuple(rows),
                    members=len(group.members), total_lag=total, topics=topic_lags,
                    severity=severity, thresholds=th)


def _old_read_positions(groups: Iterable[GroupLag]) -> dict[Position, int]:
    best: dict[Position, int] = {}
    for g in groups:
        for p in g.partitions:
            off = oldest_unconsumed_offset(p)
            if off is not None:
                pos = (p.tp, off)
                best[pos] = max(best.get(pos, 0), p.lag or 0)
    return best


def _old_timeline_estimate(now_ms: int, c: int, end: int, packed: Sequence[int],
                           retention: tuple[int, int] | None
                           ) -> tuple[float | None, float | None] | None:
    if not packed:
        return None
    times, offs = list(packed[0::2]), list(packed[1::2])
    if end > offs[-1] and now_ms > times[-1]:
        times.append(now_ms)
        offs.append(end)
    if offs[-1] <= c:
        return None
    if offs[0] > c:
        record_ms = times[0]
        seconds: float | None = None
    else:
        i = len(offs) - 2
        while offs[i] > c:
            i -= 1
        lo_t, lo_o, hi_t, hi_o = times[i], offs[i], times[i + 1], offs[i + 1]
        record_ms = lo_t - (-((c + 1 - lo_o) * (hi_t - lo_t)) // (hi_o - lo_o))
        diff = now_ms - record_ms
        seconds = diff / 1000.0 if diff >= 0 else 0.0
    if retention is None:
        return seconds, None
    age_ms = now_ms - record_ms
    left_ms = retention[0] - max(0, age_ms)
    return seconds, max(0, left_ms) / 1000.0


# ----------------------------------------------------------------- generated inputs


def _world(rnd: random.Random) -> tuple[dict[str, int], dict[TopicPartition, PartitionOffsets]]:
    counts = {f"t{i}": rnd.randint(1, 6) for i in range(rnd.randint(1, 4))}
    offsets: dict[TopicPartition, PartitionOffsets] = {}
    for t, n in counts.items():
        for p in range(n + 1):  # one partition past the count: deleted
            if rnd.random() < 0.1:
                continue  # offsets not read
            start = rnd.randint(0, 50) if rnd.random() > 0.05 else -1  # a broker's odd answer
            end = start + rnd.randint(0, 50) if rnd.random() > 0.05 else start - 3
            offsets[TopicPartition(t, p)] = PartitionOffsets(TopicPartition(t, p), start, end)
    return counts, offsets


def _group(rnd: random.Random, gid: str, counts: Mapping[str, int]
           ) -> tuple[GroupDescription, dict[TopicPartition, int], list[TopicPartition]]:
    tps = [TopicPartition(t, p) for t, n in counts.items() for p in range(n + 1)]
    committed = {tp: rnd.choice((-1, rnd.randint(0, 120), rnd.randint(0, 60)))
                 for tp in rnd.sample(tps, rnd.randint(0, len(tps)))}
    unreadable = [tp for tp in tps if rnd.random() < 0.05]
    members = tuple(Member(f"m{i}", "c", "h", tuple(rnd.sample(tps, rnd.randint(0, 2))))
                    for i in range(rnd.randint(0, 2)))
    state = GroupState.STABLE if members else GroupState.EMPTY
    return GroupDescription(gid, state, members), committed, unreadable


@pytest.mark.parametrize("seed", range(8))
def test_group_lag_equals_the_rows_of_partition_lag(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(300):
        counts, offsets = _world(rnd)
        desc, committed, unreadable = _group(rnd, "g", counts)
        th = LagThresholds(rnd.randint(0, 40), rnd.randint(40, 200))
        got = compute_group_lag(desc, committed, offsets, counts, th, unreadable=unreadable)
        assert got == _old_group_lag(desc, committed, offsets, counts, th, unreadable)


def test_the_generated_groups_reach_every_kind_of_row() -> None:
    rnd = random.Random(0)
    kinds: set[Anomaly] = set()
    usual = 0
    for _ in range(300):
        counts, offsets = _world(rnd)
        desc, committed, unreadable = _group(rnd, "g", counts)
        for r in compute_group_lag(desc, committed, offsets, counts,
                                   unreadable=unreadable).partitions:
            kinds.update(r.anomalies)
            usual += not r.anomalies and r.lag is not None
    assert usual > 100
    assert {Anomaly.COMMITTED_INVALID, Anomaly.COMMITTED_UNREADABLE, Anomaly.OFFSETS_UNAVAILABLE,
            Anomaly.COMMITTED_BEYOND_LOG_END, Anomaly.COMMITTED_BELOW_LOG_START,
            Anomaly.NO_COMMITTED_OFFSET, Anomaly.LOG_START_BEYOND_LOG_END} <= kinds, kinds


@pytest.mark.parametrize("seed", range(8))
def test_read_positions_equal_the_loop_they_replace(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(100):
        counts, offsets = _world(rnd)
        groups = []
        for i in range(rnd.randint(1, 5)):
            desc, committed, unreadable = _group(rnd, f"g{i}", counts)
            groups.append(compute_group_lag(desc, committed, offsets, counts,
                                            unreadable=unreadable))
        got, want = read_positions(groups), _old_read_positions(groups)
        assert got == want
        assert list(got) == list(want)  # the same order too


@pytest.mark.parametrize("seed", range(8))
def test_the_timeline_estimate_equals_its_list_form(seed: int) -> None:
    rnd = random.Random(seed)
    reached = set()
    for _ in range(3_000):
        n = rnd.randint(0, 20)
        t, off = 1_000_000, rnd.randint(0, 100)
        packed = array("q")
        for _k in range(n):
            t += rnd.randint(1, 30_000)
            off += rnd.choice((0, 0, rnd.randint(1, 500)))
            packed.extend((t, off))
        now = t + rnd.choice((-5_000, 0, rnd.randint(1, 60_000)))
        first = packed[1] if n else 0
        c = rnd.randint(max(0, first - 50), off + 20)
        end = max(c + 1, off + rnd.choice((0, 0, rnd.randint(1, 300))))
        retention = rnd.choice((None, (3_600_000, -1), (10_000, -1), (0, -1)))
        got = _timeline_estimate(now, c, end, packed, retention)
        assert got == _old_timeline_estimate(now, c, end, packed, retention), (packed, now, c, end)
        reached.add("none" if got is None else "before" if got[0] is None else "within")
    assert reached == {"none", "before", "within"}


def test_the_bulk_cache_lookup_equals_lookups_one_by_one() -> None:
    rnd = random.Random(7)
    conn = ConnectionConfig(bootstrap="127.0.0.1:1")
    tps = [TopicPartition("t", p) for p in range(5)]
    for _ in range(50):
        one, bulk = (RecordTimeReader(conn, cache_size=30) for _ in range(2))
        for r in (one, bulk):
            r.remember({(tp, o): RecordTime(o, 1_000 + o, "create")
                        for tp in tps for o in range(6) if (o + tp.partition) % 3})
        asked = [(rnd.choice(tps), rnd.randint(0, 8)) for _ in range(rnd.randint(0, 40))]
        want = {}
        for pos in asked:
            hit = one.cached(*pos)
            if hit is not None:
                want[pos] = hit
        assert bulk.cached_many(asked) == want
        assert list(bulk._cache) == list(one._cache)  # the same LRU order after
