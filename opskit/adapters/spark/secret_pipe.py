"""Handing a secret to a child process without a command line, an environment or a file.

``spark-submit`` starts a JVM that starts the Python driver: a password given as an
argument is on three command lines anyone on the host can read (``/proc/PID/cmdline``),
one given in the environment is in the ``environ`` of all three, and one written to a
file stays on disk. Instead, :func:`served_secret` makes a named pipe (FIFO, mode 0600)
in a private directory (0700) and a thread writes the secret into it each time a reader
opens it; the child is given the pipe's *path* and reads the secret from it. Nothing
holds the secret at rest: the pipe has no content on disk and is removed afterwards.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opskit.errors import UnsupportedError

log = logging.getLogger(__name__)

_POLL_S = 0.05


def _serve(path: Path, data: bytes, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until a reader opens it
        except OSError as e:
            if e.errno != errno.ENXIO:
                log.debug("secret pipe %s: %s", path, e.strerror)
                return
            stop.wait(_POLL_S)
            continue
        try:
            os.set_blocking(fd, True)
            os.write(fd, data)
        except OSError as e:  # the reader went away: serve the next one
            log.debug("secret pipe %s: %s", path, e.strerror)
        finally:
            os.close(fd)
        stop.wait(_POLL_S)  # let the reader see end-of-file before the next open


@contextmanager
def served_secret(secret: str, name: str = "secret") -> Iterator[Path]:
    """The path of a FIFO that yields ``secret`` to every reader while the block runs."""
    if not hasattr(os, "mkfifo"):  # pragma: no cover - POSIX only
        raise UnsupportedError("named pipes are not available on this platform")
    d = Path(tempfile.mkdtemp(prefix="opskit-secret-"))  # 0700
    path = d / name
    os.mkfifo(path, 0o600)
    stop = threading.Event()
    t = threading.Thread(target=_serve, args=(path, secret.encode(), stop),
                         name="opskit-secret-pipe", daemon=True)
    t.start()
    try:
        yield path
    finally:
        stop.set()
        t.join(2)
        shutil.rmtree(d, ignore_errors=True)
