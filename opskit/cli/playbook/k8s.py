"""``opskit playbook ... --platform kubernetes`` and ``opskit playbook cronjob``: the
Kubernetes half of cli/playbook/commands.py (the commands and their options live there; the
work they do on Kubernetes lives here)."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opskit.cli.common import Output, stderr, stdout
from opskit.errors import NotFoundError, RefusedError, UsageError


@dataclass(frozen=True)
class K8sArgs:
    namespace: str | None
    statefulset: str | None
    context: str | None            # the opskit (Kafka) context
    kubeconfig: Path | None = None
    kube_context: str | None = None

    def require(self, kafka: bool = True) -> tuple[str, str]:
        missing = [o for o, v in (("--namespace", self.namespace),
                                  ("--statefulset", self.statefulset),
                                  ("--context", self.context if kafka else "-")) if not v]
        if missing:
            raise UsageError(f"--platform kubernetes needs {', '.join(missing)}")
        from opskit.cli.playbook.inputs import check_k8s_names

        check_k8s_names(self.namespace, self.statefulset)
        if kafka:       # an unknown context: before the API server is asked anything
            from opskit.adapters.files.config_file import resolve_connection

            resolve_connection(None, self.context)
        assert self.namespace and self.statefulset
        return self.namespace, self.statefulset

    def api(self) -> Any:
        from opskit.adapters.k8s.api import KubeApi, KubeTarget

        return KubeApi(KubeTarget(kubeconfig=str(self.kubeconfig) if self.kubeconfig else None,
                                  context=self.kube_context))


def local_only(args: K8sArgs) -> None:
    """Kubernetes options given with --platform local are a mistake, not ignored."""
    given = [o for o, v in (("--namespace", args.namespace), ("--statefulset", args.statefulset),
                            ("--kubeconfig", args.kubeconfig),
                            ("--kube-context", args.kube_context)) if v]
    if given:
        raise UsageError(f"{', '.join(given)} need(s) --platform kubernetes")


def _run_dir(namespace: str, statefulset: str) -> Path:
    from opskit.adapters.files.safe_write import safe_file_name
    from opskit.paths import state_dir

    return state_dir() / "playbooks" / safe_file_name(f"k8s-{namespace}-{statefulset}")


def journal_store(api: Any, namespace: str, statefulset: str, playbook: str = "scale-out") -> Any:
    """The ConfigMap journal of ``playbook``'s runs on that StatefulSet (the multi-rack
    run's is its own ConfigMap, so the scale-out's scheduled runs never read it)."""
    from opskit.adapters.scaleout.journal import ConfigMapJournal
    from opskit.adapters.scaleout.multirack_k8s import journal_name as multirack_journal
    from opskit.core.scaleout.k8s import journal_name

    name = multirack_journal(statefulset) if playbook == "multi-rack" else journal_name(statefulset)
    return ConfigMapJournal(api, namespace, name)


PLAYBOOKS = ("scale-out", "multi-rack")


def refuse_other_unfinished(api: Any, namespace: str, statefulset: str, playbook: str) -> None:
    """One playbook run at a time per StatefulSet: a run of ``playbook`` is refused while
    the other playbook's run is unfinished (finish or abort it first)."""
    for other in PLAYBOOKS:
        if other == playbook:
            continue
        state, _ = journal_store(api, namespace, statefulset, other).load()
        if state is not None and state.phase.value not in ("done", "aborted"):
            raise RefusedError(
                f"{other} run {state.run_id} on {namespace}/{statefulset} is "
                f"{state.phase.value} (in flight: {state.in_flight or 'nothing'}): finish it "
                "('opskit playbook resume') or abort it ('opskit playbook abort --execute', "
                f"then resume) before a {playbook} run")


