"""``opskit reassign status|cancel|uncordon|verify`` (see opskit.cli.reassign.commands): the
commands around an execution (:mod:`opskit.cli.reassign.execute`).

``status`` shows the reassignments in flight, opskit's journaled executions, the
throttles and cordons set on brokers; ``cancel`` cancels the moves in flight (KIP-455)
and opskit's unfinished executions, putting a drain's cordon values back; ``uncordon``
lifts the cordon a finished drain left; ``verify`` compares the cluster with a plan.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from opskit.adapters.reassign.admin import RATE_KEYS, REPLICA_KEYS
from opskit.adapters.reassign.journal import Journal
from opskit.adapters.reassign.log_dir_runner import cordon_read_at
from opskit.cli.common import BootstrapOpt, ContextOpt, Output, OutputOpt, TimeoutOpt, emit
from opskit.cli.reassign.execute import ActOpt, PlanArg, partition_name, read_plan, reassign_admin
from opskit.cli.reassign.log_dirs import (
    cancel_lines,
    cancel_log_dirs,
    dir_plan_of,
    disk_cordon_found,
    status_log_dirs,
    verify_log_dirs,
)
from opskit.core.reassign.checks import replicas_verdict
from opskit.core.reassign.cordon import CORDON_KEY
from opskit.core.reassign.log_dir_exec import newest_cordon_priors
from opskit.core.reassign.machine import Phase
from opskit.core.reassign.plan_input import plan_id
from opskit.errors import KafkaOperationError, RefusedError, UnsupportedError


def status(output: OutputOpt = Output.table, bootstrap: BootstrapOpt = None,
           context: ContextOpt = None, timeout: TimeoutOpt = 10.0) -> None:
    """Reassignments in flight, opskit's journaled executions, throttles set on brokers."""
    with reassign_admin(bootstrap, context, timeout) as admin:
        admin.require()
        _reps, _isr, brokers = admin.assignment()
        flights = admin.in_flight()
        journal = Journal(admin.admin.metadata().cluster_id)
        execs = journal.executions()
        found = admin.throttle_configs(brokers, [], tolerant=True)
    throttled = {name: {k: v for k, (v, src) in entries.items() if k in RATE_KEYS and src == 2}
                 for (_k, name), entries in found.items()}
    cordoned = {name: entries[CORDON_KEY][0] for (_k, name), entries in found.items()
                if entries.get(CORDON_KEY, (None, 5))[0]}
    data: dict[str, Any] = {
        "in_flight": [{"partition": partition_name(tp), "replicas": list(f.replicas),
                       "adding": list(f.adding), "removing": list(f.removing)}
                      for tp, f in sorted(flights.items())],
        "executions": [{"plan_id": s.plan_id, "phase": s.phase.value, "moves": s.counts(),
                        "waiting": s.waiting} for s in execs],
        "broker_throttles": {b: v for b, v in sorted(throttled.items()) if v},
        "cordoned": dict(sorted(cordoned.items())),
    }
    drains = status_log_dirs(journal.root.name)
    if drains:  # log-directory drains (--remove-log-dirs), journaled apart
        data["log_dir_drains"] = drains

    def table(con: Any) -> None:
        con.print(f"{len(flights)} reassignment(s) in flight")
        for r in data["in_flight"]:
            con.print(f"  {r['partition']} replicas={r['replicas']} adding={r['adding']} "
                      f"removing={r['removing']}")
        for e in data["executions"]:
            con.print(f"opskit plan {e['plan_id']}: {e['phase']} {e['moves']}"
                      + (f" ({e['waiting']})" if e["waiting"] else ""))
        for b, v in data["broker_throttles"].items():
            con.print(f"broker {b} throttle: {v}")
        for b, v in data["cordoned"].items():
            con.print(f"broker {b} cordoned: {CORDON_KEY}={v}")
        for d in drains:
            con.print(f"opskit log-directory drain {d['plan_id']}: "
                      f"{'cancelled' if d['cancelled'] else 'done' if d['done'] else 'unfinished'} "
                      f"{d['moves']}")

    emit(data, output, table)


