"""A fault-injecting Kafka broker double: a proxy in front of a real broker.

Brokers that misbehave (the Hanzo Stream gateway, Heraclitus) cannot be installed
on a fresh machine, so the tests put this proxy between opskit and a real Kafka
sandbox broker and make it misbehave the way they do. The data is real (every
request it lets through is answered by Kafka); the proxy only changes what it
is told to:

* ``advertise``: answer ApiVersions itself with only these API keys (versions
  capped by ``max_versions`` and by what the real broker speaks);
* ``close_on``: close the connection on these API keys (what the Hanzo gateway and
  Heraclitus do for APIs they advertise but do not handle); ``close_unadvertised``
  closes on every key outside ``advertise``;
* ``stall_on`` / ``stall_below``: never answer these keys (below a version): the
  connection stays open, nothing comes back;
* ``garbage_on``: answer with the right correlation id followed by junk;
  ``truncate_on``: send half an answer and then nothing; ``wrong_cid_on``: answer
  with another correlation id;
* ``list_groups_error``: (error code, count): the first ``count`` ListGroups answers carry
  that error code (a group coordinator still starting answers COORDINATOR_NOT_AVAILABLE
  or COORDINATOR_LOAD_IN_PROGRESS), later ones pass unchanged;
* ``delay_s``: hold every answer this long;
* ``stall_all``: accept connections and never read or answer anything;
* ``offset_fetch_all_empty``: an OffsetFetch for "all partitions of the group"
  (topics null) is passed on with an empty topic list, so it returns nothing (the
  Hanzo gateway's answer to librdkafka);
* ``latest_minus``: ListOffsets (latest) answers that many less than the truth (a
  broker misreporting its log end, as Tansu 0.6 does); ``high_watermark_plus``: every
  Fetch answer's high watermark that many more (a high watermark no record backs).
  Both need ``max_versions`` to keep ListOffsets at v5 and Fetch at v11 or below
  (:func:`misreporting`), whose formats the proxy rewrites.

Broker addresses in answers (Metadata, FindCoordinator) are rewritten to the
proxy's, so clients that follow them come back through it. Loopback only, a free
port, threads only; :meth:`BrokerDouble.close` stops everything.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import struct
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Self

from opskit.adapters.kafka.capabilities import api_versions

API_VERSIONS, OFFSET_FETCH, LIST_OFFSETS, FETCH, LIST_GROUPS = 18, 9, 2, 1, 16
#: every API key a client may send (for "all but ApiVersions" behaviours)
ALL_APIS = frozenset(range(80)) - {API_VERSIONS}

#: the Hanzo Stream gateway's 14 APIs and the highest version it advertises of each (seed 000)
HANZO_APIS: Mapping[int, int] = {
    0: 11, 1: 12, 2: 9, 3: 12, 8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 14: 5, 18: 4, 19: 7, 22: 5, 32: 4,
}


@dataclass(frozen=True)
class Behaviour:
    advertise: frozenset[int] | None = None
    max_versions: Mapping[int, int] = field(default_factory=dict)
    close_unadvertised: bool = True
    close_on: frozenset[int] = frozenset()
    stall_on: frozenset[int] = frozenset()
    #: api key -> first version that is answered (lower versions stall)
    stall_below: Mapping[int, int] = field(default_factory=dict)
    garbage_on: frozenset[int] = frozenset()
    truncate_on: frozenset[int] = frozenset()
    wrong_cid_on: frozenset[int] = frozenset()
    delay_s: float = 0.0
    stall_all: bool = False
    offset_fetch_all_empty: bool = False
    latest_minus: int = 0
    high_watermark_plus: int = 0
    list_groups_error: tuple[int, int] = (0, 0)

    def action(self, api: int, version: int) -> str:
        if api == API_VERSIONS and self.advertise is not None:
            return "answer"
        if api in self.close_on or (self.advertise is not None and self.close_unadvertised
                                    and api not in self.advertise):
            return "close"
        if api in self.stall_on or version < self.stall_below.get(api, -1):
            return "stall"
        for name, keys in (("garbage", self.garbage_on), ("truncate", self.truncate_on),
                           ("wrong_cid", self.wrong_cid_on)):
            if api in keys:
                return name
        return "forward"


def hanzo_gateway() -> Behaviour:
    """The gateway as docs/compat-notes.md records it: its 14 APIs only, the connection
    closed on any other, CreateTopics / DescribeConfigs in their non-flexible versions
    never answered (it decodes them as flexible), nothing for a whole-group OffsetFetch."""
    return Behaviour(advertise=frozenset(HANZO_APIS), max_versions=HANZO_APIS,
                     stall_below={19: 5, 32: 4}, offset_fetch_all_empty=True)


def misreporting(upstream_apis: Iterable[int], latest_minus: int = 0,
                 high_watermark_plus: int = 0) -> Behaviour:
    """Every API of the real broker, ListOffsets capped at v5 and Fetch at v11 (the
    versions whose answers the proxy rewrites), with the log end misreported."""
    return Behaviour(advertise=frozenset(upstream_apis), max_versions={2: 5, 1: 11},
                     latest_minus=latest_minus, high_watermark_plus=high_watermark_plus)


_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def _str_at(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _I16.unpack_from(buf, pos)
    return buf[pos + 2:pos + 2 + max(n, 0)].decode(), pos + 2 + max(n, 0)


def _latest_asked(req: bytes) -> set[tuple[str, int]]:
    """The partitions a ListOffsets v1-v5 request asks the latest offset of."""
    version = _I16.unpack_from(req, 2)[0]
    (cid_len,) = _I16.unpack_from(req, 8)
    pos = 10 + max(cid_len, 0) + 4 + (1 if version >= 2 else 0)
    out: set[tuple[str, int]] = set()
    (n_topics,) = _I32.unpack_from(req, pos)
    pos += 4
    for _ in range(n_topics):
        topic, pos = _str_at(req, pos)
        (n_parts,) = _I32.unpack_from(req, pos)
        pos += 4
        for _ in range(n_parts):
            (p,) = _I32.unpack_from(req, pos)
            pos += 4 + (4 if version >= 4 else 0)
            (ts,) = _I64.unpack_from(req, pos)
            pos += 8
            if ts == -1:
                out.add((topic, p))
    return out


def _list_offsets_minus(resp: bytes, version: int, latest: set[tuple[str, int]], minus: int) -> bytes:
    """A ListOffsets v1-v5 answer with the asked latest offsets lowered by ``minus``."""
    b = bytearray(resp)
    pos = 4 + (4 if version >= 2 else 0)  # correlation id, throttle time
    (n_topics,) = _I32.unpack_from(b, pos)
    pos += 4
    for _ in range(n_topics):
        topic, pos = _str_at(bytes(b), pos)
        (n_parts,) = _I32.unpack_from(b, pos)
        pos += 4
        for _ in range(n_parts):
            (p,) = _I32.unpack_from(b, pos)
            at = pos + 4 + 2 + 8  # partition, error code, timestamp
            (off,) = _I64.unpack_from(b, at)
            if (topic, p) in latest and off > 0:
                _I64.pack_into(b, at, max(off - minus, 0))
            pos = at + 8 + (4 if version >= 4 else 0)
    return bytes(b)


def _fetch_high_watermark_plus(resp: bytes, version: int, plus: int) -> bytes:
    """A Fetch v4-v11 answer with every partition's high watermark raised by ``plus``."""
    b = bytearray(resp)
    pos = 4 + 4 + (6 if version >= 7 else 0)  # correlation id, throttle, error + session
    (n_topics,) = _I32.unpack_from(b, pos)
    pos += 4
    for _ in range(n_topics):
        _topic, pos = _str_at(bytes(b), pos)
        (n_parts,) = _I32.unpack_from(b, pos)
        pos += 4
        for _ in range(n_parts):
            (err,) = _I16.unpack_from(b, pos + 4)
            (hw,) = _I64.unpack_from(b, pos + 6)
            if not err and hw >= 0:
                _I64.pack_into(b, pos + 6, hw + plus)
            pos += 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)  # + last stable, log start
            (n_aborted,) = _I32.unpack_from(b, pos)
            pos += 4 + 16 * max(n_aborted, 0)
            pos += 4 if version >= 11 else 0  # preferred read replica
            (size,) = _I32.unpack_from(b, pos)
            pos += 4 + max(size, 0)
    return bytes(b)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    return _recv_exact(sock, size)


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _offset_fetch_all_to_empty(req: bytes) -> bytes:
    """An OffsetFetch request (header + body) with every null topic list made empty."""
    api, version = struct.unpack_from(">hh", req, 0)
    assert api == OFFSET_FETCH
    (cid_len,) = struct.unpack_from(">h", req, 8)
    pos = 10 + max(cid_len, 0)
    b = bytearray(req)
    if version < 6:  # group (string), topics (int32 count, -1 null)
        if version < 2:
            return req
        (glen,) = struct.unpack_from(">h", req, pos)
        pos += 2 + glen
        if struct.unpack_from(">i", req, pos)[0] == -1:
            b[pos:pos + 4] = struct.pack(">i", 0)
        return bytes(b)
    n_tags, pos = _read_uvarint(req, pos)  # request header tagged fields
    for _ in range(n_tags):
        _tag, pos = _read_uvarint(req, pos)
        size, pos = _read_uvarint(req, pos)
        pos += size
    if version < 8:
        glen, pos = _read_uvarint(req, pos)
        pos += glen - 1
        if b[pos] == 0:
            b[pos] = 1
        return bytes(b)
    n_groups, pos = _read_uvarint(req, pos)
    for _ in range(n_groups - 1):
        glen, pos = _read_uvarint(req, pos)
        pos += glen - 1
        if version >= 9:
            mlen, pos = _read_uvarint(req, pos)  # member id (compact nullable)
            pos += max(mlen - 1, 0) + 4  # + member epoch
        if b[pos] == 0:  # null topics: all partitions
            b[pos] = 1
            pos += 1
        else:
            n_topics, pos = _read_uvarint(req, pos)
            for _ in range(n_topics - 1):
                tlen, pos = _read_uvarint(req, pos)
                pos += tlen - 1
                n_parts, pos = _read_uvarint(req, pos)
                pos += 4 * max(n_parts - 1, 0)
                pos += 1  # topic tags (none)
        pos += 1  # group tags (none)
    return bytes(b)


