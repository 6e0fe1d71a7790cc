"""Kafka-compatible, non-Apache brokers on loopback, for compatibility tests.

Two brokers are supported (installed by ``scripts/install-compat.sh`` under
``${OPSKIT_CACHE:-~/.cache/opskit}/compat/bin``; see docs/compat-notes.md):

* **Tansu** (``tansu broker``, memory storage): one child process listening on
  ``127.0.0.1:PORT``.
* **Hanzo Stream** (a Kafka wire-protocol gateway over NATS JetStream): the
  gateway binary cannot be told which address to bind and listens on all
  interfaces, so it runs, together with its ``nats-server``, inside a private
  network namespace that has only a loopback interface. A small relay process
  (this module run as ``python -m opskit.sandbox.compat relay``) accepts
  connections on ``127.0.0.1:PORT`` in the host namespace, on a socket created
  here before the relay enters the namespace, and forwards them to the gateway
  at ``127.0.0.1:PORT`` inside it. The gateway advertises ``127.0.0.1:PORT``, so
  clients that follow Metadata come back through the relay. This needs root
  (``unshare``/``nsenter``) and ``ip`` to bring the namespace's loopback up.

Every process started here is a child of the caller, logs to a file in the
given work directory, and is stopped by :meth:`CompatBroker.stop` (also at
interpreter exit, as a safety net). Only the standard library (and opskit's own
ApiVersions probe) is used.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from opskit.adapters import capabilities
from opskit.errors import SandboxError

__all__ = [
    "API_NAMES",
    "CompatBroker",
    "api_versions",
    "compat_bin_dir",
    "find_binary",
    "free_port",
    "start_hanzo_stream",
    "start_tansu",
]

INSTALL_HINT = "install it with scripts/install-compat.sh"
LOOPBACK = "127.0.0.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: client port of nats-server inside the gateway's private namespace (no clash possible)
_NATS_PORT_IN_NS = 4222

#: Kafka API key -> name, for reports of ApiVersions answers.
API_NAMES: dict[int, str] = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    4: "LeaderAndIsr",
    5: "StopReplica",
    6: "UpdateMetadata",
    7: "ControlledShutdown",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    27: "WriteTxnMarkers",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    38: "CreateDelegationToken",
    39: "RenewDelegationToken",
    40: "ExpireDelegationToken",
    41: "DescribeDelegationToken",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    55: "DescribeQuorum",
    56: "AlterPartition",
    57: "UpdateFeatures",
    60: "DescribeCluster",
    61: "DescribeProducers",
    64: "UnregisterBroker",
    65: "DescribeTransactions",
    66: "ListTransactions",
    67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions",
    72: "PushTelemetry",
    74: "ListClientMetricsResources",
    75: "DescribeTopicPartitions",
}


# --------------------------------------------------------------------------- binaries


def compat_bin_dir() -> Path:
    """Where scripts/install-compat.sh puts the binaries."""
    root = os.environ.get("OPSKIT_CACHE") or str(Path.home() / ".cache" / "opskit")
    return Path(root) / "compat" / "bin"


_ENV_OVERRIDES = {
    "tansu": "OPSKIT_TANSU_BIN",
    "hanzo-stream": "OPSKIT_HANZO_STREAM_BIN",
    "nats-server": "OPSKIT_NATS_SERVER_BIN",
}


def find_binary(name: str) -> Path | None:
    """Locate ``name``: env override, the compat bin dir, PATH, then /usr/sbin and /sbin."""
    env_var = _ENV_OVERRIDES.get(name)
    if env_var and os.environ.get(env_var):
        p = Path(os.environ[env_var])
        return p if _is_exe(p) else None
    candidates = [compat_bin_dir() / name]
    which = shutil.which(name)
    if which:
        candidates.append(Path(which))
    candidates += [Path("/usr/sbin") / name, Path("/sbin") / name, Path("/usr/bin") / name]
    for c in candidates:
        if _is_exe(c):
            return c
    return None


def _is_exe(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def _require(name: str, what: str) -> Path:
    p = find_binary(name)
    if p is None:
        env_var = _ENV_OVERRIDES.get(name)
        where = f"{compat_bin_dir()} or PATH" + (f" (or set {env_var})" if env_var else "")
        raise SandboxError(f"{what}: '{name}' not found in {where}; {INSTALL_HINT}")
    return p


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the usual small race applies)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _tail(path: Path, lines: int = 12) -> str:
    try:
        data = path.read_bytes()[-8192:].decode("utf-8", "replace")
    except OSError:
        return "<no log>"
    data = _ANSI.sub("", data)
    kept = [ln.strip()[:300] for ln in data.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept) if kept else "<empty log>"


def api_versions(host: str, port: int, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """Ask the broker for its ApiVersions (request v0); returns ``{api_key: (min, max)}``.

    The same probe opskit uses before commands (:mod:`opskit.adapters.capabilities`).
    Raises ``OSError``/``ConnectionError``/``ValueError`` when the broker does not answer
    with a well-formed, error-free v0 response.
    """
    return capabilities.api_versions(host, port, timeout)


def _api_versions_ok(port: int, timeout: float) -> bool:
    try:
        return bool(api_versions(LOOPBACK, port, timeout=timeout))
    except (OSError, ValueError):
        return False


def _wait_for_log(proc: subprocess.Popen[bytes], log: Path, needle: str, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if needle in log.read_text("utf-8", "replace"):
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- broker handle

_LIVE: list[CompatBroker] = []
_LIVE_LOCK = threading.Lock()


@dataclass
class CompatBroker:
    """A running compat broker. ``pids``/``logs`` are keyed by role (``broker``, ``nats``...)."""

    name: str
    bootstrap: str
    port: int
    workdir: Path
    pids: dict[str, int] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    version: str = ""
    _procs: list[tuple[str, subprocess.Popen[bytes]]] = field(
        default_factory=list, repr=False, compare=False
    )

    def alive(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for _, p in self._procs)

    def log_tail(self, lines: int = 12) -> str:
        return "; ".join(f"[{role}] {_tail(path, lines)}" for role, path in self.logs.items())

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every process (last started first): SIGTERM, then SIGKILL after ``timeout``."""
        procs, self._procs = self._procs, []
        for _role, p in reversed(procs):
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout)
        with _LIVE_LOCK:
            _LIVE[:] = [b for b in _LIVE if b is not self]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # internal ------------------------------------------------------------------------
    def _spawn(
        self,
        role: str,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        env: dict[str, str] | None = None,
        pass_fds: Sequence[int] = (),
    ) -> subprocess.Popen[bytes]:
        log = self.workdir / f"{self.name}-{role}.log"
        with open(log, "ab") as fh:
            try:
                p = subprocess.Popen(
                    [os.fspath(c) for c in cmd],
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    env=env,
                    pass_fds=tuple(pass_fds),
                )
            except OSError as e:
                raise SandboxError(f"{self.name}: cannot start {role} ({cmd[0]}): {e}") from e
        self._procs.append((role, p))
        self.pids[role] = p.pid
        self.logs[role] = log
        return p

    def _fail(self, what: str) -> SandboxError:
        tail = self.log_tail()
        self.stop(timeout=5.0)
        return SandboxError(f"{self.name}: {what}; log tail: {tail}")


