"""Lag sampled over a window for Burrow-style status.

:func:`sample_lag` calls a collector (e.g.
:func:`opskit.adapters.lag.timed.collect.collect_timed_lag`) every ``interval`` for a
``window`` (or a number of rounds), feeding each round into a
:class:`~opskit.core.status.GroupWindow` per group; :func:`judge_groups` turns
the windows into statuses with rates and catch-up ETA. The clock and sleep are
parameters, so the loop is tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from opskit.adapters.lag.timed.collect import (
    Clock,
    Sleep,
    collect_timed_lag,
    judge_invisible_groups,
)
from opskit.adapters.lag.timed.report import RetentionConfig, TimedLagReport
from opskit.core.models import (
    Anomaly,
    GroupLag,
    LagThresholds,
    Severity,
    TopicPartition,
)
from opskit.core.status.evaluate import evaluate_group
from opskit.core.status.result import GroupStatus
from opskit.core.status.window import DEFAULT_MIN_SPAN_MS, GroupWindow, OffsetSample, StatusPolicy
from opskit.core.timing.rates import CatchUp, catch_up_eta, consume_rate, produce_rate

#: imported from here by the CLI and the exporter
__all__ = ["GroupJudgement", "RetentionConfig", "Sampling", "TimedLagReport", "collect_timed_lag",
           "judge_groups", "judge_invisible_groups", "policy_for_window", "sample_lag",
           "samples_of"]


def samples_of(group: GroupLag, timestamp_ms: int) -> dict[TopicPartition, OffsetSample]:
    """One :class:`OffsetSample` per partition whose log offsets were read."""
    out: dict[TopicPartition, OffsetSample] = {}
    for p in group.partitions:
        if p.log_end is None:
            continue
        out[p.tp] = OffsetSample(timestamp_ms, p.committed, p.log_end, p.log_start)
    return out


@dataclass
class Sampling:
    """The state of a sampling run: one window per group, and the last round."""

    policy: StatusPolicy
    windows: dict[str, GroupWindow] = field(default_factory=dict)
    last: TimedLagReport | None = None
    rounds: int = 0
    started_ms: int | None = None
    last_ms: int | None = None

    def observe(self, timestamp_ms: int, report: TimedLagReport) -> None:
        if self.started_ms is None:
            self.started_ms = timestamp_ms
        for g in report.groups:
            w = self.windows.get(g.group_id, GroupWindow(g.group_id))
            self.windows[g.group_id] = w.observe(timestamp_ms, samples_of(g, timestamp_ms), self.policy)
        self.last = report
        self.last_ms = timestamp_ms
        self.rounds += 1


def policy_for_window(
    window_ms: int, thresholds: LagThresholds | None = None, allowed_lag: int = 0
) -> StatusPolicy:
    """A status policy for a sampling window: trend rules need half the window
    (at most the default 5 minutes) of history."""
    return StatusPolicy(
        window_ms=window_ms,
        min_span_ms=min(DEFAULT_MIN_SPAN_MS, window_ms // 2),
        allowed_lag=allowed_lag,
        thresholds=thresholds or LagThresholds(),
    )


def sample_lag(
    collect: Callable[[], TimedLagReport],
    policy: StatusPolicy,
    *,
    interval_s: float,
    window_s: float | None = None,
    max_rounds: int | None = None,
    clock: Clock = time.time,
    sleep: Sleep = time.sleep,
    on_round: Callable[[Sampling], None] | None = None,
) -> Sampling:
    """Collect every ``interval_s`` seconds, from now until ``window_s`` has passed
    (rounds at 0, interval, 2*interval, ... <= window) or ``max_rounds`` rounds.

    With neither limit it runs until interrupted (KeyboardInterrupt propagates;
    the :class:`Sampling` so far is lost only then). Rounds keep their schedule:
    a slow collection shortens the next sleep, never shifts later rounds.
    """
    if interval_s <= 0:
        raise ValueError("interval must be positive")
    st = Sampling(policy)
    start = clock()
    k = 0
    while True:
        ts_ms = int(clock() * 1000)
        if st.last_ms is not None and ts_ms <= st.last_ms:
            ts_ms = st.last_ms + 1  # a clock step back must not drop the round
        st.observe(ts_ms, collect())
        if on_round is not None:
            on_round(st)
        k += 1
        if max_rounds is not None and k >= max_rounds:
            break
        next_at = start + k * interval_s
        if window_s is not None and next_at > start + window_s + 1e-9:
            break
        delay = next_at - clock()
        if delay > 0:
            sleep(delay)
    return st


@dataclass(frozen=True)
class GroupJudgement:
    """Status of a group over the window, with its rates and catch-up ETA."""

    status: GroupStatus
    #: messages/s written to the group's partitions (sum of log end rates)
    produce_rate: float | None
    #: messages/s the group commits (sum of committed offset rates)
    consume_rate: float | None
    catch_up: CatchUp

    def to_dict(self) -> dict[str, Any]:
        d = self.status.to_dict()
        d["produce_rate"] = self.produce_rate
        d["consume_rate"] = self.consume_rate
        d["catch_up"] = self.catch_up.to_dict()
        return d


def _sum_rates(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _unknown_if_contradicted(status: GroupStatus, gl: GroupLag | None) -> GroupStatus:
    """A group with partitions whose log end the broker contradicted itself about (their
    samples are left out of the window) is UNKNOWN, never OK, unless already CRITICAL."""
    bad = [str(p.tp) for p in (gl.partitions if gl is not None else ())
           if Anomaly.LOG_END_INCONSISTENT in p.anomalies]
    lost = [str(p.tp) for p in (gl.partitions if gl is not None else ())
            if Anomaly.LOG_END_LOST in p.anomalies]
    if not (bad or lost) or status.severity is Severity.CRITICAL:
        return status
    if not bad:
        why = (f"log end unknown on {', '.join(lost[:3])}{' ...' if len(lost) > 3 else ''}: "
               "records exist past the log end the broker reports (it lost its log end, "
               "e.g. after a restart)")
        return replace(status, severity=Severity.UNKNOWN, reasons=(why, *status.reasons))
    why = (f"log end unknown on {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}: "
           "the broker's ListOffsets and Fetch answers contradict each other")
    return replace(status, severity=Severity.UNKNOWN, reasons=(why, *status.reasons))


def judge_groups(sampling: Sampling) -> list[GroupJudgement]:
    """Evaluate every group's window at the last round."""
    if sampling.last is None or sampling.last_ms is None:
        return []
    now = sampling.last_ms
    last = {g.group_id: g for g in sampling.last.groups}
    out: list[GroupJudgement] = []
    for gid, w in sorted(sampling.windows.items()):
        gl = last.get(gid)
        status = _unknown_if_contradicted(evaluate_group(
            w, sampling.policy, now, group_lag=gl, lag_seconds=sampling.last.lag_seconds(gid)
        ), gl)
        prod = _sum_rates(produce_rate(pw.samples).per_second for pw in w.partitions)
        cons = _sum_rates(consume_rate(pw.samples).per_second for pw in w.partitions)
        eta = catch_up_eta(status.total_lag, cons, prod)
        out.append(GroupJudgement(status, prod, cons, eta))
    return out
