"""Processes, binaries and the private network namespace shared by the compat brokers.

Every process started here is a child of the caller, logs to a file in the given
work directory, and is stopped by :meth:`CompatBroker.stop` (also at interpreter
exit, as a safety net).

Brokers that cannot be told which address to bind (the Hanzo gateway, Heraclitus,
StreamNest) run in a :class:`PrivateNetns`: a network namespace that has only a
loopback interface, held open by a ``sleep`` started with ``unshare --net``.
Their ports are reachable from the host only through a relay
(:mod:`opskit.sandbox.compat.relay`) whose listening sockets are created here, on
``127.0.0.1`` in the host namespace, before the relay enters the namespace. This
needs root (``unshare``/``nsenter``) and ``ip`` to bring the namespace's loopback up.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from opskit.adapters.kafka import capabilities
from opskit.errors import SandboxError

INSTALL_HINT = "install it with scripts/install-compat.sh"
LOOPBACK = "127.0.0.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


# --------------------------------------------------------------------------- binaries


def compat_bin_dir() -> Path:
    """Where scripts/install-compat.sh puts the binaries."""
    root = os.environ.get("OPSKIT_CACHE") or str(Path.home() / ".cache" / "opskit")
    return Path(root) / "compat" / "bin"


_ENV_OVERRIDES = {
    "tansu": "OPSKIT_TANSU_BIN",
    "hanzo-stream": "OPSKIT_HANZO_STREAM_BIN",
    "nats-server": "OPSKIT_NATS_SERVER_BIN",
    "heraclitus": "OPSKIT_HERACLITUS_BIN",
    "streamnest": "OPSKIT_STREAMNEST_BIN",
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


def require(name: str, what: str) -> Path:
    p = find_binary(name)
    if p is None:
        env_var = _ENV_OVERRIDES.get(name)
        where = f"{compat_bin_dir()} or PATH" + (f" (or set {env_var})" if env_var else "")
        raise SandboxError(f"{what}: '{name}' not found in {where}; {INSTALL_HINT}")
    return p


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, outside the ephemeral range (the usual
    small race with other servers applies; none with outgoing connections)."""
    from opskit.sandbox.ports import free_port_block

    return free_port_block(1)


def tail(path: Path, lines: int = 12) -> str:
    try:
        data = path.read_bytes()[-8192:].decode("utf-8", "replace")
    except OSError:
        return "<no log>"
    data = _ANSI.sub("", data)
    kept = [ln.strip()[:300] for ln in data.splitlines() if ln.strip()][-lines:]
    return " | ".join(kept) if kept else "<empty log>"


