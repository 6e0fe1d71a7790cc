"""A small Kafka wire codec: the requests opskit's batched reads send, and their answers.

Only what :mod:`opskit.adapters.kafka.protocol.client`, :mod:`~opskit.adapters.kafka.protocol.groups` and
:mod:`~opskit.adapters.kafka.protocol.offsets` need, in the versions they negotiate:

==================  ========  =====================  ==========================
API                 key       versions               flexible (compact, tags)
==================  ========  =====================  ==========================
Fetch               1         4-11                   no (12+)
ListOffsets         2         1-5                    no (6+)
Metadata            3         1-8                    no (9+)
OffsetFetch         9         8 (many groups)        yes
FindCoordinator     10        4 (many keys)          yes
DescribeGroups      15        0-5                    v5
ListGroups          16        0-4                    v3+
DescribeConfigs     32        1-3 (topics)           no (4+)
ApiVersions         18        0                      no
SaslHandshake       17        1                      no
SaslAuthenticate    36        0-1                    no (2+)
==================  ========  =====================  ==========================

Requests are built as :class:`Request` (API key, version, encoded body, the
decoder of the answer); :func:`encode_request` frames one with request header
v1 (v2 for flexible versions), :func:`decode_response` checks the response
header (v0, v1 for flexible versions except ApiVersions) and decodes the body.
Decoders read straight from the received buffer with precompiled
:class:`struct.Struct` s and return plain tuples, lists and small named tuples;
unknown tagged fields are skipped.

Record batches (the ``records`` of a Fetch answer): :func:`record_batches`
walks magic v2 batch headers without touching their records, and
:func:`batch_records` yields ``(offset, timestamp)`` of one batch's records,
uncompressed or gzip. Other codecs (snappy, lz4, zstd) and the old message
formats (magic 0/1) raise :class:`WireUnsupported`, so the caller reads those
through librdkafka. A last batch cut short (Fetch answers may end mid-batch)
is not yielded.

Stdlib only (``struct``, ``zlib``); no I/O.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

API_FETCH, API_LIST_OFFSETS, API_METADATA = 1, 2, 3
API_OFFSET_FETCH, API_FIND_COORDINATOR, API_DESCRIBE_GROUPS = 9, 10, 15
API_API_VERSIONS, API_LIST_GROUPS, API_DESCRIBE_CONFIGS = 18, 16, 32
API_DESCRIBE_LOG_DIRS = 35
API_SASL_HANDSHAKE, API_SASL_AUTHENTICATE = 17, 36

#: first flexible version of each API (compact strings / arrays, tagged fields)
FLEXIBLE_FROM = {API_FETCH: 12, API_LIST_OFFSETS: 6, API_METADATA: 9, API_OFFSET_FETCH: 6,
                 API_FIND_COORDINATOR: 3, API_DESCRIBE_GROUPS: 5, API_API_VERSIONS: 3,
                 API_LIST_GROUPS: 3, API_DESCRIBE_CONFIGS: 4, API_DESCRIBE_LOG_DIRS: 2,
                 API_SASL_HANDSHAKE: 99, API_SASL_AUTHENTICATE: 2}
#: versions this codec encodes and decodes, per API
SUPPORTED = {API_FETCH: (4, 11), API_LIST_OFFSETS: (1, 5), API_METADATA: (1, 8),
             API_OFFSET_FETCH: (8, 8), API_FIND_COORDINATOR: (4, 4),
             API_DESCRIBE_GROUPS: (0, 5), API_API_VERSIONS: (0, 0), API_LIST_GROUPS: (0, 4),
             API_DESCRIBE_CONFIGS: (1, 3), API_DESCRIBE_LOG_DIRS: (1, 5),
             API_SASL_HANDSHAKE: (1, 1), API_SASL_AUTHENTICATE: (0, 1)}

Buf = bytes | bytearray | memoryview
#: decodes a response body: (buffer, position after the response header, version)
#: -> (decoded body, position after it)
Decoder = Callable[[Buf, int, int], tuple[Any, int]]


class WireUnsupported(Exception):
    """The batched path cannot be used here (an API version, record format or
    compression codec this codec lacks, an answer it cannot decode, SASL, ...);
    the caller reads the same data through librdkafka instead."""


class WireErrorCode(WireUnsupported):
    """The broker answered with an error code (``COORDINATOR_NOT_AVAILABLE`` while its
    group coordinator starts, ...): it serves the API, this read failed. The caller may
    ask librdkafka, but must never conclude from it that the broker lacks the API."""


class MalformedResponse(ValueError):
    """An answer that does not parse as the expected response."""


class Request(NamedTuple):
    api_key: int
    version: int
    body: bytes
    decode: Decoder


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEADER = struct.Struct(">hhi")


# ----- primitive encoders -----
def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    b = s.encode("utf-8")
    return (_uvarint(len(b) + 1) if flexible else _I16.pack(len(b))) + b


def _count(n: int | None, flexible: bool) -> bytes:
    """An array length; None is the null array."""
    if n is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def _check(api_key: int, version: int) -> bool:
    lo, hi = SUPPORTED[api_key]
    if not lo <= version <= hi:
        raise WireUnsupported(f"opskit's codec lacks API {api_key} v{version} (has v{lo}-v{hi})")
    return version >= FLEXIBLE_FROM[api_key]


def encode_request(req: Request, correlation_id: int, client_id: str | None) -> bytes:
    """The size-prefixed request: header v1 (v2 with a tag buffer when flexible) + body."""
    flexible = req.version >= FLEXIBLE_FROM[req.api_key]
    msg = b"".join((_HEADER.pack(req.api_key, req.version, correlation_id),
                    _string(client_id, False), b"\x00" if flexible else b"", req.body))
    return _I32.pack(len(msg)) + msg


def decode_response(req: Request, data: Buf) -> tuple[int, Any]:
    """(correlation id, decoded body) of one answer (without its size prefix)."""
    try:
        (cid,) = _I32.unpack_from(data, 0)
        pos = 4
        # ApiVersions answers always carry response header v0 (so old clients can read them)
        if req.version >= FLEXIBLE_FROM[req.api_key] and req.api_key != API_API_VERSIONS:
            pos = _skip_tags(data, pos)
        body, end = req.decode(data, pos, req.version)
    except (IndexError, struct.error, UnicodeDecodeError, zlib.error) as e:
        raise MalformedResponse(f"undecodable answer to API {req.api_key} v{req.version}: {e}") from e
    if end != len(data):
        raise MalformedResponse(f"answer to API {req.api_key} v{req.version} is {len(data)} bytes, "
                                f"decoded {end}")
    return cid, body


# ----- primitive decoders: (buffer, position) -> (value, next position) -----
def _read_uvarint(buf: Buf, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    value, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + 1
        shift += 7
        if shift > 63:
            raise MalformedResponse("varint longer than 64 bits")


def _read_varint(buf: Buf, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed varint (record fields)."""
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = _read_uvarint(buf, pos)
    return (u >> 1) ^ -(u & 1), pos