def cancel(do_execute: ActOpt = False,
           output: OutputOpt = Output.table, bootstrap: BootstrapOpt = None,
           context: ContextOpt = None, timeout: TimeoutOpt = 10.0) -> None:
    """Cancel every reassignment in flight (KIP-455: they revert to their original replicas)
    and opskit's unfinished executions: nothing more is submitted, a drain's cordon values
    come back."""
    with reassign_admin(bootstrap, context, timeout) as admin:
        admin.require()
        flights = admin.in_flight()
        journal = Journal(admin.admin.metadata().cluster_id)
        unfinished = [st for st in journal.executions() if st.phase is not Phase.DONE]
        held = {st.plan_id: st.cordon for st in unfinished
                if st.cordon is not None and st.cordon.holds and st.cordon.prior is not None}
        data: dict[str, Any] = {"in_flight": [partition_name(tp) for tp in sorted(flights)],
                                "executions": [st.plan_id for st in unfinished],
                                "uncordon": {pid: list(c.brokers) for pid, c in held.items()},
                                "dry_run": not do_execute}
        if do_execute and (flights or unfinished):
            admin.require_acls("reassign cancel --execute", ())
            if held:  # uncordoning too: refused before the cancel, not after it
                admin.require_acls("reassign execute --execute", (), only=admin.CORDON_ACLS,
                                   label="reassign cancel --execute (uncordon)")
            res = admin.cancel(sorted(flights))
            data["cancelled"] = [partition_name(tp) for tp in res.accepted]
            data["errors"] = {partition_name(tp): e for tp, e in res.rejected.items()}
            for st in unfinished:  # a running or resumed execution reads it (the runner)
                journal.record(st.plan_id, "cancel", partitions=data["cancelled"])
            mismatches: list[str] = []
            for pid, c in held.items():
                assert c.prior is not None
                journal.record(pid, "uncordon", values=[[b, v] for b, v in c.prior])
                mismatches += admin.restore_cordon(c.prior)
            data["cordon_mismatches"] = mismatches
        disk = cancel_log_dirs(admin, do_execute)  # log-directory drains (--remove-log-dirs)
        data.update(disk)

    def table(con: Any) -> None:
        ids = sorted({b for bs in data["uncordon"].values() for b in bs})
        for line in cancel_lines(disk):
            con.print(line)
        if not flights and not unfinished:
            if not disk:
                con.print("no reassignment in flight: nothing to cancel")
        elif not do_execute:
            con.print(f"would cancel {len(flights)} reassignment(s)"
                      + (": " + ", ".join(data["in_flight"]) if flights else "")
                      + (f" and opskit execution(s) {', '.join(data['executions'])}"
                         if unfinished else "")
                      + (f", and uncordon broker(s) {','.join(map(str, ids))}" if ids else "")
                      + " (dry run; add --execute)")
        else:
            con.print(f"cancelled {len(data['cancelled'])} reassignment(s)"
                      + (f"; broker(s) {','.join(map(str, ids))} uncordoned" if ids else "")
                      + "; an opskit execution they belonged to finishes (throttles removed, "
                      "nothing more submitted) with opskit reassign execute PLAN --resume "
                      "--execute")

    emit(data, output, table)
    if data.get("errors"):
        raise KafkaOperationError(f"cancelling failed for {len(data['errors'])} partition(s): "
                                  f"{next(iter(data['errors'].items()))}")
    if data.get("log_dir_mismatches"):
        raise KafkaOperationError("cancelling the log-directory drain left: " + "; ".join(
            data["log_dir_mismatches"]))
    if data.get("cordon_mismatches"):
        raise KafkaOperationError("uncordoning did not take: " + "; ".join(
            data["cordon_mismatches"]) + " (opskit reassign execute PLAN --resume --execute "
            "retries it)")


