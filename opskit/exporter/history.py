"""The exporter's bounded memory between cycles (pure: every instant is a parameter).

* per topic: (time, sum of log end offsets) and (time, bytes on disk) points over
  the rate window, for messages/s and bytes/s in;
* per partition: an :class:`~opskit.core.timing.OffsetTimeline` of its log end, so
  lag in seconds can be estimated for partitions whose record was not read this
  cycle (the per-cycle read budget);
* per group: a :class:`~opskit.core.status.GroupWindow` thinned to one stored
  sample every ``window / samples``; each cycle's fresh sample is added to a
  transient copy for evaluation only, so status and rates see the latest offsets
  while memory stays at ``samples`` per group-partition.

Stored windows are packed (:class:`PackedWindow`): one ``array('q')`` per group
holding every sample as four machine integers, instead of one Python object
per sample (~100 bytes each, plus its tuple slot): at 50,000 group-partitions x
11 samples that is ~18 MB instead of ~65 MB, and half a million fewer objects
for the garbage collector to walk. Each cycle reads one group at a time out of
its packed window as plain ``(time, committed, log end, log start)`` rows
(:meth:`History.observe_group_rows`), which the exporter evaluates with the
core's status rules (:func:`opskit.core.status.quick.partition_status`) and
rates (:func:`opskit.core.timing.rates.window_rates`) without building the
core's window objects. Log-end timelines are kept the same way
(``array('q')`` of ``(time, offset)`` pairs per partition) and updated in place
by :meth:`History.observe_log_ends`; a timeline is unpacked into an
:class:`OffsetTimeline` only when a lag-in-seconds estimate needs it, held for
the cycle, and :meth:`History.end_cycle` drops those.

Between two stores a group's window is the same stored samples plus each cycle's own,
so :meth:`History.carried_window` summarizes the stored samples still in the window once
(:func:`opskit.core.status.carry.summarize`, packed in an ``array('q')``: 21 integers per
group partition) and keeps that until the next store or until the oldest of them leaves
the window; the cycles in between get status and rates from the summary and their own
sample, without unpacking the window. The storing cycles do too, and carry the summary
over the store: one cycle between two stores prepares the summary the next window keeps,
and the store adds its own sample to it (:mod:`opskit.exporter.windows`).

Whatever was not seen in the latest cycle (deleted topic, partition, group) is
dropped at once, so nothing grows with churn.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from opskit.core.models import TopicPartition
from opskit.core.status.window import (
    DEFAULT_MIN_SPAN_MS,
    GroupWindow,
    OffsetSample,
    PartitionWindow,
    StatusPolicy,
)
from opskit.core.timing.rates import Rate, offset_rate
from opskit.core.timing.timeline import OffsetTimeline, TimelinePoint
from opskit.exporter.windows import (
    CarriedWindow,
    PackedWindow,
    Row,
    carry,
    prepare_next,
    store_carried,
    unpack_rows,
)

TIMELINE_POINTS = 20
MAX_RATE_POINTS = 64


@dataclass
class TopicSeries:
    offsets: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=MAX_RATE_POINTS))
    sizes: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=MAX_RATE_POINTS))


def _prune(points: deque[tuple[int, int]], cutoff_ms: int) -> None:
    # keep one point at or before the cutoff so the rate spans the whole window
    while len(points) > 2 and points[1][0] <= cutoff_ms:
        points.popleft()


def _pack_timeline(tl: OffsetTimeline) -> array[int]:
    out = array("q")
    for pt in tl.points:
        out.extend((pt.timestamp_ms, pt.offset))
    return out


def _unpack_timeline(data: array[int]) -> OffsetTimeline:
    return OffsetTimeline(tuple(TimelinePoint(data[i], data[i + 1]) for i in range(0, len(data), 2)),
                          TIMELINE_POINTS)


class History:
    def __init__(self, rate_window_ms: int, status_window_ms: int, status_samples: int) -> None:
        self.rate_window_ms = rate_window_ms
        self.status_samples = status_samples
        self.spacing_ms = max(1, status_window_ms // status_samples)
        self.policy = StatusPolicy(
            window_ms=status_window_ms,
            max_samples=status_samples + 1,
            min_span_ms=min(DEFAULT_MIN_SPAN_MS, status_window_ms // 2),
        )
        self._topics: dict[str, TopicSeries] = {}
        self._timelines: dict[TopicPartition, array[int]] = {}
        #: this cycle's timelines, unpacked (dropped by end_cycle)
        self._live_timelines: dict[TopicPartition, OffsetTimeline] = {}
        self._windows: dict[str, PackedWindow] = {}
        self._stored_at: dict[str, int] = {}
        #: one TopicPartition object per live partition, shared by every stored window
        self._tps: dict[TopicPartition, TopicPartition] = {}
        #: per group, its stored window summarized for the cycles until it changes
        self._carried: dict[str, CarriedWindow] = {}

    # ----- topics -----
    def observe_topics(self, now_ms: int, log_end_sums: Mapping[str, int],
                       size_sums: Mapping[str, int] | None) -> None:
        for gone in set(self._topics) - set(log_end_sums):
            del self._topics[gone]
        cutoff = now_ms - self.rate_window_ms
        for topic, total in log_end_sums.items():
            s = self._topics.setdefault(topic, TopicSeries())
            if not s.offsets or s.offsets[-1][0] < now_ms:
                s.offsets.append((now_ms, total))
            _prune(s.offsets, cutoff)
            if size_sums is not None and topic in size_sums:
                if not s.sizes or s.sizes[-1][0] < now_ms:
                    s.sizes.append((now_ms, size_sums[topic]))
                _prune(s.sizes, cutoff)

    def messages_in_rate(self, topic: str) -> Rate | None:
        s = self._topics.get(topic)
        return offset_rate(s.offsets) if s is not None else None

    def bytes_in_rate(self, topic: str) -> Rate | None:
        s = self._topics.get(topic)
        return offset_rate(s.sizes) if s is not None and s.sizes else None

    # ----- partitions -----
    def observe_log_ends(self, now_ms: int, log_ends: Mapping[TopicPartition, int]) -> None:
        """Add this cycle's log ends to the partitions' timelines, in place (the rules of
        :meth:`OffsetTimeline.add` on the packed points)."""
        tls = self._timelines
        if len(tls) > len(log_ends) or any(tp not in log_ends for tp in tls):
            for gone in set(tls) - set(log_ends):
                del tls[gone]
        self._tps = {tp: tp for tp in log_ends}
        cap = 2 * TIMELINE_POINTS
        for tp, end in log_ends.items():
            a = tls.get(tp)
            if a is None:
                tls[tp] = array("q", (now_ms, end))
            elif now_ms <= a[-2]:
                continue  # not newer than the last point: ignored
            elif end < a[-1]:
                tls[tp] = array("q", (now_ms, end))  # truncated or recreated: restart
            elif len(a) >= 4 and a[-1] == a[-3] == end:
                a[-2] = now_ms  # an idle plateau keeps its first and its latest point
            else:
                a.append(now_ms)
                a.append(end)
                if len(a) > cap:
                    del a[:2]
        self._live_timelines = {}

    def timeline(self, tp: TopicPartition) -> OffsetTimeline | None:
        live = self._live_timelines.get(tp)
        if live is not None:
            return live
        packed = self._timelines.get(tp)
        if packed is None:
            return None
        live = self._live_timelines[tp] = _unpack_timeline(packed)
        return live

    def packed_timeline(self, tp: TopicPartition) -> array[int] | None:
        """The partition's timeline as stored: ``(time, offset)`` pairs, oldest first
        (read only; what :meth:`timeline` unpacks)."""
        return self._timelines.get(tp)

    def end_cycle(self) -> None:
        """Drop what only the current cycle needed (the timelines unpacked for it)."""
        self._live_timelines = {}

    # ----- groups -----
    def observe_group_rows(self, group_id: str, now_ms: int, samples: Mapping[TopicPartition, Row]
                           ) -> list[tuple[TopicPartition, int | None, list[Row]]]:
        """The group's window with this cycle's samples, for evaluation: per partition
        (sorted) its ``committed_since_ms`` and its samples as
        ``(timestamp_ms, committed, log_end, log_start)`` rows -- what
        :meth:`GroupWindow.observe` gives, without building its objects.

        It is kept (replacing the stored window) only when the last kept one is
        at least ``spacing_ms`` old.
        """
        window_ms, cap = self.policy.window_ms, self.policy.max_samples
        by_tp: dict[TopicPartition, tuple[int | None, list[Row]]] = {}
        packed = self._windows.get(group_id)
        if packed is not None:
            by_tp = unpack_rows(packed)
        since: int | None
        rows: list[Row]
        for tp, row in samples.items():
            old = by_tp.get(tp)
            if old is None:
                since, rows = None, []
            else:
                since, rows = old
                if rows and row[0] <= rows[-1][0]:
                    continue  # not newer than the latest sample: ignored
            c = row[1]
            if c is None:
                since = None
            elif not rows or rows[-1][1] != c or since is None:
                since = row[0]
            # rows are in strictly increasing time: what falls out of the window is a
            # prefix; the lists are this call's own (fresh from the packed window)
            cutoff = row[0] - window_ms
            if rows and rows[0][0] < cutoff:
                rows = [r for r in rows if r[0] >= cutoff]
            rows.append(row)
            by_tp[tp] = (since, rows if len(rows) <= cap else rows[-cap:])
        cutoff = now_ms - window_ms
        out: list[tuple[TopicPartition, int | None, list[Row]]] = []
        for tp in sorted(by_tp):
            since, rows = by_tp[tp]
            if rows and rows[0][0] < cutoff:
                rows = [r for r in rows if r[0] >= cutoff]
            if len(rows) > cap:
                rows = rows[-cap:]
            if rows:
                out.append((tp, since, rows))
        last = self._stored_at.get(group_id)
        if last is None or now_ms - last >= self.spacing_ms:
            self._windows[group_id] = PackedWindow.of_rows(out, self._tps)
            self._stored_at[group_id] = now_ms
        return out

    def observe_group(self, group_id: str, now_ms: int,
                      samples: Mapping[TopicPartition, OffsetSample]) -> GroupWindow:
        """:meth:`observe_group_rows` as the core's :class:`GroupWindow`."""
        rows = self.observe_group_rows(group_id, now_ms, {
            tp: (s.timestamp_ms, s.committed, s.log_end, s.log_start) for tp, s in samples.items()})
        return GroupWindow(group_id, tuple(
            PartitionWindow(tp, tuple(OffsetSample(*r) for r in rs), since) for tp, since, rs in rows))

    def stored_window(self, group_id: str) -> GroupWindow | None:
        """The group's stored (thinned) window, unpacked; None when none is kept."""
        packed = self._windows.get(group_id)
        return packed.unpack(group_id) if packed is not None else None

    def carried_window(self, group_id: str, now_ms: int, samples: Mapping[TopicPartition, Row]
                       ) -> CarriedWindow | None:
        """The group's stored window summarized (:mod:`opskit.core.status.carry`) for this
        cycle, when this cycle's window is its stored samples still in the window plus
        ``samples`` (each taken at ``now_ms``, the caller guarantees it); None otherwise
        (the first cycles of a group, a stored partition without a sample, a partition set
        that changed and cannot be summarized, a clock that did not move on): the caller
        then uses :meth:`observe_group_rows`.

        The summary is built from the packed window once and kept while the same samples
        stay in the window: until the next store or until the oldest of them leaves it.
        When this cycle stores (once per ``spacing_ms``), the window stored is made here
        from the packed one and ``samples`` (what :meth:`observe_group_rows` stores), and
        the summary for the cycles after it is the prepared one (:attr:`CarriedWindow.nxt`)
        with this cycle's samples added (:func:`~opskit.core.status.carry.append`); the
        summary returned is still this cycle's (the stored samples before the store).
        """
        packed = self._windows.get(group_id)
        last = self._stored_at.get(group_id)
        if packed is None or last is None:
            return None  # nothing stored yet
        cutoff = now_ms - self.policy.window_ms
        cw = self._carried.get(group_id)
        fresh = False
        if (cw is None or cw.packed is not packed or not cw.cutoff <= cutoff <= cw.until
                or now_ms <= cw.latest_ms or len(samples) != len(cw.tps)
                or not all(map(samples.__contains__, cw.tps))):  # (no Python frame per tp)
            cw = carry(group_id, packed, cutoff, samples, self.policy, self._tps)
            if cw is None:
                self._carried.pop(group_id, None)
                return None  # a stored partition without a sample this cycle: the general path
            self._carried[group_id] = cw
            if now_ms <= cw.latest_ms:
                return None
            fresh = True
        if now_ms - last >= self.spacing_ms:
            w, nxt = store_carried(now_ms, cutoff, cw, samples, self.policy, self._tps)
            self._windows[group_id] = w
            self._stored_at[group_id] = now_ms
            if nxt is None:
                self._carried.pop(group_id, None)
            else:
                self._carried[group_id] = nxt
        elif cw.nxt is None:
            cw.uses += 1
            if not fresh and cw.uses > cw.slot:  # (a fresh one was just read: next cycle)
                prepare_next(cw, self.policy)
        return cw

    def forget_groups_except(self, alive: Iterable[str]) -> None:
        keep = set(alive)
        for gone in set(self._windows) - keep:
            del self._windows[gone]
            self._stored_at.pop(gone, None)
        for gone in set(self._carried) - keep:
            del self._carried[gone]

    # ----- introspection (tests, benchmarks) -----
    def sizes(self) -> dict[str, int]:
        return {
            "topics": len(self._topics),
            "timelines": len(self._timelines),
            "groups": len(self._windows),
            "group_samples": sum(w.samples for w in self._windows.values()),
        }

    def timeline_points(self) -> int:
        return sum(len(a) // 2 for a in self._timelines.values())

    def window_bytes(self) -> int:
        """Bytes of the packed arrays of every stored group window (benchmarks)."""
        return sum(w.nbytes() for w in self._windows.values())
