"""The scale-out playbook's platform-independent steps: the ones that only talk to
Kafka (and to opskit's reassignment engine), shared by the local and the Kubernetes
step runners.

Each step is idempotent: run again after a crash it finds its work done and says
so. The reassignment is not re-implemented: ``raise_rf`` writes one plan with
``opskit reassign plan --replication-factor`` (kept in the run's directory, so a
resumed run executes the same plan) and runs it with ``opskit reassign execute``,
whose own journal resumes, never cancels and never submits a move twice.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from collections.abc import Callable, Iterable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TextIO

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.core.connection import ConnectionConfig
from opskit.core.health_model import Finding
from opskit.core.models import Severity
from opskit.core.scaleout.plan import INTERNAL_TOPICS, ClusterFacts, ScaleOutPlan
from opskit.errors import InconsistentStateError, OpskitError, RefusedError

log = logging.getLogger(__name__)

#: broker settings that are read-only in Kafka (a restart applies them); the platform
#: runner says how they reach the brokers' configuration
STATIC_DEFAULTS = ("default.replication.factor", "offsets.topic.replication.factor",
                   "transaction.state.log.replication.factor")

#: health checks whose WARNING or CRITICAL stops a scale-out before it starts
BLOCKING_CHECKS = ("brokers", "controller", "offline_partitions", "under_min_isr",
                   "under_replicated")
#: what must be OK before and after each node of the rolling restart: every broker
#: registered, a controller and a quorum without lagging voters, every partition's
#: replicas all in its ISR
SETTLED_CHECKS = (*BLOCKING_CHECKS, "quorum")


def not_ok(findings: Iterable[Finding], checks: Iterable[str]) -> list[str]:
    """What stops a scale-out step among ``findings`` of the ``checks``: a WARNING or
    CRITICAL, and an UNKNOWN too (a check opskit could not read is not a healthy one: a
    quorum that was not described, a min ISR that could not be judged), named as such."""
    wanted = set(checks)
    out: list[str] = []
    for f in findings:
        if f.check not in wanted:
            continue
        if f.severity is Severity.UNKNOWN:
            out.append(f"{f.check.replace('_', ' ')} could not be verified: {f.message}")
        elif f.severity in (Severity.WARNING, Severity.CRITICAL):
            out.append(f.message)
    return out


def reassignment_problems(findings: Iterable[Finding]) -> tuple[bool, list[str]]:
    """(a reassignment is in progress, why that could not be told): reassignments that
    could not be listed are not "none in progress"."""
    in_progress = False
    unknown: list[str] = []
    for f in findings:
        if f.check == "reassignments":
            if f.severity is Severity.WARNING:
                in_progress = True
            elif f.severity is Severity.UNKNOWN:
                unknown.append(f"reassignments in progress could not be listed: {f.message}")
    return in_progress, unknown


def read_kafka_facts(admin: KafkaAdmin, *, kafka_version: str, kraft_version: int,
                     voters: tuple[int, ...]) -> ClusterFacts:
    """Preflight facts Kafka itself answers (brokers, health, reassignments, RF and
    bytes per topic); the platform gives what it knows better (version, quorum)."""
    from opskit.adapters.health.cluster import gather_health_input
    from opskit.adapters.kafka.log_dirs import read_partition_sizes
    from opskit.core.health import HealthPolicy, evaluate_health
    from opskit.core.models import TopicPartition

    meta = admin.metadata()
    report = evaluate_health(gather_health_input(admin), HealthPolicy())
    reassigning, unlisted = reassignment_problems(report.findings)
    problems = (*not_ok(report.findings, BLOCKING_CHECKS), *unlisted)
    leaders = {TopicPartition(t, p.partition): p.leader
               for t, parts in meta.topics.items() for p in parts if p.leader >= 0}
    sizes = read_partition_sizes(admin.conn, sorted(meta.topics), leaders, admin.timeout).sizes
    rf: dict[str, int] = {}
    size: dict[str, int] = {}
    for t, parts in meta.topics.items():
        for p in parts:
            rf[t] = min(rf.get(t, len(p.replicas)), len(p.replicas))
            size[t] = size.get(t, 0) + sizes.get(TopicPartition(t, p.partition), 0)
    return ClusterFacts(
        kafka_version=kafka_version, kraft_version=kraft_version, voters=voters,
        brokers=tuple(sorted(b.node_id for b in meta.brokers)), problems=problems,
        reassignment_in_progress=reassigning,
        topic_rf=rf, topic_bytes=size)


class _LineTee(io.StringIO):
    """Keeps what is written (for the error message) and passes each complete line to
    ``say`` as it is written (None: keeps only)."""

    def __init__(self, say: Callable[[str], None] | None, real: TextIO) -> None:
        super().__init__()
        self._say = say
        self._real = real          # the stderr ``say`` writes to (not this tee)
        self._part = ""

    def write(self, s: str) -> int:
        n = super().write(s)
        if self._say is not None:
            self._part += s
            *lines, self._part = self._part.split("\n")
            with redirect_stderr(self._real):
                for line in lines:
                    if line.strip():
                        self._say(f"  {line.removeprefix('opskit: ')}")
        return n


class PlanStore(Protocol):
    """Keeps the reassignment plans where the next run finds them when the run's
    directory does not outlive the run (a CronJob pod)."""

    def restore(self, path: Path) -> None:
        """Write the kept copy of ``path`` there, if there is one."""

    def keep(self, path: Path) -> None:
        """Keep a copy of ``path`` (just written)."""


@dataclass
class KafkaSteps:
    """The Kafka half of a scale-out; every method returns a one-line detail."""

    conn: ConnectionConfig
    context: str                      # the opskit context the reassign commands use
    run_dir: Path                     # where the RF and leader plans are kept
    throttle: str                     # e.g. "50MiB"
    registry: Path | None = None
    wait_s: float = 300.0
    #: opskit's CLI entry point, run in this process (the CLI passes its own ``main``)
    cli: Callable[[list[str]], int] = field(kw_only=True)
    plans: PlanStore | None = None
    #: progress lines while a wait lasts (the CLI prints them on stderr)
    say: Callable[[str], None] | None = None
    progress_every_s: float = 15.0

    # --- helpers ------------------------------------------------------------
    def admin(self) -> KafkaAdmin:
        return KafkaAdmin(self.conn, timeout=10.0)

    def opskit(self, *args: str, progress: bool = False) -> str:
        """Run an opskit command in this process; its output is kept for the log. With
        ``progress`` its stderr lines (a reassignment's progress: moves, bytes left,
        which brokers it waits for) are passed on to ``say`` as they come."""
        out = io.StringIO()
        err = _LineTee(self.say if progress else None, sys.stderr)
        with redirect_stdout(out), redirect_stderr(err):
            code = self.cli(list(args))
        log.debug("opskit %s -> %s\n%s%s", " ".join(args), code, out.getvalue(), err.getvalue())
        if code != 0:
            last = (err.getvalue().strip().splitlines() or ["(no message)"])[-1]
            raise InconsistentStateError(f"opskit {args[0]} {args[1]} exited {code}: {last}")
        return out.getvalue()

    def wait(self, what: str, check: Callable[[], str | None]) -> None:
        """Poll ``check`` (None = satisfied, else what is still missing) until wait_s."""
        start = time.monotonic()
        deadline = start + self.wait_s
        next_say = start + self.progress_every_s
        missing = ""
        while time.monotonic() < deadline:
            try:
                got = check()
            except OpskitError as e:
                got = str(e)
            if got is None:
                return
            missing = got
            now = time.monotonic()
            if self.say is not None and now >= next_say:
                self.say(f"  {what}: still {missing} ({now - start:.0f}s of "
                         f"{self.wait_s:.0f}s)")
                next_say = now + self.progress_every_s
            time.sleep(1.0)
        raise InconsistentStateError(f"{what}: still {missing} after {self.wait_s:.0f}s")

    def _plan_once(self, path: Path, *args: str) -> bool:
        """``opskit reassign plan ARGS --write-plan path`` unless the plan exists (here
        or in the plan store): a resumed run executes the same plan. False when there is
        nothing to move (``reassign plan`` then writes no file), e.g. a cluster without
        topics, or leaders already balanced."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if not path.exists() and self.plans is not None:
            self.plans.restore(path)
        if not path.exists():
            self.opskit("reassign", "plan", *args, "--write-plan", str(path),
                        "--context", self.context)
            if not path.exists():
                return False
            if self.plans is not None:
                self.plans.keep(path)
        return True

    def registered_brokers(self) -> set[int]:
        with self.admin() as admin:
            return {b.node_id for b in admin.metadata().brokers}

    # --- steps --------------------------------------------------------------
    def preflight(self, plan: ScaleOutPlan) -> str:
        brokers = sorted(self.registered_brokers())
        missing = [b for b in plan.existing if b not in brokers]
        if missing:
            raise RefusedError(f"preflight: broker(s) {missing} of the plan are not registered")
        return f"brokers {brokers} registered"

    def wait_registered(self, plan: ScaleOutPlan, nodes: tuple[int, ...] | None = None) -> str:
        """Wait until ``nodes`` (default: the existing and the new ones) are registered."""
        want = set(plan.existing) | set(plan.new_nodes) if nodes is None else set(nodes)

        def check() -> str | None:
            have = self.registered_brokers()
            return None if want <= have else f"broker(s) {sorted(want - have)} not registered"

        self.wait("waiting for the new brokers", check)
        return f"brokers {sorted(want)} registered"

    def raise_rf(self, plan: ScaleOutPlan) -> str:
        plan_file = self.run_dir / "raise-rf.json"
        if not self._plan_once(plan_file, "--replication-factor", str(plan.target_rf),
                               "--all-topics", "--include-internal", "--throttle",
                               self.throttle):
            return f"every topic already at RF {plan.target_rf}: nothing to move"
        held = self._hold_min_isr()
        self.opskit("reassign", "execute", str(plan_file), "--throttle", self.throttle,
                    "--stall-timeout", f"{max(5.0, self.wait_s):g}", "--execute",
                    "--context", self.context, progress=True)
        restored = self._restore_min_isr(held)
        return f"every topic at RF {plan.target_rf} (plan {plan_file.name}){restored}"

    def _hold_min_isr(self) -> dict[str, dict[str, str]]:
        """Topics whose ``min.insync.replicas`` is above their RF: Kafka caps what it
        requires of their acks=all writes at the replica count, so today they take them
        with RF copies; but the replicas the RF raise adds count at once, and until
        they are in sync acks=all writes would fail and the high watermark stop
        (tests/integration/test_min_isr_judgement.py). For the copy they get
        ``min.insync.replicas`` = their RF (what Kafka required of them anyway); the
        values are recorded first (``min-isr-held.json``, so a resumed run restores the
        same) and restored once the raise is done."""
        import json

        from opskit.adapters.files.safe_read import parse_json, read_text
        from opskit.adapters.files.safe_write import write_file

        path = self.run_dir / "min-isr-held.json"
        if path.exists():
            got = parse_json(read_text(path, "min ISR record"), str(path))
            held: dict[str, dict[str, str]] = got.get("topics", {})
            if got.get("restored"):
                return {}
        else:
            with self.admin() as admin:
                meta = admin.metadata()
                topics = [t for t in meta.topics if t not in INTERNAL_TOPICS]
                cfgs = admin.topic_configs(topics)
            held = {}
            for t in topics:
                rf = min((len(p.replicas) for p in meta.topics[t]), default=0)
                value = cfgs.get(t, {}).get("min.insync.replicas", (None, True))[0]
                if rf and value and value.isdigit() and int(value) > rf:
                    held[t] = {"was": value, "during_copy": str(rf)}
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_file(path, json.dumps({"topics": held, "restored": False}, indent=1),
                       what="min ISR record", mode=0o600)
        if held:
            with self.admin() as admin:
                admin.alter_topic_configs({t: {"min.insync.replicas": h["during_copy"]}
                                           for t, h in held.items()})
            if self.say is not None:
                self.say(f"  min.insync.replicas above RF on {len(held)} topic(s) ("
                         + ", ".join(sorted(held)[:5]) + "): set to their RF while the new "
                         "replicas copy, so acks=all writes keep working; restored after")
        return held

    def _restore_min_isr(self, held: dict[str, dict[str, str]]) -> str:
        import json

        from opskit.adapters.files.safe_write import write_file

        if held:
            with self.admin() as admin:
                admin.alter_topic_configs({t: {"min.insync.replicas": h["was"]}
                                           for t, h in held.items()})
        write_file(self.run_dir / "min-isr-held.json",
                   json.dumps({"topics": held, "restored": True}, indent=1),
                   what="min ISR record", mode=0o600)
        if not held:
            return ""
        return (f"; min.insync.replicas of {len(held)} topic(s) above their old RF held at "
                "that RF during the copy and restored (" + ", ".join(
                    f"{t}={h['was']}" for t, h in sorted(held.items())[:5]) + ")")

    def verify_isr(self, plan: ScaleOutPlan) -> str:
        def check() -> str | None:
            with self.admin() as admin:
                meta = admin.metadata()
            short = [f"{t}-{p.partition}" for t, parts in meta.topics.items() for p in parts
                     if len(p.replicas) < plan.target_rf or len(p.isr) < len(p.replicas)]
            return None if not short else f"{len(short)} partition(s) with ISR < RF (e.g. {short[0]})"

        self.wait("waiting for ISR = RF everywhere", check)
        return f"ISR = {plan.target_rf} on every partition"

    def elect_leaders(self, plan: ScaleOutPlan) -> str:
        # the RF raise keeps each partition's leader first, so every preferred leader is
        # still an old broker: a rebalance plan reorders replicas (no data moves) and its
        # execution ends with a preferred leader election
        leaders_file = self.run_dir / "leaders.json"
        if self._plan_once(leaders_file, "--rebalance"):
            self.opskit("reassign", "execute", str(leaders_file), "--throttle", self.throttle,
                        "--execute", "--context", self.context)

        def check() -> str | None:
            with self.admin() as admin:
                meta = admin.metadata()
            counts = {b.node_id: 0 for b in meta.brokers}
            not_preferred = 0
            for parts in meta.topics.values():
                for p in parts:
                    if p.leader >= 0:
                        counts[p.leader] = counts.get(p.leader, 0) + 1
                    if p.replicas and p.leader != p.replicas[0]:
                        not_preferred += 1
            spread = max(counts.values()) - min(counts.values()) if counts else 0
            if not_preferred:
                return f"{not_preferred} partition(s) not led by their preferred replica"
            return None if spread <= 1 else f"leaders per broker {counts} (spread {spread})"

        self.wait("waiting for balanced preferred leaders", check)
        return "every partition led by its preferred replica; leaders per broker within 1"

    def set_topic_min_isr(self, plan: ScaleOutPlan) -> int:
        """``min.insync.replicas`` on every non-internal topic; the number of topics."""
        want = str(plan.min_insync_replicas)
        with self.admin() as admin:
            meta = admin.metadata()
            topics = [t for t in meta.topics if t not in INTERNAL_TOPICS]
            admin.alter_topic_configs({t: {"min.insync.replicas": want} for t in topics})
        return len(topics)

    def update_registry(self, plan: ScaleOutPlan) -> str:
        if self.registry is None:
            return "no registry file given: skipped (topics diff compares with the packaged one)"
        from opskit.adapters.scaleout.registry import raise_registry

        changed = raise_registry(self.registry, plan.target_rf, plan.min_insync_replicas)
        return f"registry {self.registry}: {'updated' if changed else 'already up to date'}"

    def lead_again(self) -> str:
        """A preferred leader election for every partition led by another replica while
        its preferred one is in sync: a restarted broker gets its leaders back now, as
        after any rolling restart, instead of at Kafka's next automatic rebalance (up to
        ``leader.imbalance.check.interval.seconds``, 300 s by default, later). The detail
        says how many moved back; "" when none had to."""
        from opskit.adapters.reassign.admin import ReassignAdmin
        from opskit.core.models import TopicPartition

        with self.admin() as admin:
            meta = admin.metadata()
        away = [TopicPartition(t, p.partition) for t, parts in sorted(meta.topics.items())
                for p in parts if p.replicas and p.leader != p.replicas[0]
                and p.replicas[0] in p.isr]
        if not away:
            return ""
        with ReassignAdmin(self.conn) as ra:
            failed = ra.elect_preferred(away)
        if failed:
            # not fatal: Kafka's automatic rebalance still runs, and final_health waits for it
            log.info("preferred leader election failed for %d partition(s), e.g. %s",
                     len(failed), next(iter(failed.items())))
        return f"; {len(away) - len(failed)} partition(s) led by their preferred replica again"

    def final_health(self, plan: ScaleOutPlan) -> str:
        from opskit.adapters.health.cluster import gather_health_input
        from opskit.core.health import HealthPolicy, evaluate_health

        self.lead_again()  # a run resumed after its last restart has not done it yet

        def check() -> str | None:
            with self.admin() as admin:
                report = evaluate_health(gather_health_input(
                    admin, expected_brokers=len(plan.existing) + len(plan.new_nodes)),
                    HealthPolicy())
            bad = [f.message for f in report.findings if f.severity is not Severity.OK]
            return None if report.severity is Severity.OK else "; ".join(bad[:2]) or "not OK"

        self.wait("final health", check)
        return "health OK"


    # --- the rolling restart's Kafka side -------------------------------------
    def settled(self, expected_brokers: int) -> str | None:
        """None when every broker is registered, a controller leads a quorum without
        lagging voters and every partition has all its replicas in ISR; else what is not."""
        from opskit.adapters.health.cluster import gather_health_input
        from opskit.core.health import HealthPolicy, evaluate_health

        with self.admin() as admin:
            report = evaluate_health(gather_health_input(admin, expected_brokers=expected_brokers),
                                     HealthPolicy())
        bad = not_ok(report.findings, SETTLED_CHECKS)
        return "; ".join(bad[:2]) if bad else None

    def runs_with_defaults(self, node_id: int, plan: ScaleOutPlan) -> dict[str, str | None]:
        """The read-only defaults broker ``node_id`` reports it runs with that are not
        ``plan.target_rf`` yet (empty: it runs with them all)."""
        with self.admin() as admin:
            cfg = admin.broker_configs([node_id]).get(node_id, {})
        want = str(plan.target_rf)
        return {k: cfg.get(k, (None, True))[0] for k in STATIC_DEFAULTS
                if cfg.get(k, (None, True))[0] != want}

    def after_restart(self, node_id: int, plan: ScaleOutPlan, brokers: int,
                      not_applied: Callable[[dict[str, str | None]], str]) -> str:
        """The end of a node's restart on any platform: wait for every partition in ISR
        and a settled controller, check the node runs with the read-only defaults (else
        InconsistentStateError with ``not_applied(the values it still reports)``, the
        platform's words), then give it its leaders back (:meth:`lead_again`'s detail)."""
        self.wait(f"after restarting node {node_id}: waiting for every partition in ISR and "
                  "a settled controller", lambda: self.settled(brokers))
        still = self.runs_with_defaults(node_id, plan)
        if still:
            raise InconsistentStateError(not_applied(still))
        return self.lead_again()

    def sole_in_sync(self, node_id: int) -> list[str]:
        """Partitions whose only in-sync replica is on ``node_id`` (restarting it would
        take them offline)."""
        with self.admin() as admin:
            meta = admin.metadata()
        return [f"{t}-{p.partition}" for t, parts in sorted(meta.topics.items()) for p in parts
                if node_id in p.isr and not set(p.isr) - {node_id}]

    def verify_defaults(self, plan: ScaleOutPlan) -> str:
        """A topic created without an RF gets the target RF, a new group's first commit
        works, the internal topics have the target RF (:mod:`.probe`)."""
        from opskit.adapters.scaleout.probe import verify_defaults

        return verify_defaults(self, plan)


def sole_in_sync_refusal(node_id: int, alone: list[str], restarting: str,
                         not_done: str) -> RefusedError:
    """The refusal to restart node ``node_id``, which holds the only in-sync replica of
    the partitions ``alone`` (:meth:`KafkaSteps.sole_in_sync`): restarting ``restarting``
    ("it", "pod <name>") would take them offline; ``not_done``: what stays undone, after
    "so it was not restarted"."""
    return RefusedError(
        f"node {node_id} holds the only in-sync replica of {len(alone)} partition(s) ("
        + ", ".join(alone[:5]) + f"): restarting {restarting} would take them offline, so "
        f"it was not restarted{not_done}: raise their RF, then 'opskit playbook resume'")
