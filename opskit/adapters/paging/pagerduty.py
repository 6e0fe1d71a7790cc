"""PagerDuty Events API v2, through the ``pagerduty`` package's EventsApiV2Client.

Retries are capped (the package retries 429 without limit by default): 429 and
5xx are retried ``max_retries`` times with exponential backoff, network errors
too; 400 (invalid event) is never retried. Every HTTP call waits at most
``timeout`` seconds and one event, retries included, at most ``deadline``
seconds (an endpoint that accepts connections and never answers cannot hang a
command). Vendor exceptions become opskit errors here and nowhere else; the
package's own retry log lines are silenced by the CLI (``--debug`` shows them).
"""

from __future__ import annotations

import logging
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import pagerduty

from opskit.adapters.files.safe_read import read_secret
from opskit.adapters.http.deadline import DeadlinePassed, call_within
from opskit.errors import ConfigError, InvalidInputError, ServiceUnavailableError

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://events.pagerduty.com"
SEVERITIES = ("critical", "error", "warning", "info")
ACTIONS = ("trigger", "acknowledge", "resolve")
SUMMARY_MAX = 1024
_RETRIED = (429, 500, 502, 503, 504)


class PagerDutyUnavailableError(ServiceUnavailableError):
    """PagerDuty could not be reached or kept failing after the capped retries (exit 3)."""

    kind = "pagerduty_unavailable"


class PagerDutyRejectedError(InvalidInputError):
    """PagerDuty refused the event as invalid (400): retrying cannot help (exit 2)."""

    kind = "pagerduty_rejected"


def read_routing_key(path: Path) -> str:
    """The integration's routing key from a file (whitespace stripped, 32 characters)."""
    try:
        key = read_secret(path, "routing key file")
    except InvalidInputError as e:
        raise ConfigError(str(e)) from None
    if len(key) != 32 or not key.isalnum():
        raise ConfigError(f"routing key in {path} must be 32 letters or digits "
                          f"(an Events API v2 integration key), got {len(key)} characters")
    return key


@dataclass(frozen=True)
class PagerDutySettings:
    routing_key: str
    base_url: str = DEFAULT_BASE_URL
    ca_file: str | None = None
    #: seconds one HTTP call may take (connect, send, wait for the answer)
    timeout: float = 10.0
    #: seconds one event may take, retries and backoff included (a new attempt is
    #: not started after it; a running one waits at most what is left)
    deadline: float = 30.0
    max_retries: int = 3
    #: first backoff in seconds; doubles on each retry
    backoff: float = 1.0


