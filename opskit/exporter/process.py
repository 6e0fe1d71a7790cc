"""Run collection in a child process; serve from the parent.

Why: collection is CPU-bound Python (about 5 s of CPU per cycle at 10,000
partitions and 500 groups). In one process, the HTTP thread waits for the
interpreter lock behind it and scrape latency climbs to 100+ ms. The child
runs the in-process :class:`~opskit.exporter.engine.Exporter` (same bounded
cycles) and sends its served state -- gzipped exposition plus counters -- to
the parent after every success or failure, through a pipe. The parent only
serves bytes.

Resilience: the child reports within ``collection_timeout`` even when a cycle
hangs (the engine's timeout). If it dies, or says nothing for ``5 x
(interval + collection_timeout)``, the parent kills it, counts an ``internal``
error, marks Kafka down and starts a new child after ``interval`` -- never
faster, so a broken setup cannot spin. The child exits when the parent goes
away (its next report fails, or the parent's pipe closes).

Scrapes: the server notes when each ``/metrics`` scrape arrives (monotonic
time, which both processes share, and the client address); the supervisor
thread forwards them to the child in batches (never the HTTP handler: a
wedged child must not block a scrape), where the engine plans its cycles
around them (:mod:`opskit.exporter.schedule`).
"""

from __future__ import annotations

import gc
import logging
import multiprocessing as mp
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from opskit.core.connection import ConnectionConfig
from opskit.core.models import LagThresholds
from opskit.exporter.freshness import families_for
from opskit.exporter.options import ExporterOptions
from opskit.exporter.serving import Rendered, ServedState, ServesState, StateReport

log = logging.getLogger(__name__)