def _skip_tags(buf: Buf, pos: int) -> int:
    if buf[pos] == 0:
        return pos + 1
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    if pos > len(buf):
        raise MalformedResponse("tagged field past the end of the answer")
    return pos


def _text(buf: Buf, pos: int, n: int) -> str:
    end = pos + n
    if end > len(buf):
        raise MalformedResponse("string past the end of the answer")
    return str(buf[pos:end], "utf-8")


def _read_str(buf: Buf, pos: int) -> tuple[str | None, int]:
    (n,) = _I16.unpack_from(buf, pos)
    if n < 0:
        return None, pos + 2
    return _text(buf, pos + 2, n), pos + 2 + n


def _read_cstr(buf: Buf, pos: int) -> tuple[str | None, int]:
    n, pos = _read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return _text(buf, pos, n - 1), pos + n - 1


def _read_bytes(buf: Buf, pos: int, flexible: bool) -> tuple[bytes | None, int]:
    if flexible:
        n, pos = _read_uvarint(buf, pos)
        n -= 1
    else:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise MalformedResponse("bytes past the end of the answer")
    return bytes(buf[pos:pos + n]), pos + n


def _read_count(buf: Buf, pos: int, flexible: bool) -> tuple[int, int]:
    """An array length; the null array (-1) counts as empty."""
    if flexible:
        n, pos = _read_uvarint(buf, pos)
        return max(n - 1, 0), pos
    (n,) = _I32.unpack_from(buf, pos)
    return max(n, 0), pos + 4


def _str_reader(flexible: bool) -> Callable[[Buf, int], tuple[str | None, int]]:
    return _read_cstr if flexible else _read_str


# ----- ApiVersions v0 -----
def api_versions() -> Request:
    return Request(API_API_VERSIONS, 0, b"", _decode_api_versions)


_API_RANGE = struct.Struct(">hhh")


def _decode_api_versions(buf: Buf, pos: int, version: int) -> tuple[tuple[int, dict[int, tuple[int, int]]], int]:
    """(error code, {api key: (min version, max version)})."""
    (err,) = _I16.unpack_from(buf, pos)
    n, pos = _read_count(buf, pos + 2, False)
    out: dict[int, tuple[int, int]] = {}
    for _ in range(n):
        key, lo, hi = _API_RANGE.unpack_from(buf, pos)
        pos += 6
        out[key] = (lo, hi)
    return (err, out), pos