class BrokerDouble:
    """The proxy: ``with BrokerDouble(upstream, behaviour) as d: ... d.bootstrap``."""

    def __init__(self, upstream: str | None, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.upstream: tuple[str, int] | None = None
        self._upstream_versions: dict[int, tuple[int, int]] = {}
        if upstream is not None:
            host, _, port = upstream.split(",")[0].rpartition(":")
            self.upstream = (host, int(port))
            if behaviour.advertise is not None:
                self._upstream_versions = api_versions(host, int(port), 10.0)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port: int = self._listener.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._socks: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._list_groups_errors_sent = 0
        self.requests: list[tuple[int, int, str]] = []  # (api key, version, action)
        self._thread = threading.Thread(target=self._accept, name="broker-double", daemon=True)
        self._thread.start()

    # ----- lifecycle -----
    def close(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            socks, self._socks = list(self._socks), set()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self._thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _track(self, s: socket.socket) -> socket.socket:
        with self._lock:
            self._socks.add(s)
        return s

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    # ----- one connection -----
    def _hold(self, sock: socket.socket) -> None:
        """Keep the connection open, answering nothing, until the client goes or we stop."""
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([sock], [], [], 0.2)
                if ready and not sock.recv(65536):
                    return
            except (OSError, ValueError):
                return

    def _serve(self, client: socket.socket) -> None:
        up: socket.socket | None = None
        b = self.behaviour
        try:
            if b.stall_all:
                self._hold(client)
                return
            while not self._stop.is_set():
                req = _read_frame(client)
                b = self.behaviour  # per request: a test may change it between cycles
                api, version, cid = struct.unpack_from(">hhi", req, 0)
                act = b.action(api, version)
                self.requests.append((api, version, act))
                if act == "close":
                    return
                if act == "stall":
                    self._hold(client)
                    return
                if act == "answer":
                    self._pause()
                    client.sendall(_frame(self._api_versions(version, cid)))
                    continue
                if api == OFFSET_FETCH and b.offset_fetch_all_empty:
                    req = _offset_fetch_all_to_empty(req)
                if up is None:
                    assert self.upstream is not None, "no upstream broker"
                    up = self._track(socket.create_connection(self.upstream, timeout=30))
                up.sendall(_frame(req))
                resp = self._rewrite_addresses(_read_frame(up))
                if api == LIST_OFFSETS and b.latest_minus:
                    resp = _list_offsets_minus(resp, version, _latest_asked(req), b.latest_minus)
                if api == FETCH and b.high_watermark_plus:
                    resp = _fetch_high_watermark_plus(resp, version, b.high_watermark_plus)
                if api == LIST_GROUPS and self._take_list_groups_error():
                    # the error code after the correlation id, the flexible versions' empty
                    # header tags (v3+) and the throttle time (v1+)
                    at = 4 + (1 if version >= 3 else 0) + (4 if version >= 1 else 0)
                    resp = resp[:at] + struct.pack(">h", b.list_groups_error[0]) + resp[at + 2:]
                self._pause()
                if act == "garbage":
                    junk = os.urandom(64) + b"\xff" * 64
                    client.sendall(_frame(resp[:4] + junk))
                elif act == "truncate":
                    whole = _frame(resp)
                    client.sendall(whole[:max(len(whole) // 2, 5)])
                    self._hold(client)
                    return
                elif act == "wrong_cid":
                    client.sendall(_frame(struct.pack(">i", cid + 7919) + resp[4:]))
                else:
                    client.sendall(_frame(resp))
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            for s in (client, up):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()

    def _take_list_groups_error(self) -> bool:
        with self._lock:
            if self._list_groups_errors_sent >= self.behaviour.list_groups_error[1]:
                return False
            self._list_groups_errors_sent += 1
            return True

    def _pause(self) -> None:
        if self.behaviour.delay_s > 0:
            self._stop.wait(self.behaviour.delay_s)

    def _rewrite_addresses(self, resp: bytes) -> bytes:
        if self.upstream is None:
            return resp
        host, port = self.upstream
        old = host.encode() + struct.pack(">i", port)
        return resp.replace(old, host.encode() + struct.pack(">i", self.port))

    def _advertised(self) -> list[tuple[int, int, int]]:
        b = self.behaviour
        assert b.advertise is not None
        out = []
        for key in sorted(b.advertise):
            lo, hi = self._upstream_versions.get(key, (0, -1))
            hi = min(hi, b.max_versions.get(key, hi))
            if hi >= lo:
                out.append((key, lo, hi))
        return out

    def _api_versions(self, version: int, cid: int) -> bytes:
        apis = self._advertised()
        if version < 3:
            body = struct.pack(">ihi", cid, 0, len(apis)) + b"".join(
                struct.pack(">hhh", *a) for a in apis)
            return body + (struct.pack(">i", 0) if version >= 1 else b"")
        return (struct.pack(">ih", cid, 0) + _uvarint(len(apis) + 1)
                + b"".join(struct.pack(">hhh", *a) + b"\x00" for a in apis)
                + struct.pack(">i", 0) + b"\x00")

