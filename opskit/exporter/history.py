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

Whatever was not seen in the latest cycle (deleted topic, partition, group) is
dropped at once, so nothing grows with churn.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from opskit.core.models import TopicPartition
from opskit.core.status import DEFAULT_MIN_SPAN_MS, GroupWindow, OffsetSample, StatusPolicy
from opskit.core.timing import OffsetTimeline, Rate, offset_rate

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
        self._timelines: dict[TopicPartition, OffsetTimeline] = {}
        self._windows: dict[str, GroupWindow] = {}
        self._stored_at: dict[str, int] = {}

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
        for gone in set(self._timelines) - set(log_ends):
            del self._timelines[gone]
        for tp, end in log_ends.items():
            tl = self._timelines.get(tp) or OffsetTimeline((), TIMELINE_POINTS)
            self._timelines[tp] = tl.add(end, now_ms)

    def timeline(self, tp: TopicPartition) -> OffsetTimeline | None:
        return self._timelines.get(tp)

    # ----- groups -----
    def observe_group(self, group_id: str, now_ms: int,
                      samples: Mapping[TopicPartition, OffsetSample]) -> GroupWindow:
        """The group's window with this cycle's samples, for evaluation.

        It is kept (replacing the stored window) only when the last kept one is
        at least ``spacing_ms`` old.
        """
        stored = self._windows.get(group_id, GroupWindow(group_id))
        current = stored.observe(now_ms, samples, self.policy)
        last = self._stored_at.get(group_id)
        if last is None or now_ms - last >= self.spacing_ms:
            self._windows[group_id] = current
            self._stored_at[group_id] = now_ms
        return current

    def forget_groups_except(self, alive: Iterable[str]) -> None:
        keep = set(alive)
        for gone in set(self._windows) - keep:
            del self._windows[gone]
            self._stored_at.pop(gone, None)

    # ----- introspection (tests, benchmarks) -----
    def sizes(self) -> dict[str, int]:
        return {
            "topics": len(self._topics),
            "timelines": len(self._timelines),
            "groups": len(self._windows),
            "group_samples": sum(len(w.samples) for g in self._windows.values() for w in g.partitions),
        }
