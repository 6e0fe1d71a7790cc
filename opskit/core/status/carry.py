"""Status and rates of a window from a summary of its older samples plus the newest one.

The exporter evaluates every group partition every cycle, but a group's stored window
changes only when a sample is stored (once per ``window / samples``) or when its oldest
sample leaves the window; in between, each cycle's window is the same older samples plus
that cycle's fresh one. :func:`summarize` reads the older samples once into a fixed
number of integers, and :func:`status_after` / :func:`rates_after` give, from that
summary and the fresh sample alone, exactly what
:func:`opskit.core.status.quick.partition_status` and
:func:`opskit.core.timing.rates.window_rates` give on the whole window (the same rules in
the same order, the same float expressions). Equality is checked on generated windows in
``tests/unit/test_exporter_carry.py``.

A summary is a tuple of plain integers (None stored as -1, offsets and times being never
negative), so the exporter can keep it packed in an ``array('q')`` between cycles.
"""

from __future__ import annotations

from collections.abc import Sequence

from opskit.core.status.rank import Status

#: one sample: (timestamp_ms, committed or None, log_end, log_start or None)
Row = tuple[int, int | None, int, int | None]

#: the number of integers in a summary
FIELDS = 18

# flag bits
_LOST = 1        # some sample has log_start > committed
_NONMONO = 2     # the committed offsets fall somewhere
_NEVER_OK = 4    # every commit's lag is above the allowed lag
_EQUAL = 8       # every committed offset equals the first
_NONDEC = 16     # the commits' lags never decrease
_RUN_LATER = 32  # the trailing run of equal committed offsets starts after the first commit


def summarize(rows: Sequence[Row], allowed_lag: int) -> tuple[int, ...]:
    """The summary of ``rows`` (strictly increasing in time; may be empty): what
    :func:`status_after` and :func:`rates_after` need of them."""
    n = len(rows)
    ncommits = 0
    first_t = first_c = first_e = last_c = first_lag = last_lag = run_t = 0
    flags = _NEVER_OK | _EQUAL | _NONDEC
    run_i = 0
    # consume rate state (window_rates' loop)
    cnt = ct0 = cc0 = ct1 = cc1 = 0
    for t, c, e, s in rows:
        if c is None:
            continue
        if s is not None and s > c:
            flags |= _LOST
        lag = e - c if e > c else 0
        if ncommits == 0:
            first_t, first_c, first_e, first_lag = t, c, e, lag
            run_t, run_i = t, 0
        else:
            if c < last_c:
                flags |= _NONMONO
            if c != first_c:
                flags &= ~_EQUAL
            if lag < last_lag:
                flags &= ~_NONDEC
            if c != last_c:
                run_t, run_i = t, ncommits
        if lag <= allowed_lag:
            flags &= ~_NEVER_OK
        last_c, last_lag = c, lag
        ncommits += 1
        if cnt and c >= cc1:
            cnt += 1
        else:
            cnt, ct0, cc0 = 1, t, c
        ct1, cc1 = t, c
    if run_i > 0:
        flags |= _RUN_LATER
    # produce rate: from the last fall of the log end on
    pt0 = pe0 = last_e = 0
    if n:
        start = 0
        for i in range(n - 1, 0, -1):
            if rows[i][2] < rows[i - 1][2]:
                start = i
                break
        pt0, pe0, last_e = rows[start][0], rows[start][2], rows[-1][2]
    return (n, ncommits, first_t, first_c, first_e, last_c, first_lag, last_lag, flags, run_t,
            pt0, pe0, last_e, cnt, ct0, cc0, ct1, cc1)


