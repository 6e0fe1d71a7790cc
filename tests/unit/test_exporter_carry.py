"""The carried status rules (opskit.core.status.carry: a summary of the older samples plus
the newest one) against partition_status and window_rates on the whole window, and the
exporter's carried windows against its general path, cycle after cycle."""

from __future__ import annotations

import random
from collections import Counter

from opskit.core.models import TopicPartition
from opskit.core.status.carry import append, rates_after, status_after, summarize
from opskit.core.status.quick import partition_status
from opskit.core.timing.rates import window_rates
from opskit.exporter.history import History
from opskit.exporter.windows import CARRIED_STRIDE, carry


def _rows(rnd: random.Random, t: int) -> list[tuple[int, int | None, int, int | None]]:
    end, start = rnd.randint(0, 100), rnd.choice((None, 0, 20))
    c: int | None = rnd.randint(0, 100)
    rows: list[tuple[int, int | None, int, int | None]] = []
    for _ in range(rnd.randint(0, 12)):
        t += rnd.choice((5_000, 15_000, 60_000))
        end = max(0, end + rnd.choice((0, 0, 5, 30, -40)))
        if rnd.random() < 0.1:
            c = None
        elif rnd.random() < 0.5:
            c = max(0, (c or 0) + rnd.choice((0, 0, 3, 20, -15, 200)))
        s = start if rnd.random() < 0.9 else rnd.choice((None, 0, 50))
        rows.append((t, c, end, s))
    return rows


def test_carried_status_and_rates_equal_the_whole_window() -> None:
    rnd = random.Random(22)
    seen: Counter[str] = Counter()
    for _ in range(20_000):
        window_ms = rnd.choice((60_000, 600_000, 10**9))
        allowed, min_samples = rnd.choice((0, 0, 10)), rnd.choice((1, 2, 3))
        min_span = rnd.choice((0, 30_000, 60_000))
        older = _rows(rnd, 1_000_000)
        last = _rows(rnd, older[-1][0] if older else 1_000_000)
        if not last:
            continue
        row = last[0]
        # what the window holds at row's time: the older samples still inside it
        cutoff = row[0] - window_ms
        kept = [r for r in older if r[0] >= cutoff]
        since = rnd.choice((None, 900_000, kept[0][0] if kept else None, row[0]))
        want = partition_status(kept + [row], since, row[0], window_ms, allowed, min_samples, min_span)
        got = status_after(summarize(kept, allowed), row, since, min_samples, min_span, allowed)
        assert got is want, (kept, row, since, window_ms, allowed, min_samples, min_span)
        want_rates = window_rates(kept + [row])
        assert rates_after(summarize(kept, allowed), row) == want_rates, (kept, row)
        seen[want.value] += 1
    assert set(seen) == {"OK", "WARN", "REWIND", "STOP", "STALL", "ERR", "UNKNOWN"}, seen


def test_append_equals_summarizing_the_longer_window() -> None:
    """A summary carried over a store (the new sample added to the summary of the samples
    kept) equals the summary of the whole window, on 20,000 generated windows."""
    rnd = random.Random(23)
    for _ in range(20_000):
        allowed = rnd.choice((0, 0, 10))
        older = _rows(rnd, 1_000_000)
        last = _rows(rnd, older[-1][0] if older else 1_000_000)
        if not last:
            continue
        got = summarize((), allowed)
        for r in older:
            got = append(got, r, allowed)
        assert got == summarize(older, allowed), older
        assert append(summarize(older, allowed), last[0], allowed) == summarize(
            older + [last[0]], allowed), (older, last[0])


