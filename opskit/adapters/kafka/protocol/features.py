"""The cluster's finalized features (KIP-584) from one ApiVersions v3 round trip.

Kafka has no DescribeFeatures request: kafka-python's ``describe_features`` (and Kafka's
``kafka-features describe``) send ApiVersions v3+, whose answer carries, as tagged
fields, the features the broker supports (tag 0), the epoch of the finalized ones (tag 1)
and the finalized features (tag 2: name, max version level, min version level, in that
order on the wire). This reads them on one connection to a bootstrap broker, set up as
the connection config says (TLS, SASL: :func:`~opskit.adapters.kafka.protocol.connect.open_connection`),
without starting a whole client.

A broker that does not speak ApiVersions v3 (before Kafka 2.4) answers with error
UNSUPPORTED_VERSION (35) and a v0 body (KIP-511): :func:`read_features` then raises
:class:`~opskit.adapters.kafka.protocol.codec.WireUnsupported`, as it does for any
other error code or an answer it cannot decode. An address that cannot be reached or
does not answer within the deadline raises ``OSError`` (``TimeoutError`` when silent).
"""

from __future__ import annotations

import re
import struct
import time
from dataclasses import dataclass, field

from opskit import __version__
from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.connect import bootstrap_addresses, open_connection, roundtrip
from opskit.core.connection import ConnectionConfig

__all__ = ["Features", "api_versions_v3", "read_features"]

#: the answer's error code when the broker lacks the version asked (it answers v0 then)
UNSUPPORTED_VERSION = 35
_VERSION = 3
_RANGE = struct.Struct(">hhh")
_LEVELS = struct.Struct(">hh")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
#: what a broker accepts as client software name / version (else INVALID_REQUEST)
_SOFTWARE = re.compile(r"[^a-zA-Z0-9\-.]")


@dataclass(frozen=True)
class Features:
    """The features of one ApiVersions v3 answer."""

    #: feature -> (min version, max version) the answering broker supports
    supported: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: feature -> (min version level, max version level) finalized in the cluster
    finalized: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the epoch of the finalized features (None: not reported)
    epoch: int | None = None
    #: api key -> (min version, max version), as in ApiVersions v0
    apis: dict[int, tuple[int, int]] = field(default_factory=dict)


def api_versions_v3() -> kp.Request:
    """ApiVersions v3: the client's software name and version, compact strings (the
    broker refuses other characters than letters, digits, '-' and '.')."""
    version = _SOFTWARE.sub("-", __version__).strip("-.") or "0"
    body = b"".join((kp._string("opskit", True), kp._string(version, True), b"\x00"))
    return kp.Request(kp.API_API_VERSIONS, _VERSION, body, _decode)


def _decode(buf: kp.Buf, pos: int, version: int) -> tuple[tuple[int, Features], int]:
    """(error code, features). With an error code the rest of the answer (a v0 body when
    the version is unsupported) is not read."""
    (err,) = _I16.unpack_from(buf, pos)
    pos += 2
    if err:
        return (err, Features()), len(buf)
    n, pos = kp._read_count(buf, pos, True)
    apis: dict[int, tuple[int, int]] = {}
    for _ in range(n):
        key, lo, hi = _RANGE.unpack_from(buf, pos)
        pos = kp._skip_tags(buf, pos + 6)
        apis[key] = (lo, hi)
    pos += _I32.size  # throttle time
    supported: dict[str, tuple[int, int]] = {}
    finalized: dict[str, tuple[int, int]] = {}
    epoch: int | None = None
    tags, pos = kp._read_uvarint(buf, pos)
    for _ in range(tags):
        tag, pos = kp._read_uvarint(buf, pos)
        size, pos = kp._read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise kp.MalformedResponse("tagged field past the end of the answer")
        if tag == 0:  # SupportedFeatures: name, min version, max version
            count, p = kp._read_count(buf, pos, True)
            for _ in range(count):
                name, p = kp._read_cstr(buf, p)
                lo, hi = _LEVELS.unpack_from(buf, p)
                p = kp._skip_tags(buf, p + 4)
                supported[name or ""] = (lo, hi)
        elif tag == 1:  # FinalizedFeaturesEpoch
            (value,) = _I64.unpack_from(buf, pos)
            epoch = value if value >= 0 else None
        elif tag == 2:  # FinalizedFeatures: name, MAX version level, MIN version level
            count, p = kp._read_count(buf, pos, True)
            for _ in range(count):
                name, p = kp._read_cstr(buf, p)
                hi, lo = _LEVELS.unpack_from(buf, p)
                p = kp._skip_tags(buf, p + 4)
                finalized[name or ""] = (lo, hi)
        pos = end  # (tag 3, ZkMigrationReady, and unknown tags: skipped)
    return (0, Features(supported, finalized, epoch, apis)), pos


def read_features(conn: ConnectionConfig, timeout: float) -> Features:
    """The features of the first bootstrap address that answers ApiVersions v3, all
    within ``timeout`` seconds. Raises WireUnsupported (an error code, an undecodable
    answer), AuthenticationError (a definite login or TLS mistake) or, when no address
    answered, the last address's ``OSError``."""
    deadline = time.monotonic() + max(timeout, 0.5)
    last: OSError = OSError(f"no host:port in {conn.bootstrap!r}")
    for host, port in bootstrap_addresses(conn.bootstrap):
        if time.monotonic() >= deadline:
            last = TimeoutError("no time left")
            break
        try:
            sock = open_connection(host, port, conn, deadline)
        except OSError as e:
            last = e
            continue
        except ValueError as e:  # a login exchange not understood
            raise kp.WireUnsupported(f"connecting to {host}:{port}: {e}") from e
        try:
            answer: tuple[int, Features] = roundtrip(sock, api_versions_v3(), deadline,
                                                     conn.client_id)
            err, features = answer
        except (ValueError, struct.error) as e:
            raise kp.WireUnsupported(f"ApiVersions v{_VERSION} answer not understood: {e}") from e
        except OSError as e:
            last = e
            continue
        finally:
            sock.close()
        if err == UNSUPPORTED_VERSION:
            raise kp.WireUnsupported(f"the broker at {host}:{port} does not speak ApiVersions "
                                     f"v{_VERSION} (Kafka 2.4+)")
        if err:
            raise kp.WireUnsupported(f"ApiVersions v{_VERSION} error code {err} from {host}:{port}")
        return features
    raise last
