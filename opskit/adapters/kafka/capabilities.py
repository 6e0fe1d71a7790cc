"""What a broker can answer: an ApiVersions probe, and the APIs each operation needs.

Kafka-compatible brokers (Tansu, gateways such as Hanzo Stream) advertise only
part of the Kafka protocol, and some of them close the connection (or never
answer) when they get a request for an API they did not advertise. Clients that
trust the broker then wait for their whole timeout and report "cannot reach
Kafka", which is wrong and slow.

So before an operation opskit asks the broker once for its ApiVersions
(request v0, hard timeout, cached per bootstrap, security settings and
credentials) and refuses an operation whose API is not advertised with
:class:`~opskit.errors.UnsupportedError` naming the API and the broker (exit 3).

The probe sets the connection up as the config says (TLS, SASL login, see
:mod:`opskit.adapters.kafka.protocol.connect`), so it is also the check of the
credentials every command makes first: a definite authentication or TLS
mistake raises :class:`~opskit.errors.AuthenticationError` at once (one failed
login, a one-line cause, exit 9), and a server that answers something that is no
Kafka frame (nor TLS) raises :class:`~opskit.errors.KafkaUnavailableError` saying so
(exit 3) when no other bootstrap address answered. Otherwise the probe never
raises: a broker that cannot be reached or does not answer gives ``Capabilities(known=False)``,
for which every API counts as supported (the real request then fails with the
usual, translated error). A dropped connection is treated as "unsupported"
only by :func:`answers_api_versions`, which callers use after a request timed
out to tell "this API does not work on this broker" from "the broker is gone".

Usage::

    caps = probe(conn, timeout=5.0)
    caps.supports(API_KEYS["DescribeGroups"], 0)
    require(caps, "describe_groups")   # raises UnsupportedError
"""

from __future__ import annotations

import hashlib
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.connect import (
    bootstrap_addresses,
    open_connection,
    plain_request_refused,
    plaintext_mismatch,
    receive,
    recv_exact,
    send,
    uses_sasl,
)
from opskit.core.connection import ConnectionConfig
from opskit.errors import KafkaUnavailableError, UnsupportedError

log = logging.getLogger(__name__)

__all__ = [
    "API_KEYS",
    "API_NAMES",
    "COMMAND_OPERATIONS",
    "OPERATION_APIS",
    "Capabilities",
    "answers_api_versions",
    "clear_cache",
    "missing_for",
    "not_kafka",
    "probe",
    "require",
]

#: Kafka API key -> name (the ones opskit or its clients may send).
API_NAMES: Mapping[int, str] = MappingProxyType({
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 29: "DescribeAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions",
    42: "DeleteGroups", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 47: "OffsetDelete",
    55: "DescribeQuorum", 60: "DescribeCluster", 68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe", 75: "DescribeTopicPartitions",
})
API_KEYS: Mapping[str, int] = MappingProxyType({v: k for k, v in API_NAMES.items()})

#: operation (a KafkaAdmin / adapter call) -> (API name, minimum version) it needs.
#: ListOffsets v1 is the first with a timestamp per partition (librdkafka needs it);
#: OffsetFetch v2 is the first where "all partitions of the group" exists.
OPERATION_APIS: Mapping[str, tuple[tuple[str, int], ...]] = MappingProxyType({
    "metadata": (("Metadata", 0),),
    "list_groups": (("ListGroups", 0),),
    "describe_groups": (("FindCoordinator", 0), ("DescribeGroups", 0)),
    "committed_offsets": (("FindCoordinator", 0), ("OffsetFetch", 2)),
    "log_offsets": (("ListOffsets", 1),),
    "offsets_for_times": (("ListOffsets", 1),),
    "topic_configs": (("DescribeConfigs", 0),),
    "create_topics": (("CreateTopics", 0),),
    "alter_topic_configs": (("IncrementalAlterConfigs", 0),),
    "alter_broker_configs": (("IncrementalAlterConfigs", 0),),
    "create_partitions": (("CreatePartitions", 0),),
    "delete_topics": (("DeleteTopics", 0),),
    "log_dirs": (("DescribeLogDirs", 0),),
    "describe_quorum": (("DescribeQuorum", 0),),
    "list_reassignments": (("ListPartitionReassignments", 0),),
    "alter_group_offsets": (("FindCoordinator", 0), ("OffsetCommit", 2)),
    "read_records": (("Fetch", 4),),
})

#: command (as the README names it) -> the operations it performs. A command
#: whose *required* operation is missing fails with UnsupportedError; optional
#: extras (sizes, quorum, reassignments, retention configs) degrade to "unknown".
COMMAND_OPERATIONS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "lag": ("metadata", "describe_groups", "committed_offsets", "log_offsets"),
    "lag --all-groups": ("metadata", "list_groups", "describe_groups", "committed_offsets",
                         "log_offsets"),
    "health": ("metadata", "topic_configs"),
    "throughput": ("metadata", "log_offsets"),
    "snapshot": ("metadata", "list_groups", "describe_groups", "committed_offsets",
                 "log_offsets", "topic_configs"),
    "topics diff": ("metadata", "topic_configs"),
    "topics apply": ("metadata", "topic_configs", "create_topics"),
    "offsets reset": ("metadata", "describe_groups", "committed_offsets", "log_offsets"),
    "offsets export": ("metadata", "describe_groups", "committed_offsets"),
})

