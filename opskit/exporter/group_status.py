"""A group's status and its consume and produce rates per topic, for one cycle.

:func:`group_status` evaluates the group's window with the core's rules from plain rows
(:func:`~opskit.core.status.quick.partition_status`,
:func:`~opskit.core.timing.rates.window_rates`), or, on the cycles where the window is its
stored samples plus this cycle's (most cycles: a sample is stored once per ``window /
samples``), from the stored samples' carried summaries (:mod:`opskit.core.status.carry`)
without reading them again. Both give the same statuses and rates (the same rules, the
same sums in the same order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opskit.core.models import GroupLag, Severity, TopicPartition
from opskit.core.status.carry import rates_after, status_after
from opskit.core.status.quick import partition_status
from opskit.core.status.rank import Status
from opskit.core.timing.rates import window_rates
from opskit.exporter.history import History
from opskit.exporter.windows import CARRIED_STRIDE, CarriedWindow, Row


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def group_status(g: GroupLag, history: History, now_ms: int,
                 samples: Mapping[TopicPartition, Row]
                 ) -> tuple[str, dict[str, float | None], dict[str, float | None]]:
    """The group's status and its consume and produce rates per topic: what
    :func:`evaluate_group` and the core's rates give on the group's window, from
    plain rows (:func:`partition_status`, :func:`window_rates`)."""
    pol = history.policy
    window_ms, allowed, min_samples, min_span = (pol.window_ms, pol.allowed_lag, pol.min_samples,
                                                 pol.min_span_ms)
    # a partition in STOP is ERR when the group is critical (the exporter's policy
    # has no lag-seconds objectives: critical is the HIP-30 lag severity)
    critical = g.severity is Severity.CRITICAL
    carried = history.carried_window(g.group_id, now_ms, samples)
    if carried is not None:
        return _carried_status(carried, samples, critical, min_samples, min_span, allowed)
    window = history.observe_group_rows(g.group_id, now_ms, samples)
    worst = -1
    status = Status.UNKNOWN  # no window: no samples for the group
    last: Status | None = None
    per_c: dict[str, list[float | None]] = {}
    per_p: dict[str, list[float | None]] = {}
    for tp, since, rows in window:
        st = partition_status(rows, since, now_ms, window_ms, allowed, min_samples, min_span)
        if st is Status.STOP and critical:
            st = Status.ERR
        if st is not last:  # a status seen just before cannot be worse than the worst
            last = st
            if st.rank > worst:
                worst, status = st.rank, st
        cons, prod = window_rates(rows)
        c_list = per_c.get(tp.topic)
        if c_list is None:
            c_list = per_c[tp.topic] = []
            per_p[tp.topic] = []
        c_list.append(cons)
        per_p[tp.topic].append(prod)
    return (status.value, {t: _sum(v) for t, v in per_c.items()},
            {t: _sum(v) for t, v in per_p.items()})


def _carried_status(carried: CarriedWindow, samples: Mapping[TopicPartition, Row], critical: bool,
                    min_samples: int, min_span: int, allowed: int
                    ) -> tuple[str, dict[str, float | None], dict[str, float | None]]:
    """:func:`group_status` from the group's carried window (each partition's stored
    samples summarized) and this cycle's samples: the same statuses and rates, summed in
    the same (sorted) partition order, without reading the stored samples again."""
    data, stride = carried.data, CARRIED_STRIDE
    worst = -1
    status = Status.UNKNOWN
    last: Status | None = None
    per_c: dict[str, list[float | None]] = {}
    per_p: dict[str, list[float | None]] = {}
    pos = 0
    for tp in carried.tps:
        row = samples[tp]
        c = row[1]
        if c is None:
            since: int | None = None
        elif data[pos] == 0 or data[pos + 1] != c or data[pos + 2] == -1:
            since = row[0]
        else:
            since = data[pos + 2]
        sm = data[pos + 3:pos + stride]
        pos += stride
        st = status_after(sm, row, since, min_samples, min_span, allowed)
        if st is Status.STOP and critical:
            st = Status.ERR
        if st is not last:
            last = st
            if st.rank > worst:
                worst, status = st.rank, st
        cons, prod = rates_after(sm, row)
        c_list = per_c.get(tp.topic)
        if c_list is None:
            c_list = per_c[tp.topic] = []
            per_p[tp.topic] = []
        c_list.append(cons)
        per_p[tp.topic].append(prod)
    return (status.value, {t: _sum(v) for t, v in per_c.items()},
            {t: _sum(v) for t, v in per_p.items()})
