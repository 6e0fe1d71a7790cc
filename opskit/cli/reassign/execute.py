"""``opskit reassign execute`` (see opskit.cli.reassign.commands; ``status``, ``cancel``,
``uncordon`` and ``verify`` are in :mod:`opskit.cli.reassign.control`).

``execute`` is a dry run unless ``--execute``: it shows the batches, the throttles and
the bytes each broker receives. With ``--execute`` it runs the plan through the
journaled state machine (:mod:`opskit.core.reassign.machine`,
:mod:`opskit.adapters.reassign.runner`); running the same plan again after a crash (or
with ``--resume``) continues where it stopped.

A drain plan (``reassign plan --remove-brokers``) cordons the drained brokers first where
the cluster can (KIP-1066, :mod:`opskit.core.reassign.cordon`) and leaves them cordoned
when it ends; ``cancel --execute`` puts the cordon values back; ``uncordon`` lifts a
finished drain's cordon. Where the cluster cannot cordon, one warning line says what is
not protected and the drain runs as before.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Annotated, Any

import typer

from opskit.adapters.files.config_file import resolve_connection
from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.adapters.reassign.journal import Journal
from opskit.adapters.reassign.runner import Runner, Tick
from opskit.cli.common import (
    STATE,
    BootstrapOpt,
    ContextOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    emit,
    execute_option,
    fmt_bytes,
    fmt_duration,
    stderr,
)
from opskit.core.models import TopicPartition
from opskit.core.reassign.checks import (
    batches,
    build_moves,
    check_write_rates,
    copy_bytes,
    duration_bound,
    foreign_in_flight,
)
from opskit.core.reassign.cordon import (
    CORDON_KEY,
    Cordon,
    CordonStatus,
    CordonSupport,
    plan_cordon,
    unprotected_line,
)
from opskit.core.reassign.machine import (
    ExecState,
    Move,
    MoveStatus,
    Phase,
    initial_state,
    throttle_brokers,
    throttle_topics,
)
from opskit.core.reassign.plan_input import ExecPlan, parse_plan, parse_rate, plan_id
from opskit.errors import (
    KafkaOperationError,
    NotFoundError,
    RefusedError,
    UsageError,
)

PlanArg = Annotated[str, typer.Argument(help="plan file (kafka-reassign-partitions JSON, "
                                              "from opskit reassign plan or Kafka's tool)")]
ActOpt = Annotated[bool, execute_option("act")]


def partition_name(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"


def reassign_admin(bootstrap: str | None, context: str | None, timeout: float) -> ReassignAdmin:
    return ReassignAdmin(resolve_connection(bootstrap, context), timeout=timeout,
                         debug=STATE.debug)


def read_plan(path: str) -> ExecPlan:
    from opskit.adapters.files.safe_read import read_text

    return parse_plan(read_text(path, "plan file"), source=str(path))


class _Progress:
    """Progress on stderr: a rich bar on a terminal, a line every few seconds otherwise."""

    def __init__(self, total_bytes: int, rate: int) -> None:
        self.err = stderr()
        self.total = max(total_bytes, 1)
        self.rate = rate
        self._last_line = 0.0
        self._bar: Any = None
        self._task: Any = None
        if sys.stderr.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.fields[left]} left"), TimeRemainingColumn(),
                                 console=self.err, transient=True)
            self._task = self._bar.add_task("moving", total=self.total, left="?")
            self._bar.start()

    def tick(self, t: Tick) -> None:
        c = t.state.counts()
        moves = len(t.state.moves)
        done = c["done"] + c["failed"]
        # measured copy rate once known; before, the bound: busiest broker / throttle
        if t.copy_rate:
            eta: float | None = t.bytes_remaining / t.copy_rate
        else:
            eta = t.busiest_bytes / self.rate if self.rate else None
        desc = f"{done}/{moves} moves done, {c['in_flight'] + c['submitting']} in flight"
        if self._bar is not None:
            self._bar.update(self._task, completed=max(0, self.total - t.bytes_remaining),
                             description=desc, left=fmt_bytes(t.bytes_remaining))
            if t.state.waiting:
                self._bar.console.print(f"opskit: {t.state.waiting}")
            return
        now = time.monotonic()
        if now - self._last_line >= 5 or t.state.waiting:
            self._last_line = now
            extra = f"; {t.state.waiting}" if t.state.waiting else ""
            sys.stderr.write(f"opskit: reassign: {desc}, {fmt_bytes(t.bytes_remaining)} left, "
                             f"ETA {fmt_duration(eta)}{extra}\n")
            sys.stderr.flush()

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(f"opskit: {text}")
        else:
            sys.stderr.write(f"opskit: {text}\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _preview(plan: ExecPlan, moves: tuple[Move, ...], rate: int, limit: int | None,
             sizes: dict[TopicPartition, int], write_rates: dict[TopicPartition, float],
             has_base: bool) -> dict[str, Any]:
    per_broker = copy_bytes(moves, sizes)
    todo = tuple(m for m in moves if m.base != m.target)
    return {
        "plan_moves": len(plan.moves),
        "to_move": len(todo),
        "already_done": len(moves) - len(todo),
        "compare_and_set": "plan base" if has_base else "assignment read now (the plan has no "
                                                        "opskit base)",
        "throttle_bytes_per_s": rate,
        "throttled_brokers": list(throttle_brokers(todo)),
        "throttled_replicas": {t: {"leader": lead, "follower": fol}
                               for t, (lead, fol) in throttle_topics(todo).items()},
        "bytes_in_per_broker": {str(b): v for b, v in sorted(per_broker.items())},
        "duration_lower_bound_s": round(duration_bound(per_broker, rate), 1),
        "write_rate_bytes_per_s": {partition_name(tp): round(r, 1)
                                   for tp, r in sorted(write_rates.items())},
        "batches": [[{"partition": partition_name(m.tp), "from": list(m.base), "to": list(m.target)}
                     for m in b] for b in batches(todo, limit)],
    }


def _cordon_preview(cordon: Cordon | None) -> dict[str, Any] | None:
    if cordon is None:
        return None
    if cordon.status is CordonStatus.UNSUPPORTED:
        return {"brokers": list(cordon.brokers), "cordon": False, "why": cordon.note}
    return {"brokers": list(cordon.brokers), "cordon": True, "note": cordon.note}


def _print_preview(data: dict[str, Any], con: Any, dry_run: bool) -> None:
    cordon = data.get("cordon")
    if cordon and cordon["cordon"]:
        con.print(f"first: cordon broker(s) {', '.join(map(str, cordon['brokers']))} "
                  f"({CORDON_KEY}=*; kept when the drain ends, put back by reassign cancel "
                  "--execute)")
    con.print(f"{data['to_move']} of {data['plan_moves']} partition(s) to move "
              f"({data['already_done']} already in place); compare-and-set against "
              f"{data['compare_and_set']}")
    con.print(f"throttle {data['throttle_bytes_per_s']:,} B/s on brokers "
              f"{', '.join(map(str, data['throttled_brokers'])) or '-'}; bytes in per broker: "
              + (", ".join(f"{b}: {fmt_bytes(v)}" for b, v in data["bytes_in_per_broker"].items())
                 or "-")
              + f"; at least {fmt_duration(data['duration_lower_bound_s'])}")
    for t, lists in data["throttled_replicas"].items():
        con.print(f"  topic {t}: leader.replication.throttled.replicas={lists['leader']} "
                  f"follower.replication.throttled.replicas={lists['follower']}")
    for i, b in enumerate(data["batches"], 1):
        con.print(f"batch {i}: " + ", ".join(f"{m['partition']} {m['from']}->{m['to']}"
                                             for m in b))
    if dry_run:
        con.print("dry run: nothing changed (add --execute to run it)")


def _summary(state: ExecState, runner: Runner) -> dict[str, Any]:
    c = state.cordon
    return {
        "cordon": None if c is None else {"brokers": list(c.brokers), "status": c.status.value,
                                          "note": c.note},
        "cordon_mismatches": runner.cordon_mismatches,
        "plan_id": state.plan_id, "phase": state.phase.value, "moves": state.counts(),
        "failed": {partition_name(m.tp): m.error for m in state.moves
                   if m.status is MoveStatus.FAILED},
        "adopted": [partition_name(m.tp) for m in state.moves if m.adopted],
        "election_errors": runner.election_errors,
        "throttle_mismatches": runner.throttle_mismatches,
    }


def execute(
    plan_file: PlanArg,
    throttle: Annotated[str | None, typer.Option(
        "--throttle", help="bytes/s per broker for the moving replicas (10MB, 50MiB, 1048576)",
        show_default=False)] = None,
    max_moves: Annotated[int | None, typer.Option(
        "--max-moves-per-broker", min=1, help="moves in flight per broker at once (default: all)",
        show_default=False)] = None,
    adopt: Annotated[bool, typer.Option(
        "--adopt", help="wait for reassignments in flight that opskit did not start")] = False,
    resume: Annotated[bool, typer.Option(
        "--resume", help="continue the journaled execution of this plan (it must exist)")] = False,
    no_cordon: Annotated[bool, typer.Option(
        "--no-cordon", help="a drain plan: do not cordon the drained brokers first (KIP-1066)"
                            )] = False,
    do_execute: ActOpt = False,
    rate_interval: Annotated[float, typer.Option(
        "--rate-interval", min=0, max=60,
        help="seconds over which the moving partitions' write rate is measured")] = 2.0,
    stall_timeout: Annotated[float, typer.Option(
        "--stall-timeout", min=5, help="give up (resumable) after this many seconds without "
                                       "progress")] = 300.0,
    output: OutputOpt = Output.table,
    bootstrap: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> None:
    """Run a reassignment plan, throttled and resumable (dry run without --execute)."""
    from opskit.cli.reassign.log_dirs import disk_plan_of, execute_log_dirs

    disk = disk_plan_of(plan_file)
    if disk is not None:  # reassign plan --remove-log-dirs: moves within brokers
        return execute_log_dirs(plan_file, disk, throttle, resume, no_cordon, do_execute,
                                stall_timeout, output, reassign_admin(bootstrap, context, timeout),
                                max_moves)
    plan = read_plan(plan_file)
    pid = plan_id(plan)
    with reassign_admin(bootstrap, context, timeout) as admin:
        admin.require()
        if do_execute:  # refused before any change when an ACL is missing
            admin.require_acls("reassign execute --execute", plan.topics)
        journal = Journal(admin.admin.metadata().cluster_id)
        existing = journal.load(pid)
        unfinished = existing is not None and existing.phase is not Phase.DONE
        if resume and not unfinished:
            raise NotFoundError(f"no unfinished execution of plan {pid} to resume")
        if unfinished:
            assert existing is not None
            _resume(existing, admin, journal, do_execute, output, stall_timeout)
            return
        others = [st for st in journal.executions()
                  if st.phase is not Phase.DONE and st.plan_id != pid]
        if others:
            started = next((e for e in journal.events(others[0].plan_id)
                            if e.get("kind") == "start"), {})
            raise RefusedError(
                f"another opskit execution is unfinished on this cluster (plan "
                f"{started.get('plan', others[0].plan_id)}, phase {others[0].phase.value}): "
                "finish it first with opskit reassign execute PLAN --resume --execute (or, "
                f"if it is abandoned, move away {journal.dir(others[0].plan_id)})")
        rate = parse_rate(throttle) if throttle is not None else None
        view = admin.view(plan.topics)
        moves = build_moves(plan, view, adopt=adopt)
        foreign = foreign_in_flight(plan, view)
        if foreign and not adopt:
            raise RefusedError(
                f"{len(foreign)} reassignment(s) opskit did not start are in flight (e.g. "
                f"{partition_name(foreign[0])}); wait for them, or pass --adopt to run "
                "alongside them")
        todo = tuple(m for m in moves if m.base != m.target)
        if any(m.moves_data for m in todo) and rate is None:
            raise UsageError("--throttle RATE is required: the plan copies data")
        write_rates, sizes = admin.write_rates(todo, rate_interval if do_execute or todo else 0)
        if rate is not None:
            check_write_rates(todo, write_rates, rate, max_moves)
        data = _preview(plan, moves, rate or 0, max_moves, sizes, write_rates, plan.base is not None)
        cordon = _plan_cordon(admin, plan, view.brokers, no_cordon)
        data["cordon"] = _cordon_preview(cordon)
        if cordon is not None and cordon.status is CordonStatus.UNSUPPORTED:
            stderr().print(f"opskit: warning: {unprotected_line(cordon.brokers, cordon.note or '')}",
                           highlight=False, soft_wrap=True)
        elif cordon is not None and cordon.note:
            stderr().print(f"opskit: note: {cordon.note}", highlight=False, soft_wrap=True)
        if not do_execute:
            data["dry_run"] = True
            emit(data, output, lambda con: _print_preview(data, con, dry_run=True))
            return
        state = initial_state(pid, moves, rate or 0, max_moves, stall_after=stall_timeout,
                              cordon=cordon)
        journal.record(pid, "start", plan=str(plan_file), base_from="plan" if plan.base else "now",
                       adopted=[partition_name(m.tp) for m in moves if view.in_flight.get(m.tp)])
        if plan.base is None:
            stderr().print("opskit: the plan has no opskit base: compared against the "
                           "assignment read now")
        _run(state, admin, journal, sum(copy_bytes(todo, sizes).values()), output)


def _plan_cordon(admin: ReassignAdmin, plan: ExecPlan, registered: frozenset[int],
                 no_cordon: bool) -> Cordon | None:
    """The cordon a drain plan starts with (None: the plan drains nothing)."""
    if not plan.drain:
        return None
    if no_cordon:
        return plan_cordon(plan.drain, registered, CordonSupport(False, "--no-cordon"))
    present = [b for b in plan.drain if b in registered]
    support = admin.cordon_support(present) if present else CordonSupport(True)
    return plan_cordon(plan.drain, registered, support)


def _cordon_end(data: dict[str, Any]) -> str:
    c = data.get("cordon")
    if not c or c["status"] in ("unsupported", "planned"):
        return ""
    ids = ",".join(map(str, c["brokers"]))
    if c["status"] == "kept":
        return (f"; broker(s) {ids} stay cordoned until removed (lift it with opskit reassign "
                f"uncordon --brokers {ids} --execute)")
    if c["status"] == "released":
        return f"; broker(s) {ids} uncordoned"
    return f"; broker(s) {ids} cordoned"


def _resume(state: ExecState, admin: ReassignAdmin, journal: Journal, do_execute: bool,
            output: Output, stall_timeout: float) -> None:
    if not do_execute:
        data = {"dry_run": True, "resume": True, "plan_id": state.plan_id,
                "phase": state.phase.value, "moves": state.counts()}
        emit(data, output, lambda con: con.print(
            f"an unfinished execution of this plan exists (phase {state.phase.value}, "
            f"{state.counts()}); add --execute to resume it (never cancels, never submits "
            "a move twice)"))
        return
    stderr().print(f"opskit: resuming plan {state.plan_id} (phase {state.phase.value})")
    # the resumed run measures stalls from its own start, with its own --stall-timeout:
    # the journaled progress time is from the run that stopped (minutes ago, perhaps), so
    # kept, it would stop the resumed run at its first look when a restarted broker has
    # not fetched yet
    _run(replace(state, progress=None, stall_after=stall_timeout), admin, journal, 0, output)


def _run(state: ExecState, admin: ReassignAdmin, journal: Journal, total: int,
         output: Output) -> None:
    sink = _Progress(total, state.rate)
    runner = Runner(admin, journal, sink)
    try:
        end = runner.run(state)
    finally:
        sink.close()
    data = _summary(end, runner)
    emit(data, output, lambda con: con.print(
        f"plan {end.plan_id}: {end.counts()['done']} of {len(end.moves)} partition(s) at their "
        f"target; throttles removed"
        + (f"; adopted {len(data['adopted'])}" if data["adopted"] else "") + _cordon_end(data)))
    if data["failed"]:
        first = next(iter(data["failed"].items()))
        raise KafkaOperationError(f"{len(data['failed'])} move(s) did not complete (e.g. "
                                  f"{first[0]}: {first[1]}); throttles were cleaned up"
                                  + _cordon_end(data))


def register(app: typer.Typer) -> None:
    """Add ``execute`` to the ``reassign`` command group."""
    app.command("execute")(execute)