def _register(b: CompatBroker) -> None:
    with _LIVE_LOCK:
        _LIVE.append(b)


@atexit.register
def _stop_all() -> None:  # pragma: no cover - safety net
    with _LIVE_LOCK:
        live = list(_LIVE)
    for b in live:
        with contextlib.suppress(Exception):
            b.stop(timeout=5.0)


def _prepare(workdir: Path, port: int | None) -> tuple[Path, int]:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir.resolve(), port if port is not None else free_port()


def _version_of(binary: Path, *args: str) -> str:
    try:
        out = subprocess.run(
            [os.fspath(binary), *args], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""


# --------------------------------------------------------------------------- tansu


def start_tansu(
    workdir: Path,
    port: int | None = None,
    *,
    timeout: float = 30.0,
    storage: str = "memory://tansu/",
    cluster_id: str = "opskit-compat",
) -> CompatBroker:
    """Start ``tansu broker`` on ``127.0.0.1:port`` (a free port if None), memory storage."""
    binary = _require("tansu", "Tansu")
    workdir, port = _prepare(workdir, port)
    url = f"tcp://{LOOPBACK}:{port}"
    b = CompatBroker(
        name="tansu",
        bootstrap=f"{LOOPBACK}:{port}",
        port=port,
        workdir=workdir,
        version=_version_of(binary, "--version"),
    )
    _register(b)
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
        proc = b._spawn(
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
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise b._fail(f"exited with code {proc.returncode} during startup")
            if _api_versions_ok(port, timeout=2.0):
                return b
            time.sleep(0.1)
        raise b._fail(f"not answering ApiVersions on {b.bootstrap} after {timeout:.0f}s")
    except BaseException:
        b.stop(timeout=5.0)
        raise


# --------------------------------------------------------------------------- hanzo stream


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
    gateway = _require("hanzo-stream", "Hanzo Stream gateway")
    nats = _require("nats-server", "Hanzo Stream gateway needs NATS JetStream")
    unshare = _require("unshare", "Hanzo Stream gateway needs a private network namespace")
    nsenter = _require("nsenter", "Hanzo Stream gateway needs a private network namespace")
    ip = _require("ip", "Hanzo Stream gateway needs a private network namespace")
    if storage not in ("memory", "file"):
        raise SandboxError(f"Hanzo Stream: storage must be 'memory' or 'file', not {storage!r}")
    workdir, port = _prepare(workdir, port)

    # Reserve the host-side port now: the relay inherits this very socket.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port))
        listener.listen(128)
    except OSError as e:
        listener.close()
        raise SandboxError(f"Hanzo Stream: cannot listen on {LOOPBACK}:{port}: {e}") from e

    b = CompatBroker(
        name="hanzo-stream",
        bootstrap=f"{LOOPBACK}:{port}",
        port=port,
        workdir=workdir,
        version=_version_of(nats, "--version"),
    )
    _register(b)
    try:
        deadline = time.monotonic() + timeout
        # 1. namespace holder: new net namespace, loopback up, then sleep forever
        holder = b._spawn(
            "netns",
            [
                unshare,
                "--net",
                "sh",
                "-c",
                f'"{ip}" link set lo up || exit 3; echo netns-ready; exec sleep 2147483647',
            ],
        )
        if not _wait_for_log(holder, b.logs["netns"], "netns-ready", deadline):
            raise b._fail(
                "could not create a private network namespace (needs root: unshare --net)"
            )
        ns = f"--net=/proc/{holder.pid}/ns/net"

        # 2. nats-server with JetStream, inside the namespace
        store = workdir / "hanzo-jetstream"
        store.mkdir(exist_ok=True)
        nats_proc = b._spawn(
            "nats",
            [
                nsenter,
                ns,
                nats,
                "-js",
                "-a",
                LOOPBACK,
                "-p",
                str(_NATS_PORT_IN_NS),
                "-sd",
                store,
                "-n",
                "opskit-compat",
            ],
        )
        if not _wait_for_log(nats_proc, b.logs["nats"], "Server is ready", deadline):
            raise b._fail("nats-server did not become ready")

        # 3. the gateway, inside the namespace, advertising the relay's address
        b._spawn(
            "broker",
            [
                nsenter,
                ns,
                gateway,
                "--pubsub-url",
                f"nats://{LOOPBACK}:{_NATS_PORT_IN_NS}",
                "--port",
                str(port),
                "--host",
                LOOPBACK,
                "--admin-port",
                "0",
                "--storage",
                storage,
            ],
        )
        b.version = f"hanzo-stream gateway over {b.version or 'nats-server'}"

        # 4. relay: host 127.0.0.1:port (inherited socket) -> ns 127.0.0.1:port
        pkg_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        b._spawn(
            "relay",
            [
                nsenter,
                ns,
                sys.executable,
                "-m",
                "opskit.sandbox.compat",
                "relay",
                str(listener.fileno()),
                str(port),
            ],
            env=env,
            pass_fds=(listener.fileno(),),
        )
        listener.close()

        while time.monotonic() < deadline:
            for role, p in b._procs:
                if p.poll() is not None:
                    raise b._fail(f"{role} exited with code {p.returncode} during startup")
            if _api_versions_ok(port, timeout=2.0):
                return b
            time.sleep(0.2)
        raise b._fail(f"not answering ApiVersions on {b.bootstrap} after {timeout:.0f}s")
    except BaseException:
        listener.close()
        b.stop(timeout=5.0)
        raise


# --------------------------------------------------------------------------- relay process


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
        client.close()
        return
    upstream.settimeout(None)
    client.settimeout(None)
    t = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    t.start()
    _pipe(client, upstream)
    t.join()
    client.close()
    upstream.close()


def _relay_main(listen_fd: int, target_port: int) -> int:
    """Accept on the inherited listening socket; forward each connection to 127.0.0.1:target."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    lsock = socket.socket(fileno=listen_fd)
    print(f"relay: {lsock.getsockname()} -> {LOOPBACK}:{target_port} (namespace side)", flush=True)
    while True:
        try:
            conn, _ = lsock.accept()
        except InterruptedError:
            continue
        threading.Thread(target=_serve_conn, args=(conn, target_port), daemon=True).start()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "relay":
        sys.exit(_relay_main(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit("usage: python -m opskit.sandbox.compat relay LISTEN_FD TARGET_PORT")