def append(sm: Sequence[int], row: Row, allowed_lag: int) -> tuple[int, ...]:
    """``summarize(rows + [row], allowed_lag)`` where ``sm`` is ``summarize(rows,
    allowed_lag)`` and ``row`` is later than every one of ``rows``: one step of
    :func:`summarize`'s loops, in O(1)."""
    (n, ncommits, first_t, first_c, first_e, last_c, first_lag, last_lag, flags, run_t,
     pt0, pe0, last_e, cnt, ct0, cc0, ct1, cc1) = sm
    t, c, e, s = row
    if c is not None:
        if s is not None and s > c:
            flags |= _LOST
        lag = e - c if e > c else 0
        if ncommits == 0:
            first_t, first_c, first_e, first_lag = t, c, e, lag
            run_t = t
        else:
            if c < last_c:
                flags |= _NONMONO
            if c != first_c:
                flags &= ~_EQUAL
            if lag < last_lag:
                flags &= ~_NONDEC
            if c != last_c:
                run_t = t
                flags |= _RUN_LATER  # the run starts at commit number ncommits > 0
        if lag <= allowed_lag:
            flags &= ~_NEVER_OK
        last_c, last_lag = c, lag
        ncommits += 1
        if cnt and c >= cc1:
            cnt += 1
        else:
            cnt, ct0, cc0 = 1, t, c
        ct1, cc1 = t, c
    # produce rate: a fall of the log end at the new row starts the run there
    if n == 0 or e < last_e:
        pt0, pe0 = t, e
    last_e = e
    return (n + 1, ncommits, first_t, first_c, first_e, last_c, first_lag, last_lag, flags,
            run_t, pt0, pe0, last_e, cnt, ct0, cc0, ct1, cc1)


def status_after(sm: Sequence[int], row: Row, committed_since_ms: int | None, min_samples: int,
                 min_span_ms: int, allowed_lag: int) -> Status:
    """``partition_status(rows + [row], committed_since_ms, now_ms, ...)`` where ``sm`` is
    ``summarize(rows, allowed_lag)``, ``row`` is later than every one of ``rows`` and no
    sample of ``rows + [row]`` is older than ``now_ms - window_ms`` (the caller keeps that)."""
    r_t, r_c, r_e, r_s = row
    ncommits, flags = sm[1], sm[8]
    # 1. lost records
    if flags & _LOST or (r_c is not None and r_s is not None and r_s > r_c):
        return Status.ERR
    # 2. no committed offset
    if r_c is None:
        if r_s is not None and r_e <= r_s:
            return Status.OK
        return Status.UNKNOWN
    # 3. within allowed lag
    lag = r_e - r_c
    if lag < 0:
        return Status.UNKNOWN
    if lag <= allowed_lag:
        return Status.OK
    # 4. rewind
    if flags & _NONMONO or (ncommits and r_c < sm[5]):
        return Status.REWIND
    # 5. enough history for trends?
    if ncommits:
        f_t, f_c, f_e, f_lag = sm[2], sm[3], sm[4], sm[6]
    else:
        f_t, f_c, f_e, f_lag = r_t, r_c, r_e, lag
    span = r_t - f_t
    if ncommits + 1 < min_samples or span < min_span_ms:
        return Status.OK
    never_ok = not ncommits or bool(flags & _NEVER_OK)  # this row's lag is above allowed
    all_equal = (not ncommits or bool(flags & _EQUAL)) and r_c == f_c
    # 6. stall
    if never_ok and all_equal and r_e > f_e:
        return Status.STALL
    # 7. stop
    if ncommits == 0:
        run_t, later = r_t, False
    elif r_c != sm[5]:
        run_t, later = r_t, True
    else:
        run_t, later = sm[9], bool(flags & _RUN_LATER)
    if committed_since_ms is None:
        since = run_t
    else:
        since = max(committed_since_ms, run_t) if later else committed_since_ms
    if r_t - since > span:
        return Status.STOP
    # 8. lag never decreasing
    if never_ok and lag > f_lag and (not ncommits or (flags & _NONDEC and lag >= sm[7])):
        return Status.WARN
    return Status.OK


def rates_after(sm: Sequence[int], row: Row) -> tuple[float | None, float | None]:
    """``window_rates(rows + [row])`` where ``sm`` is ``summarize(rows, ...)`` and ``row``
    is later than every one of ``rows``."""
    r_t, r_c, r_e, _ = row
    produce: float | None = None
    if sm[0] and r_e >= sm[12]:
        t0, e0 = sm[10], sm[11]
        produce = (r_e - e0) * 1000.0 / (r_t - t0)
    cnt, t0, c0, t1, c1 = sm[13], sm[14], sm[15], sm[16], sm[17]
    if r_c is not None:
        if cnt and r_c >= c1:
            cnt += 1
        else:
            cnt, t0, c0 = 1, r_t, r_c
        t1, c1 = r_t, r_c
    consume = (c1 - c0) * 1000.0 / (t1 - t0) if cnt >= 2 else None
    return consume, produce
