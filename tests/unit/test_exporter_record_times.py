"""Record times in the served exporter: the cycle looks every read position up in the
reader's cache once, and the background pass reads only what it did not find -- the
same positions, in the same order and within the same budget, as the full pass
(:meth:`KafkaSource._record_times`, used by a single cycle run directly)."""

from __future__ import annotations

from collections.abc import Iterable

from opskit.adapters.kafka.reader import KeptClients
from opskit.adapters.kafka.record_times import RecordTime
from opskit.core.connection import ConnectionConfig
from opskit.core.lag import compute_group_lag
from opskit.core.models import (
    GroupDescription,
    GroupLag,
    GroupState,
    PartitionOffsets,
    TopicPartition,
)
from opskit.exporter.assemble import (
    Position,
    lag_time_positions,
    most_lagging_first,
    read_positions,
)
from opskit.exporter.collector import KafkaSource
from opskit.exporter.options import ExporterOptions

TOPIC = "orders"
ENDS = {p: 100 + 10 * p for p in range(6)}


class CachingReader:
    """The two record-time calls of the reader port, over a plain cache."""

    def __init__(self, cached: Iterable[Position]) -> None:
        self.cache = {pos: RecordTime(pos[1], 1_000 + pos[1], "create") for pos in cached}
        self.lookups: list[Position] = []
        self.batches: list[list[Position]] = []

    def cached_record_time(self, position: Position) -> RecordTime | None:
        self.lookups.append(position)
        return self.cache.get(position)

    def cached_record_times(self, positions: Iterable[Position]) -> dict[Position, RecordTime]:
        out = {}
        for pos in positions:
            hit = self.cached_record_time(pos)
            if hit is not None:
                out[pos] = hit
        return out

    def read_record_times(self, positions: Iterable[Position]) -> dict[Position, RecordTime | None]:
        batch = list(positions)
        self.batches.append(batch)
        got = {pos: RecordTime(pos[1], 1_000 + pos[1], "create") for pos in batch}
        self.cache.update(got)
        return dict(got)


def _groups() -> list[GroupLag]:
    offsets = {TopicPartition(TOPIC, p): PartitionOffsets(TopicPartition(TOPIC, p), 0, end)
               for p, end in ENDS.items()}
    out = []
    # two groups, each at the head on some partitions; both read partition 0 at the
    # same offset (one position, its lag the larger of the two: equal here)
    for gid, behind in (("a", [7, 3, 40, 0, 12, 0]), ("b", [7, 25, 1, 9, 0, 0])):
        committed = {TopicPartition(TOPIC, p): ENDS[p] - behind[p] for p in ENDS}
        d = GroupDescription(gid, GroupState.EMPTY, ())
        out.append(compute_group_lag(d, committed, offsets, {TOPIC: len(ENDS)}))
    return out


def _source(budget: int) -> KafkaSource:
    return KafkaSource(ConnectionConfig(bootstrap="127.0.0.1:1"),
                       ExporterOptions(lag_time=True, lag_time_budget=budget))


def test_background_reads_what_the_full_pass_reads() -> None:
    groups = _groups()
    everything = lag_time_positions(groups)
    assert len(everything) == 7  # 4 + 4 lagging group partitions, partition 0 shared
    cached = everything[1::3]
    for budget in (0, 1, 3, 100):
        src = _source(budget)
        try:
            cycle = CachingReader(cached)
            record_ts, missing = src._cached_record_times(cycle, groups)  # type: ignore[arg-type]
            full = CachingReader(cached)
            full_ts, skipped = src._record_times(full, groups)  # type: ignore[arg-type]
            background = CachingReader(cached)
            src._read_missing_record_times(background, missing)  # type: ignore[arg-type]
        finally:
            src.close()
        # the cycle serves the cached ones and counts the others as skipped
        assert record_ts == {pos: 1_000 + pos[1] for pos in cached}
        assert set(missing) == set(everything) - set(cached)
        assert sorted(cycle.lookups) == sorted(everything)  # each looked up once
        # the background pass reads what the full pass reads, in the same order
        assert background.batches == full.batches
        assert skipped == max(0, len(missing) - budget)
        want = [pos for pos in everything if pos not in cached][:budget]
        assert (full.batches or [[]])[0] == want
        assert {pos for pos in full_ts} == set(cached) | set(want)
        # and looks up only the missing positions again, not every one
        assert sorted(background.lookups) == sorted(missing)


def test_the_lookup_order_follows_the_size_of_the_actual_cache() -> None:
    """Positions and a pass's reads that fit in the record-time reader's cache are looked
    up in any order; when they do not, most lagging first (what the next reads evict
    depends on it). The size is the kept reader's, not the default."""
    groups = _groups()
    positions = read_positions(groups)
    lagging_first = most_lagging_first(positions)
    assert lagging_first != list(positions)  # the two orders differ here
    orders = {}
    for size in (len(positions) + 2, len(positions) + 1):
        src = KafkaSource(ConnectionConfig(bootstrap="127.0.0.1:1"),
                          ExporterOptions(lag_time=True, lag_time_budget=2))
        try:
            src._kept = KeptClients(src.conn, 1.0, record_cache_size=size)
            assert src._kept.record_times().cache_size == size  # the cache it makes
            reader = CachingReader(())
            src._cached_record_times(reader, groups)  # type: ignore[arg-type]
        finally:
            src.close()
        orders[size] = reader.lookups
    assert orders[len(positions) + 2] == list(positions)  # all fit: as they come
    # one more than fits (far below the default size): most lagging first
    assert orders[len(positions) + 1] == lagging_first
