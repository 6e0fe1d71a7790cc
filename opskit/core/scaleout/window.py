"""A daily maintenance window in UTC, such as ``02:00-05:00Z``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from opskit.errors import UsageError

_RE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]|24):([0-5]\d)Z?$")
_DAY = 24 * 60


@dataclass(frozen=True)
class Window:
    """Minutes after midnight UTC; ``end`` may be smaller than ``start`` (the window
    crosses midnight). A window never spans a whole day: with no window, runs may
    act at any time."""

    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.start // 60:02d}:{self.start % 60:02d}-{self.end // 60:02d}:{self.end % 60:02d}Z"

    def _minute(self, now: datetime) -> float:
        if now.tzinfo is None:
            raise ValueError("a naive datetime has no time zone; pass an aware UTC time")
        u = now.astimezone(UTC)
        return u.hour * 60 + u.minute + u.second / 60 + u.microsecond / 60e6

    def contains(self, now: datetime) -> bool:
        m = self._minute(now)
        if self.start < self.end:
            return self.start <= m < self.end
        return m >= self.start or m < self.end

    def closes_in(self, now: datetime) -> timedelta | None:
        """Time left in the window, or None when ``now`` is outside it."""
        if not self.contains(now):
            return None
        m = self._minute(now)
        left = (self.end - m) % _DAY
        return timedelta(minutes=left)

    def opens_in(self, now: datetime) -> timedelta:
        """Time until the window next opens (zero when it is open)."""
        if self.contains(now):
            return timedelta(0)
        return timedelta(minutes=(self.start - self._minute(now)) % _DAY)


def parse_window(text: str) -> Window:
    """``HH:MM-HH:MM`` in UTC (a trailing ``Z`` is allowed); ``24:00`` ends at midnight."""
    m = _RE.match(text.strip())
    if not m:
        raise UsageError(f"--window {text!r}: expected HH:MM-HH:MMZ in UTC, e.g. 02:00-05:00Z")
    start = int(m[1]) * 60 + int(m[2])
    end = int(m[3]) * 60 + int(m[4])
    if end > _DAY:
        raise UsageError(f"--window {text!r}: the end is past 24:00")
    end %= _DAY
    if start == end:
        raise UsageError(f"--window {text!r}: start and end are equal; leave --window out to "
                         "allow any time")
    return Window(start, end)