def scale_out(args: K8sArgs, *, brokers: int, throttle: str, window: str | None,
              registry: Path | None, pager: Callable[[str], Any], execute: bool,
              output: Output, show: Callable[[dict[str, Any], Output], None],
              finish: Callable[[Any, Callable[[], None]], int],
              idle: Callable[[Any, Any, int, Output], bool], wait_s: float = 300.0) -> int:
    from opskit.adapters.files.config_file import resolve_connection
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.adapters.scaleout.k8s import read_k8s_facts
    from opskit.core.reassign.plan_input import parse_rate
    from opskit.core.scaleout.machine import RunState
    from opskit.core.scaleout.plan import ScaleOutRequest, plan_scale_out
    from opskit.core.scaleout.window import parse_window

    ns, sts = args.require()
    rate = parse_rate(throttle)
    win = parse_window(window) if window else None
    conn = resolve_connection(None, args.context)
    api = args.api()
    store = journal_store(api, ns, sts)
    existing, _ = store.load()
    if existing is not None and existing.phase.value not in ("done", "aborted"):
        if not execute:
            show({**existing.to_dict(), "dry_run": True}, output)
            stderr().print("a run is journaled; add --execute to resume it")
            return 0
        return drive(args, existing, throttle, win, registry, pager, output, show, finish,
                     wait_s=wait_s)
    with KafkaAdmin(conn, timeout=10.0) as admin:
        facts = read_k8s_facts(api, ns, sts, admin)
    if idle(existing, facts, brokers, output):
        return 0
    # the rolling restart (restart_node:N, then verify_defaults) sets the KAFKA_CFG_*
    # values in the StatefulSets and restarts one pod at a time (adapters.scaleout.k8s)
    plan = plan_scale_out(facts, ScaleOutRequest(target_brokers=brokers,
                                                 throttle_bytes_per_s=rate, window=win))
    if not execute:
        show({"dry_run": True, "plan": plan.to_dict()}, output)
        return 0
    state = RunState(f"so-{secrets.token_hex(4)}", plan)
    return drive(args, state, throttle, win, registry, pager, output, show, finish,
                 wait_s=wait_s)


def drive(args: K8sArgs, state: Any, throttle: str, win: Any, registry: Path | None,
          pager: Callable[[str], Any], output: Output,
          show: Callable[[dict[str, Any], Output], None],
          finish: Callable[[Any, Callable[[], None]], int], wait_s: float = 300.0) -> int:
    """Hold the run's Lease, then run (or resume) ``state`` to its end or a safe point
    (a new run replaces a finished journal)."""
    from opskit.adapters.files.config_file import resolve_connection
    from opskit.adapters.scaleout.k8s import ConfigMapAbort, ConfigMapPlans, K8sSteps, RunLease
    from opskit.adapters.scaleout.kafka_steps import KafkaSteps
    from opskit.adapters.scaleout.runner import drive as run

    ns, sts = args.require()
    assert args.context is not None
    conn = resolve_connection(None, args.context)    # an unknown context: before the Lease
    api = args.api()
    playbook = state.plan.playbook
    lease = RunLease(api, ns, sts, f"{socket.gethostname()}-{os.getpid()}-"
                                   f"{secrets.token_hex(3)}")
    lease.acquire()
    try:
        store = journal_store(api, ns, sts, playbook)
        loaded, version = store.load()
        if loaded is not None and loaded.run_id == state.run_id:
            state = loaded          # the journal as saved (another run may have moved it)
        elif loaded is not None and loaded.phase.value not in ("done", "aborted"):
            raise RefusedError(f"another run ({loaded.run_id}) was started meanwhile on "
                               f"{ns}/{sts}")
        refuse_other_unfinished(api, ns, sts, playbook)
        run_dir = _run_dir(ns, sts)
        err = stderr()
        from opskit.cli.main import main  # (loaded: it is running this command)

        def say(m: str) -> None:
            err.print(m, highlight=False)

        steps: Any
        if playbook == "multi-rack":
            from opskit.adapters.scaleout.multirack_k8s import steps_for

            steps = steps_for(api, ns, sts, conn=conn, context=args.context,
                              run_dir=run_dir / "multi-rack", throttle=throttle,
                              run_id=state.run_id, wait_s=wait_s, say=say, cli=main)
        else:
            steps = K8sSteps(api, ns, sts, KafkaSteps(
                conn, args.context, run_dir, throttle, registry, wait_s,
                plans=ConfigMapPlans(api, ns, sts), say=say, cli=main))
        abort = ConfigMapAbort(api, ns, sts)
        end = run(state, version, store, steps, window=win,
                  abort_marker=abort, pager=pager(state.run_id), say=say)
        show(end.to_dict(), output)
        return finish(end, abort.clear)
    finally:
        lease.release()


