"""Produce and consume rates from offset samples, and the catch-up ETA."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol


class OffsetObservation(Protocol):
    """Anything with the fields of :class:`opskit.core.status.OffsetSample`."""

    @property
    def timestamp_ms(self) -> int: ...

    @property
    def committed(self) -> int | None: ...

    @property
    def log_end(self) -> int: ...


@dataclass(frozen=True)
class Rate:
    """Average rate of an offset over the points used."""

    #: messages per second, never negative; None with fewer than 2 usable points
    per_second: float | None
    span_ms: int
    points: int
    #: the offset fell somewhere (truncation, rewind): only points after the
    #: last fall were used
    reset: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_second": self.per_second,
            "span_ms": self.span_ms,
            "points": self.points,
            "reset": self.reset,
        }


def offset_rate(points: Iterable[tuple[int, int]]) -> Rate:
    """Rate of an offset from ``(timestamp_ms, offset)`` points.

    Points are sorted by time; for equal times the last one wins. If the
    offset ever falls, only the points from the last fall on are used (a rate
    across a rewind or truncation means nothing). Rate = (last - first offset)
    / (last - first time), so it is never negative.
    """
    by_time: dict[int, int] = {}
    for t, o in points:
        by_time[t] = o
    pts = sorted(by_time.items())
    start, reset = 0, False
    for i in range(1, len(pts)):
        if pts[i][1] < pts[i - 1][1]:
            start, reset = i, True
    used = pts[start:]
    if len(used) < 2:
        return Rate(None, 0, len(used), reset)
    (t0, o0), (t1, o1) = used[0], used[-1]
    span = t1 - t0
    return Rate((o1 - o0) * 1000.0 / span, span, len(used), reset)


def window_rates(rows: Sequence[tuple[int, int | None, int, int | None]]
                 ) -> tuple[float | None, float | None]:
    """``(consume_rate(samples).per_second, produce_rate(samples).per_second)`` of a
    status window's samples given as ``(timestamp_ms, committed, log_end, log_start)``
    rows in strictly increasing time order, in one pass and without building points:
    from the last fall on, (last - first offset) * 1000 / (last - first time)."""
    n = len(rows)
    produce: float | None = None
    if n >= 2:
        start = 0
        for i in range(n - 1, 0, -1):
            if rows[i][2] < rows[i - 1][2]:
                start = i
                break
        if n - start >= 2:
            t0, _, e0, _ = rows[start]
            t1, _, e1, _ = rows[-1]
            produce = (e1 - e0) * 1000.0 / (t1 - t0)
    count, t0, c0, t1, c1 = 0, 0, 0, 0, 0
    for t, c, _, _ in rows:
        if c is None:
            continue
        if count and c >= c1:
            count += 1
        else:  # the first commit, or a fall: the rate starts again here
            count, t0, c0 = 1, t, c
        t1, c1 = t, c
    consume = (c1 - c0) * 1000.0 / (t1 - t0) if count >= 2 else None
    return consume, produce


def produce_rate(samples: Iterable[OffsetObservation]) -> Rate:
    """Messages/s written to a partition: rate of its log end."""
    return offset_rate((s.timestamp_ms, s.log_end) for s in samples)


def consume_rate(samples: Iterable[OffsetObservation]) -> Rate:
    """Messages/s a group consumes from a partition: rate of its committed offset.

    Samples without a committed offset are skipped. At the head this equals
    the produce rate, not what the consumer could do.
    """
    return offset_rate((s.timestamp_ms, s.committed) for s in samples if s.committed is not None)


# --------------------------------------------------------------------------- catch-up


class CatchUpState(str, Enum):
    #: no lag
    CAUGHT_UP = "caught_up"
    #: consume rate > produce rate: ``eta_seconds`` is set
    CATCHING_UP = "catching_up"
    #: lag > 0 and consume rate <= produce rate: the lag does not shrink
    FALLING_BEHIND = "falling_behind"
    #: a rate is missing or not a finite number
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class CatchUp:
    state: CatchUpState
    #: 0 when caught up, lag / (consume - produce) when catching up, else None
    eta_seconds: float | None
    #: consume - produce, messages/s; None when a rate is unknown
    net_rate: float | None
    lag: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "eta_seconds": self.eta_seconds,
            "net_rate": self.net_rate,
            "lag": self.lag,
        }


def catch_up_eta(lag: int, consume_rate: float | None, produce_rate: float | None) -> CatchUp:
    """Time for the consumer to reach the head at current rates.

    ``lag`` in messages (>= 0), rates in messages/s (>= 0). The ETA assumes
    both rates hold; it is never negative.
    """
    if lag < 0:
        raise ValueError(f"lag must be non-negative, got {lag}")
    for name, r in (("consume", consume_rate), ("produce", produce_rate)):
        if r is not None and r < 0:
            raise ValueError(f"{name} rate must be non-negative, got {r}")
    if lag == 0:
        net = _net(consume_rate, produce_rate)
        return CatchUp(CatchUpState.CAUGHT_UP, 0.0, net, 0)
    net = _net(consume_rate, produce_rate)
    if net is None:
        return CatchUp(CatchUpState.UNKNOWN, None, None, lag)
    if net <= 0:
        return CatchUp(CatchUpState.FALLING_BEHIND, None, net, lag)
    eta = lag / net
    if not math.isfinite(eta):
        return CatchUp(CatchUpState.UNKNOWN, None, net, lag)
    return CatchUp(CatchUpState.CATCHING_UP, eta, net, lag)


def _net(consume: float | None, produce: float | None) -> float | None:
    if consume is None or produce is None:
        return None
    if not (math.isfinite(consume) and math.isfinite(produce)):
        return None
    return consume - produce
