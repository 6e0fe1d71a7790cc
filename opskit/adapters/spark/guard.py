"""A guard process that ties ``spark-submit`` and everything it starts to opskit's life.

``opskit replay`` runs ``spark-submit`` through this guard::

    python -m opskit.adapters.spark.guard -- spark-submit ...

The guard leads a session of its own (the caller starts it with
``start_new_session=True``), so a Ctrl-C typed at the terminal reaches opskit only,
and opskit decides. It starts ``spark-submit`` in its process group; Spark's driver
JVM and the Python processes it forks stay in that group. The guard's standard input
is a pipe whose write end only opskit holds: when opskit exits for any reason --
a normal return, an exception, SIGTERM, or a SIGKILL that runs no code at all -- the
kernel closes that end, the guard reads end-of-file and stops the whole group
(SIGTERM, then SIGKILL after :data:`GRACE_SECONDS`). When ``spark-submit`` ends on its
own, the guard stops whatever it left in the group and exits with its exit code.

A second line of defence for the guard itself being killed (SIGKILL, the OOM killer):
on Linux ``spark-submit`` is started with ``PR_SET_PDEATHSIG`` = SIGTERM, so the kernel
sends it SIGTERM when the guard dies (the setting survives ``exec``, so it reaches the
driver JVM that the ``spark-submit`` script execs); the JVM's shutdown hook then stops
the Spark application.

On a Spark standalone cluster in client mode the driver is local, so stopping it
ends the application (the master then stops its executors). On Kubernetes in cluster
mode the driver runs in a pod: stopping ``spark-submit`` does not stop that pod
(``docs/replay.md`` says how to delete it).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

#: seconds between SIGTERM and SIGKILL when the group is stopped
GRACE_SECONDS = 10.0


#: prctl(2) option: the signal this process gets when its parent dies
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGTERM when ``parent`` dies (Linux
    ``prctl(PR_SET_PDEATHSIG)``); None where prctl is not available."""
    if not sys.platform.startswith("linux"):  # pragma: no cover - Linux only
        return None
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return None

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the guard died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member we may not signal still exists
        return True
    return True


def _others_in_group(pgid: int) -> list[int] | None:
    """The live (not zombie) processes of group ``pgid`` other than this guard; None when
    /proc cannot be read (the caller falls back to signalling the group)."""
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:  # pragma: no cover - no /proc
        return None
    out: list[int] = []
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # fields after the command name (which may hold spaces and parentheses)
        rest = stat[stat.rfind(b")") + 2:].split()
        if len(rest) > 2 and rest[0] != b"Z" and int(rest[2]) == pgid:
            out.append(int(name))
    return out


def stop_group(pgid: int, grace: float = GRACE_SECONDS) -> None:
    """SIGTERM every other member of ``pgid``, SIGKILL what is left after ``grace``."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group signal reaches us too
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while True:
        _reap()
        left = _others_in_group(pgid)
        if left == [] or (left is None and not _group_alive(pgid)):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    for pid in left or ():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    _reap()


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("usage: python -m opskit.adapters.spark.guard -- COMMAND [ARG ...]\n")
        return 2
    cmd = argv[1:]
    pgid = os.getpgrp()
    stopping = threading.Event()

    def watch_parent() -> None:
        # blocks until opskit closes the pipe (it exited, was killed, or is stopping us)
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except OSError:
            pass
        stopping.set()

    try:
        # started before any other thread exists, so preexec_fn is safe here
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                 preexec_fn=_die_with_parent(os.getpid()))  # noqa: PLW1509
    except OSError as e:
        sys.stderr.write(f"cannot run {cmd[0]}: {e}\n")
        return 127
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    threading.Thread(target=watch_parent, daemon=True).start()
    while True:
        if stopping.wait(0.2):
            stop_group(pgid)
            return 143
        rc = child.poll()
        if rc is not None:
            # the job ended on its own: nothing it started may outlive it
            if _others_in_group(pgid) != []:  # some left, or /proc unreadable
                stop_group(pgid, grace=2.0)
            return rc


if __name__ == "__main__":  # pragma: no cover - run as a program
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # not sys.exit: the interpreter's shutdown would abort (SIGABRT, exit -6) on the daemon
    # thread still blocked reading stdin ("could not acquire lock ... at interpreter shutdown")
    os._exit(code)
