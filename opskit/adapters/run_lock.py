"""A lock held for the whole of a playbook run, so a second run refuses at once.

An exclusive, non-blocking ``flock`` on a file in the run's directory. The kernel
drops it when the holding process ends, ``kill -9`` included, so a stale lock file
left by a killed run never blocks the next run or a resume: only a live holder does.
The file names the holder (pid, host, start time, command) for the refusal message;
it holds no secret.
"""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Self

from opskit.errors import RefusedError


class RunLock:
    """``with RunLock(path, "scale-out so-1234"):`` holds the lock or raises RefusedError."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what
        self._fd: int | None = None

    def __enter__(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise RefusedError(f"another run is active ({holder or 'holder unknown'}; lock "
                               f"{self.path}): wait for it, or stop it with 'opskit playbook "
                               "abort'") from None
        now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {now}: "
                      f"{self.what}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is not None:
            os.close(self._fd)   # closing drops the flock
            self._fd = None


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 300, 0).decode(errors="replace").strip()
    except OSError:
        return ""