# ----- SaslHandshake v1, SaslAuthenticate v0-1 -----
def sasl_handshake(mechanism: str) -> Request:
    """SaslHandshake v1: the mechanism; the tokens then travel in SaslAuthenticate."""
    _check(API_SASL_HANDSHAKE, 1)
    return Request(API_SASL_HANDSHAKE, 1, _string(mechanism, False), _decode_sasl_handshake)


def _decode_sasl_handshake(buf: Buf, pos: int, version: int) -> tuple[tuple[int, list[str]], int]:
    """(error code, the mechanisms the listener enables)."""
    (err,) = _I16.unpack_from(buf, pos)
    n, pos = _read_count(buf, pos + 2, False)
    mechanisms: list[str] = []
    for _ in range(n):
        m, pos = _read_str(buf, pos)
        mechanisms.append(m or "")
    return (err, mechanisms), pos


class SaslAnswer(NamedTuple):
    error_code: int
    error_message: str | None
    auth_bytes: bytes


def sasl_authenticate(version: int, auth_bytes: bytes) -> Request:
    _check(API_SASL_AUTHENTICATE, version)
    return Request(API_SASL_AUTHENTICATE, version, _I32.pack(len(auth_bytes)) + auth_bytes,
                   _decode_sasl_authenticate)


def _decode_sasl_authenticate(buf: Buf, pos: int, version: int) -> tuple[SaslAnswer, int]:
    (err,) = _I16.unpack_from(buf, pos)
    msg, pos = _read_str(buf, pos + 2)
    data, pos = _read_bytes(buf, pos, False)
    if version >= 1:
        pos += 8  # session_lifetime_ms: opskit's connections live shorter than any session
    return SaslAnswer(err, msg, data or b""), pos


# ----- FindCoordinator v4 -----
class Coordinator(NamedTuple):
    key: str
    node_id: int
    host: str
    port: int
    error_code: int


def find_coordinator(version: int, keys: Sequence[str], key_type: int = 0) -> Request:
    _check(API_FIND_COORDINATOR, version)
    body = b"".join([_I8.pack(key_type), _count(len(keys), True),
                     *(_string(k, True) for k in keys), b"\x00"])
    return Request(API_FIND_COORDINATOR, version, body, _decode_find_coordinator)


_NODE_ID = _I32
_PORT_ERR = struct.Struct(">ih")


def _decode_find_coordinator(buf: Buf, pos: int, version: int) -> tuple[list[Coordinator], int]:
    pos += 4  # throttle time
    n, pos = _read_count(buf, pos, True)
    out: list[Coordinator] = []
    for _ in range(n):
        key, pos = _read_cstr(buf, pos)
        (node_id,) = _NODE_ID.unpack_from(buf, pos)
        host, pos = _read_cstr(buf, pos + 4)
        port, err = _PORT_ERR.unpack_from(buf, pos)
        _msg, pos = _read_cstr(buf, pos + 6)
        pos = _skip_tags(buf, pos)
        out.append(Coordinator(key or "", node_id, host or "", port, err))
    return out, _skip_tags(buf, pos)


# ----- DescribeGroups v0-v5 -----
class GroupMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes | None
    assignment: bytes | None


class DescribedGroup(NamedTuple):
    error_code: int
    group_id: str
    state: str
    protocol_type: str
    protocol_data: str
    members: list[GroupMember]


def describe_groups(version: int, groups: Sequence[str]) -> Request:
    flexible = _check(API_DESCRIBE_GROUPS, version)
    parts = [_count(len(groups), flexible), *(_string(g, flexible) for g in groups)]
    if version >= 3:
        parts.append(b"\x00")  # include authorized operations: no
    if flexible:
        parts.append(b"\x00")
    return Request(API_DESCRIBE_GROUPS, version, b"".join(parts), _decode_describe_groups)


def _decode_describe_groups(buf: Buf, pos: int, version: int) -> tuple[list[DescribedGroup], int]:
    flexible = version >= FLEXIBLE_FROM[API_DESCRIBE_GROUPS]
    rstr = _str_reader(flexible)
    if version >= 1:
        pos += 4  # throttle time
    n, pos = _read_count(buf, pos, flexible)
    out: list[DescribedGroup] = []
    for _ in range(n):
        (err,) = _I16.unpack_from(buf, pos)
        gid, pos = rstr(buf, pos + 2)
        state, pos = rstr(buf, pos)
        ptype, pos = rstr(buf, pos)
        pdata, pos = rstr(buf, pos)
        k, pos = _read_count(buf, pos, flexible)
        members: list[GroupMember] = []
        for _ in range(k):
            mid, pos = rstr(buf, pos)
            instance: str | None = None
            if version >= 4:
                instance, pos = rstr(buf, pos)
            cid, pos = rstr(buf, pos)
            host, pos = rstr(buf, pos)
            meta, pos = _read_bytes(buf, pos, flexible)
            assignment, pos = _read_bytes(buf, pos, flexible)
            if flexible:
                pos = _skip_tags(buf, pos)
            members.append(GroupMember(mid or "", instance, cid or "", host or "", meta, assignment))
        if version >= 3:
            pos += 4  # authorized operations
        if flexible:
            pos = _skip_tags(buf, pos)
        out.append(DescribedGroup(err, gid or "", state or "", ptype or "", pdata or "", members))
    return out, (_skip_tags(buf, pos) if flexible else pos)