def test_carried_windows_equal_the_general_path_cycle_after_cycle() -> None:
    """Two histories fed the same samples: one evaluates through carried_window where it
    applies, the other always through observe_group_rows; same statuses and rates, and
    the carried path is taken on most cycles."""
    rnd = random.Random(7)
    tps = [TopicPartition("t", p) for p in range(6)]
    a, b = History(300_000, 600_000, 10), History(300_000, 600_000, 10)
    pol = a.policy
    now = 1_700_000_000_000
    ends = dict.fromkeys(tps, 1000)
    commits: dict[TopicPartition, int | None] = dict.fromkeys(tps, 900)
    carried = 0
    for k in range(200):
        now += rnd.choice((15_000, 15_000, 15_000, 1_000, 45_000, 700_000))
        for tp in tps:
            ends[tp] += rnd.choice((0, 0, 10, 100))
            c = commits[tp]
            commits[tp] = (None if rnd.random() < 0.03 else
                           max(0, min(ends[tp], (c or 0) + rnd.choice((0, 0, 50, -20, 200)))))
        present = [tp for tp in tps if rnd.random() > 0.05]  # a partition without a sample
        samples = {tp: (now, commits[tp], ends[tp], rnd.choice((0, 0, 0, 950))) for tp in present}
        want = [(tp, partition_status(rows, since, now, pol.window_ms, pol.allowed_lag,
                                      pol.min_samples, pol.min_span_ms), window_rates(rows))
                for tp, since, rows in b.observe_group_rows("g", now, samples)]
        cw = a.carried_window("g", now, samples)
        if cw is None:
            got = [(tp, partition_status(rows, since, now, pol.window_ms, pol.allowed_lag,
                                         pol.min_samples, pol.min_span_ms), window_rates(rows))
                   for tp, since, rows in a.observe_group_rows("g", now, samples)]
        else:
            carried += 1
            got = []
            stride = len(cw.data) // len(cw.tps)
            for i, tp in enumerate(cw.tps):
                d = cw.data[i * stride:(i + 1) * stride]
                row = samples[tp]
                since = (None if row[1] is None else row[0] if d[0] == 0 or d[1] != row[1] or d[2] == -1
                         else d[2])
                sm = d[3:]
                got.append((tp, status_after(sm, row, since, pol.min_samples, pol.min_span_ms,
                                             pol.allowed_lag), rates_after(sm, row)))
        assert got == want, k
        assert a.stored_window("g") == b.stored_window("g"), k
    assert carried > 60, carried


def test_stores_carry_the_summary_over_as_summarizing_the_stored_window() -> None:
    """Cycles mostly every 15 s (a store every 4th), sometimes late: the stores go through
    the carried summary, and the summary carried over each store equals summarizing the
    new stored window afresh; statuses, rates and stored windows equal the general path's.
    Three groups, one per slot of the cycle that prepares the next summary."""
    rnd = random.Random(11)
    tps = [TopicPartition("t", p) for p in range(4)]
    groups = ("a", "g", "b")  # slots 0, 1, 2
    a, b = History(300_000, 600_000, 10), History(300_000, 600_000, 10)
    pol = a.policy
    now = 1_700_000_000_000
    ends = dict.fromkeys(tps, 1000)
    commits: dict[TopicPartition, int | None] = dict.fromkeys(tps, 900)
    carried_over = Counter[str]()
    for k in range(700):
        now += rnd.choice((15_000,) * 40 + (16_000, 30_000, 200_000))
        for tp in tps:
            ends[tp] = max(0, ends[tp] + rnd.choice((0, 0, 10, 100) * 20 + (-300,)))
            c = commits[tp]
            commits[tp] = (None if rnd.random() < 0.01 else
                           max(0, min(ends[tp], (c or 0) + rnd.choice((0, 0, 50, -20, 200)))))
        present = tps if rnd.random() > 0.01 else tps[1:]
        for g in groups:
            samples = {tp: (now, commits[tp], ends[tp], rnd.choice((0,) * 30 + (950,)))
                       for tp in present}
            want = [(tp, partition_status(rows, since, now, pol.window_ms, pol.allowed_lag,
                                          pol.min_samples, pol.min_span_ms), window_rates(rows))
                    for tp, since, rows in b.observe_group_rows(g, now, samples)]
            stored_before = a._stored_at.get(g)
            cw = a.carried_window(g, now, samples)
            if cw is None:
                got = [(tp, partition_status(rows, since, now, pol.window_ms, pol.allowed_lag,
                                             pol.min_samples, pol.min_span_ms), window_rates(rows))
                       for tp, since, rows in a.observe_group_rows(g, now, samples)]
            else:
                got = []
                for i, tp in enumerate(cw.tps):
                    d = cw.data[i * CARRIED_STRIDE:(i + 1) * CARRIED_STRIDE]
                    row = samples[tp]
                    since = (None if row[1] is None else
                             row[0] if d[0] == 0 or d[1] != row[1] or d[2] == -1 else d[2])
                    got.append((tp, status_after(d[3:], row, since, pol.min_samples,
                                                 pol.min_span_ms, pol.allowed_lag),
                                rates_after(d[3:], row)))
                new = a._carried.get(g)
                if a._stored_at[g] != stored_before and new is not None:  # carried over
                    carried_over[g] += 1
                    assert new.packed is a._windows[g]
                    again = carry(g, new.packed, now - pol.window_ms, samples, pol, a._tps)
                    assert again is not None
                    assert (new.tps, new.data, new.until, new.latest_ms) == (
                        again.tps, again.data, again.until, again.latest_ms), (g, k)
            assert got == want, (g, k)
            assert a.stored_window(g) == b.stored_window(g), (g, k)
    # full windows (10 stored samples kept) are reached between the late cycles
    assert a.sizes()["group_samples"] > 0
    assert min(carried_over[g] for g in groups) > 60, carried_over
