"""When the next collection cycle starts: aligned to the scrapes when they are regular (pure).

Prometheus scrapes a target at a fixed period and a fixed phase (the offset of
a target inside its period is derived once from its labels; there is no
per-scrape jitter). A cycle started so that it ends just before the next
scrape serves data a fraction of a second old, where a cycle on a fixed
schedule of the same period serves data half a period older on average.

The HTTP side notes when each scrape arrives and from which client address;
this module fits each client's recent scrape times to a grid (period and
phase) and plans the next cycle's start:

* **aligned** when every active client that scraped at least ``MIN_SCRAPES``
  times follows a grid, and they all follow the same one (one Prometheus, or
  several at the same phase): the cycle starts ``margin`` before a predicted
  scrape, ``margin`` being the 90th percentile of the recent cycle durations
  plus a safety. Cycles stay about ``--interval`` apart and never closer (2 %
  of slack for the estimate): every k-th scrape when scrapes come more often
  than ``--interval``, and when they come less often, the period cut into
  steps of at least ``--interval`` with one ending before each scrape (see
  :func:`cycle_grid`). So the CPU per minute does not rise above the fixed
  schedule's;
* **fixed** (``--interval`` from the previous start, as before) otherwise: no
  scrapes, irregular scrapes, several scrapers at different phases (an HA pair
  of Prometheus servers: aligned to none), alignment turned off, or cycles
  longer than the period (then the next cycle starts as soon as the previous
  one ends, as on the fixed schedule).

Times are seconds on one monotonic clock (the HTTP and collector processes
share the machine's); nothing here reads a clock.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

#: a client counts as a scraper once this many of its scrapes are kept
MIN_SCRAPES = 4
#: scrape times kept per client
KEEP = 12
#: cycle durations the margin is learned from
DURATIONS_KEPT = 10
#: in a run of at least this many scrapes, one off the grid is left out
OUTLIER_FROM = 6
#: no alignment to scrapes more frequent than this
MIN_PERIOD_S = 1.0
#: a client whose latest scrape is older than this many of its periods is gone
GONE_AFTER_PERIODS = 3.0

OFF = "off"
ALIGNED = "aligned"
NO_SCRAPER = "no regular scraper"
IRREGULAR = "irregular scrapes"
SEVERAL_PHASES = "several scrapers at different phases"
LONG_CYCLES = "cycles longer than the scrape period"


def tolerance(period_s: float) -> float:
    """How far a scrape may arrive from its grid time (network, load, the scraper's own loop)."""
    return max(0.25, 0.05 * period_s)


@dataclass(frozen=True)
class Fit:
    """One scraper's grid: scrapes at ``anchor_s + n * period_s``."""

    period_s: float
    #: the grid time of the latest scrape fitted
    anchor_s: float
    #: the latest scrape's arrival
    last_s: float
    scrapes: int

    def next_at_or_after(self, t: float) -> float:
        """The first grid time >= ``t``."""
        n = math.ceil((t - self.anchor_s) / self.period_s - 1e-9)
        return self.anchor_s + n * self.period_s

    def phase_distance(self, other: Fit) -> float:
        """How far apart the two grids' phases are, in seconds (modulo this period)."""
        d = (other.anchor_s - self.anchor_s) % self.period_s
        return min(d, self.period_s - d)


def _fit(ts: Sequence[float]) -> Fit | None:
    gaps = [b - a for a, b in pairwise(ts)]
    p0 = statistics.median(gaps)
    if p0 < MIN_PERIOD_S:
        return None
    steps = []
    for g in gaps:
        k = round(g / p0)
        # one missed scrape (a failed or timed-out one) is a gap of two periods
        if k not in (1, 2) or abs(g - k * p0) > tolerance(p0) * k:
            return None
        steps.append(k)
    if sum(1 for k in steps if k == 2) > 1:
        return None
    total = sum(steps)
    period = (ts[-1] - ts[0]) / total
    if period < MIN_PERIOD_S:
        return None
    idx = [0]
    for k in steps:
        idx.append(idx[-1] + k)
    resid = [t - (ts[0] + n * period) for t, n in zip(ts, idx)]
    offset = statistics.median(resid)
    if any(abs(r - offset) > tolerance(period) for r in resid):
        return None
    return Fit(period, ts[0] + offset + total * period, ts[-1], len(ts))


def fit_scrapes(times: Sequence[float]) -> Fit | None:
    """The grid one client's recent scrape times follow, or None: fewer than
    ``MIN_SCRAPES``, a period under ``MIN_PERIOD_S``, or a scrape off the grid by
    more than the tolerance. The longest regular run ending with the latest scrape
    is used (in a run of ``OUTLIER_FROM`` or more, one scrape off the grid may be left
    out), so a change of period or phase realigns after ``MIN_SCRAPES`` scrapes."""
    ts = sorted(times)[-KEEP:]
    for n in range(len(ts), MIN_SCRAPES - 1, -1):
        run = ts[-n:]
        f = _fit(run)
        if f is not None:
            return f
        if n >= OUTLIER_FROM:  # one scrape off the grid (late under load, someone's curl)
            for i in range(n):
                f = _fit(run[:i] + run[i + 1:])
                if f is not None:
                    return f
    return None


def scrape_grid(scrapes: Mapping[str, Sequence[float]], now: float,
                interval_s: float) -> tuple[Fit | None, str]:
    """The one grid every active scraper follows, or None and why not.

    A client with fewer than ``MIN_SCRAPES`` scrapes kept (someone's curl) is
    ignored; so is one silent for ``GONE_AFTER_PERIODS`` of its periods."""
    fits: list[Fit] = []
    for _client, times in sorted(scrapes.items()):
        ts = sorted(times)
        if len(ts) < MIN_SCRAPES:
            continue
        f = fit_scrapes(ts)
        typical = f.period_s if f is not None else max(
            interval_s, statistics.median([b - a for a, b in pairwise(ts)]))
        if now - ts[-1] > GONE_AFTER_PERIODS * typical:
            continue
        if f is None:
            return None, IRREGULAR
        fits.append(f)
    if not fits:
        return None, NO_SCRAPER
    first = fits[0]
    for f in fits[1:]:
        if (abs(f.period_s - first.period_s) > tolerance(first.period_s)
                or first.phase_distance(f) > tolerance(first.period_s)):
            return None, SEVERAL_PHASES
    return max(fits, key=lambda f: f.scrapes), ALIGNED


def p90(durations: Sequence[float]) -> float:
    xs = sorted(durations)
    return xs[max(0, math.ceil(0.9 * len(xs)) - 1)] if xs else 0.0


def margin_s(durations: Sequence[float]) -> float:
    """How long before the scrape a cycle starts: the 90th percentile of the recent
    cycle durations plus a safety (10 % of it, at least 0.5 s)."""
    d = p90(durations[-DURATIONS_KEPT:])
    return d + max(0.5, 0.1 * d)


@dataclass(frozen=True)
class Plan:
    #: when the next cycle starts (monotonic seconds)
    start_s: float
    aligned: bool
    #: the estimated scrape period, when there is one
    period_s: float | None
    reason: str
    #: the scrape the cycle is meant to end before (aligned only)
    target_s: float | None = None


def plan_next(now: float, last_start_s: float, interval_s: float, fit: Fit | None,
              reason: str, durations: Sequence[float]) -> Plan:
    """When the cycle after the one that started at ``last_start_s`` (and has ended) starts.

    ``fit`` and ``reason`` come from :func:`scrape_grid` (or ``None, OFF``);
    ``durations`` are the latest cycles' durations, oldest first."""
    fixed = max(now, last_start_s + interval_s)
    if fit is None:
        return Plan(fixed, False, None, reason)
    period = fit.period_s
    step, k = cycle_grid(period, interval_s)
    span = k * step
    if p90(durations[-DURATIONS_KEPT:]) >= span:
        return Plan(fixed, False, period, LONG_CYCLES)
    m = margin_s(durations)
    # never two cycles for one grid time: half a step before the span is up at the earliest
    earliest = max(now, last_start_s + span - step / 2)
    grid = Fit(step, fit.anchor_s, fit.last_s, fit.scrapes)
    target = grid.next_at_or_after(earliest + m)
    return Plan(target - m, True, period, ALIGNED, target)


def cycle_grid(period_s: float, interval_s: float) -> tuple[float, int]:
    """(step, k): cycles end before every k-th point of a grid of ``step`` seconds that
    holds every scrape, spaced about ``--interval`` apart and never closer (2 % of slack
    for the estimate: a 15 s scrape measured as 14.9 s still gets one cycle per scrape).

    Scraped more often than the interval: every k-th scrape. Scraped less often: the
    period cut into n equal steps of at least the interval (30 s scrapes and a 15 s
    interval: a cycle every 15 s, one of them ending just before each scrape), so the
    status windows and rates get the samples they got on the fixed schedule."""
    if period_s < interval_s:
        return period_s, max(1, math.ceil(interval_s / period_s - 0.02))
    n = max(1, math.floor(period_s / interval_s + 0.02))
    return period_s / n, 1