def uncordon(
    brokers: Annotated[str, typer.Option(
        "--brokers", help="the brokers to uncordon: 2 or 2,5", show_default=False)],
    do_execute: ActOpt = False,
    output: OutputOpt = Output.table, bootstrap: BootstrapOpt = None,
    context: ContextOpt = None, timeout: TimeoutOpt = 10.0,
) -> None:
    """Lift the cordon a finished drain left (cordoned.log.dirs back to the value found
    before it, or deleted). Refused while an unfinished drain holds it: cancel that."""
    from opskit.cli.reassign.plan import broker_ids

    ids = broker_ids(brokers, "--brokers")
    with reassign_admin(bootstrap, context, timeout) as admin:
        admin.require()
        journal = Journal(admin.admin.metadata().cluster_id)
        found: list[tuple[float, tuple[tuple[int, str | None], ...]]] = []
        for st in journal.executions()[::-1]:  # finished ones first, unfinished last
            c = st.cordon
            if c is None or not c.holds or c.prior is None:
                continue
            if st.phase is not Phase.DONE and set(c.brokers) & set(ids):
                raise RefusedError(
                    f"an unfinished drain (plan {st.plan_id}) holds the cordon of broker(s) "
                    f"{','.join(map(str, sorted(set(c.brokers) & set(ids))))}: cancel it with "
                    "opskit reassign cancel --execute, or let it finish")
            found.append((cordon_read_at(journal.events(st.plan_id)), c.prior))
        found += disk_cordon_found(journal.root.name, ids)  # --remove-log-dirs drains
        # the value the newest drain found (by the journals' times), else none
        prior: dict[int, str | None] = {b: None for b in ids}
        prior.update(newest_cordon_priors(found, ids))
        now = admin.cordons(ids)
        missing = [b for b in ids if b not in now]
        if missing:
            raise UnsupportedError(f"broker(s) {','.join(map(str, missing))} report no "
                                   f"{CORDON_KEY} (KIP-1066 needs Kafka 4.3+, and a broker "
                                   "that answers)")
        data: dict[str, Any] = {"brokers": {str(b): {"now": now[b][0], "after": prior[b]}
                                            for b in ids}, "dry_run": not do_execute}
        if do_execute:
            admin.require_acls("reassign execute --execute", (), only=admin.CORDON_ACLS,
                               label="reassign uncordon --execute")
            data["mismatches"] = admin.restore_cordon(sorted(prior.items()))

    def table(con: Any) -> None:
        for b, v in data["brokers"].items():
            after = (f"{CORDON_KEY}={v['after']}" if v["after"] is not None
                     else "no dynamic value (the static or default one applies)")
            con.print(f"broker {b}: {CORDON_KEY}={v['now'] or '(none)'} -> {after}")
        con.print("dry run: nothing changed (add --execute)" if not do_execute
                  else "uncordoned")

    emit(data, output, table)
    if data.get("mismatches"):
        raise KafkaOperationError("uncordoning did not take: " + "; ".join(data["mismatches"]))


def verify(plan_file: PlanArg, output: OutputOpt = Output.table, bootstrap: BootstrapOpt = None,
           context: ContextOpt = None, timeout: TimeoutOpt = 10.0) -> None:
    """Does the cluster match the plan? Exit 0 yes, 1 still moving, 2 differs; lists any
    throttle config left on the plan's brokers and topics. A plan naming log directories
    (--remove-log-dirs, or log_dirs in Kafka's JSON) also checks each such replica in its
    directory (DescribeLogDirs): exit 3 when a broker does not answer."""
    disk = dir_plan_of(plan_file)
    if disk is not None:  # moves between log directories: each replica's directory
        return verify_log_dirs(disk, output, reassign_admin(bootstrap, context, timeout))
    plan = read_plan(plan_file)
    with reassign_admin(bootstrap, context, timeout) as admin:
        admin.require()
        flights = admin.in_flight()  # first: see opskit.adapters.reassign.runner._read
        reps, _isr, brokers = admin.assignment()
        state = Journal(admin.admin.metadata().cluster_id).load(plan_id(plan))
        involved = {b for m in plan.moves for b in m.target} & brokers
        found = admin.throttle_configs(involved, [t for t in plan.topics
                                                  if any(tp.topic == t for tp in reps)])
    rows: list[dict[str, Any]] = []
    for m in plan.moves:
        now = reps.get(m.tp)
        verdict = replicas_verdict(now, m.target, m.tp in flights)
        rows.append({"partition": partition_name(m.tp), "target": list(m.target),
                     "replicas": list(now or ()), "state": verdict})
    expected = {(r, k): v for r, k, v in (state.baseline.values if state and state.baseline
                                          else ())}
    left = []
    for (kind, name), entries in sorted(found.items()):
        for k in RATE_KEYS + REPLICA_KEYS:
            value, src = entries.get(k, (None, 5))
            if src in (1, 2) and value and expected.get((f"{kind}:{name}", k)) != value:
                left.append(f"{kind} {name} {k}={value}")
    data: dict[str, Any] = {"partitions": rows, "throttles_left": left,
            "execution": None if state is None else state.phase.value}

    def table(con: Any) -> None:
        for r in rows:
            if r["state"] != "done":
                con.print(f"{r['partition']}: {r['state']} (replicas {r['replicas']}, "
                          f"target {r['target']})")
        n_done = sum(1 for r in rows if r["state"].startswith("done"))
        con.print(f"{n_done} of {len(rows)} partition(s) at their target; "
                  + ("throttles left: " + "; ".join(left) if left else "no throttle left"))

    emit(data, output, table)
    states = {r["state"] for r in rows}
    if states & {"differs", "missing"}:
        raise typer.Exit(2)
    if "moving" in states or left:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``status``, ``cancel``, ``uncordon`` and ``verify`` to the ``reassign`` command group."""
    app.command("status")(status)
    app.command("cancel")(cancel)
    app.command("uncordon")(uncordon)
    app.command("verify")(verify)
