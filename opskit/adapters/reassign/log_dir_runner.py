"""Runs a log-directory drain (:mod:`opskit.core.reassign.log_dir_exec`), journaled.

The journal is :class:`opskit.adapters.reassign.journal.Journal`'s layout (events appended
and fsynced before each request, an exclusive lock while a process runs the plan) under
its own root, ``$OPSKIT_STATE/reassign-logdirs/<cluster id>/<plan id>/``, with
``state.json`` (:class:`DiskExec`) replaced atomically after every step. The order:
read and journal the throttle values found, set the throttle; read and journal the
cordon values found, set the cordon and wait until the brokers report the directories
cordoned; then send AlterReplicaLogDirs for the moves not done (``max_moves`` in flight per
broker, one by default) and poll DescribeLogDirs until each is done; then put the
throttle values back. After ``kill -9`` the same command
continues from the journaled state (a move resent changes nothing); a ``cancel`` event in
the journal (``reassign cancel --execute``) makes a running execution cancel and stop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from opskit.adapters.files.safe_write import write_file
from opskit.adapters.reassign.journal import Journal
from opskit.adapters.reassign.log_dirs import DiskAdmin
from opskit.core.models import TopicPartition
from opskit.core.reassign.cordon import CORDON_KEY
from opskit.core.reassign.log_dir_exec import (
    C_APPLIED,
    C_KEPT,
    C_PLANNED,
    C_READ,
    C_RELEASED,
    CANCELLED,
    DONE,
    FAILED,
    PENDING,
    SUBMITTED,
    THROTTLE_KEY,
    DiskExec,
    judge,
    next_moves,
)
from opskit.errors import InvalidInputError, KafkaUnavailableError, RefusedError
from opskit.paths import state_dir

__all__ = ["DiskJournal", "DiskRunner", "cordon_read_at"]

#: seconds a caught-up copy may wait to be swapped in before a warning says so
STUCK_AFTER = 20.0


def cordon_read_at(events: list[dict[str, Any]]) -> float:
    """The ``ts`` of the last cordon-read event among a journal's events, else of the last
    event with one; 0.0 when there is none."""
    last = read = 0.0
    for e in events:
        ts = e.get("ts")
        if isinstance(ts, int | float) and not isinstance(ts, bool):
            last = max(last, float(ts))
            if e.get("kind") in ("cordon-read", "cordon_read"):
                read = max(read, float(ts))
    return read or last


class DiskJournal(Journal):
    """The journal of log-directory drains (its own root: ``reassign status`` of inter-broker
    executions never reads these states)."""

    def __init__(self, cluster_id: str | None, root: Path | None = None) -> None:
        super().__init__(cluster_id, root or state_dir() / "reassign-logdirs")

    def load_disk(self, plan_id: str) -> DiskExec | None:
        path = self.dir(plan_id) / "state.json"
        if not path.exists():
            return None
        try:
            return DiskExec.from_dict(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError) as e:
            raise InvalidInputError(f"the journal {path} is unreadable ({e}); move it away to "
                                    "start over") from e

    def save_disk(self, st: DiskExec) -> None:
        write_file(self.dir(st.plan_id) / "state.json",
                   json.dumps(st.to_dict(), separators=(",", ":")), what="reassign journal")

    def disk_executions(self) -> list[DiskExec]:
        if not self.root.exists():
            return []
        out = [s for d in sorted(self.root.iterdir()) if (d / "state.json").exists()
               if (s := self.load_disk(d.name)) is not None]
        return sorted(out, key=lambda s: s.done)

    def cordon_read_at(self, plan_id: str) -> float:
        """When the execution read the cordon values it journaled (the journal's own time of
        its last ``cordon-read`` event, ``cordon_read`` in the inter-broker journal), else of
        its last event; 0 when it has none."""
        return cordon_read_at(self.events(plan_id))

    def cancel_requested(self, plan_id: str) -> bool:
        """A ``cancel`` event since the execution's last ``start``."""
        asked = False
        for e in self.events(plan_id):
            if e.get("kind") in ("start", "cancel"):
                asked = e.get("kind") == "cancel"
        return asked

    def wait_lock(self, plan_id: str, wait: float) -> object:
        """The plan's lock, waiting up to ``wait`` s for a running execution to let go."""
        deadline = time.monotonic() + wait
        while True:
            cm = self.lock(plan_id)
            try:
                cm.__enter__()
                return cm
            except RefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


