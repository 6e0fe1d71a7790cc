"""The durable journal of reassignment executions.

One directory per cluster and plan: ``$OPSKIT_STATE/reassign/<cluster id>/<plan id>/``
with

* ``state.json``: the execution state (``ExecState.to_dict``), replaced atomically
  (written to a temporary file, fsynced, renamed, directory fsynced), so after a
  ``kill -9`` it is the previous or the next state, never a mix;
* ``events.jsonl``: one line per submission, cancellation and phase change,
  appended and fsynced before the request is sent (the audit trail: which partition
  was submitted when, by which process);
* ``lock``: an exclusive ``flock`` held while a process executes the plan (the
  kernel drops it when the process dies, even by ``kill -9``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from opskit.adapters.files.safe_write import write_file
from opskit.core.models import TopicPartition
from opskit.core.reassign.machine import ExecState, Phase
from opskit.errors import InvalidInputError, RefusedError
from opskit.paths import state_dir

__all__ = ["Journal"]


def _safe_name(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s) or "unknown"


class Journal:
    """Executions of one cluster."""

    def __init__(self, cluster_id: str | None, root: Path | None = None) -> None:
        self.root = (root or state_dir() / "reassign") / _safe_name(cluster_id or "unknown")

    def dir(self, plan_id: str) -> Path:
        return self.root / _safe_name(plan_id)

    # ------------------------------------------------------------------ state
    def load(self, plan_id: str) -> ExecState | None:
        path = self.dir(plan_id) / "state.json"
        if not path.exists():
            return None
        try:
            return ExecState.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInputError(f"the journal {path} is unreadable ({e}); move it away to "
                                    "start over (check the cluster first: opskit reassign status)"
                                    ) from e

    def save(self, state: ExecState) -> None:
        """Replace the state file atomically (temporary file, fsync, rename, directory fsync)."""
        write_file(self.dir(state.plan_id) / "state.json",
                   json.dumps(state.to_dict(), separators=(",", ":")), what="reassign journal")

    def record(self, plan_id: str, kind: str, **fields: Any) -> None:
        d = self.dir(plan_id)
        d.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"ts": round(time.time(), 3), "pid": os.getpid(), "kind": kind, **fields},
                          separators=(",", ":"))
        with open(d / "events.jsonl", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def events(self, plan_id: str) -> list[dict[str, Any]]:
        path = self.dir(plan_id) / "events.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):  # a line cut by a crash mid-write
                out.append(json.loads(line))
        return out

    def submissions(self, plan_id: str) -> Counter[TopicPartition]:
        """How often each partition was submitted (the journal's view)."""
        c: Counter[TopicPartition] = Counter()
        for e in self.events(plan_id):
            if e.get("kind") == "submit":
                c.update(TopicPartition(t, p) for t, p in e.get("partitions", []))
        return c

    def executions(self) -> list[ExecState]:
        """Every execution journaled for this cluster, unfinished first."""
        out: list[ExecState] = []
        if not self.root.exists():
            return out
        for d in sorted(self.root.iterdir()):
            st = self.load(d.name) if (d / "state.json").exists() else None
            if st is not None:
                out.append(st)
        return sorted(out, key=lambda s: s.phase is Phase.DONE)

    # ------------------------------------------------------------------ lock
    @contextlib.contextmanager
    def lock(self, plan_id: str) -> Iterator[None]:
        d = self.dir(plan_id)
        d.mkdir(parents=True, exist_ok=True)
        f: IO[str] = open(d / "lock", "a+")  # noqa: SIM115 - held for the whole block
        try:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RefusedError(f"another opskit process is executing plan {plan_id} "
                                   f"(lock {d / 'lock'})") from None
            yield
        finally:
            f.close()
