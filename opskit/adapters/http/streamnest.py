"""Reading a StreamNest cluster over HTTP (``/metadata``, ``/metrics``).

opskit is pointed at StreamNest with HTTP URLs as the bootstrap:
``-b http://host:port[,http://host:port...]`` (or a context whose bootstrap is
such a list). Every broker named there, and every partition owner any broker
names in its ``/metadata``, is asked. Each request has the command's
``--timeout``, reads at most 8 MiB, and its failure is named: an unreachable
broker is not an empty one.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.parse
from dataclasses import dataclass

from opskit.core.streamnest import (
    NOT_APPLICABLE,
    BrokerAnswer,
    CounterReading,
    MalformedAnswer,
    StreamNestHealth,
    evaluate_health,
    parse_counters,
    parse_metadata,
)
from opskit.errors import UnsupportedError, UsageError

MAX_BODY = 8 * 1024 * 1024


def is_http_bootstrap(bootstrap: str) -> bool:
    """Does the bootstrap name HTTP endpoints (StreamNest) rather than Kafka brokers?"""
    parts = [p.strip().lower() for p in bootstrap.split(",") if p.strip()]
    return bool(parts) and any(p.startswith(("http://", "https://")) for p in parts)


def not_applicable(bootstrap: str) -> UnsupportedError:
    """The one-line refusal of a Kafka-only command pointed at StreamNest (exit 3)."""
    return UnsupportedError(f"{bootstrap} is an HTTP endpoint (StreamNest): {NOT_APPLICABLE}")


def parse_endpoints(bootstrap: str, source: str = "--bootstrap-server") -> list[str]:
    """``http://h:p,http://h2:p2`` -> ``["h:p", "h2:p2"]``; UsageError for anything else."""
    out: list[str] = []
    for raw in bootstrap.split(","):
        item = raw.strip()
        if not item:
            continue
        u = urllib.parse.urlsplit(item)
        if u.scheme.lower() != "http":
            raise UsageError(f"{source}: {item!r}: StreamNest endpoints are http://HOST:PORT "
                             "(all of them; Kafka brokers and HTTP endpoints cannot be mixed)")
        try:
            port = u.port
        except ValueError:
            port = None
        if (not u.hostname or port is None or u.path not in ("", "/") or u.query
                or u.username or not all(c.isascii() and c.isprintable() for c in item)):
            raise UsageError(f"{source}: {item!r} is not http://HOST:PORT")
        host = f"[{u.hostname}]" if ":" in u.hostname else u.hostname
        out.append(f"{host}:{port}")
    if not out:
        raise UsageError(f"{source}: no StreamNest endpoint given")
    return list(dict.fromkeys(out))


class HttpFailure(Exception):
    """One request failed; the message says how (for a finding or an error line)."""


def _get(address: str, path: str, deadline: float) -> bytes:
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise HttpFailure("no answer within --timeout")
    conn = http.client.HTTPConnection(host, int(port), timeout=remaining)
    try:
        conn.request("GET", path, headers={"Accept": "*/*"})
        resp = conn.getresponse()
        body = resp.read(MAX_BODY + 1)
    except TimeoutError:
        raise HttpFailure("no answer within --timeout") from None
    except ConnectionRefusedError:
        raise HttpFailure("connection refused") from None
    except (OSError, http.client.HTTPException) as e:
        raise HttpFailure(f"{type(e).__name__}: {e}".rstrip(": ")) from None
    finally:
        conn.close()
    if resp.status != 200:
        raise HttpFailure(f"{path} answered HTTP {resp.status}")
    if len(body) > MAX_BODY:
        raise HttpFailure(f"{path} answered more than {MAX_BODY // (1024 * 1024)} MiB")
    return body


def _canonical(address: str) -> str:
    """``localhost:P`` and ``127.0.0.1:P`` are one broker: key both by IPv4 address."""
    host, _, port = address.rpartition(":")
    try:
        return f"{socket.gethostbyname(host.strip('[]'))}:{port}"
    except OSError:
        return address


@dataclass(frozen=True)
class ClusterView:
    health: StreamNestHealth
    #: every distinct broker (canonical address), for the counters
    brokers: tuple[str, ...]


def read_metadata(address: str, deadline: float) -> BrokerAnswer:
    try:
        raw = _get(address, "/metadata", deadline)
        return BrokerAnswer(address, parse_metadata(json.loads(raw)))
    except HttpFailure as e:
        return BrokerAnswer(address, None, str(e))
    except (ValueError, UnicodeDecodeError) as e:
        why = e if isinstance(e, MalformedAnswer) else "not JSON"
        return BrokerAnswer(address, None,
                            f"/metadata answered something opskit cannot parse ({why})")


def read_cluster(endpoints: list[str], timeout: float,
                 expected_brokers: int | None = None) -> ClusterView:
    """Ask every bootstrap endpoint, then every owner they name, for ``/metadata``."""
    same: dict[str, str] = {}
    answers: dict[str, BrokerAnswer] = {}
    todo = list(endpoints)
    while todo:
        addr = todo.pop(0)
        key = same.setdefault(addr, _canonical(addr))
        if key in answers:
            continue
        a = read_metadata(addr, time.monotonic() + timeout)
        answers[key] = BrokerAnswer(key, a.metadata, a.error)
        for owners in (a.metadata or {}).values():
            for o in owners:
                if o not in same:
                    same[o] = _canonical(o)
                    if same[o] not in answers:
                        todo.append(o)
    health = evaluate_health(list(answers.values()), same, expected_brokers)
    return ClusterView(health, tuple(answers))


def read_counters(brokers: tuple[str, ...], timeout: float) -> CounterReading:
    counters: dict[str, dict[str, float]] = {}
    errors: dict[str, str] = {}
    at = time.time()
    for b in brokers:
        try:
            text = _get(b, "/metrics", time.monotonic() + timeout).decode("utf-8", "replace")
            counters[b] = parse_counters(text)
        except HttpFailure as e:
            errors[b] = str(e)
        except MalformedAnswer as e:
            errors[b] = f"/metrics answered something opskit cannot parse ({e})"
    return CounterReading(at, counters, errors)
