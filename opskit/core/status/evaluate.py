"""Consumer-group status over a sliding window of offset samples.

In the spirit of LinkedIn Burrow (threshold-free status from how offsets
move), adapted to a *polling* model: every sample is one observation of a
partition, taken by opskit's collector, holding the group's committed offset
and the partition's log end (and log start when known). Burrow sees commit
events instead; the differences that follow from that are noted where the
rules are.

Units: every instant is **epoch milliseconds as int** (``*_ms``), as Kafka
record timestamps and ``retention.ms`` are. Durations carry their unit in
their name (``window_ms``, ``lag_seconds_warn``). Time is always a parameter:
nothing here reads a clock.

Partition rules, evaluated on the samples of the window
``[now_ms - window_ms, now_ms]`` (older ones are ignored), first match wins.
``lag = max(0, log_end - committed)`` per sample; "commits" are the samples
with a committed offset; ``allowed`` is ``policy.allowed_lag``.

1. UNKNOWN: no sample in the window; or the latest sample has no committed
   offset and the partition has (or may have) records to read. With no
   committed offset and nothing to read (``log_end <= log_start``), OK.
   Also UNKNOWN (checked just before rule 3): the latest committed offset is
   past the log end (the broker lost its log end, e.g. a restart, the log was
   truncated, or the offset was set by hand): the lag is not known.
2. ERR: some sample in the window had ``committed < log_start``: retention
   deleted records the group never read (records lost). Checked before
   everything else: no lag value makes data loss fine.
3. OK: latest lag <= allowed.
4. REWIND: the committed offset went backwards between two consecutive
   commits in the window.
5. Not enough history -- fewer than ``min_samples`` commits, or the commits
   span less than ``min_span_ms`` -- OK, with ``complete=False``. A consumer
   that commits every few minutes (Flink, Spark) must not look stuck in the
   first seconds after opskit starts watching it.
6. STALL: lag > allowed at every commit, all commits equal, and the log end
   grew: producers write, the consumer does not move, the backlog grows.
7. STOP: the committed offset has been unchanged for longer than the window
   spans, i.e. ``latest.timestamp_ms - committed_since_ms > span_ms`` where
   ``span_ms`` is the time between the first and the latest commit in the
   window and ``committed_since_ms`` is when the current committed value was
   first observed. Only a :class:`PartitionWindow` fed by
   :meth:`PartitionWindow.add` remembers that across evictions; from bare
   samples it is the first sample of the final run of equal commits, which is
   never older than the window, so bare samples never give STOP. Measured up
   to the latest sample, not to ``now_ms``, so a gap in collection never looks
   like a stopped consumer. Lag > allowed holds (rule 3 did not match).
   STALL is tested before STOP (Burrow tests STOP first): polling cannot tell
   "commits stopped arriving" from "commits repeat the same offset", so the
   growing-backlog case is singled out as STALL and STOP is what remains: a
   consumer that has not moved for longer than the window while its backlog
   is not (or not always) growing.
8. WARN: lag > allowed at every commit, lag never decreased between two
   consecutive commits, and the latest lag is above the first: the consumer
   moves but slower than the producers.
9. Otherwise OK.

Partition status to :class:`~opskit.core.models.Severity` (Nagios code):
OK -> OK, WARN -> WARNING, REWIND -> WARNING, STOP -> WARNING,
STALL -> CRITICAL, ERR -> CRITICAL, UNKNOWN -> UNKNOWN.

Group (:func:`evaluate_group`): a partition in STOP becomes ERR when its group
is critical -- total lag above the HIP-30 critical threshold
(``GroupLag.severity``, or ``policy.thresholds`` on the window's latest lags)
or some partition's lag in seconds above ``policy.lag_seconds_crit``.
``GroupStatus.status`` is then the worst partition status (ranked OK <
UNKNOWN < WARN < REWIND < STOP < STALL < ERR), UNKNOWN rather than OK when the
lag severity is UNKNOWN (a partition whose lag is not known has no sample to judge);
``GroupStatus.severity`` is
the worst of the partition severities, the HIP-30 lag severity and the
lag-seconds objective severity, ranked OK < UNKNOWN < WARNING < CRITICAL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import pairwise

from opskit.core.lag import severity_for
from opskit.core.models import GroupLag, Severity, TopicPartition
from opskit.core.status.rank import SEVERITY_RANK, Status, worst_severity, worst_status
from opskit.core.status.result import GroupStatus, PartitionStatus
from opskit.core.status.window import GroupWindow, OffsetSample, PartitionWindow, StatusPolicy


def evaluate_partition(
    window: PartitionWindow, policy: StatusPolicy, now_ms: int
) -> PartitionStatus:
    """Status of one partition from its window; rules in the module docstring."""
    tp = window.tp
    samples = [s for s in window.samples if s.timestamp_ms >= now_ms - policy.window_ms]
    win = _fmt_duration(policy.window_ms)
    if not samples:
        return PartitionStatus(tp, Status.UNKNOWN, f"no samples in the last {win}")
    latest = samples[-1]
    commits = [s for s in samples if s.committed is not None]

    def result(
        status: Status, text: str, complete: bool = False, lost: int | None = None
    ) -> PartitionStatus:
        span = commits[-1].timestamp_ms - commits[0].timestamp_ms if commits else 0
        return PartitionStatus(
            tp,
            status,
            text,
            lag=latest.lag,
            committed=latest.committed,
            log_end=latest.log_end,
            records_lost=latest.records_lost if lost is None else lost,
            samples=len(samples),
            span_ms=span,
            complete=complete,
        )

    # 1. lost records
    lossy = [s for s in samples if s.records_lost > 0]
    if lossy:
        worst = max(lossy, key=lambda s: s.records_lost)
        text = (
            f"records lost: committed offset {worst.committed:,} was below log start "
            f"{worst.log_start:,}, so {worst.records_lost:,} records were deleted by "
            "retention before the group read them"
        )
        if worst is not latest:
            ago = _fmt_duration(latest.timestamp_ms - worst.timestamp_ms)
            text += (
                f" (seen {ago} before the latest sample; committed offset now {latest.committed})"
            )
        return result(Status.ERR, text, lost=worst.records_lost)

    # 2. no committed offset
    if latest.committed is None:
        if latest.log_start is not None and latest.log_end <= latest.log_start:
            return result(Status.OK, "no committed offset, and the partition has nothing to read")
        if latest.log_start is not None:
            readable = f"{latest.log_end - latest.log_start:,} records readable"
        else:
            readable = f"log end {latest.log_end:,}"
        return result(Status.UNKNOWN, f"no committed offset ({readable})")

    lag = latest.log_end - latest.committed
    offs = [s.committed for s in samples if s.committed is not None]
    rewinds = [i for i in range(1, len(offs)) if offs[i] < offs[i - 1]]
    rewind_note = ""
    if rewinds:
        i = rewinds[-1]
        ago = _fmt_duration(latest.timestamp_ms - commits[i].timestamp_ms)
        rewind_note = (
            f"committed offset went back from {offs[i - 1]:,} to {offs[i]:,} "
            f"({offs[i - 1] - offs[i]:,} records to re-read) {ago} before the latest sample"
        )

    # 3. within allowed lag (a position past the log end is not: its lag is not known)
    if lag < 0:
        text = (
            f"committed offset {latest.committed:,} is past log end {latest.log_end:,}: the "
            "broker lost its log end (e.g. it restarted), the log was truncated or the offset "
            "was set by hand; lag counted as 0 but unknown"
        )
        if rewind_note:
            text += f"; {rewind_note}"
        return result(Status.UNKNOWN, text)
    if lag <= policy.allowed_lag:
        if lag == 0:
            text = "at the head (lag 0)"
        else:
            text = f"lag {lag:,} within allowed {policy.allowed_lag:,}"
        if rewind_note:
            text += f"; {rewind_note}"
        return result(Status.OK, text)

    # 4. rewind
    if rewinds:
        return result(Status.REWIND, f"{rewind_note}; lag now {lag:,}")

    # 5. enough history for trends?
    first = commits[0]
    span = latest.timestamp_ms - first.timestamp_ms
    if len(commits) < policy.min_samples or span < policy.min_span_ms:
        return result(
            Status.OK,
            f"lag {lag:,}; trend unknown: {len(commits)} sample(s) over {_fmt_duration(span)}, "
            f"rules need {policy.min_samples} over at least {_fmt_duration(policy.min_span_ms)}",
        )

    lags = [s.lag or 0 for s in commits]
    never_ok = all(x > policy.allowed_lag for x in lags)
    all_equal = all(o == offs[0] for o in offs)
    log_end_moved = latest.log_end > first.log_end
    over = _fmt_duration(span)

    # 6. stall
    if never_ok and all_equal and log_end_moved:
        return result(
            Status.STALL,
            f"committed offset stuck at {latest.committed:,} for {over} while log end grew "
            f"from {first.log_end:,} to {latest.log_end:,}; lag grew from {lags[0]:,} to {lag:,}",
            complete=True,
        )

    # 7. stop
    since = _committed_since(window.committed_since_ms, commits)
    if latest.timestamp_ms - since > span:
        unchanged = _fmt_duration(latest.timestamp_ms - since)
        if log_end_moved:
            producers = f"log end grew from {first.log_end:,} to {latest.log_end:,}"
        else:
            producers = f"log end {latest.log_end:,} not moving"
        return result(
            Status.STOP,
            f"committed offset {latest.committed:,} unchanged for {unchanged} (longer than "
            f"the {over} the window spans) with lag {lag:,}; {producers}",
            complete=True,
        )

    # 8. lag never decreasing
    advanced = offs[-1] - offs[0]
    non_decreasing = all(b >= a for a, b in pairwise(lags))
    if never_ok and non_decreasing and lags[-1] > lags[0]:
        return result(
            Status.WARN,
            f"lag grew from {lags[0]:,} to {lag:,} over {over} while commits advanced "
            f"{advanced:,} (consumer slower than producers)",
            complete=True,
        )

    # 9. fine
    if never_ok:
        trend = f"lag {lag:,} (was {lags[0]:,} {over} ago); commits advanced {advanced:,}"
    else:
        trend = (
            f"lag {lag:,}; lag was within allowed {policy.allowed_lag:,} in the last {over}; "
            f"commits advanced {advanced:,}"
        )
    return result(Status.OK, trend, complete=True)


def evaluate_group(
    window: GroupWindow,
    policy: StatusPolicy,
    now_ms: int,
    *,
    group_lag: GroupLag | None = None,
    lag_seconds: Mapping[TopicPartition, float | None] | None = None,
) -> GroupStatus:
    """Status and severity of a group; rules in the module docstring.

    ``group_lag`` (from :func:`opskit.core.lag.compute_group_lag`) supplies the
    HIP-30 lag severity; without it the latest lags in the window are summed
    and judged with ``policy.thresholds``. ``lag_seconds`` gives each
    partition's lag in seconds (see :mod:`opskit.core.timing`), judged with
    the policy's objectives; None and NaN values are ignored.
    """
    seconds = dict(lag_seconds or {})
    parts = [evaluate_partition(w, policy, now_ms) for w in window.partitions]

    if group_lag is not None:
        total, lag_sev = group_lag.total_lag, group_lag.severity
        th = group_lag.thresholds
    else:
        total = sum(p.lag or 0 for p in parts)
        th = policy.thresholds
        lag_sev = severity_for(total, th)

    # None (no lag / unknown) and NaN are left out: one NaN must not poison the max
    known = [(tp, s) for tp, s in seconds.items() if s is not None and math.isfinite(s)]
    max_tp, max_secs = max(known, key=lambda x: x[1]) if known else (None, None)
    secs_sev = Severity.OK
    if max_secs is not None:
        if policy.lag_seconds_crit is not None and max_secs > policy.lag_seconds_crit:
            secs_sev = Severity.CRITICAL
        elif policy.lag_seconds_warn is not None and max_secs > policy.lag_seconds_warn:
            secs_sev = Severity.WARNING

    reasons: list[tuple[Severity, str]] = []
    if lag_sev is Severity.UNKNOWN:
        reasons.append((lag_sev, "the lag of some partition is not known (see its anomalies)"))
    elif lag_sev is not Severity.OK:
        limit = th.crit if lag_sev is Severity.CRITICAL else th.warn
        reasons.append(
            (lag_sev, f"total lag {total:,} > {lag_sev.value.lower()} {limit:,} messages")
        )
    if secs_sev is not Severity.OK and max_secs is not None:
        limit_s = (
            policy.lag_seconds_crit if secs_sev is Severity.CRITICAL else policy.lag_seconds_warn
        )
        reasons.append(
            (
                secs_sev,
                (
                    f"lag on {max_tp} is {_fmt_duration(int(max_secs * 1000))} > "
                    f"{secs_sev.value.lower()} {_fmt_duration(int((limit_s or 0) * 1000))}"
                ),
            )
        )

    group_critical = Severity.CRITICAL in (lag_sev, secs_sev)
    final: list[PartitionStatus] = []
    for p in parts:
        if p.status is Status.STOP and group_critical:
            p = replace(p, status=Status.ERR, explanation=f"{p.explanation}; the group is critical")
        final.append(replace(p, lag_seconds=seconds.get(p.tp)))
    for p in final:
        if p.status is not Status.OK:
            reasons.append((p.severity, f"{p.tp} {p.status.value}: {p.explanation}"))

    if not final:
        status = Status.UNKNOWN
        reasons.append((Severity.UNKNOWN, f"no samples for group {window.group_id}"))
    else:
        status = worst_status(p.status for p in final)
    if status is Status.OK and lag_sev is Severity.UNKNOWN:
        # a partition whose lag is unknown has no sample (no log end, an unreadable
        # commit): the samples of the others must not make the group OK
        status = Status.UNKNOWN
    severity = worst_severity([lag_sev, secs_sev, *(p.severity for p in final)])
    if not final:
        severity = worst_severity([severity, Severity.UNKNOWN])
    ordered = sorted(reasons, key=lambda r: -SEVERITY_RANK[r[0]])
    return GroupStatus(
        group_id=window.group_id,
        status=status,
        severity=severity,
        partitions=tuple(final),
        total_lag=total,
        lag_severity=lag_sev,
        max_lag_seconds=max_secs,
        lag_seconds_severity=secs_sev,
        reasons=tuple(text for _, text in ordered),
    )


# --------------------------------------------------------------------------- helpers


def _committed_since(tracked: int | None, commits: Sequence[OffsetSample]) -> int:
    """When the latest committed value was first seen.

    The first sample of the final run of equal commits, unless the window
    remembers an earlier time (the whole window holds one value) or a later
    one (the offset vanished and came back).
    """
    last = commits[-1].committed
    i = len(commits) - 1
    while i > 0 and commits[i - 1].committed == last:
        i -= 1
    run_start = commits[i].timestamp_ms
    if tracked is None:
        return run_start
    return max(tracked, run_start) if i > 0 else tracked


def _fmt_duration(ms: int) -> str:
    """Short human duration: 45s, 10m, 1h05m, 2d03h."""
    s = max(0, ms) // 1000
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m" if s == 0 else f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"
