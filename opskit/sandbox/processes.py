"""The sandbox nodes' JVM processes, by pid: alive, running this node's config, reaped;
and arguments quoted for a java ``@argfile``."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int | None) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def pid_runs(pid: int | None, config_path: Path) -> bool:
    """True if ``pid`` is alive and is the JVM started with this node's config.

    Only used once a node is past start-up: while the java launcher execs, its
    command line can briefly read empty.
    """
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(config_path) in cmdline


def java_arg(arg: str) -> str:
    """One argument quoted for a java ``@argfile``."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def reap(pid: int) -> None:
    """Collect the exit status if the node is our own child (tests start nodes in-process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
