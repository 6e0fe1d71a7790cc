"""The exporter's snapshot building (opskit.exporter.assemble) against the per-object
path it replaced (benchmarks/exporter_baseline.py): identical snapshots, rendered text and
history on seeded random cycle sequences with churn and broken answers."""

from __future__ import annotations

import importlib
import random
import sys
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from opskit.core.lag import compute_group_lag, oldest_unconsumed_offset
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupState,
    LagThresholds,
    Member,
    PartitionOffsets,
    TopicPartition,
)
from opskit.core.status.evaluate import evaluate_partition
from opskit.core.status.quick import partition_status
from opskit.core.status.window import OffsetSample, PartitionWindow, StatusPolicy
from opskit.core.timing.rates import consume_rate, produce_rate, window_rates
from opskit.exporter.assemble import CycleInputs, assemble_snapshot
from opskit.exporter.families import render_partition_families, small_families
from opskit.exporter.freshness import FAMILIES, FamilyRead
from opskit.exporter.history import History
from opskit.exporter.serving import ListCollector
from opskit.exporter.snapshot import BrokerSnap, PartitionSnap, Snapshot

# the old path, the oracle: kept beside its benchmark, outside the package
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
baseline = importlib.import_module("exporter_baseline")


def _render(snap: Snapshot) -> bytes:
    fams = small_families(snap)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ListCollector(lambda: fams))
    return generate_latest(reg) + b"".join(t.encode() for t, _ in render_partition_families(snap))


