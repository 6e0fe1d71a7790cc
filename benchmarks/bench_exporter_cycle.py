"""The exporter's per-cycle snapshot building, old path vs new, on synthetic inputs (no Kafka).

Builds the collector's inputs (``CycleInputs``) for N partitions x G groups -- topics of
100 partitions, each group committed on 90 of one topic's 100 partitions, as
``bench_lag.py`` -- and runs consecutive cycles 15 s apart in which only part of the
offsets move (by default log ends advance on 30% of the partitions, commits on 20% of
the committed group partitions; a few groups stop consuming). Every cycle is built by
both paths, each with its own history:

* old: ``exporter_baseline.assemble_snapshot`` (beside this file) (the per-object path as it
  was before issue #22, kept verbatim);
* new: :func:`opskit.exporter.assemble.assemble_snapshot`.

Each path's ``assemble_snapshot`` call is timed with ``time.process_time`` (the inputs
are built outside the timing, as the collector reads them), the order alternating
between cycles. Both snapshots are then rendered to the Prometheus text the exporter
serves and the texts are compared: the benchmark stops with an error on the first
difference. Memory: after the timed cycles, one more cycle of each path runs under
tracemalloc (peak bytes allocated during the call), and the process's peak RSS.
Rendering the new snapshot to text (``render`` below: the current families code, which
both paths share, without gzip, reusing unchanged group blocks from the previous cycle as
the collector does) is timed too, so the cost of a whole cycle's Python work is ``new +
render``; every cycle that text is also checked against a render without reuse.

    python benchmarks/bench_exporter_cycle.py --sizes 2000x200,10000x500 --cycles 48
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass

import exporter_baseline as baseline  # beside this file: the old path, the oracle
from prometheus_client import CollectorRegistry, generate_latest

from opskit.core.lag import compute_group_lag, oldest_unconsumed_offset
from opskit.core.models import (
    GroupDescription,
    GroupLag,
    GroupState,
    LagThresholds,
    Member,
    PartitionOffsets,
    TopicPartition,
)
from opskit.exporter.assemble import CycleInputs, assemble_snapshot
from opskit.exporter.families import RenderCache, render_partition_families, small_families
from opskit.exporter.freshness import FAMILIES, FamilyRead
from opskit.exporter.history import History
from opskit.exporter.serving import ListCollector
from opskit.exporter.snapshot import BrokerSnap, PartitionSnap, Snapshot

TOPIC_PARTITIONS = 100
COMMITTED_PER_GROUP = 90
INTERVAL_MS = 15_000


@dataclass
class World:
    """The synthetic cluster, mutated cycle by cycle."""

    topics: list[str]
    partitions: tuple[PartitionSnap, ...]
    starts: dict[TopicPartition, int]
    ends: dict[TopicPartition, int]
    descs: list[GroupDescription]
    #: group -> tp -> committed offset
    committed: list[dict[TopicPartition, int]]
    #: groups that stopped consuming (commits never move)
    stopped: set[int]
    #: record timestamp of each offset, made up: (offset * 7) ms after a base
    base_ms: int


def make_world(n_parts: int, n_groups: int, seed: int) -> World:
    rnd = random.Random(seed)
    n_topics = max(1, n_parts // TOPIC_PARTITIONS)
    topics = [f"topic-{i:04d}" for i in range(n_topics)]
    parts = tuple(PartitionSnap(t, p, p % 3, (p % 3, (p + 1) % 3, (p + 2) % 3),
                                (p % 3, (p + 1) % 3, (p + 2) % 3))
                  for t in topics for p in range(TOPIC_PARTITIONS))
    starts = {TopicPartition(p.topic, p.partition): 0 for p in parts}
    ends = {tp: rnd.randint(1_000, 1_000_000) for tp in starts}
    descs, committed = [], []
    for g in range(n_groups):
        t = topics[g % n_topics]
        members = tuple(Member(f"m{i}", f"client-{g}", "10.0.0.1") for i in range(g % 4))
        descs.append(GroupDescription(f"group-{g:05d}", GroupState.STABLE if members else GroupState.EMPTY,
                                      members))
        c = {}
        for p in range(COMMITTED_PER_GROUP):
            tp = TopicPartition(t, p)
            c[tp] = max(0, ends[tp] - rnd.choice((0, 0, 0, rnd.randint(1, 5_000))))
        committed.append(c)
    stopped = set(rnd.sample(range(n_groups), max(1, n_groups // 20)))
    return World(topics, parts, starts, ends, descs, committed, stopped, 1_700_000_000_000)


def step(w: World, rnd: random.Random, end_share: float, commit_share: float) -> None:
    for tp in w.ends:
        if rnd.random() < end_share:
            w.ends[tp] += rnd.randint(1, 200)
    for g, c in enumerate(w.committed):
        if g in w.stopped:
            continue
        for tp, off in c.items():
            if rnd.random() < commit_share:
                c[tp] = min(w.ends[tp], off + rnd.randint(1, 300))


def cycle_inputs(w: World, now_ms: int) -> CycleInputs:
    """The inputs as the collector hands them over (lag computed per group)."""
    offsets = {tp: PartitionOffsets(tp, w.starts[tp], end) for tp, end in w.ends.items()}
    counts = dict.fromkeys(w.topics, TOPIC_PARTITIONS)
    th = LagThresholds(50_000, 500_000)
    groups: list[GroupLag] = [compute_group_lag(d, c, offsets, counts, th)
                              for d, c in zip(w.descs, w.committed)]
    # record timestamps: half of the read positions are in the reader's cache
    record_ts: dict[tuple[TopicPartition, int], int | None] = {}
    for g in groups:
        for p in g.partitions:
            off = oldest_unconsumed_offset(p)
            if off is not None and (off + p.tp.partition) % 2 == 0:
                record_ts[(p.tp, off)] = min(now_ms, w.base_ms + off * 7)
    fams = {f: FamilyRead(True, now_ms / 1000, read_s=0.1, refresh_s=15.0, attempt=1) for f in FAMILIES}
    return CycleInputs(
        cluster_id="bench", controller_id=0,
        brokers=tuple(BrokerSnap(b, f"broker-{b}:9092") for b in range(3)),
        partitions=w.partitions, groups=groups, offsets=offsets, record_ts=record_ts,
        retention=dict.fromkeys(w.topics, (7 * 86_400_000, -1)),
        min_isr=dict.fromkeys(w.topics, 2),
        sizes={tp: end * 100 for tp, end in w.ends.items()},
        families=fams,
    )


def render(snap: Snapshot, cache: RenderCache | None = None) -> bytes:
    """The exposition text the exporter serves for the snapshot (uncompressed); with
    ``cache``, as the collector renders it (unchanged group blocks reused)."""
    fams = small_families(snap)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ListCollector(lambda: fams))
    parts = [generate_latest(reg)]
    parts.extend(text.encode() for text, _ in render_partition_families(snap, cache=cache))
    return b"".join(parts)


Assemble = Callable[[CycleInputs, int], Snapshot]


def run_size(n_parts: int, n_groups: int, cycles: int, warmup: int, end_share: float,
             commit_share: float, seed: int, new_only: bool = False) -> dict[str, float]:
    rnd = random.Random(seed)
    w = make_world(n_parts, n_groups, seed)
    old_h = baseline.BaselineHistory(300_000, 600_000, 10)
    new_h = History(300_000, 600_000, 10)
    paths: dict[str, Assemble] = {
        "old": lambda inp, now: baseline.assemble_snapshot(inp, old_h, now),
        "new": lambda inp, now: assemble_snapshot(inp, new_h, now),
    }
    if new_only:  # scale runs: the new path alone, no oracle, nothing compared
        del paths["old"]
    times: dict[str, list[float]] = {"old": [], "new": [], "render": []}
    cache = RenderCache()  # the collector's, kept from cycle to cycle
    now = w.base_ms + 3_600_000
    rows = 0
    for k in range(cycles + 1):
        if k:
            step(w, rnd, end_share, commit_share)
        now += INTERVAL_MS
        inp = cycle_inputs(w, now)
        rows = sum(len(g.partitions) for g in inp.groups)
        snaps: dict[str, Snapshot] = {}
        order = tuple(n for n in (("old", "new") if k % 2 == 0 else ("new", "old")) if n in paths)
        last = k == cycles
        for name in order:
            gc.collect()
            if last:  # the memory cycle: not timed
                tracemalloc.start()
                snaps[name] = paths[name](inp, now)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
                times[f"{name}_peak_mb"] = [peak / 1e6]
            else:
                t0 = time.process_time()
                snaps[name] = paths[name](inp, now)
                dt = time.process_time() - t0
                if k >= warmup:
                    times[name].append(dt)
        a = render(snaps["old"]) if "old" in snaps else None
        t0 = time.process_time()
        b = render(snaps["new"], cache)
        if k >= warmup and not last:
            times["render"].append(time.process_time() - t0)
        full = render(snaps["new"])  # without the cache: the text must be the same
        if full != b:
            sys.exit(f"{n_parts}x{n_groups} cycle {k}: the render reusing unchanged group "
                     "blocks differs from a full render")
        del full
        if a is not None and a != b:
            al, bl = a.decode().splitlines(), b.decode().splitlines()
            diff = next((i for i, (x, y) in enumerate(zip(al, bl)) if x != y), min(len(al), len(bl)))
            sys.exit(f"{n_parts}x{n_groups} cycle {k}: rendered output differs at line {diff}:\n"
                     f"  old: {al[diff] if diff < len(al) else '<end>'}\n"
                     f"  new: {bl[diff] if diff < len(bl) else '<end>'}")
        del snaps, inp, a, b
    if new_only:
        times["old"], times["old_peak_mb"] = [math.nan], [math.nan]
    old_ms = statistics.median(times["old"]) * 1000
    new_ms = statistics.median(times["new"]) * 1000
    return {"partitions": n_parts, "groups": n_groups, "group_partitions": rows,
            "cycles_timed": len(times["new"]), "old_ms": old_ms, "new_ms": new_ms,
            "old_mean_ms": statistics.fmean(times["old"]) * 1000,
            "new_mean_ms": statistics.fmean(times["new"]) * 1000,
            "render_ms": statistics.median(times["render"]) * 1000,
            "ratio": new_ms / old_ms, "old_peak_mb": times["old_peak_mb"][0],
            "new_peak_mb": times["new_peak_mb"][0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000x200,10000x500",
                    help="comma-separated PARTITIONSxGROUPS (e.g. 2000x200,10000x500,50000x2000)")
    ap.add_argument("--cycles", type=int, default=48, help="timed cycles plus warm-up, per size")
    ap.add_argument("--warmup", type=int, default=4, help="first cycles not timed")
    ap.add_argument("--end-share", type=float, default=0.3, help="share of log ends advancing per cycle")
    ap.add_argument("--commit-share", type=float, default=0.2, help="share of commits advancing per cycle")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--new-only", action="store_true",
                    help="time the new path alone (no old path, no comparison): for sizes "
                         "where the old path would take too long")
    args = ap.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().strip()}  (cores: {os.cpu_count()})")
    print("size | group partitions | cycles timed | old ms/cycle (median, mean) | new ms/cycle "
          "(median, mean) | new/old | peak MB during a cycle old/new | rendered identical | "
          "render of the new snapshot ms (median) | new + render ms", flush=True)
    for size in args.sizes.split(","):
        n_parts, n_groups = (int(x) for x in size.lower().split("x"))
        r = run_size(n_parts, n_groups, args.cycles, args.warmup, args.end_share,
                     args.commit_share, args.seed, args.new_only)
        print(f"{n_parts}x{n_groups} | {r['group_partitions']:,} | {r['cycles_timed']} | "
              f"{r['old_ms']:.1f}, {r['old_mean_ms']:.1f} | {r['new_ms']:.1f}, {r['new_mean_ms']:.1f} | "
              f"{r['ratio']:.3f} | {r['old_peak_mb']:.1f} / {r['new_peak_mb']:.1f} | "
              f"{'not compared (--new-only)' if args.new_only else f'yes, {args.cycles + 1} cycles'} | "
              f"{r['render_ms']:.1f} | "
              f"{r['new_ms'] + r['render_ms']:.1f}", flush=True)
    with open("/proc/loadavg") as f:
        print(f"load average after: {f.read().strip()}")
    print(f"peak RSS of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