# ----- OffsetFetch v8 (many groups) -----
class GroupOffsets(NamedTuple):
    group_id: str
    error_code: int
    #: [(topic, [(partition, committed offset, error code)])]
    topics: list[tuple[str, list[tuple[int, int, int]]]]


def offset_fetch(version: int, groups: Sequence[str],
                 topics: Mapping[str, Sequence[int]] | None = None,
                 require_stable: bool = False) -> Request:
    """Committed offsets of ``groups``: of every partition (``topics`` None), or of those given."""
    _check(API_OFFSET_FETCH, version)
    if topics is None:
        wanted = b"\x00"
    else:
        wanted = b"".join([_count(len(topics), True), *(
            _string(t, True) + _count(len(ps), True) + b"".join(_I32.pack(p) for p in ps) + b"\x00"
            for t, ps in topics.items())])
    parts = [_count(len(groups), True)]
    for g in groups:
        parts += (_string(g, True), wanted, b"\x00")
    parts.append(b"\x01\x00" if require_stable else b"\x00\x00")
    return Request(API_OFFSET_FETCH, version, b"".join(parts), _decode_offset_fetch)


_COMMITTED = struct.Struct(">iqi")  # partition, committed offset, committed leader epoch
#: the usual committed-offset entry: empty or null metadata, no tagged fields (20 bytes)
_COMMITTED_PLAIN = struct.Struct(">iqiBhB")


def _decode_offset_fetch(buf: Buf, pos: int, version: int) -> tuple[list[GroupOffsets], int]:
    pos += 4  # throttle time
    n_groups, pos = _read_count(buf, pos, True)
    out: list[GroupOffsets] = []
    unpack_plain = _COMMITTED_PLAIN.unpack_from
    for _ in range(n_groups):
        gid, pos = _read_cstr(buf, pos)
        n_topics, pos = _read_count(buf, pos, True)
        topics: list[tuple[str, list[tuple[int, int, int]]]] = []
        for _ in range(n_topics):
            name, pos = _read_cstr(buf, pos)
            n_parts, pos = _read_count(buf, pos, True)
            parts: list[tuple[int, int, int]] = []
            append = parts.append
            for _ in range(n_parts):
                # every entry is at least 20 bytes, so this never reads past a whole answer
                p, offset, _epoch, meta, err, tags = unpack_plain(buf, pos)
                if meta <= 1 and not tags:  # metadata null (0) or empty (1), no tags
                    pos += 20
                else:
                    pos, err = _committed_entry(buf, pos)
                append((p, offset, err))
            pos = _skip_tags(buf, pos)
            topics.append((name or "", parts))
        (err,) = _I16.unpack_from(buf, pos)
        pos = _skip_tags(buf, pos + 2)
        out.append(GroupOffsets(gid or "", err, topics))
    return out, _skip_tags(buf, pos)


def _committed_entry(buf: Buf, pos: int) -> tuple[int, int]:
    """(next position, error code) of a committed-offset entry with metadata or tags."""
    k, pos = _read_uvarint(buf, pos + 16)  # metadata: compact nullable string
    pos += max(k - 1, 0)
    (err,) = _I16.unpack_from(buf, pos)
    return _skip_tags(buf, pos + 2), err


# ----- ListOffsets v1-v5 -----
def list_offsets(version: int, topics: Mapping[str, Sequence[int]], timestamp: int,
                 isolation_level: int = 0) -> Request:
    """The offset for ``timestamp`` (-2 earliest, -1 latest) of each partition."""
    _check(API_LIST_OFFSETS, version)
    part = struct.Struct(">iiq" if version >= 4 else ">iq")
    parts = [_I32.pack(-1)]  # replica id: a consumer
    if version >= 2:
        parts.append(_I8.pack(isolation_level))
    parts.append(_count(len(topics), False))
    for t, ps in topics.items():
        parts += (_string(t, False), _count(len(ps), False))
        if version >= 4:
            parts += [part.pack(p, -1, timestamp) for p in ps]
        else:
            parts += [part.pack(p, timestamp) for p in ps]
    return Request(API_LIST_OFFSETS, version, b"".join(parts), _decode_list_offsets)


