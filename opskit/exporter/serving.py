"""What the HTTP endpoint serves: the latest rendered snapshot and the exporter's state.

Shared by the in-process engine (:class:`~opskit.exporter.engine.Exporter`)
and the collector-process runner (:mod:`opskit.exporter.process`): both publish
successes and failures here, and scrapes read from here only.

Stale data: after a failed cycle the last good snapshot is still served, with
``opskit_kafka_up 0`` and a growing ``opskit_exporter_snapshot_age_seconds``,
until it is older than ``stale_after``; then only self-metrics are served, so
dashboards show a gap instead of frozen values.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from opskit.exporter.families import ExporterStatus, self_families
from opskit.exporter.freshness import FamilyRead, core_failure


class ListCollector(Collector):
    """A custom collector yielding whatever families it is handed for one render."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families()


@dataclass(frozen=True)
class Rendered:
    """A snapshot's exposition, kept gzipped only (Prometheus asks for gzip;
    the plain text of 10,000 partitions would hold ~20 MB)."""

    taken_at_ms: int
    gz: bytes
    series: int
    #: family -> the outcome of its latest read when this snapshot was taken
    families: dict[str, FamilyRead] = field(default_factory=dict)

    @property
    def text(self) -> bytes:
        return gzip.decompress(self.gz)


@dataclass(frozen=True)
class StateReport:
    """The whole served state, as plain picklable data (collector process -> server)."""

    rendered: Rendered | None
    up: bool
    collections: int
    errors: dict[str, int] = field(default_factory=dict)
    last_duration_s: float | None = None
    last_success_s: float | None = None
    last_error: str | None = None
    first_done: bool = False
    #: (family, kind) -> failed reads
    family_errors: dict[tuple[str, str], int] = field(default_factory=dict)
    #: family -> the outcome of its latest read
    families: dict[str, FamilyRead] = field(default_factory=dict)
    #: the collection schedule: aligned to the scrapes, and their estimated period
    schedule_aligned: bool = False
    scrape_period_s: float | None = None