def load(args: K8sArgs) -> Any:
    """The journaled run (for status): the unfinished one (scale-out or multi-rack),
    else the one whose journal was written last; NotFoundError when there is none."""
    ns, sts = args.require(kafka=False)
    api = args.api()
    found = [s for s in (journal_store(api, ns, sts, p).load()[0] for p in PLAYBOOKS) if s is not None]
    if not found:
        raise NotFoundError(f"no scale-out run is journaled in ConfigMap {ns}/"
                            f"opskit-scaleout-{sts}")
    open_ = [s for s in found if s.phase.value not in ("done", "aborted")]
    if open_:
        return open_[0]
    return max(found, key=lambda s: s.journal[-1].at if s.journal else "")


def process(args: K8sArgs, state: Any) -> dict[str, Any] | None:
    """For a run journaled as planned or running: whether a live run holds its Lease
    (``running``) or its process is gone (``interrupted``, kill -9, a lost node), with the
    command that resumes it; None for a run that stopped on its own (as the sandbox's
    ``run.process``)."""
    from opskit.adapters.scaleout.k8s import lease_state

    if state.phase.value not in ("planned", "running"):
        return None
    ns, sts = args.require(kafka=False)
    got = lease_state(args.api(), ns, sts)
    if got["state"] == "interrupted":
        got["resume_command"] = resume_hint(ns, sts)
    return got


def resume_hint(namespace: str, statefulset: str) -> str:
    """The command that resumes a Kubernetes run (its throttle, window and paging options
    are not journaled, so they are named, not given)."""
    return (f"opskit playbook resume --platform kubernetes --namespace {namespace} "
            f"--statefulset {statefulset} (and the run's other options)")


def stopped_inside(args: K8sArgs, state: Any) -> dict[str, Any] | None:
    """For a run that halted or failed with a step in flight, what the sandbox's
    ``run.stopped_inside`` gives: ``in_flight_state`` and the command that resumes it."""
    if state.phase.value not in ("halted", "failed") or not state.in_flight:
        return None
    ns, sts = args.require(kafka=False)
    return {"in_flight_state": state.phase.value, "resume_command": resume_hint(ns, sts)}


def unfinished(args: K8sArgs) -> Any:
    state = load(args)
    if state.phase.value in ("done", "aborted"):
        raise NotFoundError(f"no unfinished scale-out run for StatefulSet {args.namespace}/"
                            f"{args.statefulset}")
    return state


def abort(args: K8sArgs, execute: bool) -> int:
    from opskit.adapters.scaleout.k8s import ConfigMapAbort

    ns, sts = args.require(kafka=False)
    state = unfinished(args)
    if not execute:
        stdout().print(f"would ask run {state.run_id} to stop at its next safe point "
                       f"(in flight: {state.in_flight or 'nothing'}); add --execute")
        return 0
    ConfigMapAbort(args.api(), ns, sts).request(state.run_id)
    stdout().print(f"run {state.run_id}: abort requested (ConfigMap {ns}/opskit-scaleout-"
                   f"{sts}-abort); it stops at its next safe point")
    return 0


def cronjob(spec: Any, write: Path | None) -> int:
    import yaml

    from opskit.core.scaleout.cronjob import cronjob_objects

    text = yaml.safe_dump_all(cronjob_objects(spec), sort_keys=False)
    if write is None:
        stdout().out(text, end="", highlight=False)
        return 0
    from opskit.adapters.files.safe_write import write_file

    write_file(write, text, what="CronJob manifest", mode=0o644)
    stderr().print(f"wrote {write} (ServiceAccount, Role, RoleBinding, CronJob); the Secret "
                   f"{spec.config_secret!r} with key config.yaml (an opskit config whose "
                   f"context {spec.context!r} reaches Kafka) must exist", highlight=False)
    return 0
