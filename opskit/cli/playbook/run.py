"""What the ``opskit playbook`` runs share on the local platform: where a sandbox's runs
live (one directory per sandbox; the scale-out's journal in it, the multi-rack run's in
its ``multi-rack/`` subdirectory, one run lock for both so they never overlap), paging,
the resume command a run records, whether a journaled run's process is alive, and the
exit of a run that stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from opskit.errors import InconsistentStateError, NotFoundError, RefusedError

#: the multi-rack run's subdirectory of the sandbox's playbook directory
MULTI_RACK_DIR = "multi-rack"


def run_dir(sandbox: str) -> Path:
    from opskit.sandbox.cluster import Sandbox

    return Sandbox(sandbox).playbook_dir


def context(sandbox: str) -> str:
    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.security import admin_context_name

    sb = Sandbox(sandbox)
    return admin_context_name(sandbox, sb.security(sb.require()))


def require_context(sandbox: str, who: str) -> None:
    """The sandbox's opskit context, which the runs' ``reassign`` commands use, must exist
    before a run changes anything (``sandbox up --no-context`` leaves it out): exit 4
    otherwise, naming ``who`` needs it."""
    from opskit.adapters.files.config_file import resolve_connection

    name = context(sandbox)
    try:
        resolve_connection(None, name)
    except NotFoundError as e:
        raise NotFoundError(f"{e}: {who} through the sandbox's opskit context {name!r}, "
                            "which 'opskit sandbox up' writes (not with --no-context); rerun "
                            f"'opskit sandbox up --name {sandbox}' to write it") from None


def pager(routing_key_file: Path | None, base_url: str | None, run_id: str,
           ca_file: Path | None = None, playbook: str = "scale-out") -> Any:
    if routing_key_file is None:
        return None
    from opskit.adapters.paging.pagerduty import (
        DEFAULT_BASE_URL,
        PagerDutyEvents,
        PagerDutySettings,
        build_event,
        read_routing_key,
    )

    settings = PagerDutySettings(read_routing_key(routing_key_file), base_url or DEFAULT_BASE_URL,
                                 str(ca_file) if ca_file else None)

    def page(p: Any) -> None:
        sev = p.severity if p.severity in ("critical", "error", "warning", "info") else "error"
        with PagerDutyEvents(settings) as pd:
            pd.send(build_event("trigger",
                                dedup_key=f"opskit-{playbook.replace('-', '')}/{run_id}",
                                summary=p.summary, source=f"opskit playbook {playbook}",
                                severity=sev))

    return page


def resume_command(sandbox: str, throttle: str, win: Any, registry: Path | None,
                    routing_key_file: Path | None, pagerduty_url: str | None,
                    pagerduty_ca_file: Path | None, wait_s: float) -> str:
    """The ``opskit playbook resume`` command that continues a run with the options it was
    started with (files as absolute paths; the routing key's file, never the key)."""
    import shlex

    args = ["opskit", "playbook", "resume", "--sandbox", sandbox]
    if throttle != "50MiB":
        args += ["--throttle", throttle]
    if win is not None:
        args += ["--window", str(win)]
    for flag, path in (("--registry", registry), ("--routing-key-file", routing_key_file),
                       ("--pagerduty-ca-file", pagerduty_ca_file)):
        if path is not None:
            args += [flag, str(Path(path).absolute())]
    if pagerduty_url is not None:
        args += ["--pagerduty-url", pagerduty_url]
    if wait_s != 300.0:
        args += ["--stall-timeout", f"{wait_s:g}"]
    return shlex.join(args)


def process(sandbox: str, phase: str) -> dict[str, Any] | None:
    """For a run journaled as planned or running: whether a live process still runs it
    (it holds the run lock) or it was interrupted (killed, the machine restarted), with
    the command that resumes it. None for a run that stopped on its own."""
    from opskit.adapters.files.run_lock import probe

    if phase not in ("planned", "running"):
        return None
    lock = probe(run_dir(sandbox) / "run.lock")
    if lock.held:
        return {"state": "running", "pid": lock.pid, "holder": lock.holder}
    return {"state": "interrupted", "pid": lock.pid, "pid_gone": lock.pid_gone,
            "resume_command": lock.resume or f"opskit playbook resume --sandbox {sandbox}"}


def describe(sandbox: str, state: Any) -> dict[str, Any]:
    """A journaled run as ``status`` shows it: the journal, whether a live process runs
    it (``process``), what its step in flight is doing (``in_flight_state``) and, for a
    run stopped inside a step, the command that resumes it."""
    data: dict[str, Any] = state.to_dict()
    proc = process(sandbox, state.phase.value)
    if proc is not None:
        data["process"] = proc
    data.update(stopped_inside(sandbox, state.phase.value, state.in_flight) or {})
    if state.in_flight:
        data["in_flight_state"] = in_flight_state(data)
    return data


def stopped_inside(sandbox: str, phase: str, in_flight: str | None) -> dict[str, Any] | None:
    """For a run that halted or failed with a step in flight (it stopped inside that
    step; nothing runs it now): ``in_flight_state`` and the command that resumes it (the
    one its last run recorded in the run lock, else the plain one). None otherwise."""
    from opskit.adapters.files.run_lock import probe

    if phase not in ("halted", "failed") or not in_flight:
        return None
    lock = probe(run_dir(sandbox) / "run.lock")
    return {"in_flight_state": phase,
            "resume_command": lock.resume or f"opskit playbook resume --sandbox {sandbox}"}


def in_flight_state(data: dict[str, Any]) -> str | None:
    """What the step in flight is doing: "running" (a live process runs it, or the
    journal says so and no process was probed), "interrupted" (its process is gone),
    "halted" or "failed" (the run stopped inside it); None when no step is in flight."""
    if not data.get("in_flight"):
        return None
    proc = (data.get("process") or {}).get("state")
    if proc in ("running", "interrupted"):
        return str(proc)
    phase = str(data.get("phase", "planned"))
    return phase if phase in ("halted", "failed") else "running"


def step_mark(data: dict[str, Any], key: str) -> str:
    """The status table's mark of one step: done, the in-flight state in capitals, -."""
    if key in set(data.get("done", [])):
        return "done"
    if key == data.get("in_flight"):
        return str(in_flight_state(data) or "-").upper()
    return "-"


def headline(data: dict[str, Any]) -> str:
    """The status line after the run's name: its phase, why it stopped, how it resumes."""
    why = f" - {data['reason']}" if data.get("reason") else ""
    state = in_flight_state(data)
    if state in ("halted", "failed"):
        resume = data.get("resume_command") or "'opskit playbook resume' (the run's options)"
        then = "fix the cause, then resume" if state == "failed" else "resume"
        return (f"{state} inside {data['in_flight']} (nothing runs it now){why}; "
                f"{then} with {resume}")
    return phase_text(data) + why


def phase_text(data: dict[str, Any]) -> str:
    proc = data.get("process") or {}
    if proc.get("state") != "interrupted":
        return str(data.get("phase", "planned"))
    pid = proc.get("pid")
    who = (proc["lease"] if proc.get("lease") else  # Kubernetes: the run's Lease
           "no process holds its run lock" if pid is None else
           f"pid {pid} gone" if proc.get("pid_gone") else
           f"pid {pid} no longer holds its run lock")
    return f"interrupted ({who}): resume with {proc['resume_command']}"


def step_throttles(sandbox: str, end: Any, run_dir: Path) -> Any:
    """What the reassignment of the step ``end`` stopped in (the RF raise, the spread)
    left about throttles, from its plan file in ``run_dir`` and its journal; UNKNOWN
    when the sandbox's cluster id cannot be read."""
    from opskit.adapters.scaleout.multirack import spread_plan_path
    from opskit.adapters.scaleout.throttles import RAISE_RF_PLAN
    from opskit.adapters.scaleout.throttles import step_throttles as of_plan
    from opskit.core.scaleout.throttles import Throttles
    from opskit.errors import OpskitError
    from opskit.sandbox.cluster import Sandbox

    files = {"raise_rf": run_dir / RAISE_RF_PLAN, "spread": spread_plan_path(run_dir, end.run_id)}
    if end.in_flight not in files:
        return Throttles.UNKNOWN
    try:
        st = Sandbox(sandbox).load()
    except OpskitError:
        st = None
    return of_plan(files[end.in_flight], st.cluster_id if st is not None else None)


def finish(end: Any, clear_abort: Callable[[], object], throttles: Any = None) -> int:
    """The exit of a run that stopped: 0 done; 5 aborted, outside the window or failed
    (an operator or the next window must act); 3 halted on a retryable error.
    ``throttles``: what the journal of the step in flight says about its throttles
    (:func:`step_throttles`; None: not known, the exit line says they may stay set)."""
    if end.phase.value == "done":
        clear_abort()
        return 0
    from opskit.core.scaleout.machine import unfinished_note
    from opskit.core.scaleout.throttles import Throttles

    note = unfinished_note(end, Throttles.UNKNOWN if throttles is None else throttles)
    what = f"{end.plan.playbook} {end.run_id}"
    if end.phase.value == "aborted":
        clear_abort()
        raise RefusedError(f"{what} aborted at a safe point: {end.reason}{note}")
    if end.reason == "outside the maintenance window":
        raise RefusedError(f"{what} halted at a safe point: outside the "
                           f"maintenance window; the next run inside it resumes{note}")
    if end.phase.value == "failed":
        raise RefusedError(f"{what} failed: {end.reason}; fix the cause, then "
                           f"'opskit playbook resume'{note}")
    raise InconsistentStateError(f"{what} halted: {end.reason}; 'opskit "
                                 f"playbook resume' (or the next scheduled run) continues{note}")


def journals(sandbox: str) -> list[tuple[Any, Path]]:
    """The sandbox's run journals (a FileJournal and its run directory each): the
    scale-out's and the multi-rack run's."""
    from opskit.adapters.scaleout.journal import FileJournal

    top = run_dir(sandbox)
    return [(FileJournal(d / "journal.json"), d) for d in (top, top / MULTI_RACK_DIR)]


def unfinished(sandbox: str) -> tuple[Any, str | None, Any, Path] | None:
    """The sandbox's run that is not done or aborted: (state, version, store, run dir)."""
    for store, d in journals(sandbox):
        state, version = store.load()
        if state is not None and state.phase.value not in ("done", "aborted"):
            return state, version, store, d
    return None


def latest(sandbox: str) -> tuple[Any, Path]:
    """The run ``status`` shows: the unfinished one, else the last journal written."""
    got = unfinished(sandbox)
    if got is not None:
        return got[0], got[3]
    found = [(store.path.stat().st_mtime, store, d) for store, d in journals(sandbox)
             if store.path.exists()]
    if not found:
        raise NotFoundError(f"no playbook run is journaled for sandbox {sandbox!r}")
    _, store, d = max(found, key=lambda x: x[0])
    state, _ = store.load()
    return state, d


def refuse_other_unfinished(sandbox: str, playbook: str) -> None:
    """A new run of ``playbook`` while the other playbook's run is unfinished: refused
    (they share the sandbox's run lock, and one must finish or be aborted first)."""
    got = unfinished(sandbox)
    if got is not None and got[0].plan.playbook != playbook:
        state = got[0]
        raise RefusedError(f"{state.plan.playbook} run {state.run_id} on sandbox {sandbox!r} is "
                           f"{state.phase.value} (in flight: {state.in_flight or 'nothing'}): "
                           "finish it ('opskit playbook resume') or abort it ('opskit playbook "
                           f"abort --execute', then resume) before a {playbook} run")