_LISTED = struct.Struct(">ihqq")  # partition, error code, timestamp, offset


def _decode_list_offsets(buf: Buf, pos: int, version: int
                         ) -> tuple[list[tuple[str, list[tuple[int, int, int, int]]]], int]:
    """[(topic, [(partition, error code, timestamp, offset)])]."""
    if version >= 2:
        pos += 4  # throttle time
    step = 26 if version >= 4 else 22  # + leader epoch
    n, pos = _read_count(buf, pos, False)
    out: list[tuple[str, list[tuple[int, int, int, int]]]] = []
    for _ in range(n):
        name, pos = _read_str(buf, pos)
        k, pos = _read_count(buf, pos, False)
        parts: list[tuple[int, int, int, int]] = []
        for _ in range(k):
            parts.append(_LISTED.unpack_from(buf, pos))
            pos += step
        out.append((name or "", parts))
    return out, pos


# ----- Fetch v4-v11 -----
class FetchedPartition(NamedTuple):
    partition: int
    error_code: int
    high_watermark: int
    records: memoryview | None


#: {topic: [(partition, fetch offset, partition max bytes)]}
FetchWanted = Mapping[str, Sequence[tuple[int, int, int]]]


def fetch(version: int, topics: FetchWanted, max_wait_ms: int, min_bytes: int, max_bytes: int,
          isolation_level: int = 0) -> Request:
    """A one-off (sessionless) fetch, as a consumer."""
    _check(API_FETCH, version)
    parts = [struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, isolation_level)]
    if version >= 7:
        parts.append(struct.pack(">ii", 0, -1))  # no fetch session
    parts.append(_count(len(topics), False))
    for t, ps in topics.items():
        parts += (_string(t, False), _count(len(ps), False))
        for p, offset, limit in ps:
            if version >= 9:
                parts.append(struct.pack(">iiqqi", p, -1, offset, -1, limit))
            elif version >= 5:
                parts.append(struct.pack(">iqqi", p, offset, -1, limit))
            else:
                parts.append(struct.pack(">iqi", p, offset, limit))
    if version >= 7:
        parts.append(_count(0, False))  # forgotten topics
    if version >= 11:
        parts.append(_string("", False))  # rack id
    return Request(API_FETCH, version, b"".join(parts), _decode_fetch)


_FETCHED = struct.Struct(">ihq")  # partition, error code, high watermark


def _decode_fetch(buf: Buf, pos: int, version: int
                  ) -> tuple[list[tuple[str, list[FetchedPartition]]], int]:
    """[(topic, [FetchedPartition])]; records are views into the answer's buffer."""
    pos += 4  # throttle time
    if version >= 7:
        (err,) = _I16.unpack_from(buf, pos)
        if err:
            raise WireUnsupported(f"Fetch error {err}")
        pos += 6  # + session id
    view = memoryview(buf)
    n, pos = _read_count(buf, pos, False)
    out: list[tuple[str, list[FetchedPartition]]] = []
    for _ in range(n):
        name, pos = _read_str(buf, pos)
        k, pos = _read_count(buf, pos, False)
        parts: list[FetchedPartition] = []
        for _ in range(k):
            p, err, hw = _FETCHED.unpack_from(buf, pos)
            pos += 22  # + last stable offset
            if version >= 5:
                pos += 8  # log start offset
            aborted, pos = _read_count(buf, pos, False)
            pos += 16 * aborted
            if version >= 11:
                pos += 4  # preferred read replica
            (size,) = _I32.unpack_from(buf, pos)
            pos += 4
            records = None
            if size >= 0:
                if pos + size > len(buf):
                    raise MalformedResponse("Fetch records past the end of the answer")
                records = view[pos:pos + size]
                pos += size
            parts.append(FetchedPartition(p, err, hw, records))
        out.append((name or "", parts))
    return out, pos


# ----- Metadata v1-v8 -----
class Broker(NamedTuple):
    node_id: int
    host: str
    port: int


class TopicMetadata(NamedTuple):
    error_code: int
    name: str
    #: [(error code, partition, leader id)], or with ``metadata(..., replicas=True)``
    #: [(error code, partition, leader id, replicas, in-sync replicas)]
    partitions: list[tuple[Any, ...]]


class ClusterMetadata(NamedTuple):
    """A whole Metadata answer (``metadata(..., replicas=True)``)."""

    brokers: list[Broker]
    cluster_id: str | None
    controller_id: int
    topics: list[TopicMetadata]


