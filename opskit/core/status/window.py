"""Offset samples of a group's partitions over a sliding window, and the policy that
bounds the window and judges it (rules in :mod:`opskit.core.status.evaluate`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from opskit.core.models import LagThresholds, TopicPartition
from opskit.errors import InvalidInputError

DEFAULT_WINDOW_MS = 10 * 60 * 1000
DEFAULT_MIN_SPAN_MS = 5 * 60 * 1000
DEFAULT_MAX_SAMPLES = 60


@dataclass(frozen=True)
class OffsetSample:
    """One observation of a partition for one group, taken at ``timestamp_ms``."""

    timestamp_ms: int
    committed: int | None
    log_end: int
    log_start: int | None = None

    def __post_init__(self) -> None:
        if self.log_end < 0 or (self.committed is not None and self.committed < 0):
            raise ValueError(f"offsets must be non-negative: {self!r}")
        if self.log_start is not None and self.log_start < 0:
            raise ValueError(f"log start must be non-negative: {self!r}")

    @property
    def lag(self) -> int | None:
        """Never negative; None without a committed offset."""
        if self.committed is None:
            return None
        return max(0, self.log_end - self.committed)

    @property
    def records_lost(self) -> int:
        """Records deleted before the group read them (committed below log start)."""
        if self.committed is None or self.log_start is None:
            return 0
        return max(0, self.log_start - self.committed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp_ms": self.timestamp_ms,
            "committed": self.committed,
            "log_end": self.log_end,
            "log_start": self.log_start,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> OffsetSample:
        try:
            return cls(
                timestamp_ms=_int(d["timestamp_ms"]),
                committed=_opt_int(d.get("committed")),
                log_end=_int(d["log_end"]),
                log_start=_opt_int(d.get("log_start")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"bad offset sample {dict(d)!r}: {e}") from e


@dataclass(frozen=True)
class StatusPolicy:
    """How status is judged.

    ``window_ms``: samples older than ``now_ms - window_ms`` are ignored and
    dropped. ``max_samples``: per-partition cap on samples kept.
    ``allowed_lag``: lag (messages) that is always OK. ``min_samples`` and
    ``min_span_ms``: history needed before trend rules (STALL, STOP, WARN)
    apply. ``thresholds``: HIP-30 group lag thresholds. ``lag_seconds_warn`` /
    ``lag_seconds_crit``: optional objectives on any partition's lag in
    seconds (strictly above is a breach, like the HIP-30 thresholds).
    """

    window_ms: int = DEFAULT_WINDOW_MS
    max_samples: int = DEFAULT_MAX_SAMPLES
    allowed_lag: int = 0
    min_samples: int = 2
    min_span_ms: int = DEFAULT_MIN_SPAN_MS
    thresholds: LagThresholds = field(default_factory=LagThresholds)
    lag_seconds_warn: float | None = None
    lag_seconds_crit: float | None = None

    def __post_init__(self) -> None:
        if self.window_ms <= 0:
            raise ValueError("window_ms must be positive")
        if self.max_samples < 2:
            raise ValueError("max_samples must be at least 2")
        if self.allowed_lag < 0:
            raise ValueError("allowed_lag must be non-negative")
        if not 2 <= self.min_samples <= self.max_samples:
            raise ValueError("min_samples must be between 2 and max_samples")
        if not 0 <= self.min_span_ms <= self.window_ms:
            raise ValueError("min_span_ms must be between 0 and window_ms")
        w, c = self.lag_seconds_warn, self.lag_seconds_crit
        if (w is not None and w < 0) or (c is not None and c < 0):
            raise ValueError("lag seconds objectives must be non-negative")
        if w is not None and c is not None and w > c:
            raise ValueError(f"lag seconds warn {w} is above critical {c}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "window_ms": self.window_ms,
            "max_samples": self.max_samples,
            "allowed_lag": self.allowed_lag,
            "min_samples": self.min_samples,
            "min_span_ms": self.min_span_ms,
            "thresholds": {"warn": self.thresholds.warn, "crit": self.thresholds.crit},
            "lag_seconds_warn": self.lag_seconds_warn,
            "lag_seconds_crit": self.lag_seconds_crit,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StatusPolicy:
        """Missing keys take their defaults."""
        dflt = cls()
        try:
            th = d.get("thresholds")
            thresholds = (
                LagThresholds(warn=_int(th["warn"]), crit=_int(th["crit"]))
                if th is not None
                else dflt.thresholds
            )
            return cls(
                window_ms=_int(d.get("window_ms", dflt.window_ms)),
                max_samples=_int(d.get("max_samples", dflt.max_samples)),
                allowed_lag=_int(d.get("allowed_lag", dflt.allowed_lag)),
                min_samples=_int(d.get("min_samples", dflt.min_samples)),
                min_span_ms=_int(d.get("min_span_ms", dflt.min_span_ms)),
                thresholds=thresholds,
                lag_seconds_warn=_opt_float(d.get("lag_seconds_warn")),
                lag_seconds_crit=_opt_float(d.get("lag_seconds_crit")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"bad status policy: {e}") from e


# --------------------------------------------------------------------------- windows


@dataclass(frozen=True)
class PartitionWindow:
    """The recent samples of one partition: at most ``policy.max_samples``, none
    older than ``policy.window_ms`` before the newest, in strictly increasing
    time order.

    ``committed_since_ms`` is when the current committed offset was first
    observed; it outlives the samples that showed it, which is what lets STOP
    see "unchanged for longer than the window". None when unknown.
    """

    tp: TopicPartition
    samples: tuple[OffsetSample, ...] = ()
    committed_since_ms: int | None = None

    def __post_init__(self) -> None:
        ts = [s.timestamp_ms for s in self.samples]
        if any(b <= a for a, b in pairwise(ts)):
            raise ValueError(f"samples of {self.tp} are not in strictly increasing time order")

    @property
    def latest(self) -> OffsetSample | None:
        return self.samples[-1] if self.samples else None

    def add(self, sample: OffsetSample, policy: StatusPolicy) -> PartitionWindow:
        """A new window with ``sample`` appended, then pruned to ``sample.timestamp_ms``.

        A sample not newer than the latest one (clock stepped back, duplicate)
        is ignored: the window is returned unchanged.
        """
        prev = self.latest
        if prev is not None and sample.timestamp_ms <= prev.timestamp_ms:
            return self
        if sample.committed is None:
            since: int | None = None
        elif prev is None or prev.committed != sample.committed or self.committed_since_ms is None:
            since = sample.timestamp_ms
        else:
            since = self.committed_since_ms
        grown = PartitionWindow(self.tp, self.samples + (sample,), since)
        return grown.prune(sample.timestamp_ms, policy)

    def prune(self, now_ms: int, policy: StatusPolicy) -> PartitionWindow:
        """Drop samples older than ``now_ms - window_ms`` and beyond ``max_samples``."""
        cutoff = now_ms - policy.window_ms
        kept = tuple(s for s in self.samples if s.timestamp_ms >= cutoff)[-policy.max_samples :]
        if kept == self.samples:
            return self
        since = self.committed_since_ms if kept else None
        return PartitionWindow(self.tp, kept, since)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "committed_since_ms": self.committed_since_ms,
            "samples": [s.to_dict() for s in self.samples],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartitionWindow:
        try:
            return cls(
                tp=TopicPartition(str(d["topic"]), _int(d["partition"])),
                samples=tuple(OffsetSample.from_dict(s) for s in d.get("samples", ())),
                committed_since_ms=_opt_int(d.get("committed_since_ms")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"bad partition window: {e}") from e


@dataclass(frozen=True)
class GroupWindow:
    """The windows of all partitions of one group, sorted by partition.

    Memory is bounded: ``max_samples`` per partition, and a partition with no
    sample inside the window (topic deleted, group stopped committing on it)
    is dropped.
    """

    group_id: str
    partitions: tuple[PartitionWindow, ...] = ()

    def window_for(self, tp: TopicPartition) -> PartitionWindow | None:
        for w in self.partitions:
            if w.tp == tp:
                return w
        return None

    def observe(
        self, now_ms: int, samples: Mapping[TopicPartition, OffsetSample], policy: StatusPolicy
    ) -> GroupWindow:
        """Add one round of samples, prune everything to ``now_ms``."""
        by_tp = {w.tp: w for w in self.partitions}
        for tp, s in samples.items():
            by_tp[tp] = by_tp.get(tp, PartitionWindow(tp)).add(s, policy)
        pruned = (w.prune(now_ms, policy) for _, w in sorted(by_tp.items()))
        return GroupWindow(self.group_id, tuple(w for w in pruned if w.samples))

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group_id, "partitions": [w.to_dict() for w in self.partitions]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupWindow:
        try:
            parts = tuple(PartitionWindow.from_dict(p) for p in d.get("partitions", ()))
            return cls(group_id=str(d["group"]), partitions=tuple(sorted(parts, key=_tp_key)))
        except (KeyError, TypeError) as e:
            raise InvalidInputError(f"bad group window: {e}") from e


def _tp_key(w: PartitionWindow) -> TopicPartition:
    return w.tp


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _opt_int(v: Any) -> int | None:
    return None if v is None else _int(v)


def _opt_float(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"expected a number, got {v!r}")
    return float(v)