class DiskRunner:
    def __init__(self, da: DiskAdmin, journal: DiskJournal, say: Callable[[str], None],
                 stall_timeout: float = 300.0, poll: float = 1.0) -> None:
        self.da, self.journal, self.say = da, journal, say
        self.stall_timeout, self.poll = stall_timeout, poll
        self.mismatches: list[str] = []
        self.stuck: set[int] = set()

    def _save(self, st: DiskExec) -> DiskExec:
        self.journal.save_disk(st)
        return st

    def run(self, st: DiskExec) -> DiskExec:
        with self.journal.lock(st.plan_id):
            st = self._save(st)
            if st.done:
                return st
            if self.journal.cancel_requested(st.plan_id):
                return self.cancel(st)
            st = self._throttle(st)
            st = self._cordon(st)
            st = self._move(st)
            if st.cancelled or self.journal.cancel_requested(st.plan_id):
                return self.cancel(st)
            return self._finish(st)

    # ------------------------------------------------------------------ steps
    def _brokers(self, st: DiskExec) -> list[int]:
        return sorted({m.broker for m in st.moves})

    def _throttle(self, st: DiskExec) -> DiskExec:
        if st.rate is None or st.throttle not in ("none", "read"):
            return st
        if st.throttle_prior is None:
            prior = self.da.dynamic_values(THROTTLE_KEY, self._brokers(st))
            self.journal.record(st.plan_id, "throttle-read", values=[list(p) for p in prior])
            st = self._save(replace(st, throttle_prior=prior, throttle="read"))
        self.journal.record(st.plan_id, "throttle", rate=st.rate, brokers=self._brokers(st))
        assert st.rate is not None
        self.mismatches += self.da.set_throttle(st.rate, self._brokers(st))
        return self._save(replace(st, throttle="set"))

    def _cordon(self, st: DiskExec) -> DiskExec:
        if st.cordon not in (C_PLANNED, C_READ):
            return st
        if st.cordon_prior is None:
            prior = self.da.dynamic_values(CORDON_KEY, st.cordon_brokers())
            self.journal.record(st.plan_id, "cordon-read", values=[list(p) for p in prior])
            st = self._save(replace(st, cordon_prior=prior, cordon=C_READ))
        wanted = st.cordon_wanted()
        self.journal.record(st.plan_id, "cordon", values=[[b, v] for b, v in wanted.items()])
        self.da.cordon_dirs(wanted, st.drained)
        return self._save(replace(st, cordon=C_APPLIED))

    def _move(self, st: DiskExec) -> DiskExec:
        brokers = self._brokers(st)
        seen_progress = (-1, -(2**62))
        last = time.monotonic()
        shown = 0.0
        stuck_since: dict[int, float] = {}
        while True:
            if self.journal.cancel_requested(st.plan_id):  # before sending anything more
                return replace(st, cancelled=True)
            try:
                dirs, reps = self.da.describe(brokers)
            except KafkaUnavailableError as e:
                self.say(f"reassign: {e}")
                dirs, reps = None, []
            if dirs is not None:
                seen: dict[tuple[TopicPartition, int], tuple[str | None, str | None]] = {}
                future_lag = 0
                caught_up: set[tuple[TopicPartition, int]] = set()
                for r in reps:
                    live, fut = seen.get((r.tp, r.broker), (None, None))
                    seen[(r.tp, r.broker)] = (live, r.path) if r.future else (r.path, fut)
                    future_lag += max(r.offset_lag, 0) if r.future else 0
                    if r.future and r.offset_lag == 0:
                        caught_up.add((r.tp, r.broker))
                for i, m in enumerate(st.moves):
                    if st.status[i] in (DONE, FAILED, CANCELLED):
                        continue
                    status, why = judge(m, seen)
                    if status != st.status[i] or why != st.errors[i]:
                        st = st.with_status(i, status, why)
                self._unstick(st, caught_up, stuck_since)
                todo = {i: st.moves[i].target for i in next_moves(st, list(st.status))}
                if todo:
                    self.journal.record(st.plan_id, "submit", moves=[
                        [st.moves[i].tp.topic, st.moves[i].tp.partition, st.moves[i].broker,
                         t] for i, t in sorted(todo.items())])
                    for i in todo:
                        st = st.with_status(i, SUBMITTED)
                    st = self._save(st)
                    refused = self.da.alter({(st.moves[i].tp, st.moves[i].broker): t
                                             for i, t in todo.items()})
                    for i, m in enumerate(st.moves):
                        if (m.tp, m.broker) in refused:
                            st = st.with_status(i, FAILED, f"AlterReplicaLogDirs refused: "
                                                           f"{refused[(m.tp, m.broker)]}")
                st = self._save(st)
                c = st.counts()
                # a move ended, or the copies' offset lag shrank (a copy caught up but not
                # swapped in is no progress, whatever is appended to it)
                progress = (c[DONE] + c[FAILED], -future_lag)
                if progress > seen_progress:
                    seen_progress, last = progress, time.monotonic()
                if c[PENDING] + c[SUBMITTED] == 0:
                    return st
                if time.monotonic() - shown >= 5:
                    shown = time.monotonic()
                    left = sum(m.size_bytes for i, m in enumerate(st.moves)
                               if st.status[i] in (PENDING, SUBMITTED))
                    self.say(f"reassign: {c[DONE]}/{len(st.moves)} replicas moved, "
                             f"{c[SUBMITTED]} copying, {left:,} bytes left to move")
            if time.monotonic() - last > self.stall_timeout:
                raise KafkaUnavailableError(
                    f"no progress for {self.stall_timeout:g}s ({st.counts()}): stopped; the "
                    "throttle and cordon stay set; resume with opskit reassign execute "
                    f"{st.plan_path} --resume --execute, or cancel")
            time.sleep(self.poll)

    def _unstick(self, st: DiskExec,
                 caught_up: set[tuple[TopicPartition, int]], since: dict[int, float]) -> None:
        """Say once per move when a copy is caught up (offset lag 0) but not swapped in for
        :data:`STUCK_AFTER` s: Kafka 3.7.2 was seen to leave such a copy for good (a
        NullPointerException in ReplicaAlterLogDirsThread's directory assignment, in the
        broker log); dropping it and sending the move again did not help there, a broker
        restart did (the 3.7 integration test)."""
        now = time.monotonic()
        for i, m in enumerate(st.moves):
            key = (m.tp, m.broker)
            if st.status[i] != SUBMITTED or key not in caught_up:
                since.pop(i, None)
                continue
            first = since.setdefault(i, now)
            if now - first < STUCK_AFTER or i in self.stuck:
                continue
            self.stuck.add(i)
            self.say(f"reassign: warning: {m.tp.topic}:{m.tp.partition} on broker {m.broker}: "
                     f"its copy caught up {now - first:.0f} s ago but is not swapped in; Kafka "
                     "3.7 can stop there (NullPointerException in ReplicaAlterLogDirsThread in "
                     "the broker log): if so, the run stops after --stall-timeout; restart the "
                     "broker, then run the same command")
            self.journal.record(st.plan_id, "stuck", move=[m.tp.topic, m.tp.partition, m.broker])

    def _finish(self, st: DiskExec) -> DiskExec:
        st = self._restore_throttle(st)
        if st.counts()[FAILED]:
            return self._save(st)  # unfinished: resume or cancel decides the cordon
        if st.cordon in (C_READ, C_APPLIED):
            st = replace(st, cordon=C_KEPT)
        self.journal.record(st.plan_id, "done", counts=st.counts())
        return self._save(replace(st, done=True))

    def _restore_throttle(self, st: DiskExec) -> DiskExec:
        if st.throttle in ("read", "set") and st.throttle_prior is not None:
            self.journal.record(st.plan_id, "unthrottle",
                                values=[list(p) for p in st.throttle_prior])
            self.mismatches += self.da.restore(THROTTLE_KEY, st.throttle_prior,
                                               "removing the intra-broker throttle")
            st = self._save(replace(st, throttle="removed"))
        return st

    def cancel(self, st: DiskExec) -> DiskExec:
        """Put the cordon values back, then drop the future replica of every move not
        finished (AlterReplicaLogDirs to the directory the replica is in: first, because
        Kafka refuses a move into a cordoned directory), then put the throttle back. The
        caller holds the lock."""
        st = replace(st, cancelled=True)
        if st.cordon_holds and st.cordon_prior is not None:
            self.journal.record(st.plan_id, "uncordon", values=[list(p) for p in st.cordon_prior])
            self.mismatches += self.da.restore(CORDON_KEY, st.cordon_prior,
                                               "uncordoning log directories (cordoned.log.dirs)")
            st = self._save(replace(st, cordon=C_RELEASED))
        seen = self.da.placement(self._brokers(st))
        back: dict[tuple[TopicPartition, int], str] = {}
        for i, m in enumerate(st.moves):
            if st.status[i] in (DONE, FAILED, CANCELLED):
                continue
            status, why = judge(m, seen)
            if status == DONE:
                st = st.with_status(i, DONE)
                continue
            live, future = seen.get((m.tp, m.broker), (None, None))
            if future is not None and live is not None:
                back[(m.tp, m.broker)] = live
            st = st.with_status(i, CANCELLED, why)
        if back:
            self.journal.record(st.plan_id, "revert", moves=[
                [tp.topic, tp.partition, b, d] for (tp, b), d in sorted(back.items())])
            refused = self.da.alter(back)
            self.mismatches += [f"{tp.topic}:{tp.partition} on broker {b}: the copy could not be "
                                f"dropped ({err})" for (tp, b), err in refused.items()]
            for i, m in enumerate(st.moves):  # it finished before the request arrived
                if (m.tp, m.broker) in refused:
                    now = self.da.placement([m.broker])
                    if judge(m, now)[0] == DONE:
                        st = st.with_status(i, DONE)
        st = self._restore_throttle(self._save(st))
        self.journal.record(st.plan_id, "cancelled", counts=st.counts())
        return self._save(replace(st, done=True))
