"""The runner of a reassignment execution: performs the state machine's actions.

Loop: the state returned by :func:`opskit.core.reassign.machine.transition` is saved to
the journal *before* its actions are performed; each action's outcome becomes the
next event. A submission is also appended to the journal's event log before the
request leaves. So a ``kill -9`` anywhere leaves a state from which
``transition(state, Begin())`` continues safely (see the core module).

``reassign cancel --execute`` (another process) appends a ``cancel`` event to the
execution's journal; the runner reads it at its start and before each observation, so
a running or resumed drain stops submitting and puts its cordon values back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.adapters.reassign.journal import Journal
from opskit.core.reassign.checks import bytes_remaining_by_broker
from opskit.core.reassign.machine import (
    Action,
    BaselineRead,
    Begin,
    CordonRead,
    CordonRestored,
    CordonSet,
    Elected,
    ElectLeaders,
    Event,
    ExecState,
    Finish,
    MoveStatus,
    Observation,
    Observe,
    Observed,
    ReadBaseline,
    ReadCordon,
    RemoveThrottles,
    RestoreCordon,
    SetCordon,
    SetThrottles,
    Stop,
    Submit,
    ThrottlesRemoved,
    ThrottlesSet,
    transition,
)
from opskit.errors import KafkaUnavailableError, ServiceUnavailableError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    """What the progress display gets after each observation."""

    state: ExecState
    bytes_remaining: int
    #: bytes/s copied, measured over the last observations (None until known)
    copy_rate: float | None
    #: bytes the busiest broker still has to receive (the throttle bounds each broker)
    busiest_bytes: int = 0


class ProgressSink(Protocol):
    def tick(self, tick: Tick) -> None: ...

    def note(self, text: str) -> None: ...


class Runner:
    def __init__(self, admin: ReassignAdmin, journal: Journal, sink: ProgressSink,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.time) -> None:
        self.admin = admin
        self.journal = journal
        self.sink = sink
        self.sleep = sleep
        self.clock = clock
        self._last_bytes: tuple[float, int] | None = None
        self._rate: float | None = None
        self._busiest = 0
        self.election_errors: dict[str, str] = {}
        self.throttle_mismatches: list[str] = []
        self.cordon_mismatches: list[str] = []

    def run(self, state: ExecState) -> ExecState:
        """Run to the end (or raise). Holds the plan's lock the whole time."""
        with self.journal.lock(state.plan_id):
            self.journal.save(state)
            state, queue = transition(state, Begin(cancelled=self._cancelled(state.plan_id)))
            self.journal.save(state)
            while queue:
                action = queue.pop(0)
                event = self._perform(state, action)
                if event is None:
                    return state
                state, more = transition(state, event)
                self.journal.save(state)
                queue = more + queue
        return state

    # ------------------------------------------------------------------ actions
    def _perform(self, state: ExecState, action: Action) -> Event | None:
        pid = state.plan_id
        if isinstance(action, ReadCordon):
            prior = self.admin.read_cordon(action.brokers)
            self.journal.record(pid, "cordon_read", values=[[b, v] for b, v in prior])
            return CordonRead(prior)
        if isinstance(action, SetCordon):
            self.journal.record(pid, "cordon", brokers=list(action.brokers))
            self.sink.note(f"cordoning broker(s) {', '.join(map(str, action.brokers))} "
                           "(cordoned.log.dirs=*): no new replica is placed there from now on")
            self.admin.set_cordon(action.brokers)
            return CordonSet()
        if isinstance(action, RestoreCordon):
            self.journal.record(pid, "uncordon", values=[[b, v] for b, v in action.prior])
            self.cordon_mismatches = self.admin.restore_cordon(action.prior)
            if self.cordon_mismatches:
                self.journal.record(pid, "cordon_mismatch", found=self.cordon_mismatches)
            self.sink.note("the drain was cancelled: broker(s) "
                           f"{', '.join(str(b) for b, _ in action.prior)} uncordoned (earlier "
                           "values restored)")
            return CordonRestored()
        if isinstance(action, ReadBaseline):
            base = self.admin.read_baseline(action.brokers, action.topics)
            self.journal.record(pid, "baseline", values=base.to_dict())
            return BaselineRead(base)
        if isinstance(action, SetThrottles):
            self.journal.record(pid, "set_throttles", rate=action.rate,
                                brokers=list(action.brokers), topics=sorted(action.topics))
            self.sink.note(f"throttle {action.rate:,} B/s on brokers "
                           f"{', '.join(map(str, action.brokers))} and the moving replicas of "
                           f"{len(action.topics)} topic(s)")
            self.admin.set_throttles(action.rate, action.brokers, action.topics)
            return ThrottlesSet()
        if isinstance(action, Observe):
            if action.after:
                self.sleep(action.after)
            return Observed(self._observe(state))
        if isinstance(action, Submit):
            parts = [[m.tp.topic, m.tp.partition] for m in action.moves]
            self.journal.record(pid, "submit", partitions=parts,
                                targets=[list(m.target) for m in action.moves])
            res = self.admin.submit(action.moves)
            if res.rejected:
                self.journal.record(pid, "rejected", errors={f"{tp.topic}:{tp.partition}": e
                                                            for tp, e in res.rejected.items()})
            return res
        if isinstance(action, ElectLeaders):
            self.sink.note(f"preferred leader election on {len(action.partitions)} partition(s)")
            errs = self.admin.elect_preferred(action.partitions)
            self.election_errors = {f"{tp.topic}:{tp.partition}": e for tp, e in errs.items()}
            self.journal.record(pid, "elected", errors=self.election_errors)
            return Elected(errs)
        if isinstance(action, RemoveThrottles):
            self.journal.record(pid, "remove_throttles")
            self.throttle_mismatches = self.admin.restore_throttles(action.baseline)
            if self.throttle_mismatches:
                self.journal.record(pid, "throttle_mismatch", found=self.throttle_mismatches)
            self.sink.note("throttles removed; earlier values restored")
            return ThrottlesRemoved()
        if isinstance(action, Stop):
            self.journal.record(pid, "stopped", reason=action.reason)
            raise KafkaUnavailableError(
                f"{action.reason}; moves in flight continue on the brokers, throttles stay "
                "until the run is resumed (opskit reassign execute PLAN --resume --execute)")
        assert isinstance(action, Finish)
        self.journal.record(pid, "finished")
        return None

    def _cancelled(self, plan_id: str) -> bool:
        """Was ``reassign cancel --execute`` journaled since this execution started?"""
        cancelled = False
        for e in self.journal.events(plan_id):
            kind = e.get("kind")
            if kind == "start":
                cancelled = False
            elif kind == "cancel":
                cancelled = True
        return cancelled

    def _observe(self, state: ExecState) -> Observation:
        """Read the cluster; while it cannot be reached, wait (bounded by the stall limit)."""
        started = self.clock()
        while True:
            try:
                return self._read(state)
            except ServiceUnavailableError as e:
                waited = self.clock() - started
                if waited > state.stall_after:
                    raise
                self.sink.note(f"waiting for the cluster ({waited:.0f}s of "
                               f"{state.stall_after:g}s): {e}")
                self.sleep(2.0)

    def _read(self, state: ExecState) -> Observation:
        # in flight first: metadata read after it is never older than the list, so a move
        # that ended (or was cancelled) between the two reads is not taken for done
        flights = self.admin.in_flight()
        replicas, _isr, live = self.admin.assignment()
        topics = {m.tp.topic for m in state.moves
                  if m.status not in (MoveStatus.DONE, MoveStatus.FAILED)}
        left = self._last_bytes[1] if self._last_bytes else 0
        busiest = self._busiest
        if topics:
            sizes = self.admin.replica_sizes(topics)
            if sizes:  # (unavailable, e.g. a broker down: the last figures stand)
                lead = {m.tp: sizes.get(m.tp, {}).get(m.base[0], 0) for m in state.moves}
                # moves not yet submitted still count in full
                per = bytes_remaining_by_broker(state.moves, lead, sizes)
                left, busiest = sum(per.values()), max(per.values(), default=0)
        else:
            left = busiest = 0
        self._busiest = busiest
        now = self.clock()
        if self._last_bytes is not None and now > self._last_bytes[0]:
            dt, db = now - self._last_bytes[0], self._last_bytes[1] - left
            if db > 0:
                r = db / dt
                self._rate = r if self._rate is None else 0.7 * self._rate + 0.3 * r
        self._last_bytes = (now, left)
        obs = Observation(now, {tp: replicas[tp] for tp in (m.tp for m in state.moves)
                                if tp in replicas},
                          {tp: f for tp, f in flights.items()}, live, left,
                          cancelled=not state.cancelled and self._cancelled(state.plan_id))
        self.sink.tick(Tick(state, left, self._rate, busiest))
        return obs