def build_event(action: str, dedup_key: str | None = None, summary: str | None = None,
                source: str | None = None, severity: str = "critical",
                custom_details: dict[str, Any] | None = None,
                links: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The event body (without the routing key), validated like PagerDuty does."""
    if action not in ACTIONS:
        raise InvalidInputError(f"event action must be one of {', '.join(ACTIONS)}, not {action!r}")
    event: dict[str, Any] = {"event_action": action}
    if dedup_key is not None:
        if not dedup_key or len(dedup_key) > 255:
            raise InvalidInputError("dedup key must be 1 to 255 characters")
        event["dedup_key"] = dedup_key
    elif action != "trigger":
        raise InvalidInputError(f"{action} needs a dedup key")
    if action == "trigger":
        if not summary:
            raise InvalidInputError("a trigger needs a summary")
        if not source:
            raise InvalidInputError("a trigger needs a source")
        if severity not in SEVERITIES:
            raise InvalidInputError(f"severity must be one of {', '.join(SEVERITIES)}, "
                                    f"not {severity!r}")
        payload: dict[str, Any] = {"summary": summary[:SUMMARY_MAX], "source": source,
                                   "severity": severity}
        if custom_details:
            payload["custom_details"] = custom_details
        event["payload"] = payload
        if links:
            event["links"] = links
    return event


class PagerDutyEvents:
    """Sends events; every method returns the dedup key PagerDuty answered with."""

    def __init__(self, settings: PagerDutySettings) -> None:
        if settings.max_retries < 0:
            raise InvalidInputError("max retries must be >= 0")
        self.settings = settings
        try:
            verify: ssl.SSLContext | bool = (
                ssl.create_default_context(cafile=settings.ca_file) if settings.ca_file else True)
        except (OSError, ssl.SSLError) as e:  # unreadable or malformed CA file
            raise ConfigError(f"cannot load CA file {settings.ca_file}: {e}") from e
        try:
            client = pagerduty.EventsApiV2Client(
                settings.routing_key, base_url=settings.base_url.rstrip("/"), verify=verify)
        except pagerduty.UrlError as e:
            raise InvalidInputError(f"PagerDuty URL {settings.base_url!r}: {e}") from e
        # cap every retry: the package's default retries 429 forever
        client.retry = {status: settings.max_retries for status in _RETRIED}
        # 0 would mean "unlimited" for 429 in the package: one retry is the floor there
        client.retry[429] = max(1, settings.max_retries)
        client.max_http_attempts = settings.max_retries
        client.max_network_attempts = settings.max_retries
        # the package multiplies by its cooldown factor (2) before the first sleep
        client.sleep_timer = settings.backoff / client.sleep_timer_base
        client.timeout = settings.timeout  # type: ignore[assignment]
        self._deadline = _Deadline(client.parent, settings.timeout, settings.deadline)
        client.parent = self._deadline  # type: ignore[assignment]
        self._client = client

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, event: dict[str, Any]) -> str:
        """Send a body made by :func:`build_event`."""
        props = {k: v for k, v in event.items() if k not in ("event_action", "dedup_key")}
        self._deadline.start()
        try:
            return str(self._client.send_event(event["event_action"],
                                               dedup_key=event.get("dedup_key"), **props))
        except pagerduty.HttpError as e:
            status = e.response.status_code if e.response is not None else 0
            if status == 400:
                raise PagerDutyRejectedError(
                    f"PagerDuty rejected the event: {_errors(e.response)}") from e
            if status in (401, 403):
                raise ConfigError(f"PagerDuty refused the routing key (HTTP {status})") from e
            raise PagerDutyUnavailableError(
                f"PagerDuty answered HTTP {status} after {self.settings.max_retries} retries") from e
        except _DeadlineExceededError as e:
            raise PagerDutyUnavailableError(
                f"PagerDuty at {self.settings.base_url} did not answer within "
                f"{self.settings.deadline:g}s") from e
        except pagerduty.Error as e:
            raise PagerDutyUnavailableError(
                f"cannot reach PagerDuty at {self.settings.base_url}: {_first_line(e)}") from e

    def trigger(self, summary: str, source: str, severity: str = "critical",
                dedup_key: str | None = None, custom_details: dict[str, Any] | None = None,
                links: list[dict[str, str]] | None = None) -> str:
        return self.send(build_event("trigger", dedup_key, summary, source, severity,
                                     custom_details, links))

    def resolve(self, dedup_key: str) -> str:
        return self.send(build_event("resolve", dedup_key))

    def acknowledge(self, dedup_key: str) -> str:
        return self.send(build_event("acknowledge", dedup_key))


class _DeadlineExceededError(Exception):
    """The event's deadline passed (deliberately not a transport error, which the
    package would retry)."""


class _Deadline:
    """Stands in for the package's HTTP session: each attempt gets at most the time
    left before the event's deadline, and none starts after it."""

    def __init__(self, session: Any, timeout: float, total: float) -> None:
        self._session = session
        self._timeout = timeout
        self._total = total
        self._end = time.monotonic() + total

    def start(self) -> None:
        self._end = time.monotonic() + self._total

    def request(self, method: str, url: str, **kwargs: Any) -> Any:
        left = self._end - time.monotonic()
        if left <= 0:
            raise _DeadlineExceededError()
        kwargs["timeout"] = min(self._timeout, left)
        # httpx's timeout is per socket operation: a server dripping its handshake or its
        # answer a byte at a time never reaches it; this bounds the whole attempt
        try:
            return call_within(kwargs["timeout"],
                               lambda: self._session.request(method, url, **kwargs))
        except DeadlinePassed:
            raise _DeadlineExceededError() from None

    def __getattr__(self, name: str) -> Any:  # close() and the rest go to the session
        return getattr(self._session, name)


def _errors(response: Any) -> str:
    try:
        body = response.json()
        errs = body.get("errors") or [body.get("message", "")]
        return "; ".join(str(x) for x in errs)
    except Exception:  # noqa: BLE001 - any undecodable body
        return str(response.text)[:200]


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]
