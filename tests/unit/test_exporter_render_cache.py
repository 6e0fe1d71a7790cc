"""Rendering with the collector's RenderCache (each group's block of the group-partition
families reused when unchanged) gives the same text as a full render, cycle after cycle."""

from __future__ import annotations

import math
import random

import pytest

from opskit.core.models import Severity
from opskit.exporter.families import RenderCache, render_partition_families
from opskit.exporter.options import Granularity
from opskit.exporter.snapshot import GroupPartitionSnap, GroupSnap, PartitionSnap, Snapshot

_ODD_VALUES: tuple[float | None, ...] = (
    None, 0, 1, 1.0, True, -0.0, -1, -2.5, 2**63 - 1, 2**70, 1e300, float("inf"), float("-inf"),
    float("nan"), 0.1 + 0.2, 1.25, 7,
)


def _value(rnd: random.Random, old: float | None) -> float | None:
    r = rnd.random()
    if r < 0.6:
        return old  # unchanged (most series, most cycles)
    if r < 0.75:
        return rnd.choice(_ODD_VALUES)
    if r < 0.9:
        return rnd.randint(0, 10**6)
    return rnd.random() * 1000


class _Groups:
    def __init__(self, rnd: random.Random) -> None:
        self.rnd = rnd
        self.groups: dict[str, list[GroupPartitionSnap]] = {}
        for _ in range(6):
            self.add()

    def add(self) -> None:
        rnd = self.rnd
        gid = rnd.choice(("g", 'we"ird', "back\\slash", "new\nline", "ü-grp")) + str(rnd.randint(0, 99))
        topics = rnd.sample(("t1", "t2", 'q"t', "t\\4"), rnd.randint(1, 3))
        self.groups[gid] = [GroupPartitionSnap(t, p, rnd.choice((None, 5, 10)), rnd.choice((None, 0, 3)),
                                               rnd.choice((None, 0.0, 1.5)))
                            for t in topics for p in range(rnd.randint(0, 5))]

    def step(self) -> None:
        rnd = self.rnd
        if rnd.random() < 0.2:
            self.add()  # a group appears
        if self.groups and rnd.random() < 0.15:
            del self.groups[rnd.choice(list(self.groups))]  # one disappears
        for gid, parts in list(self.groups.items()):
            r = rnd.random()
            if r < 0.05:
                self.groups[gid] = parts[1:]  # a partition fewer (a topic left the group)
                continue
            if r < 0.1:
                parts.append(GroupPartitionSnap("t9", len(parts), 1, 1, 0.5))  # one more
                continue
            if r < 0.15:  # same values, other partitions (a reassigned subscription)
                self.groups[gid] = [GroupPartitionSnap(rnd.choice((gp.topic, "t2")), gp.partition + rnd.randint(0, 1),
                                                       gp.committed, gp.lag, gp.lag_seconds) for gp in parts]
                continue
            if r < 0.5:
                continue  # the whole group unchanged
            self.groups[gid] = [GroupPartitionSnap(gp.topic, gp.partition,
                                                   _value(rnd, gp.committed),  # type: ignore[arg-type]
                                                   _value(rnd, gp.lag),  # type: ignore[arg-type]
                                                   _value(rnd, gp.lag_seconds))
                                for gp in parts]

    def snapshot(self) -> Snapshot:
        order = list(self.groups)
        if self.rnd.random() < 0.2:
            self.rnd.shuffle(order)  # the listing's order changes
        return Snapshot(
            taken_at_ms=1, cluster_id="c", controller_id=0, brokers=(),
            partitions=(PartitionSnap("t1", 0, 0, (0,), (0,), 0, 5),),
            topics=(), groups=tuple(GroupSnap(g, "Stable", 1, Severity.OK, "OK",
                                              partitions=tuple(self.groups[g])) for g in order))


@pytest.mark.parametrize("seed", range(12))
def test_cached_render_equals_a_full_render_over_many_cycles(seed: int) -> None:
    rnd = random.Random(seed)
    groups = _Groups(rnd)
    cache, small_cache = RenderCache(), RenderCache()
    reused = 0
    for k in range(120):
        groups.step()
        snap = groups.snapshot()
        full = list(render_partition_families(snap))
        want = "".join(t for t, _ in full)
        got = list(render_partition_families(snap, cache=cache))
        assert "".join(t for t, _ in got) == want, (seed, k)
        assert sum(n for _, n in got) == sum(n for _, n in full), (seed, k)
        # chunks cut at group boundaries: the same text
        chunked = list(render_partition_families(snap, chunk_series=3, cache=small_cache))
        assert "".join(t for t, _ in chunked) == want, (seed, k)
        assert sum(n for _, n in chunked) == sum(n for _, n in full)
        assert set(cache.groups) == {g.group_id for g in snap.groups}  # the gone are dropped
        reused += cache.reused
    assert reused > 0  # blocks were actually reused, not only written


def test_cached_render_never_serves_a_stale_value() -> None:
    gp = GroupPartitionSnap("t", 0, 10, 4, 2.0)
    snap = Snapshot(taken_at_ms=1, cluster_id="c", controller_id=0, brokers=(), partitions=(),
                    topics=(), groups=(GroupSnap("g", "Stable", 1, Severity.OK, "OK", partitions=(gp,)),))
    cache = RenderCache()
    first = "".join(t for t, _ in render_partition_families(snap, cache=cache))
    assert 'kafka_consumergroup_lag{consumergroup="g",topic="t",partition="0"} 4\n' in first
    again = "".join(t for t, _ in render_partition_families(snap, cache=cache))
    assert again == first and cache.reused == 3 and cache.written == 0
    for lag, text in ((5, " 5\n"), (None, None), (math.nan, None), (4, " 4\n")):
        changed = Snapshot(taken_at_ms=2, cluster_id="c", controller_id=0, brokers=(), partitions=(),
                           topics=(), groups=(GroupSnap("g", "Stable", 1, Severity.OK, "OK", partitions=(
                               GroupPartitionSnap("t", 0, 10, lag, 2.0),)),))  # type: ignore[arg-type]
        out = "".join(t for t, _ in render_partition_families(changed, cache=cache))
        assert out == "".join(t for t, _ in render_partition_families(changed))
        line = 'kafka_consumergroup_lag{consumergroup="g",topic="t",partition="0"}'
        assert (line + text in out) if text else (line not in out)
    assert list(render_partition_families(snap, Granularity.TOPIC, cache=cache)) == []
