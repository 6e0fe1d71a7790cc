"""``health``, ``throughput`` and ``exporter`` for a StreamNest cluster (``-b http://...``).

The Kafka versions of these commands hand over here when the bootstrap is a list
of ``http://HOST:PORT`` endpoints (see :mod:`opskit.adapters.http.streamnest`); every
other command refuses such a bootstrap with one line (exit 3).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.http import streamnest as sn
from opskit.cli.common import Output, emit, stderr
from opskit.core.connection import ConnectionConfig
from opskit.core.models import Severity
from opskit.core.streamnest import StreamNestHealth, measure, render_metrics
from opskit.errors import IncompleteError, KafkaUnavailableError, UnsupportedError
from opskit.exporter.server import WebConfig, serve_until_signal

log = logging.getLogger(__name__)

_STYLE = {Severity.OK: "green", Severity.WARNING: "yellow", Severity.CRITICAL: "red",
          Severity.UNKNOWN: "magenta"}


def endpoints(conn: ConnectionConfig) -> list[str]:
    return sn.parse_endpoints(conn.bootstrap, conn.source)


# --------------------------------------------------------------------------- health


def health(conn: ConnectionConfig, expected_brokers: int | None, output: Output,
           timeout: float) -> int:
    view = sn.read_cluster(endpoints(conn), timeout, expected_brokers)
    report = view.health
    emit(report.to_dict(), output, lambda c: _render_health(c, report))
    return report.severity.nagios_code


def _render_health(console: Console, report: StreamNestHealth) -> None:
    console.print(f"[bold]{report.summary}[/bold]")
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("CHECK", "STATUS", "DETAIL"):
        t.add_column(col, overflow="fold")
    for f in report.findings:
        style = _STYLE[f.severity]
        t.add_row(f.check, f"[{style}]{f.severity.value}[/{style}]", f.message)
    console.print(t)


# --------------------------------------------------------------------------- throughput


def throughput(conn: ConnectionConfig, interval_s: float, topics: list[str] | None,
               groups: list[str] | None, output: Output, timeout: float,
               sleep: Any = time.sleep) -> int:
    if groups:
        raise UnsupportedError(f"--group: StreamNest has no consumer groups ({conn.bootstrap})")
    if topics:
        raise UnsupportedError("--topic: StreamNest counts messages per broker, not per topic; "
                               "run without --topic for the cluster's totals")
    view = sn.read_cluster(endpoints(conn), timeout)
    down = [b for b in view.health.brokers if b.metadata is None]
    if len(down) == len(view.health.brokers):
        raise KafkaUnavailableError(f"cannot reach StreamNest at {conn.bootstrap}: "
                                    f"{down[0].error}")
    first = sn.read_counters(view.brokers, timeout)
    sleep(max(0.0, interval_s - (time.time() - first.at)))
    second = sn.read_counters(view.brokers, timeout)
    data = measure(first, second)
    emit(data, output, lambda c: _render_throughput(c, data))
    if data["unknown"]:  # the rows are printed; the total is unknown, never a smaller number
        raise IncompleteError(f"StreamNest throughput unknown: {data['unknown'][0]}")
    return 0


def _render_throughput(console: Console, data: dict[str, Any]) -> None:
    def rate(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f} msg/s"

    console.print(f"[bold]StreamNest over {data['interval_seconds']:.1f}s: produced "
                  f"{data['produced'] if data['produced'] is not None else '?'} "
                  f"({rate(data['produced_per_second'])}), consumed "
                  f"{data['consumed'] if data['consumed'] is not None else '?'} "
                  f"({rate(data['consumed_per_second'])})[/bold]")
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("BROKER", "PRODUCED", "CONSUMED", "NOTE"):
        t.add_column(col, overflow="fold")
    for r in data["brokers"]:
        t.add_row(r["broker"], "-" if r["produced"] is None else str(r["produced"]),
                  "-" if r["consumed"] is None else str(r["consumed"]), r["note"] or "")
    console.print(t)
    console.print(data["note"])


# --------------------------------------------------------------------------- exporter


class StreamNestExporter:
    """Collects in a thread every ``interval_s``; serves the last text (never waits)."""

    def __init__(self, addrs: list[str], interval_s: float, timeout: float) -> None:
        self._addrs = addrs
        self._interval = interval_s
        self._timeout = timeout
        self._lock = threading.Lock()
        self._text: bytes | None = None
        self._up = False
        self._error: str | None = "no collection yet"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamnest-collect",
                                        daemon=True)

    def collect(self) -> None:
        t0 = time.monotonic()
        error: str | None = None
        try:
            view = sn.read_cluster(self._addrs, self._timeout)
            health: StreamNestHealth | None = view.health
            reading = sn.read_counters(view.brokers, self._timeout)
        except Exception as e:  # noqa: BLE001 - a collection never kills the exporter
            log.warning("StreamNest collection failed: %s", e)
            health, error = None, f"{type(e).__name__}: {e}"
            reading = None
        counters = dict(reading.counters) if reading else {}
        errors = dict(reading.errors) if reading else {}
        text = render_metrics(health, counters, errors, error, time.time(),
                              time.monotonic() - t0)
        up = text.startswith("# HELP opskit_streamnest_up") and "\nopskit_streamnest_up 1\n" in text
        why = error or next((f"{b}: {e}" for b, e in errors.items()), None) or next(
            (f"{b.address}: {b.error}" for b in (health.brokers if health else ())
             if b.metadata is None), None)
        with self._lock:
            self._text, self._up, self._error = text.encode(), up, None if up else why

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.collect()
            self._stop.wait(self._interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._timeout * 4 + 5)

    @property
    def up(self) -> bool:
        return self._up

    @property
    def error(self) -> str | None:
        return self._error

    # Servable --------------------------------------------------------------------------
    def scrape(self, gzipped: bool = False) -> bytes:
        with self._lock:
            body = self._text or render_metrics(None, {}, {}, "no collection yet", None,
                                                None).encode()
        if gzipped:
            import gzip

            return gzip.compress(body)
        return body

    def healthy(self) -> tuple[bool, str]:
        return True, "ok"

    def scrape_arrived(self, at: float, client: str) -> None:
        """A scrape arrived: StreamNest collects on its own fixed schedule, so ignored."""

    def ready(self) -> tuple[bool, str]:
        with self._lock:
            if self._text is None:
                return False, "no collection yet"
            return (True, "ok") if self._up else (False, self._error or "not up")


def exporter(conn: ConnectionConfig, web: WebConfig, interval_s: float, timeout: float,
             once: bool) -> int:
    addrs = endpoints(conn)
    engine = StreamNestExporter(addrs, interval_s, timeout)
    if once:
        engine.collect()
        typer.echo(engine.scrape().decode(), nl=False)
        if not engine.up:
            raise IncompleteError(f"StreamNest collection incomplete: {engine.error}")
        return 0
    serve_until_signal(engine, web, lambda port: stderr().print(
        f"opskit exporter: serving /metrics on {web.host}:{port} for StreamNest "
        f"{conn.bootstrap} every {interval_s:g}s", highlight=False))
    return 0
