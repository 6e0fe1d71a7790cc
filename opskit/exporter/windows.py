"""The exporter's stored status windows, packed as machine integers, and their carried
summaries (:mod:`opskit.core.status.carry`): how :class:`~opskit.exporter.history.History`
keeps them between cycles and carries a summary over a store without reading the window.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Mapping, Sequence

from opskit.core.models import TopicPartition
from opskit.core.status.carry import FIELDS, append, summarize
from opskit.core.status.window import GroupWindow, OffsetSample, PartitionWindow, StatusPolicy

#: one sample of a window: (timestamp_ms, committed, log_end, log_start)
Row = tuple[int, int | None, int, int | None]

#: stands for None in packed windows (offsets and times are never negative)
_NONE = -1


def _opt(v: int) -> int | None:
    return None if v == _NONE else v


class PackedWindow:
    """A :class:`GroupWindow` as flat machine integers (lossless).

    ``data`` holds ``(timestamp, committed, log_end, log_start)`` per sample,
    partition after partition; ``counts[i]`` is the number of samples of
    ``tps[i]`` and ``since[i]`` its ``committed_since_ms``; None is stored as -1.
    """

    __slots__ = ("counts", "data", "since", "tps")

    def __init__(self, window: GroupWindow,
                 intern: Mapping[TopicPartition, TopicPartition] | None = None) -> None:
        parts = window.partitions
        it = intern or {}
        self.tps: tuple[TopicPartition, ...] = tuple(it.get(w.tp, w.tp) for w in parts)
        self.counts = array("l", (len(w.samples) for w in parts))
        self.since = array("q", (_NONE if w.committed_since_ms is None else w.committed_since_ms
                                 for w in parts))
        data = array("q")
        for w in parts:
            for smp in w.samples:
                data.extend((smp.timestamp_ms,
                             _NONE if smp.committed is None else smp.committed,
                             smp.log_end,
                             _NONE if smp.log_start is None else smp.log_start))
        self.data = data

    def unpack(self, group_id: str) -> GroupWindow:
        data, pos, parts = self.data, 0, []
        for tp, n, since in zip(self.tps, self.counts, self.since):
            end = pos + 4 * n
            samples = tuple(
                OffsetSample(data[i], _opt(data[i + 1]), data[i + 2], _opt(data[i + 3]))
                for i in range(pos, end, 4))
            parts.append(PartitionWindow(tp, samples, _opt(since)))
            pos = end
        return GroupWindow(group_id, tuple(parts))

    @classmethod
    def of_rows(cls, parts: Sequence[tuple[TopicPartition, int | None, Sequence[Row]]],
                intern: Mapping[TopicPartition, TopicPartition] | None = None) -> PackedWindow:
        """A window given as :meth:`History.observe_group_rows` returns it."""
        it = intern or {}
        w = cls.__new__(cls)
        w.tps = tuple(it.get(tp, tp) for tp, _, _ in parts)
        w.counts = array("l", (len(rows) for _, _, rows in parts))
        w.since = array("q", (_NONE if since is None else since for _, since, _ in parts))
        data = array("q")
        for _, _, rows in parts:
            for t, c, e, s in rows:
                data.extend((t, _NONE if c is None else c, e, _NONE if s is None else s))
        w.data = data
        return w

    @property
    def samples(self) -> int:
        return len(self.data) // 4

    def nbytes(self) -> int:
        return sum(a.buffer_info()[1] * a.itemsize for a in (self.counts, self.since, self.data))


def unpack_rows(packed: PackedWindow) -> dict[TopicPartition, tuple[int | None, list[Row]]]:
    """Every partition's ``(committed_since_ms, rows)`` of a stored window: the columns
    sliced out of the array at C speed, -1 turned back into None only where it occurs."""
    flat = packed.data.tolist()
    out: dict[TopicPartition, tuple[int | None, list[Row]]] = {}
    pos = 0
    for tp, n, at in zip(packed.tps, packed.counts, packed.since):
        end = pos + 4 * n
        cs: Sequence[int | None] = flat[pos + 1:end:4]
        ss: Sequence[int | None] = flat[pos + 3:end:4]
        if _NONE in cs:
            cs = [None if c == _NONE else c for c in cs]
        if _NONE in ss:
            ss = [None if v == _NONE else v for v in ss]
        out[tp] = (None if at == _NONE else at,
                   list(zip(flat[pos:end:4], cs, flat[pos + 2:end:4], ss)))
        pos = end
    return out


#: later than any instant
_FOREVER = 2**63 - 1
#: integers per partition in :attr:`CarriedWindow.data`: (stored, last stored committed,
#: committed since) then the summary
CARRIED_STRIDE = 3 + FIELDS
#: integers per partition in :attr:`CarriedWindow.nxt`: the time of the first sample the
#: next summary keeps (-1: none but the storing cycle's own) then the summary before it
NEXT_STRIDE = 1 + FIELDS
#: the cycles between two stores that prepare the next summary share the groups out
#: (3 at the defaults: a store every 4th cycle)
_NEXT_SLOTS = 3


class CarriedWindow:
    """A group's stored window as kept between cycles for :meth:`History.carried_window`:
    per partition (``tps``, sorted, the order the status rules and rates are summed in),
    ``CARRIED_STRIDE`` integers in ``data``: whether it has stored samples, the committed
    offset of its last stored sample and its ``committed_since_ms`` (-1: None), then
    :func:`opskit.core.status.carry.summarize` of its stored samples still in the window
    (at most ``max_samples - 1``: the cycle's own sample is the last). Valid while the
    window's cutoff stays in ``[cutoff, until]`` (no stored sample leaves it) and the
    stored window is ``packed``; ``latest_ms`` is its newest stored sample.

    ``nxt`` (None until a cycle between two stores prepares it, ``NEXT_STRIDE`` integers
    per partition) is what the next store needs to carry the summary over without
    reading the window: per partition the time of the oldest stored sample the next
    summary keeps and the summary of the stored samples it keeps (the summarized ones,
    less the oldest when they are ``max_samples - 1``, the next one's cap). ``slot``
    says in which of the cycles between two stores the group prepares it: the one that
    reuses the summary for the ``slot + 1``-th time (``uses`` counts them)."""

    __slots__ = ("cutoff", "data", "latest_ms", "nxt", "packed", "slot", "tps", "until", "uses")

    def __init__(self, packed: PackedWindow, cutoff: int, until: int, latest_ms: int,
                 tps: tuple[TopicPartition, ...], data: array[int], slot: int) -> None:
        self.packed, self.cutoff, self.until, self.latest_ms = packed, cutoff, until, latest_ms
        self.tps, self.data, self.slot = tps, data, slot
        self.nxt: array[int] | None = None
        self.uses = 0


def slot(group_id: str) -> int:
    """Which of the cycles between two stores prepares the group's next summary."""
    return zlib.crc32(group_id.encode()) % _NEXT_SLOTS


def carry(group_id: str, packed: PackedWindow, cutoff: int, samples: Mapping[TopicPartition, Row],
          policy: StatusPolicy, intern: Mapping[TopicPartition, TopicPartition]
          ) -> CarriedWindow | None:
    """The group's stored window ``packed`` summarized for the cutoff ``cutoff`` (None when a
    stored partition has no sample in ``samples``)."""
    by_tp = unpack_rows(packed)
    if not all(map(samples.__contains__, by_tp)):
        return None  # a stored partition without a sample this cycle: the general path
    keep = policy.max_samples - 1
    allowed = policy.allowed_lag
    it = intern
    tps = tuple(it.get(tp, tp) for tp in sorted(samples))
    data = array("q")
    until = latest = _NONE
    for tp in tps:
        old = by_tp.get(tp)
        if old is None:
            data.extend((0, _NONE, _NONE))
            data.extend(summarize((), allowed))
            continue
        since, rows = old
        latest = max(latest, rows[-1][0])
        kept = rows if rows[0][0] >= cutoff else [r for r in rows if r[0] >= cutoff]
        if len(kept) > keep:
            kept = kept[-keep:]
        # valid while the oldest sample summarized is in the window (older ones, left
        # out by the cap, are left out of every window until then as well)
        if kept and (until == _NONE or kept[0][0] < until):
            until = kept[0][0]
        last_c = rows[-1][1]
        data.extend((1, _NONE if last_c is None else last_c, _NONE if since is None else since))
        data.extend(summarize(kept, allowed))
    cw = CarriedWindow(packed, cutoff, _FOREVER if until == _NONE else until, latest, tps, data,
                       slot(group_id))
    return cw


def prepare_next(cw: CarriedWindow, policy: StatusPolicy) -> None:
    """Fill ``cw.nxt``: per partition, the summary of the stored samples that the next
    store keeps besides its own (:class:`CarriedWindow`), and the time of the oldest."""
    by_tp = unpack_rows(cw.packed)
    keep = policy.max_samples - 1
    allowed, cutoff = policy.allowed_lag, cw.cutoff
    nxt = array("q")
    for tp in cw.tps:
        old = by_tp.get(tp)
        kept: Sequence[Row] = ()
        if old is not None:  # the rows cw.data summarizes, as carry chose them
            rows = old[1]
            kept = rows if rows[0][0] >= cutoff else [r for r in rows if r[0] >= cutoff]
            if len(kept) > keep:
                kept = kept[-keep:]
            if len(kept) == keep:
                kept = kept[1:]  # the next window's cap leaves the oldest out
        nxt.append(kept[0][0] if kept else _NONE)
        nxt.extend(summarize(kept, allowed))
    cw.nxt = nxt


def store_carried(now_ms: int, cutoff: int, cw: CarriedWindow,
                  samples: Mapping[TopicPartition, Row], policy: StatusPolicy,
                  intern: Mapping[TopicPartition, TopicPartition]
                  ) -> tuple[PackedWindow, CarriedWindow | None]:
    """Store this cycle's window (the stored samples of ``cw.packed`` still in the
    window, capped, plus ``samples``: what ``History.observe_group_rows`` stores on the
    cycles ``cw`` applies to) and carry the summary over to it from ``cw.nxt`` when
    prepared (else None: the next cycle summarizes the new window)."""
    cap, allowed, stride = policy.max_samples, policy.allowed_lag, CARRIED_STRIDE
    it = intern
    tps = tuple(it.get(tp, tp) for tp in cw.tps)
    old, cd, nxt = cw.packed, cw.data, cw.nxt
    od, ocounts = old.data, old.counts
    data, counts, sinces = array("q"), array("l"), array("q")
    carried = array("q") if nxt is not None else None
    until = _FOREVER
    j = opos = 0  # the stored partitions are cw.tps's flagged ones, in the same order
    for i, tp in enumerate(tps):
        t, c, e, s = samples[tp]
        pos = i * stride
        n = 0
        if c is None:
            since = _NONE
        elif cd[pos] == 0 or cd[pos + 1] != c or cd[pos + 2] == _NONE:
            since = t
        else:
            since = cd[pos + 2]
        if cd[pos]:
            end = opos + 4 * ocounts[j]
            k = opos
            while k < end and od[k] < cutoff:
                k += 4
            n = min((end - k) // 4, cap - 1)
            if n:
                data.extend(od[end - 4 * n:end])
            opos, j = end, j + 1
        data.extend((t, _NONE if c is None else c, e, _NONE if s is None else s))
        counts.append(n + 1)
        sinces.append(since)
        if carried is not None and nxt is not None:
            q = i * NEXT_STRIDE
            first = nxt[q]
            if first == _NONE:
                first = t
            until = min(until, first)
            carried.extend((1, _NONE if c is None else c, since))
            carried.extend(append(nxt[q + 1:q + NEXT_STRIDE], (t, c, e, s), allowed))
    w = PackedWindow.__new__(PackedWindow)
    w.tps, w.counts, w.since, w.data = tps, counts, sinces, data
    if carried is None:
        return w, None
    return w, CarriedWindow(w, cutoff, until, now_ms, tps, carried, cw.slot)
