"""``opskit playbook multi-rack``: put every broker of a sandbox in its rack and spread
every partition over the racks, as a journaled, resumable run (the scale-out's machine,
runner, window, pager and run lock; ``status``, ``resume`` and ``abort`` are shared).

The run's journal and its spread plan live in the sandbox's playbook directory under
``multi-rack/`` (the scale-out's journal stays beside it); the run lock is the one file
both playbooks take, so they never run at once, and neither starts while the other's run
is unfinished. ``--platform kubernetes`` (HIP-30's StatefulSets, a ConfigMap journal, the
scale-out's Lease and abort ConfigMap) is cli/playbook/k8s.py's and
adapters/scaleout/multirack_k8s.py's.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated, Any

import typer

from opskit.cli.common import Output, OutputOpt, emit, stderr
from opskit.errors import RefusedError, UsageError


def register(app: typer.Typer) -> None:
    app.command("multi-rack")(multi_rack)


def multi_rack(
    racks: Annotated[str, typer.Option(
        "--racks", help="the rack of every registered broker: 0=a,1=b,2=c")],
    add_brokers: Annotated[str | None, typer.Option(
        "--add-brokers", help="new brokers to start, each in its rack: 3=a,4=b,5=c",
        show_default=False)] = None,
    platform: Annotated[str, typer.Option(
        "--platform", help="local (a sandbox) or kubernetes (HIP-30's StatefulSets)")] = "local",
    sandbox: Annotated[str, typer.Option("--sandbox", help="the local sandbox")] = "default",
    namespace: Annotated[str | None, typer.Option(
        "--namespace", help="kubernetes: namespace of the StatefulSet", show_default=False)] = None,
    statefulset: Annotated[str | None, typer.Option(
        "--statefulset", help="kubernetes: HIP-30's combined Kafka StatefulSet",
        show_default=False)] = None,
    context: Annotated[str | None, typer.Option(
        "--context", help="kubernetes: the opskit context that reaches Kafka",
        show_default=False)] = None,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="kubernetes: kubeconfig file (default: in-cluster, then "
        "~/.kube/config)", show_default=False)] = None,
    kube_context: Annotated[str | None, typer.Option(
        "--kube-context", help="kubernetes: kubeconfig context", show_default=False)] = None,
    throttle: Annotated[str, typer.Option(
        "--throttle", help="replication throttle per broker while the spread copies")] = "50MiB",
    window: Annotated[str | None, typer.Option(
        "--window", help="act only inside this daily UTC window, e.g. 02:00-05:00Z; outside it "
        "a run stops at the next safe point and the next run resumes", show_default=False)] = None,
    routing_key_file: Annotated[Path | None, typer.Option(
        "--routing-key-file", help="PagerDuty Events v2 routing key: page when a run halts or "
        "fails", show_default=False)] = None,
    pagerduty_url: Annotated[str | None, typer.Option(
        "--pagerduty-url", help="Events API base URL (tests)", show_default=False)] = None,
    pagerduty_ca_file: Annotated[Path | None, typer.Option(
        "--pagerduty-ca-file", help="CA bundle that signs the Events API's certificate",
        show_default=False)] = None,
    do_execute: Annotated[bool, typer.Option("--execute", help="act (default: show the plan)")] = False,
    stall_timeout: Annotated[float, typer.Option(
        "--stall-timeout", min=5, max=86400, help="halt (resumable) after this many seconds "
        "without progress: a node that does not come back, partitions not back in ISR, a copy "
        "that moves nothing")] = 300.0,
    output: OutputOpt = Output.table,
) -> int:
    """Give every broker its rack (one restart per broker whose rack changes), add
    brokers in their racks, spread every partition over the racks under a throttle;
    plan shown without --execute, a journaled run resumed by 'opskit playbook resume'."""
    from opskit.adapters.scaleout.journal import FileJournal
    from opskit.cli.playbook.inputs import check_run_inputs
    from opskit.cli.playbook.k8s import K8sArgs, local_only
    from opskit.cli.playbook.run import MULTI_RACK_DIR, refuse_other_unfinished, run_dir
    from opskit.core.scaleout.multirack import MultiRackRequest, parse_rack_map

    k8s = K8sArgs(namespace, statefulset, context, kubeconfig, kube_context)
    if platform not in ("local", "kubernetes"):
        raise UsageError(f"--platform {platform!r}: expected local or kubernetes")
    if platform == "local":
        local_only(k8s)
        if context is not None:
            raise UsageError("--context is for --platform kubernetes (a sandbox has its own)")
    else:
        k8s.require()
    rack_map = parse_rack_map(racks, "--racks")
    adds = parse_rack_map(add_brokers, "--add-brokers") if add_brokers is not None else {}
    inputs = check_run_inputs(throttle=throttle, window=window, registry=None,
                              routing_key_file=routing_key_file, pagerduty_url=pagerduty_url,
                              pagerduty_ca_file=pagerduty_ca_file)
    if platform == "kubernetes":
        from opskit.cli.playbook.run import pager

        return on_kubernetes(
            k8s, MultiRackRequest(rack_map, adds, inputs.rate, inputs.window),
            throttle=throttle, execute=do_execute, output=output, wait_s=stall_timeout,
            pager=lambda rid: pager(routing_key_file, pagerduty_url, rid, pagerduty_ca_file,
                                    playbook="multi-rack"))
    from opskit.sandbox.cluster import Sandbox

    sb = Sandbox(sandbox)
    sb.require()
    _require_context(sandbox)
    store = FileJournal(run_dir(sandbox) / MULTI_RACK_DIR / "journal.json")
    existing, version = store.load()
    if existing is not None and existing.phase.value not in ("done", "aborted"):
        if not do_execute:
            from opskit.cli.playbook.run import describe

            show({**describe(sandbox, existing), "dry_run": True}, output)
            stderr().print("a multi-rack run is journaled; add --execute (or 'opskit playbook "
                           "resume') to resume it")
            return 0
        return run(sandbox, existing, version, store, throttle, inputs.window,
                   routing_key_file, pagerduty_url, pagerduty_ca_file, stall_timeout, output)
    refuse_other_unfinished(sandbox, "multi-rack")
    from opskit.adapters.scaleout.multirack import plan_for

    plan = plan_for(sb, MultiRackRequest(rack_map, adds, inputs.rate, inputs.window))
    if not do_execute:
        show({"dry_run": True, "plan": plan.to_dict()}, output)
        return 0
    from opskit.core.scaleout.machine import RunState

    state = RunState(f"mr-{secrets.token_hex(4)}", plan)
    return run(sandbox, state, version, store, throttle, inputs.window, routing_key_file,
               pagerduty_url, pagerduty_ca_file, stall_timeout, output)


def on_kubernetes(args: Any, request: Any, *, throttle: str, pager: Any, execute: bool,
                  output: Output, wait_s: float) -> int:
    """``--platform kubernetes``: the plan (dry run), or a journaled run (new, or the
    unfinished one resumed) driven by cli/playbook/k8s.py to its end or a safe point."""
    from opskit.adapters.files.config_file import resolve_connection
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.adapters.scaleout.multirack_k8s import plan_for
    from opskit.cli.playbook.k8s import drive, journal_store, refuse_other_unfinished
    from opskit.cli.playbook.run import finish
    from opskit.core.scaleout.machine import RunState

    ns, sts = args.require()
    conn = resolve_connection(None, args.context)
    api = args.api()
    existing, _ = journal_store(api, ns, sts, "multi-rack").load()
    if existing is not None and existing.phase.value not in ("done", "aborted"):
        if not execute:
            show({**existing.to_dict(), "dry_run": True}, output)
            stderr().print("a multi-rack run is journaled; add --execute (or 'opskit playbook "
                           "resume') to resume it")
            return 0
        return drive(args, existing, throttle, request.window, None, pager, output, show,
                     finish, wait_s=wait_s)
    refuse_other_unfinished(api, ns, sts, "multi-rack")
    with KafkaAdmin(conn, timeout=10.0) as admin:
        plan = plan_for(api, ns, sts, admin, request)
    if not execute:
        show({"dry_run": True, "plan": plan.to_dict()}, output)
        return 0
    state = RunState(f"mr-{secrets.token_hex(4)}", plan)
    return drive(args, state, throttle, request.window, None, pager, output, show, finish,
                 wait_s=wait_s)


def _require_context(sandbox: str) -> None:
    from opskit.cli.playbook.run import require_context

    require_context(sandbox, "the spread's reassignment runs")


def run(sandbox: str, state: Any, version: str | None, store: Any, throttle: str, win: Any,
        routing_key_file: Path | None, pagerduty_url: str | None,
        pagerduty_ca_file: Path | None, wait_s: float, output: Output) -> int:
    """Drive a multi-rack run (new or resumed) to its end, under the sandbox's run lock."""
    from opskit.adapters.files.run_lock import RunLock
    from opskit.adapters.scaleout.multirack import MultiRackSteps
    from opskit.adapters.scaleout.runner import drive
    from opskit.cli.main import main  # (loaded: it is running this command)
    from opskit.cli.playbook.run import (
        MULTI_RACK_DIR,
        context,
        describe,
        finish,
        pager,
        refuse_other_unfinished,
        resume_command,
        run_dir,
        step_throttles,
    )
    from opskit.sandbox.cluster import Sandbox

    sb = Sandbox(sandbox)
    _require_context(sandbox)
    d = run_dir(sandbox) / MULTI_RACK_DIR
    err = stderr()

    def say(m: str) -> None:
        err.print(m, highlight=False)

    steps = MultiRackSteps(sb, sb.connection(), context(sandbox), d, throttle, state.run_id,
                           wait_s=wait_s, say=say, cli=main)
    resume = resume_command(sandbox, throttle, win, None, routing_key_file, pagerduty_url,
                            pagerduty_ca_file, wait_s)
    with RunLock(run_dir(sandbox) / "run.lock", f"playbook multi-rack {state.run_id}",
                 resume=resume):
        _, now_version = store.load()
        if now_version != version:
            raise RefusedError(f"multi-rack journal {store.path} changed while this run was "
                               "starting (another run?); rerun to see its state")
        refuse_other_unfinished(sandbox, "multi-rack")
        end = drive(state, version, store, steps, window=win, abort_marker=d / "abort",
                    pager=pager(routing_key_file, pagerduty_url, state.run_id,
                                pagerduty_ca_file, playbook="multi-rack"), say=say)
    show(describe(sandbox, end), output)
    return finish(end, lambda: (d / "abort").unlink(missing_ok=True),
                  step_throttles(sandbox, end, d))