_CACHE_TTL_S = 300.0


@dataclass(frozen=True)
class Capabilities:
    """What one broker of a cluster advertised in ApiVersions."""

    bootstrap: str
    #: host:port that answered; None when nobody did
    broker: str | None = None
    #: api key -> (min version, max version)
    apis: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    #: False when the probe got no usable answer: everything then counts as supported
    known: bool = False
    #: why the probe has no answer (known=False)
    reason: str | None = None
    #: every bootstrap address was tried and none answered in time (connected or not,
    #: it said nothing: a black-holed or hung broker), as opposed to refused or untried
    silent: bool = False

    def supports(self, api_key: int, min_version: int = 0) -> bool:
        """True when the API is advertised at ``min_version`` or above (or nothing is known)."""
        if not self.known:
            return True
        rng = self.apis.get(api_key)
        return rng is not None and rng[1] >= min_version

    def max_version(self, api_key: int) -> int | None:
        rng = self.apis.get(api_key)
        return rng[1] if rng is not None else None

    def describe(self) -> str:
        where = self.broker or self.bootstrap
        if not self.known:
            return f"{where}: capabilities unknown ({self.reason or 'no answer'})"
        return f"{where}: {len(self.apis)} APIs advertised"

    def to_dict(self) -> dict[str, object]:
        return {
            "bootstrap": self.bootstrap,
            "broker": self.broker,
            "known": self.known,
            "reason": self.reason,
            "apis": {API_NAMES.get(k, str(k)): {"key": k, "min": lo, "max": hi}
                     for k, (lo, hi) in sorted(self.apis.items())},
        }


def missing_for(caps: Capabilities, operation: str) -> list[str]:
    """The APIs of ``operation`` the broker does not advertise, as 'Name (key K, vN+)'."""
    try:
        needs = OPERATION_APIS[operation]
    except KeyError:
        raise ValueError(f"unknown operation {operation!r}") from None
    out: list[str] = []
    for name, min_v in needs:
        key = API_KEYS[name]
        if not caps.supports(key, min_v):
            have = caps.max_version(key)
            why = "not advertised" if have is None else f"only up to v{have}"
            out.append(f"{name} (API key {key}{f', v{min_v}+' if min_v else ''}; {why})")
    return out


def require(caps: Capabilities, operation: str, what: str | None = None) -> None:
    """Raise UnsupportedError when the broker lacks an API ``operation`` needs."""
    missing = missing_for(caps, operation)
    if missing:
        action = what or operation.replace("_", " ")
        raise UnsupportedError(
            f"the broker at {caps.broker or caps.bootstrap} does not support "
            f"{' and '.join(missing)}, needed for {action}"
        )


# --------------------------------------------------------------------------- probe

_cache: dict[tuple[object, ...], tuple[float, Capabilities]] = {}
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _cache_key(conn: ConnectionConfig) -> tuple[object, ...]:
    # the probe logs in: an answer counts only for the same credentials
    secret = hashlib.sha256((conn.password or "").encode()).hexdigest()
    return (conn.bootstrap, conn.security_protocol.upper(), conn.ca_file, conn.cert_file,
            (conn.sasl_mechanism or "").upper(), conn.username, secret)


def probe(conn: ConnectionConfig, timeout: float = 5.0, *, refresh: bool = False) -> Capabilities:
    """ApiVersions of the first bootstrap broker that answers; cached for 5 minutes.

    Never waits longer than ``timeout`` in all. Raises only AuthenticationError (a
    definite login or TLS mistake) and KafkaUnavailableError (no address answered, and
    one answered something that is not the Kafka protocol). Only answers are cached: an
    unknown result is retried on the next call.
    """
    key = _cache_key(conn)
    now = time.monotonic()
    if not refresh:
        with _cache_lock:
            hit = _cache.get(key)
        if hit is not None and now - hit[0] < _CACHE_TTL_S:
            return hit[1]
    caps = _probe_uncached(conn, timeout)
    if caps.known:
        with _cache_lock:
            _cache[key] = (now, caps)
    return caps


def answers_api_versions(conn: ConnectionConfig, timeout: float = 3.0) -> bool:
    """A fresh ApiVersions round trip: is the broker itself still there?

    After a request timed out or its connection dropped, True means the broker
    is up and it is the request's API that does not work (treat as unsupported).
    """
    try:
        return _probe_uncached(conn, timeout).known
    except KafkaUnavailableError:  # it answers, but not as Kafka
        return False