def api_versions(host: str, port: int, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """Ask the broker for its ApiVersions (request v0); returns ``{api_key: (min, max)}``.

    The same probe opskit uses before commands (:mod:`opskit.adapters.kafka.capabilities`).
    Raises ``OSError``/``ConnectionError``/``ValueError`` when the broker does not answer
    with a well-formed, error-free v0 response.
    """
    return capabilities.api_versions(host, port, timeout)


def api_versions_ok(port: int, timeout: float) -> bool:
    try:
        return bool(api_versions(LOOPBACK, port, timeout=timeout))
    except (OSError, ValueError):
        return False


def wait_for_log(proc: subprocess.Popen[bytes], log: Path, needle: str, deadline: float) -> bool:
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


def version_of(binary: Path, *args: str) -> str:
    try:
        out = subprocess.run(
            [os.fspath(binary), *args], capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    text = (out.stdout or out.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0] if text else ""


def prepare(workdir: Path, port: int | None) -> tuple[Path, int]:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir.resolve(), port if port is not None else free_port()


# --------------------------------------------------------------------------- broker handle

_LIVE: list[CompatBroker] = []
_LIVE_LOCK = threading.Lock()


@dataclass
class _Spawn:
    cmd: list[str]
    env: dict[str, str] | None
    cwd: Path


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
    #: extra addresses reachable from the host (e.g. ``{"http": "127.0.0.1:P"}``)
    extra: dict[str, str] = field(default_factory=dict)
    _procs: list[tuple[str, subprocess.Popen[bytes]]] = field(
        default_factory=list, repr=False, compare=False
    )
    _spawns: dict[str, _Spawn] = field(default_factory=dict, repr=False, compare=False)
    #: waits until the broker answers again after a restart (set by its launcher)
    _ready: Callable[[float], bool] | None = field(default=None, repr=False, compare=False)

    def alive(self) -> bool:
        return bool(self._procs) and all(p.poll() is None for _, p in self._procs)

    def log_tail(self, lines: int = 12) -> str:
        return "; ".join(f"[{role}] {tail(path, lines)}" for role, path in self.logs.items())

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every process (last started first): SIGTERM, then SIGKILL after ``timeout``."""
        procs, self._procs = self._procs, []
        for _role, p in reversed(procs):
            _terminate(p, timeout)
        with _LIVE_LOCK:
            _LIVE[:] = [b for b in _LIVE if b is not self]

    def restart(self, role: str = "broker", timeout: float = 60.0) -> None:
        """Stop the process of ``role`` (SIGTERM, as an operator's restart does) and start it
        again with the same command line; the namespace, relay and other processes stay.
        Returns once the broker answers again."""
        spawn = self._spawns.get(role)
        old = [p for r, p in self._procs if r == role]
        if spawn is None or not old:
            raise SandboxError(f"{self.name}: no running {role} process to restart")
        for p in old:
            _terminate(p, timeout=15.0)
        self._procs = [(r, p) for r, p in self._procs if r != role]
        self._spawn(role, spawn.cmd, env=spawn.env, cwd=spawn.cwd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise self._fail(f"{role} exited during restart")
            if self._ready is None or self._ready(2.0):
                return
            time.sleep(0.2)
        raise self._fail(f"not answering {timeout:.0f}s after the restart of {role}")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # used by the launchers -------------------------------------------------------------
    def _spawn(
        self,
        role: str,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        env: dict[str, str] | None = None,
        pass_fds: Sequence[int] = (),
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        log = self.workdir / f"{self.name}-{role}.log"
        argv = [os.fspath(c) for c in cmd]
        where = cwd or self.workdir
        with open(log, "ab") as fh:
            try:
                p = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    cwd=where,
                    env=env,
                    pass_fds=tuple(pass_fds),
                )
            except OSError as e:
                raise SandboxError(f"{self.name}: cannot start {role} ({argv[0]}): {e}") from e
        self._procs.append((role, p))
        if not pass_fds:  # a process holding inherited sockets cannot be restarted alone
            self._spawns[role] = _Spawn(argv, env, where)
        self.pids[role] = p.pid
        self.logs[role] = log
        return p

    def _fail(self, what: str) -> SandboxError:
        text = self.log_tail()
        self.stop(timeout=5.0)
        return SandboxError(f"{self.name}: {what}; log tail: {text}")


def _terminate(p: subprocess.Popen[bytes], timeout: float) -> None:
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(timeout=timeout)


def register(b: CompatBroker) -> None:
    with _LIVE_LOCK:
        _LIVE.append(b)


@atexit.register
def _stop_all() -> None:  # pragma: no cover - safety net
    with _LIVE_LOCK:
        live = list(_LIVE)
    for b in live:
        with contextlib.suppress(Exception):
            b.stop(timeout=5.0)


# --------------------------------------------------------------------------- namespace


class PrivateNetns:
    """A network namespace with only loopback, owned by broker ``b`` (role ``netns``)."""

    def __init__(self, b: CompatBroker, deadline: float) -> None:
        self._b = b
        self._nsenter = require("nsenter", f"{b.name} needs a private network namespace")
        unshare = require("unshare", f"{b.name} needs a private network namespace")
        ip = require("ip", f"{b.name} needs a private network namespace")
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
        if not wait_for_log(holder, b.logs["netns"], "netns-ready", deadline):
            raise b._fail(
                "could not create a private network namespace (needs root: unshare --net)"
            )
        self._flag = f"--net=/proc/{holder.pid}/ns/net"

    def spawn(
        self,
        role: str,
        cmd: Sequence[str | os.PathLike[str]],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``cmd`` inside the namespace."""
        return self._b._spawn(role, [self._nsenter, self._flag, *cmd], env=env, cwd=cwd)

    def relay(self, listeners: Sequence[tuple[socket.socket, int]]) -> None:
        """Forward each host-side listening socket to ``127.0.0.1:port`` in the namespace.
        The sockets are closed here once the relay holds them."""
        pkg_root = str(Path(__file__).resolve().parents[3])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [pkg_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        fds = [s.fileno() for s, _ in listeners]
        try:
            self._b._spawn(
                "relay",
                [
                    self._nsenter,
                    self._flag,
                    sys.executable,
                    "-m",
                    "opskit.sandbox.compat.relay",
                    *(f"{s.fileno()}:{port}" for s, port in listeners),
                ],
                env=env,
                pass_fds=fds,
            )
        finally:
            for s, _ in listeners:
                s.close()


def loopback_listener(what: str, port: int) -> socket.socket:
    """A listening socket on ``127.0.0.1:port`` in the host namespace (for the relay)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port))
        listener.listen(128)
    except OSError as e:
        listener.close()
        raise SandboxError(f"{what}: cannot listen on {LOOPBACK}:{port}: {e}") from e
    return listener


def wait_until(
    b: CompatBroker, ready: Callable[[float], bool], deadline: float, what: str
) -> None:
    """Poll ``ready`` until it is true; fail (stopping ``b``) if a process exits or time runs out."""
    while time.monotonic() < deadline:
        for role, p in b._procs:
            if p.poll() is not None:
                raise b._fail(f"{role} exited with code {p.returncode} during startup")
        if ready(2.0):
            return
        time.sleep(0.2)
    raise b._fail(f"not {what} on {b.bootstrap} in time")