def _child_main(conn: ConnectionConfig, options: ExporterOptions,
                thresholds: Callable[[str], LagThresholds] | None, pipe: Connection,
                log_level: int, log_setup: Callable[[], None] | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    if log_setup is not None:
        log_setup()
    else:
        logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from opskit import redact

    redact.register(conn.password)  # a fresh interpreter: the parent's registry is not here
    redact.install()
    from opskit.adapters.kafka.kafka_python import quiet_kafka_python
    from opskit.exporter.collector import KafkaSource
    from opskit.exporter.engine import Exporter

    quiet_kafka_python(log_level <= logging.DEBUG)
    # what is loaded by now (modules, classes, the parent's objects copied by the fork)
    # lives as long as the process: kept out of every garbage collection from here on.
    # No automatic collections either: the engine collects after every cycle (the young
    # generations; everything every FULL_GC_EVERY cycles), where an automatic full
    # collection would walk every long-lived object again at some allocation count
    gc.freeze()
    gc.disable()
    source = KafkaSource(conn, options, thresholds)
    sent: list[Rendered | None] = [None]
    lock = threading.Lock()
    engine: Exporter

    def report() -> None:
        rep = engine.state.report()
        with lock:
            new = rep.rendered if rep.rendered is not sent[0] else None
            try:
                pipe.send(StateReport(new, rep.up, rep.collections, rep.errors, rep.last_duration_s,
                                      rep.last_success_s, rep.last_error, rep.first_done,
                                      rep.family_errors, rep.families, rep.schedule_aligned,
                                      rep.scrape_period_s))
            except (BrokenPipeError, EOFError, OSError):
                os._exit(0)  # the parent is gone
            if new is not None:
                sent[0] = new

    engine = Exporter(source, options, on_change=report)

    def watch_parent() -> None:
        try:
            while True:
                msg = pipe.recv()
                if msg == "stop":
                    break
                if isinstance(msg, tuple) and len(msg) == 2 and msg[0] == "scrapes":
                    engine.note_scrapes(msg[1])
        except (EOFError, OSError):
            pass
        engine.stop(timeout=0)
        os._exit(0)

    threading.Thread(target=watch_parent, name="opskit-exporter-parent", daemon=True).start()
    engine.loop()


class ProcessExporter(ServesState):
    """Same serving interface as :class:`~opskit.exporter.engine.Exporter`."""

    def __init__(self, conn: ConnectionConfig, options: ExporterOptions,
                 thresholds: Callable[[str], LagThresholds] | None = None,
                 clock: Callable[[], float] = time.time,
                 log_setup: Callable[[], None] | None = None,
                 start_method: str = "spawn") -> None:
        """``thresholds`` and ``log_setup`` are sent to the child: module-level
        functions, bound methods of plain objects or ``functools.partial`` of them.

        ``start_method`` "fork" is lighter (no second interpreter start, no
        resource-tracker process, pages shared copy-on-write) but only safe
        before any thread or Kafka client exists in this process: the CLI uses
        it; tests and library callers keep "spawn"."""
        self.conn = conn
        self.log_setup = log_setup
        self.options = options
        self.thresholds = thresholds
        self.state = ServedState(options.stale_after_s, clock, families_for(options))
        self._ctx: Any = mp.get_context(start_method)
        self._proc: Any = None
        self._pipe: Connection | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._restarts = 0
        #: errors counted here plus the final counts of earlier (dead) collector processes
        self._base_errors: dict[str, int] = {}
        self._base_collections = 0
        self._base_family_errors: dict[tuple[str, str], int] = {}
        self._last_report = time.monotonic()
        self._last_state: StateReport | None = None
        #: scrapes noted by the server, not yet forwarded to the collector process
        self._scrapes: list[tuple[float, str]] = []
        self._scrapes_lock = threading.Lock()
        self._send_lock = threading.Lock()

    @property
    def child_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def scrape_arrived(self, at: float, client: str) -> None:
        with self._scrapes_lock:
            if len(self._scrapes) < 1000:  # a child not reading them: drop, never grow
                self._scrapes.append((at, client))

    def _forward_scrapes(self, pipe: Connection) -> None:
        """Hand the noted scrapes to the collector, if its pipe takes them without waiting."""
        with self._scrapes_lock:
            batch, self._scrapes = self._scrapes, []
        if not batch:
            return
        try:
            poller = select.poll()  # not select(): no limit on the descriptor's number
            poller.register(pipe.fileno(), select.POLLOUT)
            if any(ev & select.POLLOUT for _, ev in poller.poll(0)):
                with self._send_lock:
                    pipe.send(("scrapes", batch))
        except (OSError, ValueError):
            pass  # the child died: the supervisor restarts it

    # ----- lifecycle -----
    def start(self) -> None:
        self._spawn()
        self._thread = threading.Thread(target=self._supervise, name="opskit-exporter-supervise",
                                        daemon=True)
        self._thread.start()

    def _spawn(self) -> None:
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(
            target=_child_main, name="opskit-exporter-collector", daemon=True,
            args=(self.conn, self.options, self.thresholds, child, logging.getLogger().level,
                  self.log_setup))
        self._proc.start()
        child.close()
        self._pipe = parent
        self._last_report = time.monotonic()

    def _kill_child(self) -> None:
        p, self._proc = self._proc, None
        if self._pipe is not None:
            try:
                self._pipe.close()
            except OSError:
                pass
            self._pipe = None
        if p is not None and p.is_alive():
            p.kill()
        if p is not None:
            p.join(5)

    def _supervise(self) -> None:
        silent_limit = 5 * (self.options.interval_s + self.options.collection_timeout_s)
        while not self._stop.is_set():
            pipe = self._pipe
            try:
                if pipe is not None:
                    self._forward_scrapes(pipe)
                if pipe is not None and pipe.poll(0.25):
                    rep = pipe.recv()
                    if isinstance(rep, StateReport):
                        self._last_report = time.monotonic()
                        self._last_state = rep
                        self.state.apply(rep, self._base_errors, self._base_collections,
                                         self._base_family_errors)
                    continue
            except (EOFError, OSError):
                pass  # the child died: handled below
            if self._stop.is_set():
                break
            dead = self._proc is None or not self._proc.is_alive()
            silent = time.monotonic() - self._last_report > silent_limit
            if dead or silent:
                why = "collector process died" if dead else \
                    f"collector process silent for {silent_limit:g}s"
                log.error("%s; restarting it in %gs", why, self.options.interval_s)
                last = self._last_state
                if last is not None:  # fold the dead child's counters into the base
                    for k, n in last.errors.items():
                        self._base_errors[k] = self._base_errors.get(k, 0) + n
                    self._base_collections += last.collections
                    for fk, n in last.family_errors.items():
                        self._base_family_errors[fk] = self._base_family_errors.get(fk, 0) + n
                self._base_errors["internal"] = self._base_errors.get("internal", 0) + 1
                self._last_state = None
                self.state.apply(StateReport(
                    None, False, 0, {}, last.last_duration_s if last else None,
                    last.last_success_s if last else None, why, True),
                    self._base_errors, self._base_collections, self._base_family_errors)
                self._kill_child()
                if self._stop.wait(self.options.interval_s):
                    break
                self._restarts += 1
                self._spawn()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._pipe is not None:
            try:
                with self._send_lock:
                    self._pipe.send("stop")
            except (BrokenPipeError, OSError):
                pass
        if self._proc is not None:
            self._proc.join(timeout)
        self._kill_child()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_first_cycle(self, timeout: float) -> bool:
        return self.state.first_done.wait(timeout)

    # ----- serving (status, scrape, ready: from the served state) -----
    def healthy(self) -> tuple[bool, str]:
        if self._thread is not None and not self._thread.is_alive() and not self._stop.is_set():
            return False, "supervisor thread is not running"
        return True, "ok"

    @property
    def restarts(self) -> int:
        return self._restarts
