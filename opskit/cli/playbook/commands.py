"""``opskit playbook scale-out|status|resume|abort|cronjob``: HIP-30's 1 -> 3 broker
scaling path.

- ``--platform local`` (default) drives a sandbox: nodes are started on this machine,
  the journal is a file in opskit's state directory, an abort is a marker file.
- ``--platform kubernetes --namespace NS --statefulset NAME --context KAFKA_CONTEXT``
  drives HIP-30's bitnami-style combined StatefulSet (static quorum only): a broker-only
  StatefulSet beside it, the journal in a ConfigMap, one run at a time by a Lease, an
  abort as a ConfigMap (cli/playbook/k8s.py, adapters/scaleout/k8s.py).
- ``upgrade-quorum --sandbox N`` (Kafka 4.1+): the explicit, irreversible static ->
  dynamic controller quorum upgrade of a sandbox; never done by ``scale-out``.
- ``multi-rack --sandbox N --racks 0=a,1=b,2=c`` (cli/playbook/multirack.py): every broker
  in its rack, every partition spread over the racks; a sandbox or, with ``--platform
  kubernetes``, HIP-30's StatefulSets (adapters/scaleout/multirack_k8s.py).
- ``cronjob`` prints or writes the CronJob (+ ServiceAccount/Role/RoleBinding) that runs
  the Kubernetes scale-out on a schedule inside a window.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated, Any

import typer

from opskit.cli.common import Output, OutputOpt, emit, stderr, stdout
from opskit.cli.playbook.run import context as _context
from opskit.cli.playbook.run import finish as _finish
from opskit.cli.playbook.run import headline, step_mark
from opskit.cli.playbook.run import pager as _pager
from opskit.cli.playbook.run import resume_command as _resume_command
from opskit.cli.playbook.run import run_dir as _run_dir
from opskit.errors import NotFoundError, RefusedError, UsageError

app = typer.Typer(help="Scheduled, resumable cluster playbooks (scale-out from 1 to 3 "
                  "brokers, multi-rack).", no_args_is_help=True)

PagerDutyUrlOpt = Annotated[str | None, typer.Option(
    "--pagerduty-url", help="Events API base URL (tests)", show_default=False)]
PagerDutyCaOpt = Annotated[Path | None, typer.Option(
    "--pagerduty-ca-file", help="CA bundle that signs the Events API's certificate "
    "(a local receiver)", show_default=False)]
SandboxOpt = Annotated[str, typer.Option("--sandbox", help="the local sandbox to scale")]
StallOpt = Annotated[float, typer.Option(
    "--stall-timeout", min=5, max=86400,
    help="halt (resumable) after this many seconds without progress: a copy that moves "
    "nothing (a broker down), a node or pod that does not come up, partitions not back in "
    "ISR")]
PlatformOpt = Annotated[str, typer.Option(
    "--platform", help="local (a sandbox) or kubernetes (HIP-30's StatefulSet)")]
NamespaceOpt = Annotated[str | None, typer.Option(
    "--namespace", help="kubernetes: namespace of the StatefulSet", show_default=False)]
StatefulSetOpt = Annotated[str | None, typer.Option(
    "--statefulset", help="kubernetes: HIP-30's combined Kafka StatefulSet",
    show_default=False)]
KafkaContextOpt = Annotated[str | None, typer.Option(
    "--context", help="kubernetes: the opskit context that reaches Kafka", show_default=False)]
KubeconfigOpt = Annotated[Path | None, typer.Option(
    "--kubeconfig", help="kubernetes: kubeconfig file (default: in-cluster, then "
    "~/.kube/config)", show_default=False)]
KubeContextOpt = Annotated[str | None, typer.Option(
    "--kube-context", help="kubernetes: kubeconfig context", show_default=False)]


def _platform(platform: str, namespace: str | None, statefulset: str | None,
              context: str | None, kubeconfig: Path | None,
              kube_context: str | None) -> Any:
    """K8sArgs for --platform kubernetes, None for local (which refuses k8s options)."""
    from opskit.cli.playbook.k8s import K8sArgs, local_only

    args = K8sArgs(namespace, statefulset, context, kubeconfig, kube_context)
    if platform == "kubernetes":
        return args
    if platform != "local":
        raise UsageError(f"--platform {platform!r}: expected local or kubernetes")
    local_only(args)
    if context is not None:
        raise UsageError("--context is for --platform kubernetes (a sandbox has its own)")
    return None


def _check_inputs(throttle: str, window: str | None, registry: Path | None,
                  routing_key_file: Path | None, pagerduty_url: str | None,
                  pagerduty_ca_file: Path | None) -> None:
    """Every input of a run, before it reads the cluster or changes anything (exit 2 or 4)."""
    from opskit.cli.playbook.inputs import check_run_inputs

    check_run_inputs(throttle=throttle, window=window, registry=registry,
                     routing_key_file=routing_key_file, pagerduty_url=pagerduty_url,
                     pagerduty_ca_file=pagerduty_ca_file)


def _nothing_to_do(existing: Any, facts: Any, brokers: int, output: Output) -> bool:
    """A finished run whose target the cluster still meets (a scheduled run after the
    scale-out): say so in one line and succeed rather than refuse every night."""
    from opskit.core.scaleout.machine import nothing_to_do

    line = nothing_to_do(existing, facts.brokers, brokers)
    if line is None:
        return False
    emit({"run_id": existing.run_id, "phase": existing.phase.value, "nothing_to_do": True,
          "brokers": sorted(set(facts.brokers)), "message": line}, output,
         lambda con: con.print(line, highlight=False))
    return True


def _require_context(sandbox: str) -> None:
    """Exit 4 before anything changes when the sandbox has no opskit context (``sandbox up
    --no-context``): the RF raise and the leader rebalance run ``reassign`` through it."""
    from opskit.cli.playbook.run import require_context

    require_context(sandbox, "the RF raise and the leader rebalance run their reassignments")


def _show(data: dict[str, Any], output: Output) -> None:
    def table(con: Any) -> None:
        plan = data.get("plan", {})
        con.print(f"scale-out {data.get('run_id', '(plan)')}: {headline(data)}",
                  highlight=False)
        con.print(f"  {plan.get('quorum')} quorum, Kafka {plan.get('kafka_version')}; brokers "
                  f"{plan.get('existing')} + new {plan.get('new_nodes')} ({plan.get('new_node_roles')})")
        con.print(f"  data to copy {plan.get('bytes_to_copy', 0):,} bytes; estimated "
                  f"{plan.get('estimated_seconds', 0):.0f} s")
        for key in plan.get("steps", []):
            mark = step_mark(data, key)
            con.print(f"  {mark:>7}  {key}", highlight=False)
        for n in plan.get("notes", []):
            con.print(f"  note: {n}")

    emit(data, output, table)


@app.command("scale-out")
def scale_out(
    brokers: Annotated[int, typer.Option("--brokers", min=2, max=32, help="brokers wanted")] = 3,
    controllers: Annotated[int | None, typer.Option(
        "--controllers", min=1, max=32, show_default=False,
        help="controller voters wanted in the end: refused on a static quorum unless it is "
        "the voters it has; on a dynamic one, how many new nodes become voters (default: "
        "every new node on a dynamic quorum, none on a static one)")] = None,
    platform: PlatformOpt = "local",
    sandbox: SandboxOpt = "default",
    namespace: NamespaceOpt = None,
    statefulset: StatefulSetOpt = None,
    context: KafkaContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    kube_context: KubeContextOpt = None,
    throttle: Annotated[str, typer.Option(
        "--throttle", help="replication throttle per broker while copying (50MiB, 10MB, ...)")] = "50MiB",
    window: Annotated[str | None, typer.Option(
        "--window", help="act only inside this daily UTC window, e.g. 02:00-05:00Z; outside it "
        "a run stops at the next safe point and the next run resumes", show_default=False)] = None,
    registry: Annotated[Path | None, typer.Option(
        "--registry", help="topic registry file to update after the RF raise (RF, min ISR)",
        show_default=False)] = None,
    routing_key_file: Annotated[Path | None, typer.Option(
        "--routing-key-file", help="PagerDuty Events v2 routing key: page when a run halts or "
        "fails", show_default=False)] = None,
    pagerduty_url: PagerDutyUrlOpt = None,
    pagerduty_ca_file: PagerDutyCaOpt = None,
    do_execute: Annotated[bool, typer.Option("--execute", help="act (default: show the plan)")] = False,
    stall_timeout: StallOpt = 300.0,
    output: OutputOpt = Output.table,
) -> int:
    """Scale a cluster out (plan shown without --execute); rerunning resumes the journaled run."""
    from opskit.core.reassign.plan_input import parse_rate
    from opskit.core.scaleout.plan import ScaleOutRequest, plan_scale_out
    from opskit.core.scaleout.window import parse_window

    k8s = _platform(platform, namespace, statefulset, context, kubeconfig, kube_context)
    _check_inputs(throttle, window, registry, routing_key_file, pagerduty_url,
                  pagerduty_ca_file)
    if k8s is not None:
        from opskit.cli.playbook import k8s as playbook_k8s
        if controllers is not None:
            raise RefusedError(
                f"--controllers {controllers}: the Kubernetes runner keeps HIP-30's static "
                "voter set (new brokers are broker-only), which Kafka cannot change on a live "
                "cluster; a dynamic quorum (Kafka 4.1+, kraft.version 1) is needed first, and "
                "'playbook upgrade-quorum' is built for sandboxes only so far")
        return playbook_k8s.scale_out(
            k8s, brokers=brokers, throttle=throttle, window=window, registry=registry,
            pager=lambda rid: _pager(routing_key_file, pagerduty_url, rid, pagerduty_ca_file),
            execute=do_execute, output=output, show=_show, finish=_finish,
            idle=_nothing_to_do, wait_s=stall_timeout)
    rate = parse_rate(throttle)
    win = parse_window(window) if window else None
    _require_context(sandbox)     # before the journal is read, a node added or a plan shown
    run_dir = _run_dir(sandbox)
    from opskit.adapters.scaleout.journal import FileJournal

    store = FileJournal(run_dir / "journal.json")
    existing, version = store.load()
    if existing is not None and existing.phase.value not in ("done", "aborted"):
        if not do_execute:
            from opskit.cli.playbook.run import describe

            _show({**describe(sandbox, existing), "dry_run": True}, output)
            stderr().print("a run is journaled; add --execute to resume it")
            return 0
        return _resume(sandbox, existing, version, store, throttle, win, registry,
                       routing_key_file, pagerduty_url, output, pagerduty_ca_file,
                       stall_timeout)
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.adapters.scaleout.local import read_local_facts
    from opskit.cli.playbook.run import refuse_other_unfinished
    from opskit.sandbox.cluster import Sandbox

    refuse_other_unfinished(sandbox, "scale-out")
    sb = Sandbox(sandbox)
    with KafkaAdmin(sb.connection(), timeout=10.0) as admin:
        facts = read_local_facts(sb, admin)
    if _nothing_to_do(existing, facts, brokers, output):
        return 0
    plan = plan_scale_out(facts, ScaleOutRequest(target_brokers=brokers, throttle_bytes_per_s=rate,
                                                 window=win, controllers=controllers))
    if not do_execute:
        _show({"dry_run": True, "plan": plan.to_dict()}, output)
        return 0
    from opskit.core.scaleout.machine import RunState

    state = RunState(f"so-{secrets.token_hex(4)}", plan)
    return _resume(sandbox, state, version, store, throttle, win, registry, routing_key_file,
                   pagerduty_url, output, pagerduty_ca_file, stall_timeout)


def _resume(sandbox: str, state: Any, version: str | None, store: Any, throttle: str,
            win: Any, registry: Path | None, routing_key_file: Path | None,
            pagerduty_url: str | None, output: Output, pagerduty_ca_file: Path | None = None,
            wait_s: float = 300.0) -> int:
    from opskit.adapters.files.run_lock import RunLock
    from opskit.adapters.scaleout.local import LocalSteps
    from opskit.adapters.scaleout.runner import drive
    from opskit.cli.playbook.run import describe, refuse_other_unfinished, step_throttles
    from opskit.sandbox.cluster import Sandbox

    sb = Sandbox(sandbox)
    _require_context(sandbox)
    run_dir = _run_dir(sandbox)
    err = stderr()
    from opskit.cli.main import main  # (loaded: it is running this command)

    steps = LocalSteps(sb, sb.connection(), _context(sandbox), run_dir, throttle, registry,
                       wait_s=wait_s, say=lambda m: err.print(m, highlight=False), cli=main)
    # held for the whole run: a second run refuses at once, naming the holder; the kernel
    # drops it when a run dies (kill -9 too), so a killed run never blocks its resume
    resume_cmd = _resume_command(sandbox, throttle, win, registry, routing_key_file,
                                 pagerduty_url, pagerduty_ca_file, wait_s)
    with RunLock(run_dir / "run.lock", f"playbook scale-out {state.run_id}", resume=resume_cmd):
        _, now_version = store.load()
        if now_version != version:
            raise RefusedError(f"scale-out journal {store.path} changed while this run was "
                               "starting (another run?); rerun to see its state")
        refuse_other_unfinished(sandbox, state.plan.playbook)
        end = drive(state, version, store, steps, window=win, abort_marker=run_dir / "abort",
                    pager=_pager(routing_key_file, pagerduty_url, state.run_id,
                                 pagerduty_ca_file),
                    say=lambda m: err.print(m, highlight=False))
    _show(describe(sandbox, end), output)
    return _finish(end, lambda: (run_dir / "abort").unlink(missing_ok=True),
                   step_throttles(sandbox, end, run_dir))


@app.command("status")
def status(sandbox: SandboxOpt = "default", platform: PlatformOpt = "local",
           namespace: NamespaceOpt = None, statefulset: StatefulSetOpt = None,
           context: KafkaContextOpt = None, kubeconfig: KubeconfigOpt = None,
           kube_context: KubeContextOpt = None, output: OutputOpt = Output.table) -> int:
    """The journaled run (scale-out or multi-rack): steps done, the one in flight,
    why it stopped; a run whose process is gone (kill -9, a reboot) is
    "interrupted", one that halted or failed inside a step says so; both with the
    command that resumes it."""
    from opskit.cli.playbook.run import describe, latest

    k8s = _platform(platform, namespace, statefulset, context, kubeconfig, kube_context)
    if k8s is not None:
        from opskit.cli.playbook import k8s as playbook_k8s
        got = playbook_k8s.load(k8s)
        shown = got.to_dict()
        proc = playbook_k8s.process(k8s, got)  # a killed run's Lease is not renewed
        if proc is not None:
            shown["process"] = proc
        shown.update(playbook_k8s.stopped_inside(k8s, got) or {})
        if got.plan.playbook == "multi-rack":
            from opskit.cli.playbook.multirack import show

            show(shown, output)
        else:
            _show(shown, output)
        return 0

    state, _ = latest(sandbox)
    data = describe(sandbox, state)
    if state.plan.playbook == "multi-rack":
        from opskit.cli.playbook.multirack import show

        show(data, output)
    else:
        _show(data, output)
    return 0


@app.command("resume")
def resume(
    sandbox: SandboxOpt = "default",
    throttle: Annotated[str, typer.Option("--throttle", help="replication throttle per broker")] = "50MiB",
    window: Annotated[str | None, typer.Option("--window", show_default=False,
                                               help="daily UTC window, e.g. 02:00-05:00Z")] = None,
    registry: Annotated[Path | None, typer.Option("--registry", show_default=False,
                                                  help="topic registry file to update")] = None,
    routing_key_file: Annotated[Path | None, typer.Option(
        "--routing-key-file", help="PagerDuty Events v2 routing key: page when the run halts "
        "or fails", show_default=False)] = None,
    pagerduty_url: PagerDutyUrlOpt = None,
    pagerduty_ca_file: PagerDutyCaOpt = None,
    platform: PlatformOpt = "local",
    namespace: NamespaceOpt = None,
    statefulset: StatefulSetOpt = None,
    context: KafkaContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    kube_context: KubeContextOpt = None,
    stall_timeout: StallOpt = 300.0,
    output: OutputOpt = Output.table,
) -> int:
    """Continue the journaled run, scale-out or multi-rack (steps done are never run again)."""
    from opskit.cli.playbook.run import unfinished
    from opskit.core.scaleout.window import parse_window

    k8s = _platform(platform, namespace, statefulset, context, kubeconfig, kube_context)
    _check_inputs(throttle, window, registry, routing_key_file, pagerduty_url,
                  pagerduty_ca_file)
    if k8s is not None:
        from opskit.cli.playbook import k8s as playbook_k8s
        k8s.require()
        open_run = playbook_k8s.unfinished(k8s)
        shown, kind = _show, open_run.plan.playbook
        if kind == "multi-rack":
            from opskit.cli.playbook.multirack import show as shown

            if registry is not None:
                raise UsageError("--registry is for a scale-out run; this is a multi-rack run")
        return playbook_k8s.drive(k8s, open_run, throttle,
                                  parse_window(window) if window else None, registry,
                                  lambda rid: _pager(routing_key_file, pagerduty_url, rid,
                                                     pagerduty_ca_file, playbook=kind),
                                  output, shown, _finish, wait_s=stall_timeout)

    got = unfinished(sandbox)
    if got is None:
        raise NotFoundError(f"no unfinished playbook run for sandbox {sandbox!r}")
    state, version, store, _ = got
    if state.plan.playbook == "multi-rack":
        from opskit.cli.playbook.multirack import run

        if registry is not None:
            raise UsageError("--registry is for a scale-out run; this is a multi-rack run")
        return run(sandbox, state, version, store, throttle,
                   parse_window(window) if window else None, routing_key_file,
                   pagerduty_url, pagerduty_ca_file, stall_timeout, output)
    return _resume(sandbox, state, version, store, throttle,
                   parse_window(window) if window else None, registry, routing_key_file,
                   pagerduty_url, output, pagerduty_ca_file, stall_timeout)


@app.command("abort")
def abort(sandbox: SandboxOpt = "default",
          do_execute: Annotated[bool, typer.Option("--execute", help="act (default: dry run)")] = False,
          platform: PlatformOpt = "local", namespace: NamespaceOpt = None,
          statefulset: StatefulSetOpt = None, context: KafkaContextOpt = None,
          kubeconfig: KubeconfigOpt = None, kube_context: KubeContextOpt = None) -> int:
    """Stop the run at its next safe point (a step under way finishes first)."""
    from opskit.adapters.files.safe_write import write_file
    from opskit.cli.playbook.run import unfinished

    k8s = _platform(platform, namespace, statefulset, context, kubeconfig, kube_context)
    if k8s is not None:
        from opskit.cli.playbook import k8s as playbook_k8s
        return playbook_k8s.abort(k8s, do_execute)

    got = unfinished(sandbox)
    if got is None:
        raise NotFoundError(f"no unfinished playbook run for sandbox {sandbox!r}")
    state, run_dir = got[0], got[3]
    if not do_execute:
        stdout().print(f"would ask run {state.run_id} to stop at its next safe point "
                       f"(in flight: {state.in_flight or 'nothing'}); add --execute")
        return 0
    write_file(run_dir / "abort", state.run_id + "\n", what="abort marker")
    stdout().print(f"run {state.run_id}: abort requested; it stops at its next safe point "
                   f"(the next '{state.plan.playbook} --execute' or 'resume' applies it)")
    return 0


@app.command("upgrade-quorum")
def upgrade_quorum(
    sandbox: SandboxOpt = "default",
    do_execute: Annotated[bool, typer.Option("--execute", help="act (default: dry run)")] = False,
    output: OutputOpt = Output.table,
) -> int:
    """Kafka 4.1+: make a static controller quorum dynamic (kraft.version 0 -> 1), its own
    explicit, irreversible step; scale-out never does it. Dry run by default."""
    from opskit.adapters.files.run_lock import RunLock
    from opskit.adapters.scaleout.local import quorum_upgrade_plan
    from opskit.adapters.scaleout.local import upgrade_quorum as do_upgrade
    from opskit.sandbox.cluster import Sandbox

    sb = Sandbox(sandbox)
    sb.require()
    run_dir = _run_dir(sandbox)
    done: dict[str, Any] | None = None
    if do_execute:
        # the scale-out's lock: never while a scale-out (or another upgrade) runs
        with RunLock(run_dir / "run.lock", f"playbook upgrade-quorum --sandbox {sandbox}"):
            plan = quorum_upgrade_plan(sb)
            done = do_upgrade(sb, plan, run_dir / "quorum-upgrade.json")
    else:
        plan = quorum_upgrade_plan(sb)
    data: dict[str, Any] = {"sandbox": sandbox, "kafka_version": plan.kafka_version,
                            "kraft_version": plan.kraft_version, "voters": list(plan.voters),
                            "actions": list(plan.actions), "dry_run": not do_execute}
    if done is not None:
        data["done"] = done

    def table(con: Any) -> None:
        verb = "did" if do_execute else "would do (add --execute)"
        con.print(f"sandbox {sandbox}: Kafka {plan.kafka_version}, kraft.version "
                  f"{plan.kraft_version}, voters {list(plan.voters)}; opskit {verb}:")
        for a in plan.actions:
            con.print(f"  - {a}")
        if do_execute:
            con.print(f"  kraft.version now {data['done']['kraft_version_after']}; recorded in "
                      f"{run_dir / 'quorum-upgrade.json'}")

    emit(data, output, table)
    return 0


@app.command("cronjob")
def cronjob(
    namespace: Annotated[str, typer.Option("--namespace", help="namespace of the StatefulSet")],
    statefulset: Annotated[str, typer.Option("--statefulset",
                                             help="HIP-30's combined Kafka StatefulSet")],
    image: Annotated[str, typer.Option("--image", help="an image with opskit installed")],
    schedule: Annotated[str, typer.Option("--schedule", help="cron schedule in UTC, e.g. "
                                          "'0 2 * * *'")],
    window: Annotated[str, typer.Option("--window", help="daily UTC window the run may act "
                                        "in, e.g. 02:00-05:00Z")],
    context: Annotated[str, typer.Option("--context", help="the opskit context (in the "
                                         "Secret's config file) that reaches Kafka")] = "kafka",
    config_secret: Annotated[str, typer.Option(
        "--config-secret", help="Secret with key config.yaml: an opskit config holding the "
        "context and its credentials")] = "opskit-config",
    brokers: Annotated[int, typer.Option("--brokers", min=2, max=32, help="brokers wanted")] = 3,
    throttle: Annotated[str, typer.Option("--throttle", help="replication throttle")] = "50MiB",
    page: Annotated[bool, typer.Option("--page", help="page PagerDuty when a run halts or "
                                       "fails (the Secret also holds key "
                                       "pagerduty-routing-key)")] = False,
    write: Annotated[Path | None, typer.Option("--write", help="write the manifest to this "
                                               "file instead of printing it",
                                               show_default=False)] = None,
) -> int:
    """The CronJob (+ ServiceAccount, Role, RoleBinding) running the Kubernetes scale-out."""
    from opskit.cli.playbook import k8s as playbook_k8s
    from opskit.core.reassign.plan_input import parse_rate
    from opskit.core.scaleout.cronjob import CronJobSpec
    from opskit.core.scaleout.window import parse_window

    parse_rate(throttle)
    win = str(parse_window(window))
    return playbook_k8s.cronjob(CronJobSpec(namespace, statefulset, image, schedule, win,
                                            context, config_secret, brokers, throttle,
                                            page=page), write)


def _register_multi_rack() -> None:
    from opskit.cli.playbook.multirack import register

    register(app)


_register_multi_rack()
