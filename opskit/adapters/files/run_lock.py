"""A lock held for the whole of a playbook run, so a second run refuses at once.

An exclusive, non-blocking ``flock`` on a file in the run's directory. The kernel
drops it when the holding process ends, ``kill -9`` included, so a stale lock file
left by a killed run never blocks the next run or a resume: only a live holder does.
The file names the holder (pid, host, start time, command) for the refusal message,
and on a second line the command that resumes the run (for ``playbook status`` once
the holder is gone); it holds no secret.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from opskit.errors import RefusedError

_HOLDER = re.compile(r"^pid (\d+) on (\S+) since ")
_RESUME = "resume: "


class RunLock:
    """``with RunLock(path, "scale-out so-1234"):`` holds the lock or raises RefusedError.
    ``resume``: the command that continues this run, written for :func:`probe`."""

    def __init__(self, path: Path, what: str, resume: str | None = None) -> None:
        self.path, self.what, self.resume = path, what, resume
        self._fd: int | None = None

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd).splitlines()
            os.close(fd)
            raise RefusedError(f"another run is active ({holder[0] if holder else 'holder unknown'}; "
                               f"lock {self.path}): wait for it, or stop it with 'opskit playbook "
                               "abort'") from None
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        text = f"pid {os.getpid()} on {socket.gethostname()} since {now}: {self.what}\n"
        if self.resume:
            text += f"{_RESUME}{self.resume}\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            os.close(self._fd)   # closing drops the flock
            self._fd = None


@dataclass(frozen=True)
class LockProbe:
    """``held``: a live process holds the lock now. ``holder``: the first line the last
    holder wrote ("" when there is no lock file or it is empty); ``pid``/``host``: from
    it (None when unknown); ``resume``: the command it named to resume its run."""

    held: bool
    holder: str = ""
    pid: int | None = None
    host: str | None = None
    resume: str | None = None

    @property
    def pid_gone(self) -> bool:
        """The last holder's process no longer exists on this machine (True when the
        pid is unknown, or it ran on another host: nothing here can be said to run it)."""
        if self.pid is None or self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:   # exists, another user's
            return False
        return False


def probe(path: Path) -> LockProbe:
    """Whether a live process holds the lock at ``path`` (see :class:`LockProbe`).

    Tested with a shared, non-blocking flock that is dropped at once: it fails while the
    exclusive holder lives, and never waits. (A run starting in that same instant is
    refused as if another run were active, and can be started again.)"""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return LockProbe(held=False)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            held = True
        else:
            held = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        lines = _read_holder(fd, 4096).splitlines()
    finally:
        os.close(fd)
    first = lines[0] if lines else ""
    m = _HOLDER.match(first)
    resume = next((ln[len(_RESUME):] for ln in lines[1:] if ln.startswith(_RESUME)), None)
    return LockProbe(held, first, int(m.group(1)) if m else None, m.group(2) if m else None,
                     resume)


def _read_holder(fd: int, size: int = 300) -> str:
    try:
        return os.pread(fd, size, 0).decode(errors="replace").strip()
    except OSError:
        return ""
