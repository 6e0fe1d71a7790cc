"""A playbook run (scale-out, multi-rack) as a state machine: ``transition(state, event) -> (state, actions)``.

A runner (adapter) persists the state it gets back **before** it performs the
actions, and feeds each outcome back as an event. So the journal always says which
step was started and not yet finished; a run killed at any moment resumes by
running that step again (every step is idempotent) and never starts a finished
step twice. The window is checked only between steps: a closed window halts the
run at that safe point (no throttles, no half-added voter left behind: those live
inside steps, which finish or are re-run whole). A step found in flight is run again
to its end even outside the window, for the same reason.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from opskit.core.scaleout.multirack import MultiRackPlan
from opskit.core.scaleout.plan import ScaleOutPlan, Step, StepKind
from opskit.core.scaleout.throttles import Throttles

#: the plans this machine runs: a scale-out, a multi-rack spread (their steps differ;
#: ``plan.playbook`` names which, and the journal says it in the plan's ``playbook`` key)
RunPlan = ScaleOutPlan | MultiRackPlan


def plan_from_dict(d: Mapping[str, Any]) -> RunPlan:
    if d.get("playbook") == MultiRackPlan.playbook:
        return MultiRackPlan.from_dict(d)
    return ScaleOutPlan.from_dict(d)


class Phase(enum.Enum):
    PLANNED = "planned"
    RUNNING = "running"
    HALTED = "halted"      # stopped at a safe point (window closed, retryable failure)
    FAILED = "failed"      # needs an operator
    ABORTED = "aborted"
    DONE = "done"


FINAL = (Phase.DONE, Phase.ABORTED)


@dataclass(frozen=True)
class JournalEntry:
    at: str          # ISO time, given by the runner
    step: str        # step key or "-"
    what: str        # started / finished / halted / failed / aborted / resumed / done
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"at": self.at, "step": self.step, "what": self.what, "detail": self.detail}


@dataclass(frozen=True)
class RunState:
    run_id: str
    plan: RunPlan
    phase: Phase = Phase.PLANNED
    done: tuple[str, ...] = ()
    in_flight: str | None = None
    reason: str = ""
    abort_requested: bool = False
    journal: tuple[JournalEntry, ...] = ()

    @property
    def remaining(self) -> tuple[Step, ...]:
        return tuple(s for s in self.plan.steps if s.key not in self.done)

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "plan": self.plan.to_dict(), "phase": self.phase.value,
                "done": list(self.done), "in_flight": self.in_flight, "reason": self.reason,
                "abort_requested": self.abort_requested,
                "journal": [e.to_dict() for e in self.journal]}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> RunState:
        return RunState(
            str(d["run_id"]), plan_from_dict(d["plan"]), Phase(d["phase"]),
            tuple(d["done"]), d.get("in_flight"), str(d.get("reason", "")),
            bool(d.get("abort_requested", False)),
            tuple(JournalEntry(e["at"], e["step"], e["what"], e.get("detail", ""))
                  for e in d.get("journal", ())))


def finished_at(s: RunState) -> str:
    """When the run was recorded done ("?" if its journal never says so)."""
    return next((e.at for e in reversed(s.journal) if e.what == "done"), "?")


def nothing_to_do(s: RunState | None, brokers: Iterable[int], target_brokers: int) -> str | None:
    """The one line a new run says instead of planning when the journal holds a finished
    run whose brokers are all still registered and the cluster has the ``target_brokers``
    asked for (a scheduled run after the scale-out); None: plan as usual (no journal, a
    run that is not done, or a cluster that no longer meets that run's target)."""
    if s is None or s.phase is not Phase.DONE or not isinstance(s.plan, ScaleOutPlan):
        return None
    present = set(brokers)
    if not set(s.plan.existing) | set(s.plan.new_nodes) <= present \
            or len(present) < target_brokers:
        return None
    return (f"scale-out {s.run_id} finished at {finished_at(s)}; the cluster has "
            f"{len(present)} brokers: nothing to do")


def _throttle_note(what: str, throttles: Throttles) -> str:
    """The exit line's word on the replication throttles of ``what`` (the RF raise, the
    spread) stopped in flight: only what its reassignment's journal says."""
    finish = (f"'opskit playbook resume' finishes {what} (after 'opskit playbook abort "
              "--execute' too: that resume stops right after it)")
    if throttles is Throttles.SET:
        return f"the replication throttles stay set until {finish}"
    if throttles is Throttles.NONE:
        return f"{what} stopped before setting any replication throttle"
    if throttles is Throttles.REMOVED:
        return f"{what} removed its replication throttles (its reassignment finished)"
    return (f"the replication throttles may stay set (opskit could not tell whether {what} "
            f"set them: 'opskit reassign status' shows its execution) until {finish}")


def unfinished_note(s: RunState, throttles: Throttles = Throttles.UNKNOWN) -> str:
    """What a run that stopped before its end leaves unfinished, for its exit line: the
    throttles of an RF raise or a spread in flight (``throttles``: what that step's
    reassignment journal says, UNKNOWN when the caller could not read it), nodes not yet
    restarted with the new defaults."""
    notes: list[str] = []
    what = {StepKind.RAISE_RF.value: "the RF raise", StepKind.SPREAD.value: "the spread"}
    if s.in_flight in what:
        notes.append(_throttle_note(what[s.in_flight], throttles))
    racks = [st.node_id for st in s.remaining if st.kind is StepKind.SET_RACK]
    if racks:
        notes.append("node(s) " + ", ".join(map(str, racks)) + " are not in their rack yet "
                     "(while some brokers have a rack and others not, 'reassign plan' refuses)")
    left = [st.node_id for st in s.remaining if st.kind is StepKind.RESTART_NODE]
    if left:
        notes.append("the cluster is not finished: node(s) "
                     + ", ".join(map(str, left)) + " still run without the new read-only "
                     "defaults (a topic created without an RF gets the old RF) until the "
                     "rolling restart is done")
    return "".join(f"; {n}" for n in notes)


# --- events -------------------------------------------------------------------

@dataclass(frozen=True)
class Tick:
    """The runner asks what to do next (a new run, a resume, after each step)."""

    at: str
    window_open: bool = True


@dataclass(frozen=True)
class StepSucceeded:
    at: str
    step: str
    detail: str = ""


@dataclass(frozen=True)
class StepFailed:
    at: str
    step: str
    reason: str
    retryable: bool = True


@dataclass(frozen=True)
class AbortRequested:
    at: str


Event = Tick | StepSucceeded | StepFailed | AbortRequested


# --- actions ------------------------------------------------------------------

@dataclass(frozen=True)
class RunStep:
    step: Step
    resumed: bool = False   # True: it was started before and never recorded finished


@dataclass(frozen=True)
class Halt:
    reason: str


@dataclass(frozen=True)
class Page:
    severity: str           # critical / error / warning / info
    summary: str


@dataclass(frozen=True)
class Finish:
    phase: Phase


Action = RunStep | Halt | Page | Finish


def _log(s: RunState, at: str, step: str, what: str, detail: str = "") -> RunState:
    return replace(s, journal=(*s.journal, JournalEntry(at, step, what, detail)))


def transition(s: RunState, ev: Event) -> tuple[RunState, tuple[Action, ...]]:
    """The next state and what the runner must do (after persisting the state)."""
    if s.phase in FINAL:
        return s, ()
    if isinstance(ev, AbortRequested):
        if s.in_flight is None:
            s = _log(replace(s, phase=Phase.ABORTED, reason="aborted by the operator"),
                     ev.at, "-", "aborted")
            return s, (Page("info", f"{s.plan.playbook} {s.run_id} aborted before "
                                    f"{len(s.remaining)} remaining steps"), Finish(Phase.ABORTED))
        # a step is under way: let it reach its end (a safe point), then stop
        return _log(replace(s, abort_requested=True), ev.at, s.in_flight, "abort requested"), ()
    if isinstance(ev, StepSucceeded):
        if ev.step != s.in_flight:
            raise ValueError(f"step {ev.step} finished but {s.in_flight} was running")
        s = _log(replace(s, done=(*s.done, ev.step), in_flight=None), ev.at, ev.step,
                 "finished", ev.detail)
        if s.abort_requested and s.remaining:
            s = _log(replace(s, phase=Phase.ABORTED, reason="aborted by the operator"),
                     ev.at, "-", "aborted")
            return s, (Page("info", f"{s.plan.playbook} {s.run_id} aborted after {ev.step}"),
                       Finish(Phase.ABORTED))
        return s, ()
    if isinstance(ev, StepFailed):
        if ev.step != s.in_flight:
            raise ValueError(f"step {ev.step} failed but {s.in_flight} was running")
        phase = Phase.HALTED if ev.retryable else Phase.FAILED
        # the step stays in flight: a resume runs it again (idempotent)
        s = _log(replace(s, phase=phase, reason=f"{ev.step}: {ev.reason}"), ev.at, ev.step,
                 "failed", ev.reason)
        sev = "error" if ev.retryable else "critical"
        return s, (Page(sev, f"{s.plan.playbook} {s.run_id} {phase.value} at {ev.step}: "
                             f"{ev.reason}"),
                   Halt(s.reason))
    # Tick
    if s.in_flight is not None:
        # started and never recorded finished (killed, or failed and retried): run it again
        # whole, even outside the window, so the cluster reaches a safe point (throttles
        # removed, a voter fully added) before the run halts
        step = Step.from_key(s.in_flight)
        s = _log(replace(s, phase=Phase.RUNNING, reason=""), ev.at, s.in_flight, "resumed")
        return s, (RunStep(step, resumed=True),)
    if not s.remaining:
        s = _log(replace(s, phase=Phase.DONE, reason=""), ev.at, "-", "done")
        return s, (Finish(Phase.DONE),)
    if not ev.window_open:
        first_halt = s.phase is not Phase.HALTED or s.reason != "outside the maintenance window"
        s = replace(s, phase=Phase.HALTED, reason="outside the maintenance window")
        acts: tuple[Action, ...] = (Halt(s.reason),)
        if first_halt:
            s = _log(s, ev.at, s.remaining[0].key, "halted", "window closed")
            acts = (Page("warning", f"{s.plan.playbook} {s.run_id} halted at a safe point "
                                    f"before "
                                    f"{s.remaining[0].key}: the maintenance window closed; "
                                    "the next run resumes"), *acts)
        return s, acts
    nxt = s.remaining[0]
    s = _log(replace(s, phase=Phase.RUNNING, in_flight=nxt.key, reason=""), ev.at, nxt.key,
             "started")
    return s, (RunStep(nxt),)
