"""Secrets never reach a log: the passwords opskit was given are masked in every record.

Client libraries log their configuration (kafka-python's "Starting
KafkaAdminClient with configuration: {...}" at DEBUG holds
``sasl_plain_password``), and an exception text may carry a value it was given.
So every secret opskit reads (a context's password or password file, a web or
PagerDuty credential) is registered here, and :class:`RedactingFilter`, which
the CLI puts on every log handler (``--debug``, text and json alike), replaces
each occurrence in a record's message, arguments, exception and stack text
with ``********`` before any formatter sees it.

Masking is by value, so it holds whatever the logger and its format: a secret
is masked wherever it appears, even inside unrelated text (a price for never
printing it).
"""

from __future__ import annotations

import logging
import threading

MASK = "********"

_lock = threading.Lock()
_secrets: set[str] = set()


def register(secret: str | None) -> None:
    """Mask ``secret`` from now on (None and the empty string are ignored)."""
    if secret:
        with _lock:
            _secrets.add(secret)


def redact(text: str) -> str:
    """``text`` with every registered secret masked (longest first, so a secret that
    contains another is masked whole)."""
    with _lock:
        known = sorted(_secrets, key=len, reverse=True)
    for s in known:
        if s in text:
            text = text.replace(s, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Masks registered secrets in a record (message with its arguments, exception and
    stack text). Put it on handlers: a handler's filters see every record it emits,
    whichever logger it came from."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose args do not fit its format
            message = f"{record.msg!r} {record.args!r}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Put a :class:`RedactingFilter` on every handler of ``logger`` (the root logger)
    that has none yet."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