def _probe_uncached(conn: ConnectionConfig, timeout: float) -> Capabilities:
    addrs = bootstrap_addresses(conn.bootstrap)
    if not addrs:
        return Capabilities(conn.bootstrap, reason="no host:port in the bootstrap list")
    reasons: list[str] = []
    garbled: list[str] = []
    timed_out = 0
    deadline = time.monotonic() + max(timeout, 0.5)
    for host, port in addrs:
        left = deadline - time.monotonic()
        if left <= 0:
            reasons.append(f"{host}:{port}: no time left")
            break
        try:
            apis = api_versions(host, port, left, conn)
        except NotKafkaAnswer as e:
            garbled.append(f"{host}:{port}")
            reasons.append(f"{host}:{port}: not Kafka: {e}")
            continue
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            reasons.append(f"{host}:{port}: {type(e).__name__}: {e}")
            timed_out += isinstance(e, TimeoutError)  # socket.timeout is TimeoutError
            continue
        return Capabilities(conn.bootstrap, f"{host}:{port}", MappingProxyType(apis), known=True)
    reason = "; ".join(reasons) or "no answer"
    log.debug("ApiVersions probe of %s failed: %s", conn.bootstrap, reason)
    if garbled:
        who = "the server" if len(addrs) == 1 else garbled[0]
        rest = "" if len(addrs) == 1 else ", and no other address answered"
        raise KafkaUnavailableError(
            f"cannot reach Kafka at {conn.bootstrap}: {who} answered something that is not the "
            f"Kafka protocol (an undecodable answer to ApiVersions; --debug shows it){rest}")
    return Capabilities(conn.bootstrap, reason=reason, silent=timed_out == len(addrs))


class NotKafkaAnswer(ValueError):
    """An answer arrived that is no Kafka frame, from a port that does not speak TLS
    either (the connection had no SASL login, which only a Kafka listener completes)."""


def not_kafka(conn: ConnectionConfig, timeout: float) -> str | None:
    """After a broken connection: why the first bootstrap server is not a Kafka broker
    (it answers an HTTP request), or None. Only on the error path: an HTTP server waits
    for a line end that no Kafka request has, so the ApiVersions probe cannot tell; a
    Kafka broker reads ``GET `` as an oversized frame and closes the connection."""
    for host, port in bootstrap_addresses(conn.bootstrap)[:1]:
        try:
            with socket.create_connection((host, port), timeout=timeout) as sock:
                sock.settimeout(timeout)
                sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
                head = recv_exact(sock, 5, time.monotonic() + timeout)
        except (OSError, ValueError):
            return None
        if head == b"HTTP/":
            return (f"the server at {host}:{port} answers HTTP, not the Kafka protocol (for "
                    f"StreamNest, give -b http://{host}:{port}: health, throughput and exporter "
                    "work with it, see docs/compat-notes.md)")
    return None


_PLAIN_CHECK_VERSION = 4


def api_versions(host: str, port: int, timeout: float,
                 conn: ConnectionConfig | None = None) -> dict[int, tuple[int, int]]:
    """One ApiVersions v0 round trip to ``host:port`` within ``timeout`` seconds.

    The connection is set up as ``conn`` says (TLS for SSL / SASL_SSL, a SASL login
    for SASL_*), so the probe also checks the credentials: a definite authentication
    or TLS mistake raises AuthenticationError (see :mod:`opskit.adapters.kafka.protocol.connect`).
    Raises OSError / ValueError on any other failure.
    """
    deadline = time.monotonic() + timeout
    conn = conn or ConnectionConfig(f"{host}:{port}")
    sock = open_connection(host, port, conn, deadline)
    corr = 0x6F70_6B74
    req = kp.api_versions()
    # without SASL, an ordinary request goes out with it (pipelined: no extra round
    # trip), a Metadata of no topics: a listener that requires SASL drops the connection
    # (v4: in every Kafka from 1.0 to 4.x, which dropped v0-v3)
    plain_check = None if uses_sasl(conn) else kp.metadata(_PLAIN_CHECK_VERSION, [])
    try:
        try:
            send(sock, req, deadline, conn.client_id, corr)
            if plain_check is not None:
                send(sock, plain_check, deadline, conn.client_id, corr + 1)
            err, apis = receive(sock, req, deadline, corr)
        except (ConnectionError, ValueError, struct.error) as e:
            if uses_sasl(conn):  # a login went through: the port speaks what we expect
                raise
            err = plaintext_mismatch(host, port, conn, deadline, e)
            if err is e and not isinstance(e, ConnectionError):
                # bytes came back, and they are neither a Kafka answer nor TLS
                raise NotKafkaAnswer(f"{type(e).__name__}: {e}") from e
            raise err from e
        if err != 0:
            raise ValueError(f"ApiVersions error code {err}")
        lo, hi = apis.get(kp.API_METADATA, (0, -1))
        if plain_check is not None and lo <= _PLAIN_CHECK_VERSION <= hi:
            # (a broker without Metadata v4 may never answer it: not waited for)
            try:
                plain_request_refused(sock, plain_check, deadline, corr + 1, host, port, conn)
            except TimeoutError as e:  # it did answer ApiVersions: not a silent broker
                raise OSError(f"ApiVersions answered, then no answer to Metadata: {e}") from e
        return dict(apis)
    finally:
        sock.close()


def names(keys: Iterable[int]) -> list[str]:
    return [API_NAMES.get(k, f"api-{k}") for k in sorted(keys)]
