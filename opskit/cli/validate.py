"""Validation at the edge: every value from the command line is checked here,
before any command, client or library sees it.

Two parts:

- :func:`harden` walks every registered command's parameters once per run and
  adds a check to each (so commands added later are covered without doing
  anything): numbers must be finite and fit in 64 bits, text must be valid
  UTF-8 (argv bytes that are not arrive as surrogate escapes) without NUL or
  other control characters, and names (groups, topics, contexts, bootstrap
  servers, ...) must not be empty or over-long. librdkafka crashed the process
  (SIGSEGV, C assertions) on such names; Python raised OverflowError or
  UnicodeEncodeError deep inside a command.
- :func:`parse_duration_option` is the one parser of duration options
  (``500ms``, ``5s``, ``10m``, ``1h``, ``1d``): positive, finite and within a
  maximum the option names in its help.

Every failure is a usage error (exit 2) with a one-line message.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # the typer installed for type checking vendors click
    from typer import _click as click
else:
    try:  # typer >= 0.2x vendors its own click
        from typer import _click as click
    except ImportError:  # pragma: no cover - older typer uses the click package
        import click

from opskit.core.k8s_names import dns_label_problem, dns_subdomain_problem
from opskit.errors import UsageError

#: integers beyond a signed 64-bit value are never meaningful (offsets, counts, ports)
MAX_INT = 2**63 - 1
#: the longest text value accepted from the command line (summaries, URLs, patterns)
MAX_TEXT = 8192
#: Kafka's own limit on topic names
MAX_TOPIC = 249
#: the longest group id, context, cluster or other name (Kafka allows more for
#: group ids; no real one is this long, and a mistake such as a pasted file is caught)
MAX_NAME = 1024

#: parameters that name a Kafka object or a cluster: never empty, no control characters
TOPIC_PARAMS = frozenset({"topic", "dead_letter_topic", "billing_topic"})
NAME_PARAMS = TOPIC_PARAMS | frozenset({
    "group", "context", "bootstrap_server", "bootstrap", "name", "cluster", "dedup_key",
    "client_id", "username", "sasl_mechanism", "security_protocol", "kafka_version",
    "collector", "listen", "web_user", "master", "events_url",
})

#: parameters that name a Kubernetes object: a DNS label of at most N characters
#: (``--statefulset``: its pods and the ``NAME-broker-headless`` Service opskit adds must
#: be DNS labels too, so at most 63 - 16) or a DNS subdomain
K8S_LABEL_PARAMS = {"namespace": 63, "k8s_namespace": 63, "statefulset": 47}
K8S_SUBDOMAIN_PARAMS = frozenset({"config_secret", "k8s_kafka_secret", "k8s_service_account"})

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _fail(param: click.Parameter, msg: str) -> None:
    raise click.exceptions.BadParameter(msg, param=param)


def _check_encoded(param: click.Parameter, value: str, limit: int, what: str) -> None:
    """UTF-8 (argv bytes that are not arrive as surrogate escapes), no NUL, bounded."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _fail(param, f"is not {what}")
    if "\x00" in value:
        _fail(param, "contains a NUL byte")
    if len(value) > limit:
        _fail(param, f"is longer than {limit} characters")


def _check_text(param: click.Parameter, value: str) -> None:
    _check_encoded(param, value, MAX_TEXT, "valid UTF-8 text")
    name = param.name or ""
    if name in NAME_PARAMS:
        if not value.strip():
            _fail(param, "is empty")
        if _CONTROL.search(value):
            _fail(param, "contains control characters")
        limit = MAX_TOPIC if name in TOPIC_PARAMS else MAX_NAME
        # a topic may carry its partitions (``T:0,1``): the limit is the topic's own
        if name in TOPIC_PARAMS and ":" in value:
            value = value.rpartition(":")[0]
        if len(value) > limit:
            _fail(param, f"is longer than {limit} characters")
    problem = None
    if name in K8S_LABEL_PARAMS:
        problem = dns_label_problem(value, K8S_LABEL_PARAMS[name])
    elif name in K8S_SUBDOMAIN_PARAMS:
        problem = dns_subdomain_problem(value)
    if problem is not None:
        _fail(param, problem)


def _check_one(param: click.Parameter, value: Any) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            _fail(param, f"{value} is not a finite number")
    elif isinstance(value, int):
        if abs(value) > MAX_INT:
            _fail(param, "is too large (at most 2^63-1)")
    elif isinstance(value, str):
        _check_text(param, value)
    elif isinstance(value, PurePath):
        _check_encoded(param, str(value), 4096, "a valid UTF-8 file name")


def check_value(param: click.Parameter, value: Any) -> None:
    """Raise ``click.BadParameter`` unless ``value`` (or each item of it) is acceptable."""
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_one(param, item)
    else:
        _check_one(param, value)


def _wrap(param: click.Parameter) -> None:
    if getattr(param, "_opskit_checked", False):
        return
    inner: Callable[..., Any] | None = param.callback

    def callback(ctx: click.Context, p: click.Parameter, value: Any) -> Any:
        check_value(p, value)
        return inner(ctx, p, value) if inner is not None else value

    param.callback = callback
    param._opskit_checked = True  # type: ignore[attr-defined]


def _commands(cmd: click.Command) -> Iterable[click.Command]:
    yield cmd
    for sub in getattr(cmd, "commands", {}).values():
        yield from _commands(sub)


def harden(cmd: click.Command) -> click.Command:
    """Add the checks to every parameter of ``cmd`` and its subcommands."""
    for c in _commands(cmd):
        for p in c.params:
            _wrap(p)
    return cmd


def hardened_command(app: typer.Typer) -> click.Command:
    """The click command of ``app`` with every parameter checked."""
    return harden(typer.main.get_command(app))


# ----- durations -----

_DURATION = re.compile(r"\s*([0-9]+)(\.[0-9]+)?\s*(ms|s|m|h|d|w)?\s*", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}

#: the usual bounds, named in the options' help
HOUR = 3600.0
DAY = 86400.0


def fmt_limit(seconds: float) -> str:
    for unit, size in (("d", DAY), ("h", HOUR), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def parse_duration_option(text: str, opt: str, maximum: float, minimum: float = 0.001) -> float:
    """Seconds of ``500ms``, ``5s``, ``10m``, ``1h``, ``1d``, ``1w`` or a bare number of
    seconds, between ``minimum`` and ``maximum`` (``minimum=0`` lets zero through);
    a UsageError otherwise."""
    m = _DURATION.fullmatch(text)
    if m is None:
        raise UsageError(f"invalid {opt} {text!r}: use e.g. 5s, 10m, 1h")
    if len(m.group(1)) > 12:  # float() of a 5000-digit number is slow or inf
        raise UsageError(f"{opt} must be at most {fmt_limit(maximum)}, got {text!r}")
    number = float(m.group(1) + (m.group(2) or "")[:16])
    value = number * _UNIT_S[(m.group(3) or "s").lower()]
    if value <= 0 and not (value == 0 and minimum == 0):
        raise UsageError(f"{opt} must be positive, got {text!r}")
    if value < minimum:
        raise UsageError(f"{opt} must be at least {fmt_limit(minimum)}, got {text!r}")
    if value > maximum:
        raise UsageError(f"{opt} must be at most {fmt_limit(maximum)}, got {text!r}")
    return value
