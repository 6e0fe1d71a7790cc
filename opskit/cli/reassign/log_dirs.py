"""Draining log directories (JBOD disks): ``reassign plan --remove-log-dirs``, the
execution of such a plan by ``reassign execute`` and its part of ``reassign cancel``.

The planning is :mod:`opskit.core.reassign.log_dirs`, the execution
:mod:`opskit.core.reassign.log_dir_exec` run by
:mod:`opskit.adapters.reassign.log_dir_runner`. On Kafka 4.3+ (KIP-1066) the drained
directories are cordoned first (``cordoned.log.dirs``, merged with the value found); on
older Kafka one line says what is not protected.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import typer

from opskit.adapters.files.safe_read import read_text
from opskit.adapters.files.safe_write import check_writable_target, write_file
from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.adapters.reassign.log_dir_runner import DiskJournal, DiskRunner
from opskit.adapters.reassign.log_dirs import DiskAdmin
from opskit.cli.common import Output, emit, fmt_bytes, stderr
from opskit.core.models import TopicPartition
from opskit.core.reassign.checks import replicas_verdict
from opskit.core.reassign.cordon import CORDON_KEY
from opskit.core.reassign.log_dir_exec import (
    C_KEPT,
    C_PLANNED,
    C_RELEASED,
    C_UNSUPPORTED,
    DONE,
    FAILED,
    THROTTLE_KEY,
    V_DONE,
    V_UNKNOWN,
    DirTarget,
    DiskExec,
    dir_targets,
    initial,
    newest_cordon_priors,
    verify_dir,
    verify_exit,
)
from opskit.core.reassign.log_dirs import (
    DiskPlan,
    dirs_plan_id,
    is_disk_plan,
    norm_dir,
    parse_disk_plan,
    parse_log_dir_targets,
    plan_dir_drain,
)
from opskit.core.reassign.model import Assignment, load_json, parse_assignments
from opskit.core.reassign.plan_input import parse_rate
from opskit.errors import (
    IncompleteError,
    InvalidInputError,
    KafkaOperationError,
    NotFoundError,
    OpskitError,
    RefusedError,
    UnsupportedError,
    UsageError,
)

_TABLE_MOVES = 30


def _say(text: str) -> None:
    sys.stderr.write(f"opskit: {text}\n")
    sys.stderr.flush()


def _unprotected(dirs: str, reason: str) -> str:
    return (f"log directories {dirs} not cordoned ({reason}): until the drain ends, a "
            "partition created on the broker meanwhile can be placed there (Kafka puts a new "
            "replica in the directory with the fewest partitions: the one emptying)")


def _dirs_text(drained: tuple[tuple[int, str], ...]) -> str:
    return ",".join(f"{b}:{d}" for b, d in drained)


# --------------------------------------------------------------------------- plan


def plan_log_dirs(spec: str, other_goal: bool, write_plan: str | None, output: Output,
                  ra: ReassignAdmin) -> None:
    """``reassign plan --remove-log-dirs BROKER:DIR,...``: show (and write) the plan."""
    if other_goal:
        raise UsageError("--remove-log-dirs is a goal of its own: give it without --add-brokers, "
                         "--remove-brokers, --replication-factor, --rebalance, --from-json or "
                         "the byte options or --leader-weights (--throttle goes with reassign execute)")
    drained = parse_log_dir_targets(spec)
    if write_plan is not None:
        check_writable_target(write_plan, "plan file")
    with ra:
        reps, _isr, registered = ra.assignment()
        brokers = sorted({b for b, _ in drained} & set(registered))
        dirs, replicas = DiskAdmin(ra).describe(brokers) if brokers else ([], [])
        plan = plan_dir_drain(dirs, replicas, drained, registered, reps,
                              datetime.now(UTC).isoformat(timespec="seconds"))
        note = _cordon_note(ra, plan)
    err = stderr()
    err.print(f"opskit: {note}", highlight=False, soft_wrap=True)
    if write_plan is not None:
        if not plan.moves:
            err.print("opskit: nothing to move: no plan file written", highlight=False)
        else:
            write_file(write_plan, plan.to_json(), what="plan file")
            err.print(f"plan written to {write_plan}: run it with opskit reassign execute "
                      f"{write_plan} [--throttle RATE] --execute", highlight=False)
    emit(plan.to_dict(), output, lambda con: _table(con, plan))


def _cordon_note(ra: ReassignAdmin, plan: DiskPlan) -> str:
    from opskit.errors import OpskitError

    try:
        support = ra.cordon_support(plan.brokers)
    except OpskitError as e:
        return f"could not tell whether reassign execute can cordon the directories: {e}"
    if not support.supported:
        return "warning: " + _unprotected(_dirs_text(plan.drained), support.reason)
    return (f"reassign execute cordons {_dirs_text(plan.drained)} before the first move "
            f"(KIP-1066, {CORDON_KEY}: no new replica is placed there) and leaves them cordoned "
            "when the drain ends")


def _table(con: Any, plan: DiskPlan) -> None:
    con.print(f"drain {_dirs_text(plan.drained)}: {len(plan.moves)} replica(s), "
              f"{fmt_bytes(plan.bytes_moved)} moved within their brokers (no data crosses the "
              "network; replica sets unchanged)")
    space = plan.space or {}
    for key in sorted(plan.before):
        b, d = key
        total, usable = space.get(key, (-1, -1))
        free = (f"; volume {fmt_bytes(usable)} free of {fmt_bytes(total)}" if total >= 0 else "")
        mark = "  (drained)" if key in plan.drained else ""
        con.print(f"  broker {b} {d}: {fmt_bytes(plan.before[key])} -> "
                  f"{fmt_bytes(plan.after.get(key, 0))}{free}{mark}")
    for m in plan.moves[:_TABLE_MOVES]:
        con.print(f"  {m.tp.topic}:{m.tp.partition} broker {m.broker}: {m.source} -> {m.target} "
                  f"({fmt_bytes(m.size_bytes)})")
    if len(plan.moves) > _TABLE_MOVES:
        con.print(f"  ... and {len(plan.moves) - _TABLE_MOVES} more (-o json or the plan file)")


# --------------------------------------------------------------------------- execute


def disk_plan_of(path: str) -> DiskPlan | None:
    """The log-directory drain in a plan file, None when it is another kind of plan."""
    try:
        return parse_disk_plan(read_text(path, "plan file"), source=str(path))
    except InvalidInputError:
        return None  # the caller's own reader says what is wrong with it


def execute_log_dirs(path: str, plan: DiskPlan, throttle: str | None, resume: bool,
                     no_cordon: bool, do_execute: bool, stall_timeout: float, output: Output,
                     ra: ReassignAdmin, max_moves: int | None = None) -> None:
    rate = parse_rate(throttle) if throttle is not None else None
    pid = plan.plan_id()
    with ra:
        da = DiskAdmin(ra)
        journal = DiskJournal(ra.admin.metadata().cluster_id)
        existing = journal.load_disk(pid)
        unfinished = existing is not None and not existing.done
        if resume and not unfinished:
            raise NotFoundError(f"no unfinished execution of plan {pid} to resume")
        if unfinished:
            assert existing is not None
            if not do_execute:
                emit({"dry_run": True, "resume": True, "plan_id": pid,
                      "moves": existing.counts()}, output, lambda con: con.print(
                    f"an unfinished execution of this plan exists ({existing.counts()}); add "
                    "--execute to resume it"))
                return
            _say(f"resuming plan {pid}")
            _run(existing, da, journal, stall_timeout, output)
            return
        others = [s for s in journal.disk_executions() if not s.done and s.plan_id != pid]
        if others:
            raise RefusedError(f"another opskit log-directory drain is unfinished on this cluster "
                               f"(plan {others[0].plan_id}): finish it with opskit reassign "
                               f"execute {others[0].plan_path} --resume --execute, or cancel it")
        cordon, note = C_UNSUPPORTED, None
        if no_cordon:
            note = "--no-cordon"
        else:
            support = ra.cordon_support(plan.brokers)
            cordon, note = (C_PLANNED, None) if support.supported else (C_UNSUPPORTED,
                                                                        support.reason)
        if cordon == C_UNSUPPORTED:
            _say("warning: " + _unprotected(_dirs_text(plan.drained), note or ""))
        data = {"plan_id": pid, "moves": len(plan.moves), "bytes": plan.bytes_moved,
                "throttle_bytes_per_s": rate, "cordon": cordon == C_PLANNED,
                "log_dirs": [[b, d] for b, d in plan.drained]}
        if not do_execute:
            data["dry_run"] = True
            emit(data, output, lambda con: con.print(
                (f"first: cordon {_dirs_text(plan.drained)} ({CORDON_KEY}, merged with the value "
                 "found; kept when the drain ends, put back by reassign cancel --execute)\n"
                 if cordon == C_PLANNED else "")
                + f"{len(plan.moves)} replica(s), {fmt_bytes(plan.bytes_moved)} to move within "
                f"broker(s) {','.join(map(str, plan.brokers))}, {max_moves or 1} at a time per "
                "broker"
                + (f"; throttle {rate:,} B/s per broker (replica.alter.log.dirs.io.max.bytes."
                   "per.second)" if rate else "; no throttle (--throttle RATE sets one)")
                + "\ndry run: nothing changed (add --execute to run it)"))
            return
        for key, name in ((34, "AlterReplicaLogDirs"), (35, "DescribeLogDirs")):
            if not ra.admin.capabilities.supports(key, 0):
                raise UnsupportedError(f"the broker does not support {name} (API key {key}), "
                                       "needed to move replicas between log directories")
        ra.require_acls("reassign execute --execute", sorted({m.tp.topic for m in plan.moves}))
        st = initial(pid, str(path), plan.moves, rate, plan.drained, cordon, note,
                     max_moves or 1)
        journal.record(pid, "start", plan=str(path))
        _run(st, da, journal, stall_timeout, output)


def _run(st: DiskExec, da: DiskAdmin, journal: DiskJournal, stall_timeout: float,
         output: Output) -> None:
    runner = DiskRunner(da, journal, _say, stall_timeout)
    end = runner.run(st)
    c = end.counts()
    data: dict[str, Any] = {"plan_id": end.plan_id, "moves": c, "cancelled": end.cancelled,
            "cordon": end.cordon, "log_dirs": [[b, d] for b, d in end.drained],
            "failed": {f"{m.tp.topic}:{m.tp.partition}@{m.broker}": end.errors[i]
                       for i, m in enumerate(end.moves) if end.status[i] == FAILED},
            "mismatches": runner.mismatches}
    tail = {C_KEPT: f"; {_dirs_text(end.drained)} stay cordoned (the disk is to be removed)",
            C_RELEASED: "; cordon values put back"}.get(end.cordon, "")
    emit(data, output, lambda con: con.print(
        f"plan {end.plan_id}: {c[DONE]} of {len(end.moves)} replica(s) in their target "
        f"directory" + ("; cancelled" if end.cancelled else "")
        + ("; throttle removed" if end.throttle == "removed" else "") + tail))
    if end.cancelled:
        raise KafkaOperationError(f"the drain was cancelled (reassign cancel --execute): "
                                  f"{c['cancelled']} move(s) stopped, {c[DONE]} finished")
    if data["failed"]:
        first = next(iter(data["failed"].items()))
        raise KafkaOperationError(f"{len(data['failed'])} move(s) did not complete (e.g. "
                                  f"{first[0]}: {first[1]}); throttle removed; resume with "
                                  f"opskit reassign execute {end.plan_path} --resume --execute "
                                  "or cancel with opskit reassign cancel --execute")
    if runner.mismatches:
        raise KafkaOperationError("config values did not take: " + "; ".join(runner.mismatches))


# --------------------------------------------------------------------------- status, cancel


def status_log_dirs(cluster: str) -> list[dict[str, Any]]:
    """``reassign status``'s part: the cluster's journaled log-directory drains."""
    return [{"plan_id": s.plan_id, "done": s.done, "cancelled": s.cancelled,
             "moves": s.counts(), "cordon": s.cordon,
             "log_dirs": [[b, d] for b, d in s.drained]}
            for s in DiskJournal(cluster).disk_executions()]


def disk_cordon_found(cluster: str, ids: Iterable[int]
                      ) -> list[tuple[float, tuple[tuple[int, str | None], ...]]]:
    """``reassign uncordon``'s part: for each finished disk drain of one of ``ids`` that
    holds a cordon, (when it read the ``cordoned.log.dirs`` values, the values it found
    before it cordoned; None: none was set). RefusedError while an unfinished disk drain
    holds the cordon of one of ``ids``."""
    out: list[tuple[float, tuple[tuple[int, str | None], ...]]] = []
    wanted = set(ids)
    journal = DiskJournal(cluster)
    for ds in journal.disk_executions()[::-1]:  # finished first
        hit = sorted(set(ds.cordon_brokers()) & wanted)
        if not hit or not ds.cordon_holds or ds.cordon_prior is None:
            continue
        if not ds.done:
            raise RefusedError(f"an unfinished log-directory drain (plan {ds.plan_id}) holds "
                               f"the cordon of broker(s) {','.join(map(str, hit))}: cancel it "
                               "with opskit reassign cancel --execute, or let it finish")
        out.append((journal.cordon_read_at(ds.plan_id),
                    tuple((b, v) for b, v in ds.cordon_prior if b in hit)))
    return out


def disk_cordon_prior(cluster: str, ids: Iterable[int]) -> dict[int, str | None]:
    """broker -> the ``cordoned.log.dirs`` value the newest finished disk drain of it found
    before it cordoned (None: none was set); brokers no such drain cordoned are left out.
    RefusedError while an unfinished disk drain holds the cordon of one of ``ids``."""
    ids = list(ids)
    return newest_cordon_priors(disk_cordon_found(cluster, ids), ids)


def cancel_log_dirs(ra: ReassignAdmin, do_execute: bool, wait: float = 60.0) -> dict[str, Any]:
    """``reassign cancel``'s part: every unfinished log-directory drain drops the copies in
    flight and gets its throttle and cordon values back. Returns what was (or would be)
    done; ``{}`` when there is no such drain."""
    journal = DiskJournal(ra.admin.metadata().cluster_id)
    unfinished = [s for s in journal.disk_executions() if not s.done]
    if not unfinished:
        return {}
    out: dict[str, Any] = {"log_dir_drains": [s.plan_id for s in unfinished],
                           "dry_run": not do_execute}
    if not do_execute:
        return out
    runner = DiskRunner(DiskAdmin(ra), journal, _say)
    ends = []
    for s in unfinished:
        journal.record(s.plan_id, "cancel")
        lock: Any = journal.wait_lock(s.plan_id, wait)  # a running execution cancels itself
        try:
            now = journal.load_disk(s.plan_id) or s
            ends.append(now if now.done else runner.cancel(now))
        finally:
            lock.__exit__(None, None, None)
    out["log_dir_cancelled"] = {e.plan_id: e.counts() for e in ends}
    out["log_dir_uncordoned"] = [e.plan_id for e in ends if e.cordon == C_RELEASED]
    out["log_dir_mismatches"] = runner.mismatches
    return out


def cancel_lines(data: dict[str, Any]) -> list[str]:
    if not data:
        return []
    if data.get("dry_run"):
        return [(f"would cancel log-directory drain(s) {', '.join(data['log_dir_drains'])}: "
                 "copies in flight dropped, throttle and cordon values put back (dry run; add "
                 "--execute)")]
    return [f"log-directory drain {pid}: cancelled ({c['cancelled']} move(s) stopped, their "
            f"copies dropped; {c['done']} already finished stay in their new directory)"
            + ("; cordon values put back" if pid in data["log_dir_uncordoned"] else "")
            for pid, c in data["log_dir_cancelled"].items()]


# --------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class DirPlan:
    """What ``reassign verify`` checks of a plan naming log directories."""

    path: str
    assignments: tuple[Assignment, ...]
    targets: tuple[DirTarget, ...]
    #: the directories an opskit ``--remove-log-dirs`` plan drains (empty for Kafka's JSON)
    drained: tuple[tuple[int, str], ...]


def dir_plan_of(path: str) -> DirPlan | None:
    """The plan file when it names log directories (``reassign plan --remove-log-dirs``, or
    Kafka's JSON with ``log_dirs`` other than ``any``); None otherwise, also when it is
    unreadable or malformed (the inter-broker reader then says why)."""
    try:
        text = read_text(path, "plan file")
        data = load_json(text)
        assignments = parse_assignments(data)
    except OpskitError:
        return None
    targets = dir_targets(assignments)
    if not targets:
        return None
    drained: tuple[tuple[int, str], ...] = ()
    if is_disk_plan(data):
        disk = parse_disk_plan(text, source=str(path))  # malformed: one line, exit 2
        drained = disk.drained if disk is not None else ()
    return DirPlan(str(path), assignments, targets, drained)


def verify_log_dirs(plan: DirPlan, output: Output, ra: ReassignAdmin) -> None:
    """``reassign verify`` of a plan naming log directories: each partition's replicas as for
    any plan, and each named replica in its directory (DescribeLogDirs, broker by broker).
    Exit 0 all at their target and no intra-broker throttle left, 1 still moving or a
    throttle left, 2 one differs or is missing, 3 one could not be verified (a broker that
    is not registered or does not answer: never 0) or the throttle could not be read."""
    pid = dirs_plan_id((t.tp, t.broker, t.target) for t in plan.targets)
    brokers = sorted({t.broker for t in plan.targets} | {b for b, _ in plan.drained})
    with ra:
        ra.require()
        flights = ra.in_flight()  # first, as verify of a broker plan
        reps, _isr, registered = ra.assignment()
        state = DiskJournal(ra.admin.metadata().cluster_id).load_disk(pid)
        da = DiskAdmin(ra)
        unreadable = {b: f"broker {b} is not registered (stopped or removed): its log "
                      "directories cannot be read" for b in brokers if b not in registered}
        dirs, replicas, failed = da.describe_each(b for b in brokers if b in registered)
        unreadable.update(failed)
        answered = [b for b in brokers if b not in unreadable]
        throttle_error: str | None = None
        try:
            throttles = da.dynamic_values(THROTTLE_KEY, answered) if answered else ()
        except OpskitError as e:  # a part of the answer, not all of it: said, and exit 3
            throttles, throttle_error = (), f"{THROTTLE_KEY} could not be read: {e}"
    seen: dict[tuple[TopicPartition, int], tuple[str | None, str | None]] = {}
    for r in replicas:
        live, fut = seen.get((r.tp, r.broker), (None, None))
        seen[(r.tp, r.broker)] = (live, r.path) if r.future else (r.path, fut)
    offline: dict[int, tuple[str, ...]] = {}
    for d in dirs:
        if d.error_code:
            offline[d.broker] = (*offline.get(d.broker, ()), d.path)
    parts: list[dict[str, Any]] = []
    for a in plan.assignments:
        now = reps.get(a.tp)
        verdict = replicas_verdict(now, a.replicas, a.tp in flights)
        parts.append({"partition": _pname(a.tp), "target": list(a.replicas),
                      "replicas": list(now or ()), "state": verdict})
    rows: list[dict[str, Any]] = []
    for t in plan.targets:
        verdict, why = verify_dir(t, seen, unreadable, offline)
        live, fut = seen.get((t.tp, t.broker), (None, None))
        rows.append({"partition": _pname(t.tp), "broker": t.broker, "target": t.target,
                     "log_dir": live, "future_log_dir": fut, "state": verdict, "why": why})
    prior = dict(state.throttle_prior or ()) if state is not None else {}
    left = [f"broker {b} {THROTTLE_KEY}={v}" for b, v in throttles
            if v is not None and prior.get(b) != v]
    drained = [{"broker": b, "dir": d, "cordoned": None if b in unreadable else next(
                    (x.cordoned for x in dirs if x.broker == b and norm_dir(x.path) == d), None),
                "replicas": None if b in unreadable else sum(
                    1 for r in replicas if r.broker == b and norm_dir(r.path) == d)}
               for b, d in plan.drained]
    data: dict[str, Any] = {
        "plan_id": pid, "partitions": parts, "replicas": rows, "throttles_left": left,
        "log_dirs": drained, "unreadable": {str(b): w for b, w in sorted(unreadable.items())},
        "throttle_unreadable": throttle_error,
        "execution": None if state is None else ("cancelled" if state.cancelled else "done"
                                                 if state.done else "unfinished")}

    def table(con: Any) -> None:
        for p in parts:
            if not p["state"].startswith("done"):
                con.print(f"{p['partition']}: {p['state']} (replicas {p['replicas']}, "
                          f"target {p['target']})")
        for r in rows:
            if r["state"] != V_DONE:
                con.print(f"{r['partition']} on broker {r['broker']}: {r['state']} "
                          f"({r['why']}; target {r['target']})")
        for d in drained:
            if d["replicas"] is None:
                continue
            con.print(f"drained {d['broker']}:{d['dir']}: {d['replicas']} replica(s) left"
                      + ("" if d["cordoned"] is None
                         else ", cordoned" if d["cordoned"] else ", not cordoned"))
        n_done = sum(1 for r in rows if r["state"] == V_DONE)
        con.print(f"{n_done} of {len(rows)} replica(s) in their planned log directory; "
                  + ("throttles left: " + "; ".join(left) if left
                     else "throttle unknown" if throttle_error else "no throttle left"))

    emit(data, output, table)
    states = [r["state"] for r in rows] + [
        V_DONE if p["state"].startswith("done") else p["state"] for p in parts]
    code = verify_exit(states + ([V_UNKNOWN] if throttle_error else []), bool(left))
    if code == 3:
        unknown = [r for r in rows if r["state"] == V_UNKNOWN]
        raise IncompleteError(f"{len(unknown)} replica(s) could not be verified: "
                              f"{unknown[0]['why']}" if unknown else str(throttle_error))
    if code:
        raise typer.Exit(code)


def _pname(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"
