"""The exporter's packed history: lossless, and the same windows as the core's GroupWindow."""

from __future__ import annotations

import random

from opskit.core.models import TopicPartition
from opskit.core.status.window import GroupWindow, OffsetSample, PartitionWindow
from opskit.exporter.history import History, PackedWindow

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_pack_unpack_is_lossless_with_nones_and_big_offsets() -> None:
    big = 2**62
    gw = GroupWindow("g", (
        PartitionWindow(A0, (OffsetSample(1_000, None, 5, None), OffsetSample(2_000, 3, 9, 1)), 2_000),
        PartitionWindow(A1, (), None),
        PartitionWindow(B0, (OffsetSample(1_500, big - 7, big, 0),), None),
    ))
    packed = PackedWindow(gw)
    assert packed.samples == 3
    assert packed.unpack("g") == gw
    assert packed.nbytes() >= 3 * 4 * 8


def test_packed_history_matches_plain_group_windows() -> None:
    """Random cycles through History (packed, thinned) and through the core's own
    GroupWindow with the same thinning: identical windows every cycle."""
    rnd = random.Random(7)
    h = History(300_000, 600_000, 5)  # store one sample every 120 s
    plain, plain_at = GroupWindow("g"), None
    committed = {A0: 0, A1: 0, B0: 0}
    ends = {A0: 10, A1: 10, B0: 10}
    for k in range(60):
        now = 1_000_000 + 15_000 * k
        samples = {}
        for tp in (A0, A1, B0):
            ends[tp] += rnd.randint(0, 5)
            if rnd.random() < 0.5:
                committed[tp] = min(ends[tp], committed[tp] + rnd.randint(0, 8))
            if tp is B0 and 20 <= k < 45:
                continue  # a partition that goes missing for a while
            c = None if tp is A1 and k < 3 else committed[tp]
            samples[tp] = OffsetSample(now, c, ends[tp], 0)
        h.observe_log_ends(now, ends)
        got = h.observe_group("g", now, samples)
        want = plain.observe(now, samples, h.policy)
        if plain_at is None or now - plain_at >= h.spacing_ms:
            plain, plain_at = want, now
        assert got == want, k
        assert h.stored_window("g") == plain, k
    assert 0 < h.sizes()["group_samples"] <= 3 * 6
    assert h.window_bytes() > 0
    h.forget_groups_except([])
    assert h.stored_window("g") is None and h.window_bytes() == 0


def test_packed_timelines_match_the_core_timeline() -> None:
    """Growth, idle plateaus, a truncation restart and the point cap: History's
    packed timelines give the same OffsetTimeline as adding to it directly."""
    from opskit.core.timing.timeline import OffsetTimeline
    from opskit.exporter.history import TIMELINE_POINTS

    h = History(300_000, 600_000, 10)
    plain = OffsetTimeline((), TIMELINE_POINTS)
    ends = [10, 20, 20, 20, 20, 35, 5, 8] + list(range(9, 60, 2))
    for k, end in enumerate(ends):
        now = 1_000_000 + 15_000 * k
        h.observe_log_ends(now, {A0: end, B0: 100})
        plain = plain.add(end, now)
        assert h.timeline(A0) == plain, k  # during the cycle (unpacked)
        h.end_cycle()
        assert h.timeline(A0) == plain, k  # between cycles (from the packed form)
    assert len(plain.points) == TIMELINE_POINTS
    assert h.timeline(B0) is not None and len(h.timeline(B0).points) == 2  # a plateau: 2 points
    h.observe_log_ends(2_000_000, {B0: 100})
    assert h.timeline(A0) is None  # gone partitions are dropped
    assert h.timeline_points() == 2