class ServedState:
    def __init__(self, stale_after_s: float, clock: Callable[[], float],
                 expected_families: tuple[str, ...] = ()) -> None:
        self.stale_after_s = stale_after_s
        self.clock = clock
        #: the families this exporter reads: each gets its series from the start
        self.expected_families = expected_families
        self._families: dict[str, FamilyRead] = {}
        self._family_errors: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._rendered: Rendered | None = None
        self._up = False
        self._collections = 0
        self._errors: dict[str, int] = {}
        self._last_duration: float | None = None
        self._last_success: float | None = None
        self._last_error: str | None = None
        self._aligned = False
        self._period: float | None = None
        self.first_done = threading.Event()
        self._scrape_lock = threading.Lock()
        self._self_pending: list[Metric] = []
        self._self_registry = CollectorRegistry(auto_describe=False)
        self._self_registry.register(ListCollector(lambda: self._self_pending))

    # ----- publishing -----
    def publish_success(self, rendered: Rendered, duration_s: float) -> None:
        """A finished cycle. ``up`` only when every core family (metadata, groups,
        offsets) was read in it; a family whose new read failed is counted once."""
        failed = core_failure(rendered.families)
        with self._lock:
            for name, r in rendered.families.items():
                prev = self._families.get(name)
                if not r.ok and r.kind and (prev is None or prev.attempt != r.attempt):
                    key = (name, r.kind)
                    self._family_errors[key] = self._family_errors.get(key, 0) + 1
            self._families = dict(rendered.families)
            self._rendered = rendered
            self._up = failed is None
            self._collections += 1
            self._last_duration = duration_s
            self._last_success = rendered.taken_at_ms / 1000.0
            self._last_error = None
            if failed is not None:
                name, r = failed
                kind = r.kind or "internal"
                self._errors[kind] = self._errors.get(kind, 0) + 1
                self._last_error = f"{name.replace('_', ' ')} could not be read: {r.message}"
        self.first_done.set()

    def publish_failure(self, kind: str, message: str, duration_s: float | None = None) -> None:
        """A failed (or, without a duration, still running but timed-out) cycle."""
        with self._lock:
            self._up = False
            self._errors[kind] = self._errors.get(kind, 0) + 1
            self._last_error = message
            # nothing of this cycle is current
            self._families = {n: r.failed(kind, message) for n, r in self._families.items()}
            if duration_s is not None:
                self._collections += 1
                self._last_duration = duration_s
        self.first_done.set()

    def set_schedule(self, aligned: bool, period_s: float | None) -> bool:
        """The collection schedule now; True when it changed enough to report at once
        (aligned or not, a period found or lost, or moved by more than 1 %)."""
        with self._lock:
            old_aligned, old = self._aligned, self._period
            self._aligned, self._period = aligned, period_s
        if aligned != old_aligned or (old is None) != (period_s is None):
            return True
        return old is not None and period_s is not None and abs(period_s - old) > 0.01 * old

    def report(self) -> StateReport:
        with self._lock:
            return StateReport(self._rendered, self._up, self._collections, dict(self._errors),
                               self._last_duration, self._last_success, self._last_error,
                               self.first_done.is_set(), dict(self._family_errors),
                               dict(self._families), self._aligned, self._period)

    def apply(self, rep: StateReport, extra_errors: dict[str, int] | None = None,
              extra_collections: int = 0,
              extra_family_errors: dict[tuple[str, str], int] | None = None) -> None:
        """Take over a report from the collector process, adding what earlier
        collector processes and the parent counted (counters never go back)."""
        errors = dict(rep.errors)
        for k, n in (extra_errors or {}).items():
            errors[k] = errors.get(k, 0) + n
        fam_errors = dict(rep.family_errors)
        for fk, n in (extra_family_errors or {}).items():
            fam_errors[fk] = fam_errors.get(fk, 0) + n
        with self._lock:
            if rep.rendered is not None:
                self._rendered = rep.rendered
            self._up = rep.up
            self._collections = rep.collections + extra_collections
            self._errors = errors
            self._last_duration = rep.last_duration_s
            self._last_success = rep.last_success_s
            self._last_error = rep.last_error
            self._family_errors = fam_errors
            self._aligned, self._period = rep.schedule_aligned, rep.scrape_period_s
            if rep.families or not rep.up:
                self._families = dict(rep.families) if rep.families else {
                    n: r.failed("internal", rep.last_error or "collector down")
                    for n, r in self._families.items()}
        if rep.first_done:
            self.first_done.set()

    def mark_down(self, message: str) -> None:
        with self._lock:
            self._up = False
            self._last_error = message
            self._families = {n: r.failed("internal", message) for n, r in self._families.items()}
        self.first_done.set()

    # ----- serving -----
    def served(self) -> Rendered | None:
        """The snapshot to serve now: the latest good one unless older than ``stale_after``."""
        with self._lock:
            r = self._rendered
        if r is None or self.clock() - r.taken_at_ms / 1000.0 > self.stale_after_s:
            return None
        return r

    def status(self) -> ExporterStatus:
        r = self.served()
        with self._lock:
            return ExporterStatus(
                up=self._up, collections=self._collections, errors=dict(self._errors),
                last_duration_s=self._last_duration, last_success_s=self._last_success,
                served_snapshot_s=r.taken_at_ms / 1000.0 if r else None,
                families=dict(self._families), family_errors=dict(self._family_errors),
                expected_families=self.expected_families,
                schedule_aligned=self._aligned, scrape_period_s=self._period,
            )

    def scrape(self, gzipped: bool = False) -> bytes:
        """The /metrics body: the served snapshot's text, then fresh self-metrics."""
        r = self.served()
        fams = self_families(self.status(), self.clock(), r.series if r else 0)
        with self._scrape_lock:
            self._self_pending = fams
            own = generate_latest(self._self_registry)
            self._self_pending = []
        if gzipped:  # gzip members may be concatenated (RFC 1952); Prometheus reads them all
            return (r.gz if r else b"") + gzip.compress(own, compresslevel=1)
        return (r.text if r else b"") + own

    def ready(self) -> tuple[bool, str]:
        """Ready once the first cycle has finished, whatever its outcome."""
        if not self.first_done.is_set():
            return False, "first collection not finished"
        with self._lock:
            return True, "kafka up" if self._up else f"kafka down: {self._last_error}"

    @property
    def up(self) -> bool:
        with self._lock:
            return self._up

    @property
    def last_error(self) -> str | None:
        with self._lock:
            return self._last_error


class ServesState:
    """What an exporter answers, from its :class:`ServedState`: the in-process engine and
    the process runner serve the same way (only how ``state`` is filled differs)."""

    state: ServedState

    def status(self) -> ExporterStatus:
        return self.state.status()

    def scrape(self, gzipped: bool = False) -> bytes:
        return self.state.scrape(gzipped)

    def scrape_arrived(self, at: float, client: str) -> None:
        """A scrape of /metrics arrived (monotonic time, client address): the
        collection schedule follows them. Here: ignored."""

    def ready(self) -> tuple[bool, str]:
        return self.state.ready()
