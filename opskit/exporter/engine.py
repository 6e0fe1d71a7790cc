"""The exporter's collection engine: cycles in the background, each one bounded.

One thread runs collection cycles; each cycle runs in its own worker thread, joined for at most ``collection_timeout``. A cycle that
overruns counts as a ``timeout`` error and marks Kafka down at once; the next
cycle starts only once it has finished (there is never more than one worker),
and every Kafka call inside it is bounded by the Kafka timeout, so it does
finish. Any exception of a cycle is caught and counted by kind; the loop never
dies of one.

When the next cycle starts: :mod:`opskit.exporter.schedule` plans it after
each cycle, and again whenever a scrape arrives while it waits. With one
regular scraper (a Prometheus server) the cycle starts so that it ends just
before the next expected scrape; otherwise every ``interval`` from the previous
start, and at once when a cycle ran longer than that.

Scrapes never touch Kafka: a cycle ends by rendering its snapshot once (the
small families written as text with the bytes prometheus_client would give them, see
:mod:`opskit.exporter.small_text`; the per-partition ones written directly, see
:func:`~opskit.exporter.families.render_partition_families`, each group's block of
the group-partition families reused from the previous cycle when it did not change)
and publishing the
gzipped text to a :class:`~opskit.exporter.serving.ServedState`; a scrape adds
fresh self-metrics to it. Rendering 230,000 series through prometheus_client
objects on every scrape would cost seconds each.

``opskit exporter`` runs this engine in a separate collector process (see
:mod:`opskit.exporter.process`) so the HTTP server never competes with
collection for the interpreter lock; tests and ``--once`` run it in-process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol

from opskit.exporter.assemble import CycleInputs, assemble_snapshot
from opskit.exporter.families import RenderCache, render_partition_families
from opskit.exporter.freshness import error_kind, families_for, first_line
from opskit.exporter.history import History
from opskit.exporter.options import ExporterOptions
from opskit.exporter.schedule import DURATIONS_KEPT, KEEP, OFF, Plan, plan_next, scrape_grid
from opskit.exporter.serving import Rendered, ServedState, ServesState
from opskit.exporter.small_text import render_small_families
from opskit.exporter.snapshot import Snapshot

log = logging.getLogger(__name__)


class CycleSource(Protocol):
    def collect(self) -> tuple[CycleInputs, int]: ...

    def close(self) -> None: ...


def _trimmer() -> Callable[[int], object] | None:
    try:
        fn: Callable[[int], object] = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        return fn
    except (OSError, AttributeError):  # not glibc
        return None


_MALLOC_TRIM = _trimmer()


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The garbage collector off while a cycle builds and renders its snapshot: the
    build allocates hundreds of thousands of objects, almost all freed by their
    reference counts, and each automatic collection would walk every live object
    again; :func:`_release_memory` collects after the cycle instead (the same garbage
    is freed, once)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: every this many cycles the collection after a cycle is a full one; the others
#: collect the young generations only (what the cycle made): a full collection walks
#: every object that outlives cycles (the latest groups, the record-time cache), which
#: cost ~10% of the collector's CPU when done every cycle
FULL_GC_EVERY = 8


def _release_memory(full: bool = True) -> None:
    """Free the cycle's garbage (reference cycles included) and hand the freed memory
    back to the OS (glibc keeps it otherwise), so RSS between cycles reflects what the
    exporter really holds. ``full``: every generation, else the young ones (what was
    made since the last collection: the cycle's garbage)."""
    gc.collect() if full else gc.collect(1)
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


class Exporter(ServesState):
    def __init__(self, source: CycleSource, options: ExporterOptions,
                 clock: Callable[[], float] = time.time,
                 on_change: Callable[[], None] | None = None) -> None:
        self.source = source
        self.options = options
        self.clock = clock
        self.state = ServedState(options.stale_after_s, clock, families_for(options))
        #: called after every published success or failure (the collector process reports then)
        self.on_change = on_change
        self.history = History(int(options.rate_window_s * 1000), int(options.status_window_s * 1000),
                               options.status_samples)
        self._lock = threading.Lock()
        self._cycle_started: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: each group's rendered blocks of the group-partition families, reused next cycle
        #: where unchanged (only the cycle's worker thread renders, one cycle at a time)
        self._render_cache = RenderCache()
        #: client address -> arrival times (monotonic) of its latest scrapes
        self._scrapes: dict[str, deque[float]] = {}
        self._durations: deque[float] = deque(maxlen=DURATIONS_KEPT)
        self._first_timed = False
        self._cycles_done = 0
        #: set by a scrape or stop(): the loop plans again
        self._wake = threading.Event()
        self.plan: Plan | None = None

    # ----- scrapes (the schedule follows them) -----
    def note_scrapes(self, scrapes: Sequence[tuple[float, str]]) -> None:
        """Scrapes that arrived: (monotonic time, client address)."""
        with self._lock:
            for at, client in scrapes:
                self._scrapes.setdefault(client, deque(maxlen=KEEP)).append(at)
            if len(self._scrapes) > 64:  # many one-off clients: keep the busiest
                keep = sorted(self._scrapes, key=lambda c: self._scrapes[c][-1])[-32:]
                self._scrapes = {c: self._scrapes[c] for c in keep}
        self._wake.set()

    def scrape_arrived(self, at: float, client: str) -> None:
        self.note_scrapes([(at, client)])

    def next_plan(self, now: float, last_start: float) -> Plan:
        """The next cycle's start (see :mod:`opskit.exporter.schedule`)."""
        with self._lock:
            scrapes = {c: list(ts) for c, ts in self._scrapes.items()}
            durations = list(self._durations)
        if self.options.align_to_scrapes:
            fit, reason = scrape_grid(scrapes, now, self.options.interval_s)
        else:
            fit, reason = None, OFF
        return plan_next(now, last_start, self.options.interval_s, fit, reason, durations)

    # ----- lifecycle -----
    def start(self) -> None:
        self._thread = threading.Thread(target=self.loop, name="opskit-exporter-collect", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_first_cycle(self, timeout: float) -> bool:
        return self.state.first_done.wait(timeout)

    def loop(self) -> None:
        """Run cycles until stopped (each one planned after the previous one ended,
        never two at once), then close the source."""
        start_background = getattr(self.source, "start_background", None)
        if start_background is not None:
            start_background()  # the slow families are read beside the cycles
        start = time.monotonic()
        while not self._stop.is_set():
            self.run_cycle()
            self._wake.clear()
            plan = self.next_plan(time.monotonic(), start)
            while True:
                self._set_plan(plan)
                now = time.monotonic()
                if self._stop.is_set() or plan.start_s <= now:
                    break  # its time has come: run it (planning again now would skip a period)
                if self._wake.wait(plan.start_s - now) and not self._stop.is_set():
                    # a scrape arrived while waiting: plan again with it
                    self._wake.clear()
                    plan = self.next_plan(time.monotonic(), start)
            start = plan.start_s
        try:
            self.source.close()
        except Exception:
            log.debug("closing the source failed", exc_info=True)

    def run_cycle(self) -> None:
        """One bounded cycle (also called directly by tests and ``--once``)."""
        box: dict[str, object] = {}
        started = time.monotonic()
        with self._lock:
            self._cycle_started = started

        def work() -> None:
            try:
                inputs, now_ms = self.source.collect()
                with _gc_paused():
                    snap = assemble_snapshot(inputs, self.history, now_ms)
                    del inputs
                    box["rendered"] = self.render(snap)
            except BaseException as e:  # noqa: BLE001 - counted by kind, never fatal
                box["error"] = e

        worker = threading.Thread(target=work, name="opskit-exporter-cycle", daemon=True)
        worker.start()
        worker.join(self.options.collection_timeout_s)
        if worker.is_alive():
            self._failed("timeout", f"collection took more than {self.options.collection_timeout_s:g}s")
            while worker.is_alive() and not self._stop.is_set():
                worker.join(0.5)
            if worker.is_alive():
                return
        duration = time.monotonic() - started
        with self._lock:
            self._cycle_started = None
            if self._first_timed:  # the first cycle also starts the clients: not typical
                self._durations.append(duration)
            self._first_timed = True
        err = box.get("error")
        rendered = box.get("rendered")
        box.clear()
        if isinstance(err, BaseException):
            kind = error_kind(err)
            self._failed(kind, first_line(err), duration)
            if kind == "internal":
                # one line; the traceback only with --debug
                log.error("collection failed with an internal error: %s: %s",
                          type(err).__name__, (str(err).splitlines() or [""])[0],
                          exc_info=err if log.isEnabledFor(logging.DEBUG) else None)
        elif isinstance(rendered, Rendered):
            self.state.publish_success(rendered, duration)
            self._changed()
        # after every cycle, failed ones too (an error's traceback is a reference cycle)
        del err, rendered
        self._cycles_done += 1
        _release_memory(full=self._cycles_done % FULL_GC_EVERY == 1)

    def _set_plan(self, plan: Plan) -> None:
        old, self.plan = self.plan, plan
        if old is None or (old.aligned, old.reason) != (plan.aligned, plan.reason):
            log.info("collection schedule: %s%s", plan.reason,
                     f" (scrape period {plan.period_s:.2f}s)" if plan.period_s else "")
        if plan.aligned and plan.target_s is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("next cycle at %.2f, %.2fs before the scrape expected at %.2f",
                      plan.start_s, plan.target_s - plan.start_s, plan.target_s)
        if self.state.set_schedule(plan.aligned, plan.period_s):
            self._changed()

    def _failed(self, kind: str, message: str, duration: float | None = None) -> None:
        log.warning("collection failed (%s): %s", kind, message)
        self.state.publish_failure(kind, message, duration)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.warning("reporting the exporter state failed", exc_info=True)

    def render(self, snap: Snapshot) -> Rendered:
        """The snapshot's exposition, gzipped."""
        head, series = render_small_families(snap, self.options.granularity)
        comp = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip member
        parts = [comp.compress(head.encode())]
        for text, n in render_partition_families(snap, self.options.granularity,
                                                 cache=self._render_cache):
            parts.append(comp.compress(text.encode()))
            series += n
        parts.append(comp.flush())
        return Rendered(snap.taken_at_ms, b"".join(parts), series, dict(snap.families))

    # ----- serving (status, scrape, ready: from the served state) -----
    def served(self) -> Rendered | None:
        return self.state.served()

    def healthy(self) -> tuple[bool, str]:
        """False only when the collection loop died or a cycle is wedged far beyond its timeout."""
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            return False, "collection thread is not running"
        with self._lock:
            started = self._cycle_started
        limit = 10 * self.options.collection_timeout_s
        if started is not None and time.monotonic() - started > limit:
            return False, f"a collection cycle has been running for more than {limit:g}s"
        return True, "ok"

    @property
    def last_error(self) -> str | None:
        return self.state.last_error
