"""Launchers of the Kafka-protocol compat brokers: Tansu, the Hanzo Stream gateway, Heraclitus.

* **Tansu** (``tansu broker``, memory storage): one child process listening on
  ``127.0.0.1:PORT``.
* **Hanzo Stream** (a Kafka wire-protocol gateway over NATS JetStream): gateway and
  ``nats-server`` in a private network namespace, reached through the relay on
  ``127.0.0.1:PORT``; the gateway advertises ``127.0.0.1:PORT``, so clients that
  follow Metadata come back through the relay.
* **Heraclitus** (``heraclitus --kafka-port P --http-port Q --storage-path ...``): binds
  0.0.0.0, so it runs in a private namespace too, with its Kafka port and its HTTP
  port (``/health``, ``/metrics``) relayed; it advertises ``127.0.0.1:P``.
  :meth:`CompatBroker.restart` restarts the broker process alone (file storage keeps
  topics and committed offsets; its high watermarks are in memory only).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from opskit.errors import SandboxError
from opskit.sandbox.compat.base import (
    LOOPBACK,
    CompatBroker,
    PrivateNetns,
    api_versions_ok,
    free_port,
    loopback_listener,
    prepare,
    register,
    require,
    version_of,
    wait_for_log,
    wait_until,
)

#: client port of nats-server inside the gateway's private namespace (no clash possible)
_NATS_PORT_IN_NS = 4222


def start_tansu(
    workdir: Path,
    port: int | None = None,
    *,
    timeout: float = 30.0,
    storage: str = "memory://tansu/",
    cluster_id: str = "opskit-compat",
) -> CompatBroker:
    """Start ``tansu broker`` on ``127.0.0.1:port`` (a free port if None), memory storage."""
    binary = require("tansu", "Tansu")
    workdir, port = prepare(workdir, port)
    url = f"tcp://{LOOPBACK}:{port}"
    b = CompatBroker(
        name="tansu",
        bootstrap=f"{LOOPBACK}:{port}",
        port=port,
        workdir=workdir,
        version=version_of(binary, "--version"),
    )
    register(b)
    b._ready = lambda t: api_versions_ok(port, timeout=t)
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "CLUSTER_ID",
            "LISTENER_URL",
            "ADVERTISED_LISTENER_URL",
            "STORAGE_ENGINE",
            "SCHEMA_REGISTRY",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        )
    }
    env["NO_COLOR"] = "1"
    try:
        b._spawn(
            "broker",
            [
                binary,
                "broker",
                "--cluster-id",
                cluster_id,
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                storage,
            ],
            env=env,
        )
        wait_until(b, b._ready, time.monotonic() + timeout, "answering ApiVersions")
        return b
    except BaseException:
        b.stop(timeout=5.0)
        raise


def start_hanzo_stream(
    workdir: Path,
    port: int | None = None,
    *,
    timeout: float = 30.0,
    storage: str = "memory",
) -> CompatBroker:
    """Start nats-server (JetStream) + the Hanzo Stream gateway, reachable on ``127.0.0.1:port``.

    ``storage`` is the JetStream storage type the gateway uses for topic streams
    (``memory`` or ``file``); JetStream's own store dir is under ``workdir``.
    """
    gateway = require("hanzo-stream", "Hanzo Stream gateway")
    nats = require("nats-server", "Hanzo Stream gateway needs NATS JetStream")
    if storage not in ("memory", "file"):
        raise SandboxError(f"Hanzo Stream: storage must be 'memory' or 'file', not {storage!r}")
    workdir, port = prepare(workdir, port)
    listener = loopback_listener("Hanzo Stream", port)  # reserved now; the relay inherits it
    b = CompatBroker(
        name="hanzo-stream",
        bootstrap=f"{LOOPBACK}:{port}",
        port=port,
        workdir=workdir,
        version=version_of(nats, "--version"),
    )
    register(b)
    b._ready = lambda t: api_versions_ok(port, timeout=t)
    try:
        deadline = time.monotonic() + timeout
        ns = PrivateNetns(b, deadline)
        store = workdir / "hanzo-jetstream"
        store.mkdir(exist_ok=True)
        nats_proc = ns.spawn(
            "nats",
            [nats, "-js", "-a", LOOPBACK, "-p", str(_NATS_PORT_IN_NS), "-sd", store,
             "-n", "opskit-compat"],
        )
        if not wait_for_log(nats_proc, b.logs["nats"], "Server is ready", deadline):
            raise b._fail("nats-server did not become ready")
        ns.spawn(
            "broker",
            [gateway, "--pubsub-url", f"nats://{LOOPBACK}:{_NATS_PORT_IN_NS}",
             "--port", str(port), "--host", LOOPBACK, "--admin-port", "0",
             "--storage", storage],
        )
        b.version = f"hanzo-stream gateway 1e7e840 over {b.version or 'nats-server'}"
        ns.relay([(listener, port)])
        wait_until(b, b._ready, deadline, "answering ApiVersions")
        return b
    except BaseException:
        listener.close()
        b.stop(timeout=5.0)
        raise


def start_heraclitus(
    workdir: Path,
    port: int | None = None,
    *,
    storage: str = "file",
    http_port: int | None = None,
    timeout: float = 60.0,
) -> CompatBroker:
    """Start Heraclitus in a private namespace, reachable on ``127.0.0.1:port``.

    ``storage``: ``file`` (a directory under ``workdir``, kept across
    :meth:`CompatBroker.restart`) or ``memory``. The HTTP port (``/health``,
    ``/metrics``) is relayed too: ``b.extra["http"]``.
    """
    binary = require("heraclitus", "Heraclitus")
    if storage not in ("memory", "file"):
        raise SandboxError(f"Heraclitus: storage must be 'memory' or 'file', not {storage!r}")
    workdir, port = prepare(workdir, port)
    if http_port is None:
        http_port = free_port()
    listener = loopback_listener("Heraclitus", port)
    try:
        http_listener = loopback_listener("Heraclitus HTTP", http_port)
    except SandboxError:
        listener.close()
        raise
    b = CompatBroker(
        name="heraclitus",
        bootstrap=f"{LOOPBACK}:{port}",
        port=port,
        workdir=workdir,
        version=version_of(binary, "--version") + " (signaldb b66e54df)",
        extra={"http": f"{LOOPBACK}:{http_port}"},
    )
    register(b)
    b._ready = lambda t: api_versions_ok(port, timeout=t)
    try:
        deadline = time.monotonic() + timeout
        ns = PrivateNetns(b, deadline)
        if storage == "file":
            path = workdir / "heraclitus-data"
            path.mkdir(exist_ok=True)
            where = str(path)
        else:
            where = "memory://"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERACLITUS")}
        env["NO_COLOR"] = "1"
        env.setdefault("RUST_LOG", "info")
        ns.spawn(
            "broker",
            [binary, "--kafka-port", str(port), "--http-port", str(http_port),
             "--storage-path", where],
            env=env,
        )
        ns.relay([(listener, port), (http_listener, http_port)])
        wait_until(b, b._ready, deadline, "answering ApiVersions")
        return b
    except BaseException:
        listener.close()
        http_listener.close()
        b.stop(timeout=5.0)
        raise