def metadata(version: int, topics: Sequence[str] | None, replicas: bool = False) -> Request:
    """Brokers, and the partitions of ``topics`` (None: of every topic); never creates topics.

    The answer decodes to ``(brokers, topics)`` with partitions as (error, partition,
    leader); with ``replicas`` to a :class:`ClusterMetadata` whose partitions also
    carry their replica and in-sync replica ids."""
    _check(API_METADATA, version)
    parts = [_count(None if topics is None else len(topics), False)]
    parts += [_string(t, False) for t in topics or ()]
    if version >= 4:
        parts.append(b"\x00")  # allow auto topic creation: no
    if version >= 8:
        parts.append(b"\x00\x00")  # include cluster / topic authorized operations: no
    return Request(API_METADATA, version, b"".join(parts),
                   _decode_cluster_metadata if replicas else _decode_metadata)


_PARTITION_MD = struct.Struct(">hii")  # error code, partition, leader


def _skip_int32s(buf: Buf, pos: int, arrays: int) -> int:
    """The position after ``arrays`` consecutive (non-compact) int32 arrays."""
    unpack = _I32.unpack_from
    for _ in range(arrays):
        (n,) = unpack(buf, pos)
        pos += 4 + 4 * n if n > 0 else 4
    return pos


def _read_int32s(buf: Buf, pos: int) -> tuple[tuple[int, ...], int]:
    (n,) = _I32.unpack_from(buf, pos)
    if n <= 0:
        return (), pos + 4
    return struct.unpack_from(f">{n}i", buf, pos + 4), pos + 4 + 4 * n


def _metadata_body(buf: Buf, pos: int, version: int, replicas: bool
                   ) -> tuple[ClusterMetadata, int]:
    if version >= 3:
        pos += 4  # throttle time
    n, pos = _read_count(buf, pos, False)
    brokers: list[Broker] = []
    for _ in range(n):
        (node_id,) = _I32.unpack_from(buf, pos)
        host, pos = _read_str(buf, pos + 4)
        (port,) = _I32.unpack_from(buf, pos)
        _rack, pos = _read_str(buf, pos + 4)
        brokers.append(Broker(node_id, host or "", port))
    cluster_id = None
    if version >= 2:
        cluster_id, pos = _read_str(buf, pos)
    (controller_id,) = _I32.unpack_from(buf, pos)
    pos += 4
    epoch = 4 if version >= 7 else 0
    arrays = 3 if version >= 5 else 2
    n, pos = _read_count(buf, pos, False)
    topics: list[TopicMetadata] = []
    for _ in range(n):
        (err,) = _I16.unpack_from(buf, pos)
        name, pos = _read_str(buf, pos + 2)
        pos += 1  # is internal
        k, pos = _read_count(buf, pos, False)
        parts: list[tuple[Any, ...]] = []
        for _ in range(k):
            head = _PARTITION_MD.unpack_from(buf, pos)
            pos += 10 + epoch  # (leader epoch)
            if replicas:
                reps, pos = _read_int32s(buf, pos)
                isr, pos = _read_int32s(buf, pos)
                pos = _skip_int32s(buf, pos, arrays - 2)  # (offline replicas)
                parts.append((*head, reps, isr))
            else:
                parts.append(head)
                pos = _skip_int32s(buf, pos, arrays)  # replicas, isr, (offline replicas)
        if version >= 8:
            pos += 4  # topic authorized operations
        topics.append(TopicMetadata(err, name or "", parts))
    if version >= 8:
        pos += 4  # cluster authorized operations
    return ClusterMetadata(brokers, cluster_id, controller_id, topics), pos


def _decode_metadata(buf: Buf, pos: int, version: int
                     ) -> tuple[tuple[list[Broker], list[TopicMetadata]], int]:
    md, pos = _metadata_body(buf, pos, version, False)
    return (md.brokers, md.topics), pos


def _decode_cluster_metadata(buf: Buf, pos: int, version: int) -> tuple[ClusterMetadata, int]:
    return _metadata_body(buf, pos, version, True)


# ----- ListGroups v0-v4 -----
class ListedGroup(NamedTuple):
    group_id: str
    protocol_type: str
    #: v4+; None before
    state: str | None


def list_groups(version: int) -> Request:
    """Every group the broker coordinates (no state filter)."""
    flexible = _check(API_LIST_GROUPS, version)
    body = b""
    if version >= 4:
        body += _count(0, True)  # states filter: empty, every state
    if flexible:
        body += b"\x00"
    return Request(API_LIST_GROUPS, version, body, _decode_list_groups)


