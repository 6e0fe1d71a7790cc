"""The scale-out playbook's steps on a local sandbox (``--platform local``).

Each step is idempotent: run again after a crash it finds its work done and says
so. The reassignment is not re-implemented: ``raise_rf`` writes one plan with
``opskit reassign plan --replication-factor`` (kept in the run's directory, so a
resumed run executes the same plan) and runs it with ``opskit reassign execute``,
whose own journal resumes, never cancels and never submits a move twice.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from opskit.adapters.kafka_admin import KafkaAdmin
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.plan import INTERNAL_TOPICS, ClusterFacts, ScaleOutPlan, Step, StepKind
from opskit.errors import InconsistentStateError, OpskitError, RefusedError
from opskit.sandbox.cluster import Sandbox

log = logging.getLogger(__name__)

#: broker settings that are read-only in Kafka (a restart applies them): written into the
#: nodes' server.properties for their next start, and named in the report
STATIC_DEFAULTS = ("default.replication.factor", "offsets.topic.replication.factor",
                   "transaction.state.log.replication.factor")


#: health checks whose WARNING or CRITICAL stops a scale-out before it starts
BLOCKING_CHECKS = ("brokers", "controller", "offline_partitions", "under_min_isr",
                   "under_replicated")


def read_local_facts(sb: Sandbox, admin: KafkaAdmin) -> ClusterFacts:
    """Preflight facts of a sandbox: version, quorum, voters, brokers, health, data."""
    from opskit.adapters.cluster_health import gather_health_input
    from opskit.adapters.log_dirs import read_partition_sizes
    from opskit.core.health import HealthPolicy, evaluate_health
    from opskit.core.models import Severity, TopicPartition
    from opskit.sandbox.scale import voters

    st = sb.require()
    meta = admin.metadata()
    report = evaluate_health(gather_health_input(admin), HealthPolicy())
    problems = tuple(f.message for f in report.findings
                     if f.check in BLOCKING_CHECKS and f.severity in (Severity.WARNING,
                                                                     Severity.CRITICAL))
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
        kafka_version=st.version, kraft_version=1 if st.quorum == "dynamic" else 0,
        voters=tuple(voters(sb, st)), brokers=tuple(sorted(b.node_id for b in meta.brokers)),
        problems=problems,
        reassignment_in_progress=any(f.check == "reassignments" and f.severity is Severity.WARNING
                                     for f in report.findings),
        topic_rf=rf, topic_bytes=size)


@dataclass
class LocalSteps:
    """Runs one step of ``plan`` against sandbox ``sb``; returns a one-line detail."""

    sb: Sandbox
    conn: ConnectionConfig
    context: str                      # the opskit context the reassign commands use
    run_dir: Path                     # where the RF plan is kept
    throttle: str                     # e.g. "50MiB"
    registry: Path | None = None
    wait_s: float = 300.0
    cli: Callable[[list[str]], int] | None = None

    def run(self, step: Step, plan: ScaleOutPlan) -> str:
        handler = {
            StepKind.PREFLIGHT: self._preflight, StepKind.ADD_NODE: self._add_node,
            StepKind.PROMOTE_VOTER: self._promote, StepKind.WAIT_REGISTERED: self._registered,
            StepKind.RAISE_RF: self._raise_rf, StepKind.VERIFY_ISR: self._verify_isr,
            StepKind.ELECT_LEADERS: self._leaders, StepKind.SET_MIN_ISR: self._min_isr,
            StepKind.UPDATE_REGISTRY: self._update_registry,
            StepKind.FINAL_HEALTH: self._final_health,
        }[step.kind]
        return handler(step, plan)

    # --- helpers ------------------------------------------------------------
    def _admin(self) -> KafkaAdmin:
        return KafkaAdmin(self.conn, timeout=10.0)

    def _opskit(self, *args: str) -> str:
        """Run an opskit command in this process; its output is kept for the log."""
        from opskit.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = (self.cli or main)(list(args))
        log.debug("opskit %s -> %s\n%s%s", " ".join(args), code, out.getvalue(), err.getvalue())
        if code != 0:
            last = (err.getvalue().strip().splitlines() or ["(no message)"])[-1]
            raise InconsistentStateError(f"opskit {args[0]} {args[1]} exited {code}: {last}")
        return out.getvalue()

    def _wait(self, what: str, check: Callable[[], str | None]) -> None:
        """Poll ``check`` (None = satisfied, else what is still missing) until wait_s."""
        deadline = time.monotonic() + self.wait_s
        missing = ""
        while time.monotonic() < deadline:
            try:
                got = check()
            except OpskitError as e:
                got = str(e)
            if got is None:
                return
            missing = got
            time.sleep(1.0)
        raise InconsistentStateError(f"{what}: still {missing} after {self.wait_s:.0f}s")

    # --- steps --------------------------------------------------------------
    def _preflight(self, step: Step, plan: ScaleOutPlan) -> str:
        with self._admin() as admin:
            brokers = sorted(b.node_id for b in admin.metadata().brokers)
        missing = [b for b in plan.existing if b not in brokers]
        if missing:
            raise RefusedError(f"preflight: broker(s) {missing} of the plan are not registered")
        return f"brokers {brokers} registered"

    def _add_node(self, step: Step, plan: ScaleOutPlan) -> str:
        from opskit.sandbox.scale import add_node

        assert step.node_id is not None
        role = "broker" if plan.new_node_roles == "broker" else "controller"
        node = add_node(self.sb, role, step.node_id)
        return f"node {node.node_id} ({node.roles}) running on port {node.port}"

    def _promote(self, step: Step, plan: ScaleOutPlan) -> str:
        from opskit.sandbox.scale import promote_controller, voters

        assert step.node_id is not None
        changed = promote_controller(self.sb, step.node_id)
        return (f"node {step.node_id} {'is now' if changed else 'was already'} a voter; "
                f"voters {voters(self.sb)}")

    def _registered(self, step: Step, plan: ScaleOutPlan) -> str:
        want = set(plan.existing) | set(plan.new_nodes)

        def check() -> str | None:
            with self._admin() as admin:
                have = {b.node_id for b in admin.metadata().brokers}
            return None if want <= have else f"broker(s) {sorted(want - have)} not registered"

        self._wait("waiting for the new brokers", check)
        return f"brokers {sorted(want)} registered"

    def _raise_rf(self, step: Step, plan: ScaleOutPlan) -> str:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        plan_file = self.run_dir / "raise-rf.json"
        if not plan_file.exists():
            self._opskit("reassign", "plan", "--replication-factor", str(plan.target_rf),
                         "--all-topics", "--include-internal", "--throttle", self.throttle,
                         "--write-plan", str(plan_file), "--context", self.context)
        self._opskit("reassign", "execute", str(plan_file), "--throttle", self.throttle,
                     "--execute", "--context", self.context)
        return f"every topic at RF {plan.target_rf} (plan {plan_file.name})"

    def _verify_isr(self, step: Step, plan: ScaleOutPlan) -> str:
        def check() -> str | None:
            with self._admin() as admin:
                meta = admin.metadata()
            short = [f"{t}-{p.partition}" for t, parts in meta.topics.items() for p in parts
                     if len(p.replicas) < plan.target_rf or len(p.isr) < len(p.replicas)]
            return None if not short else f"{len(short)} partition(s) with ISR < RF (e.g. {short[0]})"

        self._wait("waiting for ISR = RF everywhere", check)
        return f"ISR = {plan.target_rf} on every partition"

    def _leaders(self, step: Step, plan: ScaleOutPlan) -> str:
        # the RF raise keeps each partition's leader first, so every preferred leader is
        # still an old broker: a rebalance plan reorders replicas (no data moves) and its
        # execution ends with a preferred leader election
        leaders_file = self.run_dir / "leaders.json"
        if not leaders_file.exists():
            self._opskit("reassign", "plan", "--rebalance", "--write-plan", str(leaders_file),
                         "--context", self.context)
        self._opskit("reassign", "execute", str(leaders_file), "--throttle", self.throttle,
                     "--execute", "--context", self.context)

        def check() -> str | None:
            with self._admin() as admin:
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

        self._wait("waiting for balanced preferred leaders", check)
        return "every partition led by its preferred replica; leaders per broker within 1"

    def _min_isr(self, step: Step, plan: ScaleOutPlan) -> str:
        want = str(plan.min_insync_replicas)
        with self._admin() as admin:
            meta = admin.metadata()
            topics = [t for t in meta.topics if t not in INTERNAL_TOPICS]
            admin.alter_topic_configs({t: {"min.insync.replicas": want} for t in topics})
        where = self._cluster_default("min.insync.replicas", want)
        # read-only broker settings: in the nodes' files for their next start
        from opskit.adapters.safe_write import write_file

        for node in self.sb.require().nodes:
            path = node.config_path
            keep = tuple(f"{k}=" for k in (*STATIC_DEFAULTS, "min.insync.replicas"))
            lines = [ln for ln in path.read_text().splitlines() if not ln.startswith(keep)]
            lines += [f"{k}={plan.target_rf}" for k in STATIC_DEFAULTS]
            lines.append(f"min.insync.replicas={want}")
            write_file(path, "\n".join(lines) + "\n", what="node config", mode=0o600)
        return (f"min.insync.replicas={want} on {len(topics)} topic(s) and {where}; "
                f"{', '.join(STATIC_DEFAULTS)}={plan.target_rf} are read-only: written to every "
                "node's server.properties, a rolling restart applies them")

    def _cluster_default(self, key: str, value: str) -> str:
        """Set a dynamic cluster-wide broker default. Neither confluent-kafka nor
        kafka-python accepts the empty resource name of the cluster default, and Kafka 4.x
        refuses a per-broker min.insync.replicas while ELR is on: on a sandbox, Kafka's own
        kafka-configs (--entity-default) sets it."""
        from opskit.sandbox.dist import ensure_kafka_dist

        st = self.sb.require()
        if st.security != "plaintext":
            with self._admin() as admin:
                admin.alter_broker_configs(sorted(n.node_id for n in st.nodes), {key: value})
            return "on every broker (dynamic per-broker values)"
        out = ensure_kafka_dist(st.version).run_tool(
            "kafka.admin.ConfigCommand", "--bootstrap-server", st.bootstrap, "--entity-type",
            "brokers", "--entity-default", "--alter", "--add-config", f"{key}={value}",
            timeout=120)
        if out.returncode != 0:
            lines = (out.stderr or out.stdout).strip().splitlines()
            raise InconsistentStateError(f"kafka-configs --entity-default {key}={value} failed: "
                                         f"{lines[-1] if lines else out.returncode}")
        return "as the cluster-wide dynamic default (new topics)"

    def _update_registry(self, step: Step, plan: ScaleOutPlan) -> str:
        if self.registry is None:
            return "no registry file given: skipped (topics diff compares with the packaged one)"
        from opskit.adapters.scaleout_registry import raise_registry

        changed = raise_registry(self.registry, plan.target_rf, plan.min_insync_replicas)
        return f"registry {self.registry}: {'updated' if changed else 'already up to date'}"

    def _final_health(self, step: Step, plan: ScaleOutPlan) -> str:
        from opskit.adapters.cluster_health import gather_health_input
        from opskit.core.health import HealthPolicy, evaluate_health
        from opskit.core.models import Severity

        def check() -> str | None:
            with self._admin() as admin:
                report = evaluate_health(gather_health_input(
                    admin, expected_brokers=len(plan.existing) + len(plan.new_nodes)),
                    HealthPolicy())
            bad = [f.message for f in report.findings if f.severity is not Severity.OK]
            return None if report.severity is Severity.OK else "; ".join(bad[:2]) or "not OK"

        self._wait("final health", check)
        return "health OK"

