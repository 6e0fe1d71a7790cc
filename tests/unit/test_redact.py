"""The logging filter that masks registered secrets (no broker)."""

from __future__ import annotations

import io
import json
import logging

from opskit import redact


def _logger_with_filter(stream: io.StringIO, fmt: logging.Formatter) -> logging.Logger:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(fmt)
    handler.addFilter(redact.RedactingFilter())
    lg = logging.getLogger("opskit.test.redact")
    lg.handlers[:] = [handler]
    lg.propagate = False
    lg.setLevel(logging.DEBUG)
    return lg


def test_secrets_are_masked_in_message_args_and_exceptions() -> None:
    redact.register("s3cr3t-pa55")
    redact.register(None)
    redact.register("")
    out = io.StringIO()
    lg = _logger_with_filter(out, logging.Formatter("%(message)s"))
    lg.debug("Starting client with configuration: %s", {"sasl_plain_password": "s3cr3t-pa55"})
    try:
        raise ValueError("bad value s3cr3t-pa55")
    except ValueError:
        lg.exception("failed")
    lg.debug("%s %s", "only one arg")  # a broken record is still masked, not lost
    text = out.getvalue()
    assert "s3cr3t-pa55" not in text
    assert "'sasl_plain_password': '********'" in text and "bad value ********" in text


def test_json_records_are_masked_and_the_longest_secret_wins() -> None:
    redact.register("abcdef-1")
    redact.register("abcdef-1-and-more")

    class Json(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return json.dumps({"msg": record.getMessage()})

    out = io.StringIO()
    _logger_with_filter(out, Json()).warning("x=%s", "abcdef-1-and-more")
    assert json.loads(out.getvalue()) == {"msg": "x=********"}


def test_install_adds_one_filter_per_handler() -> None:
    lg = logging.getLogger("opskit.test.redact.install")
    lg.handlers[:] = [logging.StreamHandler(io.StringIO())]
    redact.install(lg)
    redact.install(lg)
    assert sum(isinstance(f, redact.RedactingFilter) for f in lg.handlers[0].filters) == 1