def _decode_list_groups(buf: Buf, pos: int, version: int
                        ) -> tuple[tuple[int, list[ListedGroup]], int]:
    """(error code, groups)."""
    flexible = version >= FLEXIBLE_FROM[API_LIST_GROUPS]
    read = _str_reader(flexible)
    if version >= 1:
        pos += 4  # throttle time
    (err,) = _I16.unpack_from(buf, pos)
    n, pos = _read_count(buf, pos + 2, flexible)
    out: list[ListedGroup] = []
    for _ in range(n):
        gid, pos = read(buf, pos)
        ptype, pos = read(buf, pos)
        state = None
        if version >= 4:
            state, pos = read(buf, pos)
        if flexible:
            pos = _skip_tags(buf, pos)
        out.append(ListedGroup(gid or "", ptype or "", state))
    if flexible:
        pos = _skip_tags(buf, pos)
    return (err, out), pos


# ----- DescribeConfigs v1-v3 (topics) -----
RESOURCE_TOPIC = 2
CONFIG_SOURCE_DEFAULT = 5


class ConfigResult(NamedTuple):
    error_code: int
    error_message: str | None
    resource_type: int
    name: str
    #: config name -> (value, is the default: config source DEFAULT_CONFIG)
    configs: dict[str, tuple[str | None, bool]]


def describe_configs(version: int, topics: Sequence[str],
                     keys: Sequence[str] | None = None) -> Request:
    """The configs of ``topics`` (only ``keys`` when given), without synonyms or docs."""
    _check(API_DESCRIBE_CONFIGS, version)
    parts = [_count(len(topics), False)]
    for t in topics:
        parts += [_I8.pack(RESOURCE_TOPIC), _string(t, False),
                  _count(None if keys is None else len(keys), False)]
        parts += [_string(k, False) for k in keys or ()]
    parts.append(b"\x00")  # include synonyms: no
    if version >= 3:
        parts.append(b"\x00")  # include documentation: no
    return Request(API_DESCRIBE_CONFIGS, version, b"".join(parts), _decode_describe_configs)


def _decode_describe_configs(buf: Buf, pos: int, version: int) -> tuple[list[ConfigResult], int]:
    pos += 4  # throttle time
    n, pos = _read_count(buf, pos, False)
    out: list[ConfigResult] = []
    for _ in range(n):
        (err,) = _I16.unpack_from(buf, pos)
        msg, pos = _read_str(buf, pos + 2)
        (rtype,) = _I8.unpack_from(buf, pos)
        name, pos = _read_str(buf, pos + 1)
        k, pos = _read_count(buf, pos, False)
        configs: dict[str, tuple[str | None, bool]] = {}
        for _ in range(k):
            key, pos = _read_str(buf, pos)
            value, pos = _read_str(buf, pos)
            source = buf[pos + 1]  # after read only
            pos += 3  # read only, config source, is sensitive
            m, pos = _read_count(buf, pos, False)  # synonyms (none asked for)
            for _ in range(m):
                _s, pos = _read_str(buf, pos)
                _v, pos = _read_str(buf, pos)
                pos += 1
            if version >= 3:
                pos += 1  # config type
                _doc, pos = _read_str(buf, pos)
            configs[key or ""] = (value, source == CONFIG_SOURCE_DEFAULT)
        out.append(ConfigResult(err, msg, rtype, name or "", configs))
    return out, pos


# ----- DescribeLogDirs v1-v5 -----
class LogDirPartition(NamedTuple):
    partition: int
    size: int
    offset_lag: int
    #: a replica being moved between this broker's log directories (not the live one)
    is_future: bool


class LogDir(NamedTuple):
    error_code: int
    path: str
    topics: list[tuple[str, list[LogDirPartition]]]
    #: the volume's total and usable bytes (v4+, Kafka 3.3+; -1 when not reported)
    total_bytes: int = -1
    usable_bytes: int = -1


_LOG_DIR_PARTITION = struct.Struct(">iqqb")  # index, size, offset lag, is future
_VOLUME = struct.Struct(">qq")  # total bytes, usable bytes


def describe_log_dirs(version: int, topics: Mapping[str, Sequence[int]]) -> Request:
    """The sizes of these partitions' replicas in each log directory of the broker."""
    flexible = _check(API_DESCRIBE_LOG_DIRS, version)
    parts = [_count(len(topics), flexible)]
    for t, ps in topics.items():
        parts += [_string(t, flexible), _count(len(ps), flexible)]
        parts += [_I32.pack(p) for p in ps]
        if flexible:
            parts.append(b"\x00")
    if flexible:
        parts.append(b"\x00")
    return Request(API_DESCRIBE_LOG_DIRS, version, b"".join(parts), _decode_describe_log_dirs)


