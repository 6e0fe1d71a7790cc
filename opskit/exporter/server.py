"""The exporter's HTTP endpoint: ``/metrics``, ``/healthz``, ``/ready``.

A threading HTTP server from the standard library; handlers only read the
engine's latest snapshot, so they answer whatever Kafka does. Optional TLS
(certificate and key files) and HTTP basic auth (``/healthz`` and ``/ready``
stay open so Kubernetes probes need no credentials).
"""

from __future__ import annotations

import base64
import hmac
import logging
import signal
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# the classic text format: every opskit name is a legacy-valid name, and every
# Prometheus version (Debian ships 2.x) parses 0.0.4
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

from typing import Protocol

from opskit.errors import UsageError


class Servable(Protocol):
    """What the endpoint needs: the in-process engine and the process runner both fit."""

    def scrape(self, gzipped: bool = False) -> bytes: ...

    def healthy(self) -> tuple[bool, str]: ...

    def ready(self) -> tuple[bool, str]: ...

    def scrape_arrived(self, at: float, client: str) -> None:
        """A GET of /metrics arrived (monotonic time, client address); may ignore it."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebConfig:
    host: str = "0.0.0.0"
    port: int = 9308
    tls_cert: str | None = None
    tls_key: str | None = None
    basic_auth_user: str | None = None
    basic_auth_password: str | None = None

    def __post_init__(self) -> None:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise UsageError("HTTPS needs both --web-tls-cert and --web-tls-key")
        if bool(self.basic_auth_user) != (self.basic_auth_password is not None):
            raise UsageError("basic auth needs both --web-user and --web-password-file")
        if self.basic_auth_password is not None and not self.basic_auth_password.strip():
            raise UsageError("basic auth password is empty: refusing to serve with it")


_OPEN_PATHS = ("/healthz", "/ready")


class _Handler(BaseHTTPRequestHandler):
    server: ExporterHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8",
              extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _authorised(self) -> bool:
        web = self.server.web
        if web.basic_auth_user is None:
            return True
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, pw = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        ok_user = hmac.compare_digest(user.encode(), web.basic_auth_user.encode())
        ok_pw = hmac.compare_digest(pw.encode(), (web.basic_auth_password or "").encode())
        return ok_user and ok_pw

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        ex = self.server.exporter
        if path not in _OPEN_PATHS and not self._authorised():
            self._send(401, b"unauthorised\n", extra={"WWW-Authenticate": 'Basic realm="opskit"'})
            return
        if path == "/metrics":
            if self.command == "GET":
                # when scrapes arrive, and from where: the collection schedule follows them
                ex.scrape_arrived(time.monotonic(), str(self.client_address[0]))
            gz = "gzip" in self.headers.get("Accept-Encoding", "")
            body = ex.scrape(gzipped=gz)
            self._send(200, body, CONTENT_TYPE, {"Content-Encoding": "gzip"} if gz else None)
        elif path == "/healthz":
            ok, why = ex.healthy()
            self._send(200 if ok else 503, (why + "\n").encode())
        elif path == "/ready":
            ok, why = ex.ready()
            self._send(200 if ok else 503, (why + "\n").encode())
        elif path == "/":
            self._send(200, b"<html><body><h1>opskit exporter</h1><a href='/metrics'>/metrics</a> "
                       b"<a href='/healthz'>/healthz</a> <a href='/ready'>/ready</a></body></html>\n",
                       "text/html; charset=utf-8")
        else:
            self._send(404, b"not found\n")


class ExporterHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, exporter: Servable, web: WebConfig) -> None:
        self.exporter = exporter
        self.web = web
        super().__init__((web.host, web.port), _Handler)
        if web.tls_cert and web.tls_key:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(web.tls_cert, web.tls_key)
            # handshake in the handler thread, so a silent client cannot block accept()
            self.socket = ctx.wrap_socket(self.socket, server_side=True,
                                          do_handshake_on_connect=False)

    def handle_error(self, request: object, client_address: object) -> None:
        # a client speaking plain HTTP to HTTPS, a dropped connection: not worth a traceback
        log.debug("HTTP request from %s failed: %s", client_address, sys.exc_info()[1])

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class Runnable(Servable, Protocol):
    """An engine that collects in the background between ``start`` and ``stop``."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def serve_until_signal(engine: Runnable, web: WebConfig, announce: Callable[[int], None]) -> None:
    """Listen on ``web`` (a port or TLS setup that fails is one UsageError line), start the
    engine, serve /metrics until SIGTERM or SIGINT, then stop the server and the engine.
    ``announce`` gets the bound port once serving."""
    try:
        server = ExporterHTTPServer(engine, web)
    except OSError as e:
        raise UsageError(f"--port {web.port}: cannot listen on {web.host}:{web.port}: "
                         f"{e.strerror}") from e
    except Exception as e:  # ssl errors: bad certificate or key
        raise UsageError(f"cannot set up HTTPS: {e}") from e
    engine.start()
    serve_in_thread(server)
    announce(server.port)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.shutdown()
        server.server_close()
        engine.stop()


def serve_in_thread(server: ExporterHTTPServer) -> threading.Thread:
    t = threading.Thread(target=server.serve_forever, name="opskit-exporter-http", daemon=True)
    t.start()
    return t
