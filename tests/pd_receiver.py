"""A local PagerDuty Events API v2 receiver for tests.

A small threaded HTTPS server on 127.0.0.1 implementing ``POST /v2/enqueue`` with
PagerDuty's validation rules (routing key of 32 characters, ``event_action``,
``dedup_key`` for acknowledge/resolve, ``payload.summary`` <= 1024 characters,
``payload.source``, ``payload.severity`` in critical/error/warning/info):
202 with the dedup key when valid, 400 with the errors otherwise. Responses can
be scripted (``fail_next``) to exercise retries. ``POST /webhook/<name>`` records
Alertmanager webhook notifications.

TLS uses a throw-away self-signed certificate made with ``openssl`` (the
``pagerduty`` client only accepts https URLs); ``ca_file`` is what clients trust.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

ACTIONS = ("trigger", "acknowledge", "resolve")
SEVERITIES = ("critical", "error", "warning", "info")


def validate_event(event: Any) -> list[str]:
    """PagerDuty's rules for an Events API v2 event; [] when valid."""
    if not isinstance(event, dict):
        return ["event must be a JSON object"]
    errs: list[str] = []
    key = event.get("routing_key")
    if not isinstance(key, str) or len(key) != 32:
        errs.append("'routing_key' must be a string of 32 characters")
    action = event.get("event_action")
    if action not in ACTIONS:
        errs.append("'event_action' must be one of trigger, acknowledge, resolve")
    dedup = event.get("dedup_key")
    if dedup is not None and (not isinstance(dedup, str) or not dedup or len(dedup) > 255):
        errs.append("'dedup_key' must be a non-empty string of at most 255 characters")
    if action in ("acknowledge", "resolve") and dedup is None:
        errs.append("'dedup_key' is required for acknowledge and resolve")
    if action == "trigger":
        payload = event.get("payload")
        if not isinstance(payload, dict):
            errs.append("'payload' is required for trigger")
        else:
            summary = payload.get("summary")
            if not isinstance(summary, str) or not summary:
                errs.append("'payload.summary' is required")
            elif len(summary) > 1024:
                errs.append("'payload.summary' must be at most 1024 characters")
            source = payload.get("source")
            if not isinstance(source, str) or not source:
                errs.append("'payload.source' is required")
            if payload.get("severity") not in SEVERITIES:
                errs.append("'payload.severity' must be one of critical, error, warning, info")
            details = payload.get("custom_details")
            if details is not None and not isinstance(details, (dict, str)):
                errs.append("'payload.custom_details' must be an object")
        links = event.get("links")
        if links is not None and (not isinstance(links, list) or not all(
                isinstance(x, dict) and isinstance(x.get("href"), str) for x in links)):
            errs.append("'links' must be a list of objects with 'href'")
    return errs


def make_self_signed_cert(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
         "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60)
    return cert, key


class PagerDutyReceiver:
    """Use as a context manager; ``url`` is the base URL (``https://127.0.0.1:PORT``)."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="pd-receiver-"))
        self.ca_file, self._key = make_self_signed_cert(self._dir)
        self.events: list[dict[str, Any]] = []
        self.rejected: list[tuple[Any, list[str]]] = []
        self.webhooks: list[tuple[str, dict[str, Any]]] = []
        self.requests = 0
        self._script: list[int] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except json.JSONDecodeError:
                    self._reply(400, {"status": "invalid event", "message": "Event object is invalid",
                                      "errors": ["body is not JSON"]})
                    return
                if self.path.startswith("/webhook/"):
                    with receiver._cond:
                        receiver.webhooks.append((self.path[len("/webhook/"):], body))
                        receiver._cond.notify_all()
                    self._reply(200, {})
                    return
                if self.path != "/v2/enqueue":
                    self._reply(404, {"status": "not found"})
                    return
                with receiver._cond:
                    receiver.requests += 1
                    scripted = receiver._script.pop(0) if receiver._script else None
                if scripted is not None:
                    self._reply(scripted, {"status": "scripted", "message": f"scripted {scripted}"})
                    return
                errs = validate_event(body)
                if errs:
                    with receiver._cond:
                        receiver.rejected.append((body, errs))
                        receiver._cond.notify_all()
                    self._reply(400, {"status": "invalid event", "message": "Event object is invalid",
                                      "errors": errs})
                    return
                dedup = body.get("dedup_key") or uuid.uuid4().hex
                with receiver._cond:
                    receiver.events.append({**body, "dedup_key": dedup})
                    receiver._cond.notify_all()
                self._reply(202, {"status": "success", "message": "Event processed",
                                  "dedup_key": dedup})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(self.ca_file), str(self._key))
        self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.url = f"https://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_next(self, *statuses: int) -> None:
        """Answer the next requests with these statuses (then normally)."""
        with self._lock:
            self._script.extend(statuses)

    def clear_script(self) -> None:
        with self._lock:
            self._script.clear()

    def wait_for(self, pred: Callable[[list[dict[str, Any]]], bool], timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(list(self.events)):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 1.0))
            return True


def routing_key() -> str:
    """A well-formed (32 character) routing key."""
    return uuid.uuid4().hex