def _decode_describe_log_dirs(buf: Buf, pos: int, version: int
                              ) -> tuple[tuple[int, list[LogDir]], int]:
    """(error code, log directories)."""
    flexible = version >= FLEXIBLE_FROM[API_DESCRIBE_LOG_DIRS]
    read = _str_reader(flexible)
    pos += 4  # throttle time
    err = 0
    if version >= 3:
        (err,) = _I16.unpack_from(buf, pos)
        pos += 2
    n, pos = _read_count(buf, pos, flexible)
    out: list[LogDir] = []
    for _ in range(n):
        (dir_err,) = _I16.unpack_from(buf, pos)
        path, pos = read(buf, pos + 2)
        n_topics, pos = _read_count(buf, pos, flexible)
        topics: list[tuple[str, list[LogDirPartition]]] = []
        for _ in range(n_topics):
            name, pos = read(buf, pos)
            n_parts, pos = _read_count(buf, pos, flexible)
            parts: list[LogDirPartition] = []
            for _ in range(n_parts):
                p, size, lag, future = _LOG_DIR_PARTITION.unpack_from(buf, pos)
                pos += _LOG_DIR_PARTITION.size
                if flexible:
                    pos = _skip_tags(buf, pos)
                parts.append(LogDirPartition(p, size, lag, bool(future)))
            if flexible:
                pos = _skip_tags(buf, pos)
            topics.append((name or "", parts))
        total = usable = -1
        if version >= 4:
            total, usable = _VOLUME.unpack_from(buf, pos)
            pos += _VOLUME.size
        if version >= 5:
            pos += 1  # is cordoned
        if flexible:
            pos = _skip_tags(buf, pos)
        out.append(LogDir(dir_err, path or "", topics, total, usable))
    if flexible:
        pos = _skip_tags(buf, pos)
    return (err, out), pos


# ----- record batches (magic v2) -----
CODEC_NONE, CODEC_GZIP = 0, 1
_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TIMESTAMP_LOG_APPEND = 0x08
TRANSACTIONAL, CONTROL = 0x10, 0x20

# base offset, batch length, partition leader epoch, magic, crc, attributes,
# last offset delta, base timestamp, max timestamp, producer id, producer epoch,
# base sequence, record count
_BATCH = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = _BATCH.size  # 61
_LOG_OVERHEAD = 12  # base offset + batch length


class RecordBatch(NamedTuple):
    base_offset: int
    last_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    record_count: int
    #: where this batch's (possibly compressed) records start and end in the buffer
    start: int
    end: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_LOG_APPEND)

    @property
    def codec(self) -> int:
        return self.attributes & 0x07


def record_batches(data: Buf) -> Iterator[RecordBatch]:
    """The complete batches of fetched record data, in order, without decoding records."""
    end_of_data = len(data)
    pos = 0
    while pos + BATCH_HEADER_SIZE <= end_of_data:
        (base, length, _epoch, magic, _crc, attrs, last_delta, base_ts, max_ts,
         _pid, _pepoch, _seq, count) = _BATCH.unpack_from(data, pos)
        if magic != 2:
            raise WireUnsupported(f"record format v{magic} (only v2 is decoded)")
        end = pos + _LOG_OVERHEAD + length
        if length < BATCH_HEADER_SIZE - _LOG_OVERHEAD:
            raise MalformedResponse(f"record batch length {length} too small")
        if end > end_of_data:
            return  # cut short by the fetch size: not an error
        yield RecordBatch(base, base + last_delta, attrs, base_ts, max_ts, count,
                          pos + BATCH_HEADER_SIZE, end)
        pos = end


def batch_records(data: Buf, batch: RecordBatch) -> Iterator[tuple[int, int]]:
    """(offset, timestamp ms) of each record of ``batch``; LogAppendTime batches give
    every record the batch's max timestamp."""
    codec = batch.attributes & 0x07
    if codec == CODEC_NONE:
        buf: Buf = data
        pos, end = batch.start, batch.end
    elif codec == CODEC_GZIP:
        buf = zlib.decompress(data[batch.start:batch.end], 16 + zlib.MAX_WBITS)
        pos, end = 0, len(buf)
    else:
        raise WireUnsupported(f"{_CODECS.get(codec, codec)}-compressed record batch")
    log_append = batch.attributes & TIMESTAMP_LOG_APPEND
    base, base_ts = batch.base_offset, batch.base_timestamp
    for _ in range(batch.record_count):
        if pos >= end:
            raise MalformedResponse("record batch holds fewer records than it says")
        length, pos = _read_varint(buf, pos)
        next_pos = pos + length
        # attributes (int8, unused), then timestamp delta and offset delta
        ts_delta, p = _read_varint(buf, pos + 1)
        off_delta, p = _read_varint(buf, p)
        yield base + off_delta, (batch.max_timestamp if log_append else base_ts + ts_delta)
        pos = next_pos

