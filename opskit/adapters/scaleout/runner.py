"""Runs a scale-out: feeds the state machine, persists its journal before every action,
performs the steps, pages on a halt or a failure.

Platform independent: the steps (``StepRunner``), the journal store and the pager are
passed in. An abort is asked for by a marker the runner reads between steps (a file, or on
Kubernetes a ConfigMap of its own), so an operator's ``playbook abort`` never races
the running process for the journal.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from opskit.adapters.scaleout.journal import JournalStore
from opskit.core.scaleout.machine import (
    AbortRequested,
    Finish,
    Halt,
    Page,
    RunState,
    RunStep,
    StepFailed,
    StepSucceeded,
    Tick,
    transition,
)
from opskit.core.scaleout.plan import Step
from opskit.core.scaleout.window import Window
from opskit.errors import OpskitError, RefusedError, UsageError, WriteFailedError

log = logging.getLogger(__name__)


class StepRunner(Protocol):
    """Runs one step of a plan (a ScaleOutPlan or a MultiRackPlan, by the runner's kind)."""

    def run(self, step: Step, plan: Any) -> str: ...


class AbortMarker(Protocol):
    """Where an operator's abort request is found: a file (``Path``), a ConfigMap."""

    def exists(self) -> bool: ...


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


#: TEST ONLY: ``OPSKIT_TEST_KILL_AT=started:<step>`` (or ``finished:<step>``) makes the
#: running process SIGKILL itself right after the journal recorded that step started (or
#: finished): the kill -9 tests use it to stop a run at every step boundary
#: deterministically; ``stopped:restart_node:N`` (``stopped:set_rack:N``) kills it inside
#: that step, after node N was stopped and before it is started again;
#: ``restarted:set_rack:N`` after node N was started in its rack, before the step waited
#: for it to report the rack and for every partition in ISR; ``planned:spread``
#: after the multi-rack spread's plan file was written, before it is executed. Never set
#: it outside tests.
KILL_AT_ENV = "OPSKIT_TEST_KILL_AT"


def failpoint(what: str, key: str) -> None:
    if os.environ.get(KILL_AT_ENV) == f"{what}:{key}":
        log.warning("test failpoint %s:%s: killing this process", what, key)
        os.kill(os.getpid(), signal.SIGKILL)


def drive(state: RunState, version: str | None, store: JournalStore, steps: StepRunner, *,
          window: Window | None = None, abort_marker: AbortMarker | None = None,
          pager: Callable[[Page], None] | None = None,
          say: Callable[[str], None] = lambda _m: None,
          now: Callable[[], datetime] = utc_now) -> RunState:
    """Run until the plan is done, halts, fails or is aborted; returns the final state."""

    def save(s: RunState) -> None:
        nonlocal version
        version = store.save(s, version)

    def page(acts: tuple[object, ...]) -> None:
        for a in acts:
            if isinstance(a, Page):
                say(f"page ({a.severity}): {a.summary}")
                if pager is not None:
                    try:
                        pager(a)
                    except OpskitError as e:  # paging must not stop the run's bookkeeping
                        say(f"paging failed: {e}")

    while True:
        if abort_marker is not None and abort_marker.exists() and not state.abort_requested:
            state, acts = transition(state, AbortRequested(iso(now())))
            save(state)
            page(acts)
            if any(isinstance(a, Finish) for a in acts):
                return state
        t = now()
        state, acts = transition(state, Tick(iso(t), window is None or window.contains(t)))
        save(state)                          # the journal says "started" before acting
        page(acts)
        run = next((a for a in acts if isinstance(a, RunStep)), None)
        if run is None:
            for a in acts:
                if isinstance(a, Halt):
                    say(f"halted: {a.reason}")
            return state
        key = run.step.key
        failpoint("started", key)
        say(f"{'resuming' if run.resumed else 'step'} {key} ...")
        try:
            detail = steps.run(run.step, state.plan)
        except (RefusedError, UsageError, WriteFailedError) as e:
            # refused, bad input, a file that cannot be written (permission, disk full):
            # an operator must act before a rerun can succeed
            ev: StepSucceeded | StepFailed = StepFailed(iso(now()), key, str(e), retryable=False)
        except OpskitError as e:
            ev = StepFailed(iso(now()), key, str(e), retryable=True)
        else:
            ev = StepSucceeded(iso(now()), key, detail)
            say(f"  {key}: {detail}")
        state, acts = transition(state, ev)
        save(state)
        if isinstance(ev, StepSucceeded):
            failpoint("finished", key)
        page(acts)
        if any(isinstance(a, (Finish, Halt)) for a in acts):
            return state