class _Cluster:
    """A small cluster whose answers drift, break and churn from cycle to cycle."""

    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.counts: dict[str, int] = {}
        self.starts: dict[TopicPartition, int] = {}
        self.ends: dict[TopicPartition, int] = {}
        self.groups: dict[str, dict[TopicPartition, int | None]] = {}
        self.behaviour: dict[str, str] = {}
        for _ in range(3):
            self.add_topic()
        for _ in range(5):
            self.add_group()

    def add_topic(self) -> None:
        t = f"t{self.rnd.randrange(1000)}"
        if t in self.counts:
            return
        self.counts[t] = self.rnd.randint(1, 4)
        for p in range(self.counts[t]):
            tp = TopicPartition(t, p)
            self.starts[tp] = self.rnd.choice((0, 0, 5))
            self.ends[tp] = self.starts[tp] + self.rnd.randint(0, 300)

    def add_group(self) -> None:
        g = f"g{self.rnd.randrange(1000)}"
        topics = self.rnd.sample(sorted(self.counts), min(len(self.counts), self.rnd.randint(1, 2)))
        c: dict[TopicPartition, int | None] = {}
        for t in topics:
            for p in range(self.counts[t]):
                if self.rnd.random() < 0.85:
                    tp = TopicPartition(t, p)
                    c[tp] = self.rnd.randint(0, self.ends[tp])
        self.groups[g] = c
        self.behaviour[g] = self.rnd.choice(("steady", "steady", "stopped", "slow", "rewinder"))

    def step(self) -> None:
        rnd = self.rnd
        if rnd.random() < 0.05:
            self.add_topic()
        if rnd.random() < 0.03 and len(self.counts) > 1:  # a topic deleted
            t = rnd.choice(sorted(self.counts))
            del self.counts[t]
            for tp in [tp for tp in self.ends if tp.topic == t]:
                del self.ends[tp], self.starts[tp]
        if rnd.random() < 0.03:  # partitions added to a topic
            t = rnd.choice(sorted(self.counts))
            n = self.counts[t]
            self.counts[t] = n + 1
            self.ends[TopicPartition(t, n)] = self.starts[TopicPartition(t, n)] = 0
        if rnd.random() < 0.06:
            self.add_group()
        if rnd.random() < 0.05 and len(self.groups) > 1:
            del self.groups[rnd.choice(sorted(self.groups))]
        for tp in self.ends:
            r = rnd.random()
            if r < 0.3:
                self.ends[tp] += rnd.randint(1, 40)
            elif r < 0.32:  # truncation: log end back (unclean election, recreated topic)
                self.ends[tp] = rnd.randint(0, self.ends[tp])
                self.starts[tp] = min(self.starts[tp], self.ends[tp])
            elif r < 0.35:  # retention deletes past some groups' commits
                self.starts[tp] = min(self.ends[tp], self.starts[tp] + rnd.randint(1, 60))
        for g, c in self.groups.items():
            how = self.behaviour[g]
            for tp, off in c.items():
                end = self.ends.get(tp, 0)
                r = rnd.random()
                if how == "stopped" or r > 0.5:
                    continue
                if off is None:
                    c[tp] = rnd.randint(0, end)
                elif how == "rewinder" and r < 0.1:
                    c[tp] = max(0, off - rnd.randint(1, 50))
                elif r < 0.03:
                    c[tp] = None  # the commit expired
                else:
                    step = rnd.randint(0, 5 if how == "slow" else 60)
                    c[tp] = off + step if rnd.random() < 0.05 else min(end, off + step)

    def inputs(self, now_ms: int) -> CycleInputs:
        rnd = self.rnd
        parts = tuple(PartitionSnap(t, p, rnd.choice((0, 1, -1)) if rnd.random() < 0.1 else p % 2,
                                    (p % 2, 1 - p % 2), (p % 2,) if rnd.random() < 0.2 else (0, 1))
                      for t in sorted(self.counts) for p in range(self.counts[t]))
        offsets = {tp: PartitionOffsets(tp, self.starts[tp], e) for tp, e in self.ends.items()
                   if rnd.random() > 0.04}  # some partitions' offsets not read (offline)
        if rnd.random() < 0.1 and offsets:  # a broker answering log start past log end
            tp = rnd.choice(sorted(offsets))
            o = offsets[tp]
            offsets[tp] = PartitionOffsets(tp, o.log_end + 3, o.log_end)
        groups = []
        for g, c in sorted(self.groups.items()):
            members = rnd.randint(0, 2)
            state = (GroupState.UNKNOWN if rnd.random() < 0.05 else
                     GroupState.STABLE if members else GroupState.EMPTY)
            desc = GroupDescription(g, state, tuple(Member(f"m{i}", "c", "h") for i in range(members)))
            committed = {tp: off for tp, off in c.items() if off is not None}
            disputed = {}
            if rnd.random() < 0.05 and committed:
                disputed[rnd.choice(sorted(committed))] = rnd.choice(
                    (Anomaly.LOG_END_LOST, Anomaly.LOG_END_INCONSISTENT, Anomaly.LOG_END_FROM_FETCH))
            th = LagThresholds(50, 200) if g < "g5" else LagThresholds()
            groups.append(compute_group_lag(desc, committed, offsets, self.counts, th,
                                            disputed=disputed))
        record_ts: dict[tuple[TopicPartition, int], int | None] = {}
        for gl in groups:
            for p in gl.partitions:
                off = oldest_unconsumed_offset(p)
                r = rnd.random()
                if off is not None and r < 0.6:
                    # read; unreadable (None); or a producer clock ahead of ours
                    record_ts[(p.tp, off)] = (None if r < 0.1 else now_ms + 5_000 if r < 0.15
                                              else now_ms - rnd.randint(0, 900_000))
        topics = sorted(self.counts)
        retention = {t: rnd.choice(((3_600_000, -1), (600_000, -1), (-1, -1), (3_600_000, 50_000),
                                    (-1, 20_000))) for t in topics if rnd.random() < 0.9}
        sizes = (None if rnd.random() < 0.2 else
                 {tp: e * 50 for tp, e in self.ends.items() if rnd.random() < 0.95})
        fams = {f: (FamilyRead(True, now_ms / 1000, read_s=0.01, refresh_s=15.0, attempt=1)
                    if rnd.random() < 0.9 else
                    FamilyRead(False, None, "timeout", "read timed out", 5.0, 15.0, 2))
                for f in FAMILIES}
        return CycleInputs(
            cluster_id="c", controller_id=0, brokers=(BrokerSnap(0, "a:9092"), BrokerSnap(1, "b:9092")),
            partitions=parts, groups=groups, offsets=offsets, record_ts=record_ts,
            retention=retention, min_isr={t: 1 for t in topics if rnd.random() < 0.9},
            sizes=sizes, families=fams, lag_time_skipped=rnd.randint(0, 3),
        )


