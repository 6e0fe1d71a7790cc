"""The collection schedule: fitting scrape times to a grid and planning the next cycle (pure)."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from opskit.exporter.schedule import (
    ALIGNED,
    IRREGULAR,
    LONG_CYCLES,
    NO_SCRAPER,
    OFF,
    SEVERAL_PHASES,
    fit_scrapes,
    margin_s,
    plan_next,
    scrape_grid,
)


def grid(period: float, phase: float, n: int, jitter: float = 0.0, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [1000.0 + phase + i * period + rng.uniform(-jitter, jitter) for i in range(n)]


def test_regular_scrapes_give_their_period_and_phase_despite_jitter():
    ts = grid(15.0, 4.0, 10, jitter=0.2)
    f = fit_scrapes(ts)
    assert f is not None
    assert f.period_s == pytest.approx(15.0, abs=0.1)
    # the next scrape is predicted within the jitter
    assert f.next_at_or_after(ts[-1] + 1) == pytest.approx(1000.0 + 4.0 + 10 * 15.0, abs=0.3)


def test_too_few_scrapes_fit_nothing():
    assert fit_scrapes(grid(15.0, 0.0, 3)) is None
    assert fit_scrapes(grid(15.0, 0.0, 4)) is not None


def test_irregular_scrapes_fit_nothing():
    rng = random.Random(7)
    t, ts = 1000.0, []
    for _ in range(12):
        t += rng.uniform(3.0, 25.0)
        ts.append(t)
    assert fit_scrapes(ts) is None


def test_one_missed_scrape_is_allowed():
    ts = grid(15.0, 0.0, 8)
    del ts[4]
    f = fit_scrapes(ts)
    assert f is not None and f.period_s == pytest.approx(15.0)


def test_a_period_change_realigns_on_the_latest_scrapes():
    ts = grid(15.0, 0.0, 8) + [1000.0 + 7 * 15.0 + 30.0 * i for i in range(1, 5)]
    f = fit_scrapes(ts)
    assert f is not None and f.period_s == pytest.approx(30.0)


def test_two_scrapers_at_different_phases_from_one_address_fit_nothing():
    ts = sorted(grid(15.0, 0.0, 6) + grid(15.0, 6.0, 6))
    assert fit_scrapes(ts) is None


def test_grid_one_prometheus_aligned():
    ts = grid(15.0, 2.0, 6)
    fit, why = scrape_grid({"10.0.0.5": ts}, ts[-1] + 1, 15.0)
    assert why == ALIGNED and fit is not None and fit.period_s == pytest.approx(15.0)


def test_grid_ha_pair_at_different_phases_falls_back():
    a, b = grid(15.0, 2.0, 6), grid(15.0, 9.5, 6)
    fit, why = scrape_grid({"10.0.0.5": a, "10.0.0.6": b}, max(a[-1], b[-1]) + 1, 15.0)
    assert fit is None and why == SEVERAL_PHASES


def test_grid_two_scrapers_at_the_same_phase_align():
    a, b = grid(15.0, 2.0, 6, seed=1, jitter=0.1), grid(15.0, 2.0, 6, seed=2, jitter=0.1)
    fit, why = scrape_grid({"10.0.0.5": a, "10.0.0.6": b}, a[-1] + 1, 15.0)
    assert why == ALIGNED and fit is not None


def test_grid_ignores_a_few_curls_but_not_an_irregular_scraper():
    ts = grid(15.0, 2.0, 6)
    now = ts[-1] + 1
    fit, why = scrape_grid({"10.0.0.5": ts, "10.0.0.9": [now - 5, now - 3, now - 2]}, now, 15.0)
    assert why == ALIGNED
    rng = random.Random(3)
    irregular = sorted(now - rng.uniform(0, 40) for _ in range(6))
    fit, why = scrape_grid({"10.0.0.5": ts, "10.0.0.9": irregular}, now, 15.0)
    assert fit is None and why == IRREGULAR


def test_grid_none_and_gone_scrapers():
    assert scrape_grid({}, 100.0, 15.0) == (None, NO_SCRAPER)
    ts = grid(15.0, 0.0, 6)
    # silent for more than three periods: gone
    assert scrape_grid({"a": ts}, ts[-1] + 46, 15.0) == (None, NO_SCRAPER)
    assert scrape_grid({"a": ts}, ts[-1] + 44, 15.0)[1] == ALIGNED


def test_margin_is_p90_of_durations_plus_safety():
    assert margin_s([1.0] * 9 + [5.0]) == pytest.approx(1.0 + 0.5)
    assert margin_s([2.0] * 8 + [6.0, 7.0]) == pytest.approx(6.0 + 0.6)
    assert margin_s([]) == pytest.approx(0.5)


def test_aligned_plan_ends_the_cycle_a_margin_before_the_next_scrape():
    ts = grid(15.0, 3.0, 6)
    fit, why = scrape_grid({"p": ts}, ts[-1] + 0.5, 15.0)
    durations = [2.0] * 10
    last_start = ts[-1] - 2.5  # the previous cycle ended just before the latest scrape
    plan = plan_next(ts[-1] + 0.5, last_start, 15.0, fit, why, durations)
    assert plan.aligned and plan.reason == ALIGNED
    assert plan.target_s == pytest.approx(ts[-1] + 15.0)
    assert plan.start_s == pytest.approx(ts[-1] + 15.0 - margin_s(durations))


def test_plans_are_one_cycle_per_scrape_period_at_most():
    """Walking the schedule: each cycle targets a later scrape than the one before,
    starts at least half a period after it, and there is one cycle per scrape."""
    period = 15.0
    scrapes = grid(period, 3.0, 40)
    fit, why = scrape_grid({"p": scrapes[:6]}, scrapes[5], period)
    start, starts, targets = scrapes[5] - 5.0, [], []
    for _ in range(20):
        durations = [2.0, 3.0, 2.5]
        end = start + 2.5
        plan = plan_next(end, start, period, fit, why, durations)
        assert plan.aligned and plan.start_s >= end
        assert plan.start_s - start >= period / 2
        starts.append(plan.start_s)
        targets.append(plan.target_s)
        start = plan.start_s
    gaps = [b - a for a, b in pairwise(starts)]
    assert all(g == pytest.approx(period) for g in gaps)
    assert len({round(t or 0, 6) for t in targets}) == len(targets)


def test_scrapes_more_often_than_the_interval_align_to_every_kth():
    """Scraped every 5 s with --interval 15s: a cycle every third scrape (CPU as before)."""
    ts = grid(5.0, 1.0, 8)
    fit, why = scrape_grid({"p": ts}, ts[-1] + 0.1, 15.0)
    assert fit is not None
    last_start = ts[-1] - 1.0
    plan = plan_next(ts[-1] + 0.1, last_start, 15.0, fit, why, [0.5])
    assert plan.aligned and plan.target_s == pytest.approx(ts[-1] + 15.0)
    assert plan.start_s - last_start >= 15.0 - 5.0 / 2


def test_a_cycle_longer_than_the_period_is_followed_at_once():
    ts = grid(15.0, 0.0, 6)
    fit, why = scrape_grid({"p": ts}, ts[-1] + 1, 15.0)
    start = ts[-1] - 10
    now = start + 20.0  # the cycle took 20 s
    plan = plan_next(now, start, 15.0, fit, why, [20.0, 19.0, 21.0])
    assert not plan.aligned and plan.reason == LONG_CYCLES
    assert plan.start_s == now and plan.period_s == pytest.approx(15.0)


@pytest.mark.parametrize("reason", [OFF, NO_SCRAPER, IRREGULAR, SEVERAL_PHASES])
def test_fallback_is_the_fixed_interval_schedule(reason):
    plan = plan_next(103.0, 100.0, 15.0, None, reason, [2.0])
    assert (plan.start_s, plan.aligned, plan.period_s, plan.reason) == (115.0, False, None, reason)
    # overran: at once
    assert plan_next(120.0, 100.0, 15.0, None, reason, [20.0]).start_s == 120.0


class _NoSource:
    def collect(self):  # type: ignore[no-untyped-def]
        raise AssertionError("not collected in this test")

    def close(self) -> None:
        pass


def _served(ex):  # type: ignore[no-untyped-def]
    from prometheus_client.parser import text_string_to_metric_families

    return {s.name: s.value for fam in text_string_to_metric_families(ex.scrape().decode())
            for s in fam.samples}


def test_engine_plans_from_noted_scrapes_and_serves_the_schedule():
    from opskit.exporter.engine import Exporter
    from opskit.exporter.options import ExporterOptions

    ex = Exporter(_NoSource(), ExporterOptions(interval_s=15.0), clock=lambda: 0.0)
    ts = grid(15.0, 2.0, 6)
    ex.note_scrapes([(t, "10.0.0.5") for t in ts])
    ex.scrape_arrived(ts[-1] + 15.0, "10.0.0.5")
    plan = ex.next_plan(ts[-1] + 16.0, ts[-1] + 14.0)
    assert plan.aligned and plan.period_s == pytest.approx(15.0)
    ex._set_plan(plan)
    v = _served(ex)
    assert v["opskit_exporter_schedule_aligned"] == 1
    assert v["opskit_exporter_scrape_period_seconds"] == pytest.approx(15.0)
    # an HA pair at another phase: back to the fixed schedule, no period served
    ex.note_scrapes([(t + 7.0, "10.0.0.6") for t in ts[1:]] + [(ts[-1] + 22.0, "10.0.0.6")])
    plan = ex.next_plan(ts[-1] + 23.0, ts[-1] + 14.0)
    assert not plan.aligned and plan.reason == SEVERAL_PHASES
    ex._set_plan(plan)
    v = _served(ex)
    assert v["opskit_exporter_schedule_aligned"] == 0
    assert "opskit_exporter_scrape_period_seconds" not in v


def test_engine_alignment_off():
    from opskit.exporter.engine import Exporter
    from opskit.exporter.options import ExporterOptions

    ex = Exporter(_NoSource(), ExporterOptions(interval_s=15.0, align_to_scrapes=False))
    ts = grid(15.0, 2.0, 8)
    ex.note_scrapes([(t, "p") for t in ts])
    plan = ex.next_plan(ts[-1] + 1, ts[-1] - 3)
    assert not plan.aligned and plan.reason == OFF and plan.start_s == ts[-1] + 12


@pytest.mark.parametrize(("period", "interval", "gap"), [
    (15.0, 15.0, 15.0), (14.9, 15.0, 14.9), (14.0, 15.0, 28.0), (7.5, 15.0, 15.0),
    (5.0, 15.0, 15.0), (20.0, 15.0, 20.0), (30.0, 15.0, 15.0), (60.0, 15.0, 15.0),
    (29.8, 15.0, 14.9)])
def test_cycles_about_an_interval_apart_never_closer(period, interval, gap):
    """Walking the schedule: cycles end gap seconds apart (never closer than the interval,
    within the 2 % slack): on every k-th scrape when scraped more often than the interval,
    else one just before every scrape."""
    ts = grid(period, 0.5, 8)
    fit, why = scrape_grid({"p": ts}, ts[-1] + 0.1, interval)
    start, ends = ts[-1] - 1.0, []
    for _ in range(12):
        plan = plan_next(start + 0.5, start, interval, fit, why, [0.5])
        assert plan.aligned
        ends.append(plan.target_s)
        start = plan.start_s
    gaps = [b - a for a, b in pairwise(ends)]
    assert all(g == pytest.approx(gap) for g in gaps)
    assert min(gaps) >= 0.98 * interval
    assert fit is not None
    if period < interval:  # every end is a scrape (every k-th)
        assert all(fit.next_at_or_after(e - 0.01) == pytest.approx(e) for e in ends)
    else:  # every scrape is an end
        scrapes = [fit.next_at_or_after(ends[0]) + i * period for i in range(3)]
        assert all(any(e == pytest.approx(s) for e in ends) for s in scrapes)


def test_one_late_scrape_among_many_is_left_out_two_are_not():
    ts = grid(15.0, 0.0, 10)
    late = list(ts)
    late[6] += 4.0  # delayed by seconds (a loaded scraper)
    f = fit_scrapes(late)
    assert f is not None and f.period_s == pytest.approx(15.0)
    assert f.next_at_or_after(ts[-1] + 1) == pytest.approx(ts[-1] + 15.0)
    late[7] += 5.0  # two off the grid among the latest: no fit until 4 regular ones follow
    assert fit_scrapes(late) is None
    assert fit_scrapes(late + [ts[-1] + 15.0 * i for i in range(1, 5)]) is not None
