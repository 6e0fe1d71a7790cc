"""StreamNest brokers (HTTP only) in a private network namespace, for compatibility tests.

Each broker is its own process, ``streamnest broker --id=N --port=P --peers=...``
(``--count`` is never used: it kills whatever listens on ports 8080.. first). A
broker names itself ``localhost:P`` in its partition ownership and forwards
produce/consume requests to the owner, so the peers are given as ``localhost:Q``
too. Every broker binds all interfaces, so all of them run in one private
namespace; one relay forwards each ``127.0.0.1:P`` on the host to the same port
inside, which keeps the owner addresses the brokers publish (``localhost:P``)
valid on the host. Each broker keeps its logs under ``data/`` in its own
directory (``workdir/broker-N``).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from opskit.errors import SandboxError
from opskit.sandbox.compat.base import (
    LOOPBACK,
    CompatBroker,
    PrivateNetns,
    free_port,
    loopback_listener,
    prepare,
    register,
    require,
    wait_until,
)


@dataclass
class StreamNestCluster:
    """A running StreamNest cluster; ``bootstrap`` is how opskit is pointed at it."""

    handle: CompatBroker
    ports: list[int]

    @property
    def urls(self) -> list[str]:
        return [f"http://{LOOPBACK}:{p}" for p in self.ports]

    @property
    def bootstrap(self) -> str:
        """``http://127.0.0.1:P1,http://127.0.0.1:P2,...``: opskit's ``-b`` for StreamNest."""
        return ",".join(self.urls)

    @property
    def version(self) -> str:
        return self.handle.version

    def alive(self) -> bool:
        return self.handle.alive()

    def stop(self, timeout: float = 10.0) -> None:
        self.handle.stop(timeout)

    def restart_broker(self, index: int, timeout: float = 30.0) -> None:
        self.handle.restart(f"broker-{index + 1}", timeout)

    # small HTTP client for tests: what a StreamNest user would do with curl -----------
    def request(self, path: str, body: dict[str, Any] | None = None, index: int = 0) -> Any:
        url = self.urls[index] + path
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            url, data=data, headers={"Content-Type": "application/json"} if data else {}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw.strip() else None

    def create_topic(self, topic: str, partitions: int, index: int = 0) -> None:
        self.request("/create-topic", {"topic": topic, "partitions": partitions}, index)

    def produce(self, topic: str, message: str, partition: int | None = None,
                index: int = 0) -> int:
        body: dict[str, Any] = {"topic": topic, "message": message}
        if partition is not None:
            body["partition"] = partition
        return int(self.request("/produce", body, index)["offset"])

    def consume(self, topic: str, partition: int, offset: int, index: int = 0) -> Any:
        return self.request(f"/consume?topic={topic}&partition={partition}&offset={offset}",
                            index=index)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _metadata_ok(port: int, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/metadata", timeout=timeout) as r:
            return r.status == 200 and isinstance(json.loads(r.read()), dict)
    except (OSError, ValueError, urllib.error.URLError):
        return False


def start_streamnest(
    workdir: Path,
    brokers: int = 3,
    ports: list[int] | None = None,
    *,
    timeout: float = 30.0,
) -> StreamNestCluster:
    """Start ``brokers`` StreamNest brokers, each on its own (``--id/--port/--peers``)."""
    binary = require("streamnest", "StreamNest")
    if not 1 <= brokers <= 5:
        raise SandboxError(f"StreamNest: 1 to 5 brokers, not {brokers}")
    workdir, first = prepare(workdir, ports[0] if ports else None)
    wanted = list(ports) if ports else [first] + [free_port() for _ in range(brokers - 1)]
    if len(wanted) != brokers or len(set(wanted)) != brokers:
        raise SandboxError(f"StreamNest: {brokers} distinct ports needed, got {wanted}")
    listeners = []
    try:
        for p in wanted:
            listeners.append(loopback_listener("StreamNest", p))
    except SandboxError:
        for s in listeners:
            s.close()
        raise
    b = CompatBroker(
        name="streamnest",
        bootstrap=",".join(f"http://{LOOPBACK}:{p}" for p in wanted),
        port=wanted[0],
        workdir=workdir,
        version=f"StreamNest d9c4126 ({brokers} brokers)",
    )
    register(b)
    b._ready = lambda t: all(_metadata_ok(p, t) for p in wanted)
    try:
        deadline = time.monotonic() + timeout
        ns = PrivateNetns(b, deadline)
        for i, p in enumerate(wanted):
            home = workdir / f"broker-{i + 1}"
            home.mkdir(exist_ok=True)
            peers = ",".join(f"localhost:{q}" for q in wanted if q != p)
            ns.spawn(
                f"broker-{i + 1}",
                [binary, "broker", f"--id={i + 1}", f"--port={p}", f"--peers={peers}"],
                cwd=home,
            )
        ns.relay([(s, p) for s, p in zip(listeners, wanted, strict=True)])
        wait_until(b, b._ready, deadline, "answering /metadata")
        return StreamNestCluster(b, wanted)
    except BaseException:
        for s in listeners:
            s.close()
        b.stop(timeout=5.0)
        raise
