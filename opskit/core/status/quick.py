"""Status of a partition window from plain sample tuples: the rules of
:func:`opskit.core.status.evaluate.evaluate_partition`, status only.

The exporter serves a group's status and its rates, never the explanations, and
evaluates every group partition every cycle (tens of thousands). This module
applies the same rules, in the same order, to ``(timestamp_ms, committed,
log_end, log_start)`` tuples, without building samples, windows, explanation
texts or result objects. Its equality with :func:`evaluate_partition` is checked
on generated windows in ``tests/unit/test_exporter_cycle_equivalence.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from opskit.core.status.rank import Status

#: one sample: (timestamp_ms, committed or None, log_end, log_start or None)
Row = tuple[int, int | None, int, int | None]


def partition_status(rows: Sequence[Row], committed_since_ms: int | None, now_ms: int,
                     window_ms: int, allowed_lag: int, min_samples: int, min_span_ms: int
                     ) -> Status:
    """``evaluate_partition(window, policy, now_ms).status`` for the window whose
    samples are ``rows`` (strictly increasing in time) and whose
    ``committed_since_ms`` is given; the policy's fields are passed one by one."""
    cutoff = now_ms - window_ms
    samples = rows if rows and rows[0][0] >= cutoff else [r for r in rows if r[0] >= cutoff]
    if not samples:
        return Status.UNKNOWN
    # 1. lost records
    for _, c, _, s in samples:
        if c is not None and s is not None and s > c:
            return Status.ERR
    latest_ts, latest_c, latest_end, latest_start = samples[-1]
    # 2. no committed offset
    if latest_c is None:
        if latest_start is not None and latest_end <= latest_start:
            return Status.OK
        return Status.UNKNOWN
    # 3. within allowed lag (a position past the log end: unknown)
    lag = latest_end - latest_c
    if lag < 0:
        return Status.UNKNOWN
    if lag <= allowed_lag:
        return Status.OK
    # 4. rewind
    commits = [r for r in samples if r[1] is not None]
    offs: list[int] = [r[1] for r in commits]  # type: ignore[misc]
    if any(offs[i] < offs[i - 1] for i in range(1, len(offs))):
        return Status.REWIND
    # 5. enough history for trends?
    first = commits[0]
    span = latest_ts - first[0]
    if len(commits) < min_samples or span < min_span_ms:
        return Status.OK
    lags = [max(0, e - c) for _, c, e, _ in commits]  # type: ignore[operator]
    never_ok = all(x > allowed_lag for x in lags)
    all_equal = all(o == offs[0] for o in offs)
    log_end_moved = latest_end > first[2]
    # 6. stall
    if never_ok and all_equal and log_end_moved:
        return Status.STALL
    # 7. stop
    if latest_ts - _committed_since(committed_since_ms, offs, commits) > span:
        return Status.STOP
    # 8. lag never decreasing
    if never_ok and lags[-1] > lags[0] and all(lags[i] >= lags[i - 1] for i in range(1, len(lags))):
        return Status.WARN
    return Status.OK


def _committed_since(tracked: int | None, offs: Sequence[int], commits: Sequence[Row]) -> int:
    """As :func:`opskit.core.status.evaluate._committed_since`."""
    last = offs[-1]
    i = len(offs) - 1
    while i > 0 and offs[i - 1] == last:
        i -= 1
    run_start = commits[i][0]
    if tracked is None:
        return run_start
    return max(tracked, run_start) if i > 0 else tracked