def show(data: dict[str, Any], output: Output) -> None:
    """A multi-rack run (or a plan: ``{"dry_run": True, "plan": ...}``) as text or JSON."""
    from opskit.cli.playbook.run import headline, step_mark

    def table(con: Any) -> None:
        plan = data.get("plan", {})
        con.print(f"multi-rack {data.get('run_id', '(plan)')}: {headline(data)}",
                  highlight=False)
        before = plan.get("racks_before", {})
        con.print(f"  Kafka {plan.get('kafka_version')}; brokers {plan.get('existing')} + new "
                  f"{plan.get('new_nodes')}; racks "
                  + " ".join(f"{n}:{r}" for n, r in plan.get("racks", {}).items())
                  + " (now " + " ".join(f"{n}:{r or '-'}" for n, r in before.items()) + ")",
                  highlight=False)
        con.print(f"  spread: {plan.get('replicas_to_move', 0)} replica(s) to move, lower bound "
                  f"{plan.get('replicas_lower_bound', 0)} (the rack spread alone "
                  f"{plan.get('rack_replicas_lower_bound', 0)}); "
                  f"{plan.get('bytes_to_copy', 0):,} bytes (lower bound "
                  f"{plan.get('bytes_lower_bound', 0):,}); {plan.get('unspread_before', 0)} "
                  "partition(s) over their rack limit", highlight=False)
        con.print(f"  estimated {plan.get('estimated_seconds', 0):.0f} s", highlight=False)
        for key in plan.get("steps", []):
            mark = step_mark(data, key)
            con.print(f"  {mark:>7}  {key}", highlight=False)
        for n in plan.get("notes", []):
            con.print(f"  note: {n}", highlight=False)

    emit(data, output, table)
