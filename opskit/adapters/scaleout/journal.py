"""Where a scale-out run's state (its journal) lives, so any later run can resume it:
a local file for ``--platform local``, a ConfigMap for ``--platform kubernetes``.

Both stores save with compare-and-set: ``save`` names the version it read, and a
store that has moved on since (another run saved meanwhile) refuses with
RefusedError. The runner saves before it acts, so a second, concurrent run stops at
its first save, before it changes anything.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Protocol

from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.files.safe_write import write_file
from opskit.adapters.k8s.api import KubeApi
from opskit.core.scaleout.k8s import JOURNAL_KEY, journal_configmap
from opskit.core.scaleout.machine import RunState
from opskit.errors import InvalidInputError, RefusedError


class JournalStore(Protocol):
    def load(self) -> tuple[RunState | None, str | None]:
        """The saved state and its version (None, None when nothing is saved)."""

    def save(self, state: RunState, version: str | None) -> str:
        """Save over exactly ``version`` (None: nothing saved yet); the new version."""


def _decode(text: str, where: str) -> RunState:
    data = parse_json(text, f"scale-out journal {where}")
    try:
        return RunState.from_dict(data.get("state", data))
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidInputError(f"scale-out journal {where} is not a journal opskit wrote "
                                f"({type(e).__name__}: {e})") from None


class FileJournal:
    """A JSON file; the version is a counter inside it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> tuple[RunState | None, str | None]:
        if not self.path.exists():
            return None, None
        text = read_text(self.path, "scale-out journal")
        data = parse_json(text, f"scale-out journal {self.path}")
        version = str(data.get("version", "0")) if isinstance(data, dict) else "0"
        return _decode(text, str(self.path)), version

    def save(self, state: RunState, version: str | None) -> str:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # read-compare-write as one step across processes
            _, current = self.load()
            if current != version:
                raise RefusedError(f"scale-out journal {self.path} was changed by another run "
                                   f"(version {current}, expected {version}): is one still "
                                   "active?")
            new = str(int(version or "0") + 1)
            write_file(self.path, json.dumps({"version": new, "state": state.to_dict()},
                                             indent=1), what="scale-out journal")
            return new
        finally:
            os.close(fd)


class ConfigMapJournal:
    """A ConfigMap; the version is its resourceVersion (the API server's own CAS)."""

    def __init__(self, api: KubeApi, namespace: str, name: str = "opskit-scaleout-journal"):
        self.api, self.namespace, self.name = api, namespace, name

    def load(self) -> tuple[RunState | None, str | None]:
        got = self.api.read_configmap(self.namespace, self.name)
        if got is None:
            return None, None
        data, version = got
        if JOURNAL_KEY not in data:
            raise InvalidInputError(f"ConfigMap {self.namespace}/{self.name} has no "
                                    f"{JOURNAL_KEY}: not a journal opskit wrote")
        return _decode(data[JOURNAL_KEY], f"ConfigMap {self.namespace}/{self.name}"), version

    def save(self, state: RunState, version: str | None) -> str:
        manifest = journal_configmap(self.name, self.namespace,
                                     json.dumps(state.to_dict(), separators=(",", ":")))
        return self.api.write_configmap(manifest, version)
