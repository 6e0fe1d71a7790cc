"""Loopback ports for local clusters and test services: free, open, and a free block
below the kernel's ephemeral range."""

from __future__ import annotations

import socket

from opskit.errors import SandboxError

CONTROLLER_PORT_OFFSET = 1000


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _ephemeral_low(default: int = 32768) -> int:
    """The first port of the kernel's range for outgoing connections' local ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_port_block(count: int, start: int = 10000, end: int | None = None) -> int:
    """A base port such that base..base+count-1 and base+1000.. are all free, below the
    kernel's ephemeral range: a port checked free there can be taken by any client's
    outgoing connection in the seconds a JVM takes to bind it ("Address already in use"
    on a busy machine)."""
    import random

    top = min(end, _ephemeral_low()) if end is not None else _ephemeral_low()
    if top - CONTROLLER_PORT_OFFSET - count <= start:  # an odd ephemeral range: old behaviour
        top = end or 60000
    rnd = random.Random()
    for _ in range(500):
        base = rnd.randrange(start, top - CONTROLLER_PORT_OFFSET - count)
        ports = [base + i for i in range(count)] + [base + CONTROLLER_PORT_OFFSET]
        if all(port_free(p) for p in ports):
            return base
    raise SandboxError("could not find free loopback ports for the sandbox")
