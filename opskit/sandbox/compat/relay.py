"""TCP relay from the host's loopback into a private network namespace.

Run as ``python -m opskit.sandbox.compat.relay FD:PORT [FD:PORT ...]`` inside the
namespace (through ``nsenter``): each ``FD`` is a listening socket on
``127.0.0.1`` that the parent created in the *host* namespace and passed down;
every connection accepted on it is forwarded to ``127.0.0.1:PORT`` inside the
namespace. Nothing in the namespace is reachable from anywhere else, and the
host side listens on loopback only.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading

LOOPBACK = "127.0.0.1"


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _serve_conn(client: socket.socket, target_port: int) -> None:
    try:
        upstream = socket.create_connection((LOOPBACK, target_port), timeout=5.0)
    except OSError:
        client.close()  # the client sees the connection closed, as with nothing listening
        return
    upstream.settimeout(None)
    client.settimeout(None)
    t = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    t.start()
    _pipe(client, upstream)
    t.join()
    client.close()
    upstream.close()


def _accept_loop(lsock: socket.socket, target_port: int) -> None:
    while True:
        try:
            conn, _ = lsock.accept()
        except InterruptedError:
            continue
        except OSError:
            return
        threading.Thread(target=_serve_conn, args=(conn, target_port), daemon=True).start()


def parse_pairs(args: list[str]) -> list[tuple[int, int]]:
    """``["5:9092", ...]`` -> ``[(5, 9092), ...]``; ValueError on anything else."""
    pairs = []
    for a in args:
        fd, _, port = a.partition(":")
        pairs.append((int(fd), int(port)))
    if not pairs:
        raise ValueError("no FD:PORT pair")
    return pairs


def relay_main(pairs: list[tuple[int, int]]) -> int:
    """Accept on each inherited listening socket; forward to 127.0.0.1:PORT here."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    threads = []
    for fd, port in pairs:
        lsock = socket.socket(fileno=fd)
        print(f"relay: {lsock.getsockname()} -> {LOOPBACK}:{port} (namespace side)", flush=True)
        t = threading.Thread(target=_accept_loop, args=(lsock, port), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    try:
        _pairs = parse_pairs(sys.argv[1:])
    except ValueError:
        sys.exit("usage: python -m opskit.sandbox.compat.relay LISTEN_FD:TARGET_PORT ...")
    sys.exit(relay_main(_pairs))
