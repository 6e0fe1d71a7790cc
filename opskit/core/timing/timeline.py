"""(log end offset, time) history of a partition, and when an offset was appended."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opskit.errors import InvalidInputError

DEFAULT_TIMELINE_POINTS = 60


@dataclass(frozen=True, order=True)
class TimelinePoint:
    """The log end offset of a partition as seen at ``timestamp_ms``."""

    timestamp_ms: int
    offset: int


@dataclass(frozen=True)
class AppendTime:
    """When a record was appended, from a timeline: in ``(after_ms, at_or_before_ms]``.

    ``after_ms`` is None when the record predates the timeline (only the upper
    end is known); ``estimate_ms`` is then ``at_or_before_ms``.
    """

    estimate_ms: int
    after_ms: int | None
    at_or_before_ms: int


@dataclass(frozen=True)
class OffsetTimeline:
    """(log end offset, time) points of one partition, oldest first, bounded.

    Rules of :meth:`add` (bounded memory, useful span on quiet topics):
    a point not newer than the last is ignored; a log end below the last one
    (truncation, topic recreated) restarts the timeline; a point equal to the
    last two offsets replaces the last one, so an idle plateau costs two points
    (when it began, and the last time it was seen); beyond ``max_points`` the
    oldest points go.
    """

    points: tuple[TimelinePoint, ...] = ()
    max_points: int = DEFAULT_TIMELINE_POINTS

    def __post_init__(self) -> None:
        if self.max_points < 2:
            raise ValueError("an offset timeline needs at least 2 points")
        for a, b in zip(self.points, self.points[1:]):
            if b.timestamp_ms <= a.timestamp_ms or b.offset < a.offset:
                raise ValueError("timeline points must grow in time and never fall in offset")

    def add(self, log_end: int, timestamp_ms: int) -> OffsetTimeline:
        pts = self.points
        if pts and timestamp_ms <= pts[-1].timestamp_ms:
            return self
        new = TimelinePoint(timestamp_ms, log_end)
        if pts and log_end < pts[-1].offset:
            return OffsetTimeline((new,), self.max_points)
        if len(pts) >= 2 and pts[-1].offset == pts[-2].offset == log_end:
            pts = pts[:-1]
        return OffsetTimeline((pts + (new,))[-self.max_points :], self.max_points)

    def append_time(self, offset: int) -> AppendTime | None:
        """When the record at ``offset`` was appended, from the timeline.

        The record at ``offset`` was appended when the log end went from
        ``<= offset`` to ``> offset``. Take the **last** point whose log end
        was still ``<= offset`` and the first point after it (log end
        ``> offset``): the append happened in between, and the estimate
        interpolates linearly by offset inside that one interval.

        Why this stays sane after idle periods: a quiet topic sits on one log
        end for hours, then a burst arrives. Interpolating from the *first*
        time the log end equalled the committed offset (what kafka-lag-exporter
        did) puts the burst's records hours in the past; the last point of
        the plateau bounds them to the last sampling interval. And a record
        older than the whole timeline is bounded, not extrapolated
        (``after_ms`` None).

        None when the timeline does not show the record yet (every point has
        log end ``<= offset``) or is empty.
        """
        pts = self.points
        if not pts or pts[-1].offset <= offset:
            return None
        if pts[0].offset > offset:
            return AppendTime(pts[0].timestamp_ms, None, pts[0].timestamp_ms)
        i = max(k for k, p in enumerate(pts) if p.offset <= offset)
        lo, hi = pts[i], pts[i + 1]
        # integer ceiling: the estimate stays strictly after lo and at or before hi
        num = (offset + 1 - lo.offset) * (hi.timestamp_ms - lo.timestamp_ms)
        est = lo.timestamp_ms - (-num // (hi.offset - lo.offset))
        return AppendTime(est, lo.timestamp_ms, hi.timestamp_ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_points": self.max_points,
            "points": [[p.timestamp_ms, p.offset] for p in self.points],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OffsetTimeline:
        try:
            pts = tuple(TimelinePoint(_int(t), _int(o)) for t, o in d.get("points", ()))
            return cls(pts, _int(d.get("max_points", DEFAULT_TIMELINE_POINTS)))
        except (TypeError, ValueError) as e:
            raise InvalidInputError(f"bad offset timeline: {e}") from e


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v