@pytest.mark.parametrize("seed", range(24))
def test_snapshots_equal_the_per_object_path(seed: int) -> None:
    rnd = random.Random(seed)
    cluster = _Cluster(rnd)
    # short windows for half the seeds, so the trend rules (STALL, STOP, WARN) apply soon
    shape = (60_000, 120_000, 4) if seed % 2 else (300_000, 600_000, 10)
    old_h, new_h = baseline.BaselineHistory(*shape), History(*shape)
    now = 1_700_000_000_000
    statuses: Counter[str] = Counter()
    for k in range(60):
        cluster.step()
        r = rnd.random()
        now += 15_000 if r < 0.85 else 45_000 if r < 0.95 else 0  # gaps, and a repeated instant
        inp = cluster.inputs(now)
        with_status = rnd.random() > 0.05
        want = baseline.assemble_snapshot(inp, old_h, now, with_status)
        got = assemble_snapshot(inp, new_h, now, with_status)
        assert got == want, (seed, k)
        assert _render(got) == _render(want), (seed, k)
        for g in inp.groups:
            assert new_h.stored_window(g.group_id) == old_h.stored_window(g.group_id), (seed, k)
        for tp in inp.offsets:
            assert new_h.timeline(tp) == old_h.timeline(tp), (seed, k, tp)
        assert new_h.sizes() == old_h.sizes()
        statuses.update(g.status for g in got.groups if g.status is not None)
    # the sequences reach the statuses whose rules were re-written, not only OK
    assert {"OK", "UNKNOWN"} <= set(statuses), statuses


def test_the_sequences_reach_every_status() -> None:
    """Across the seeds, every group status the rules can give occurs (so the
    equivalence above covers each rule)."""
    seen: set[str] = set()
    for seed in range(24):
        rnd = random.Random(seed)
        cluster = _Cluster(rnd)
        shape = (60_000, 120_000, 4) if seed % 2 else (300_000, 600_000, 10)
        h, now = History(*shape), 1_700_000_000_000
        for _ in range(60):
            cluster.step()
            now += 15_000
            seen.update(g.status for g in assemble_snapshot(cluster.inputs(now), h, now).groups
                        if g.status is not None)
    assert seen == {"OK", "WARN", "REWIND", "STOP", "STALL", "ERR", "UNKNOWN"}


def test_quick_status_and_rates_equal_the_core_rules() -> None:
    """partition_status and window_rates against evaluate_partition and the core's
    rates on generated windows (ones the exporter's cycles rarely build as well)."""
    rnd = random.Random(5)
    tp = TopicPartition("t", 0)
    seen: Counter[str] = Counter()
    for _ in range(4000):
        policy = StatusPolicy(window_ms=rnd.choice((60_000, 600_000)), max_samples=12,
                              allowed_lag=rnd.choice((0, 0, 10)), min_samples=rnd.choice((2, 3)),
                              min_span_ms=rnd.choice((0, 30_000, 60_000)))
        t, end, start = 1_000_000, rnd.randint(0, 100), rnd.choice((None, 0, 20))
        c: int | None = rnd.randint(0, 100)
        samples = []
        for _ in range(rnd.randint(0, 10)):
            t += rnd.choice((5_000, 15_000, 60_000))
            end = max(0, end + rnd.choice((0, 0, 5, 30, -40)))
            if rnd.random() < 0.1:
                c = None
            elif rnd.random() < 0.5:
                c = max(0, (c or 0) + rnd.choice((0, 0, 3, 20, -15, 200)))
            samples.append(OffsetSample(t, c, end, start))
        since = rnd.choice((None, 900_000, samples[0].timestamp_ms if samples else None))
        window = PartitionWindow(tp, tuple(samples), since)
        now = t + rnd.choice((0, 1_000, 100_000))
        want = evaluate_partition(window, policy, now).status
        rows = [(s.timestamp_ms, s.committed, s.log_end, s.log_start) for s in samples]
        assert partition_status(rows, since, now, policy.window_ms, policy.allowed_lag,
                                policy.min_samples, policy.min_span_ms) is want, window
        seen[want.value] += 1
        assert window_rates(rows) == (consume_rate(samples).per_second,
                                      produce_rate(samples).per_second), window
    assert set(seen) == {"OK", "WARN", "REWIND", "STOP", "STALL", "ERR", "UNKNOWN"}, seen
