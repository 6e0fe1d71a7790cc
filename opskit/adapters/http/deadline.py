"""A wall-clock deadline for one HTTP exchange: connect, TLS handshake, request and
answer together, retries included.

urllib3's timeouts are per socket operation: an endpoint that sends one byte of its
handshake or its answer every few seconds resets them forever, and each retry starts
them again (the Kubernetes client retries three times, PagerDuty's package too). Here
every socket a client opens or reuses inside ``with deadline(seconds)`` is registered,
and when the deadline passes a timer shuts them down (``shutdown(SHUT_RDWR)`` wakes a
blocked read or handshake at once), including sockets opened later by a retry.
``Watch.expired`` then tells the caller that the deadline, not the server, ended it.

Clients opt in through :func:`install` (a urllib3 ``PoolManager``: the Kubernetes
client). PagerDuty's package speaks httpx, which has no such hook: its attempts are
bounded by :func:`call_within` instead.
"""

from __future__ import annotations

import contextvars
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection

T = TypeVar("T")


class Watch:
    """The sockets of one exchange and whether its deadline passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def add(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            if not self.expired:
                self._socks.append(sock)
                return
        _shut(sock)  # a retry after the deadline ends at once

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            socks, self._socks = self._socks, []
        for s in socks:
            _shut(s)


def _shut(sock: socket.socket) -> None:
    try:  # the descriptor itself (an SSLSocket's own shutdown would drop its TLS state)
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


_current: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("http_deadline",
                                                                       default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[Watch]:
    """Every socket used in this block (by a client set up with :func:`install` or
    :class:`DeadlineAdapter`) is shut down ``seconds`` after the block started."""
    watch = Watch(seconds)
    token = _current.set(watch)
    watch._timer.start()
    try:
        yield watch
    finally:
        watch._timer.cancel()
        _current.reset(token)


class DeadlinePassed(TimeoutError):
    """:func:`call_within` gave up waiting."""


def call_within(seconds: float, fn: Callable[[], T]) -> T:
    """``fn()`` in a worker thread, given up after ``seconds`` (``TimeoutError``). The
    worker is left to end on its own (a daemon thread; its socket closes when the server
    or the process ends it): for clients without a socket hook, whose calls are few.
    :class:`DeadlinePassed` when it did not end in time."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box.append((False, e))

    worker = threading.Thread(target=run, name="http-deadline", daemon=True)
    worker.start()
    worker.join(seconds)
    if not box:
        raise DeadlinePassed(f"no answer within {seconds:g}s")
    ok, value = box[0]
    if ok:
        return cast(T, value)
    raise value


def _register(sock: socket.socket | None) -> None:
    watch = _current.get()
    if watch is not None:
        watch.add(sock)


class _Connection(HTTPConnection):
    # _new_conn opens the TCP socket (before any TLS handshake on it): urllib3 1.x and 2.x
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)  # a kept-alive connection reused in a new exchange
        super().request(*args, **kwargs)


class _TlsConnection(HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _register(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self.sock)
        super().request(*args, **kwargs)


class _Pool(HTTPConnectionPool):
    ConnectionCls = _Connection


class _TlsPool(HTTPSConnectionPool):
    ConnectionCls = _TlsConnection


def install(manager: PoolManager) -> None:
    """Make ``manager``'s connections obey :func:`deadline`."""
    manager.pool_classes_by_scheme = {"http": _Pool, "https": _TlsPool}

