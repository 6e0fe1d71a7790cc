"""The multi-rack playbook's steps on a local sandbox (``opskit playbook multi-rack``).

Each step is idempotent, like the scale-out's: run again after a ``kill -9`` it finds
its work done (a node already reporting its rack, a plan already written, a spread
already at its target) and says so. The Kafka side (waits, the reassignment engine
through opskit's own commands, the preferred election) is the scale-out's
:class:`~opskit.adapters.scaleout.kafka_steps.KafkaSteps`; the spread is
``reassign plan --rebalance`` written once into the run directory (a resumed run
executes that same plan, whose base refuses a changed cluster) and ``reassign
execute`` (its own journal: never submitted twice, throttles removed at the end).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.kafka_steps import KafkaSteps, read_kafka_facts, sole_in_sync_refusal
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.multirack import (
    MultiRackPlan,
    MultiRackRequest,
    RackFacts,
    plan_multi_rack,
    spread_problems,
)
from opskit.core.scaleout.plan import Step, StepKind
from opskit.errors import InconsistentStateError, NotFoundError, RefusedError
from opskit.sandbox.cluster import Sandbox


def spread_plan_path(run_dir: Path, run_id: str) -> Path:
    """The spread's plan file: one per run (a new run never executes an older run's)."""
    return run_dir / f"spread-{run_id}.json"


def read_rack_facts(sb: Sandbox, admin: KafkaAdmin) -> RackFacts:
    """Preflight facts of a sandbox: the topology with the racks its brokers report
    (DescribeCluster), the voters, health and reassignments."""
    from opskit.adapters.reassign.topology import read_topology
    from opskit.sandbox.scale import voters

    st = sb.require()
    got = read_topology(admin)
    if got.racks_unavailable:
        raise InconsistentStateError(f"preflight: {got.racks_unavailable}: the brokers' racks "
                                     "must be known to plan the spread")
    vs = tuple(voters(sb, st))
    health = read_kafka_facts(admin, kafka_version=st.version, kraft_version=0, voters=vs)
    return RackFacts(st.version, vs, got.topology, health.problems,
                     health.reassignment_in_progress)


def plan_for(sb: Sandbox, request: MultiRackRequest) -> MultiRackPlan:
    with KafkaAdmin(sb.connection(), timeout=10.0) as admin:
        facts = read_rack_facts(sb, admin)
    return plan_multi_rack(facts, request, datetime.now(UTC))


@dataclass
class MultiRackSteps:
    """Runs one step of a :class:`MultiRackPlan` against sandbox ``sb``."""

    sb: Sandbox
    conn: ConnectionConfig
    context: str                      # the opskit context the reassign commands use
    run_dir: Path                     # where the spread plan is kept
    throttle: str
    run_id: str                       # names the run's spread plan
    wait_s: float = 300.0
    say: Callable[[str], None] | None = None
    cli: Callable[[list[str]], int] = field(kw_only=True)
    kafka: KafkaSteps = field(init=False)

    def __post_init__(self) -> None:
        self.kafka = KafkaSteps(self.conn, self.context, self.run_dir, self.throttle, None,
                                self.wait_s, cli=self.cli, say=self.say)

    def run(self, step: Step, plan: MultiRackPlan) -> str:
        if step.kind is StepKind.ADD_NODE:
            return self._add_node(step, plan)
        if step.kind is StepKind.SET_RACK:
            return self._set_rack(step, plan)
        handler: dict[StepKind, Callable[[MultiRackPlan], str]] = {
            StepKind.PREFLIGHT: self._preflight, StepKind.SPREAD: self._spread,
            StepKind.ELECT_LEADERS: self._elect, StepKind.VERIFY_SPREAD: self._verify,
            StepKind.FINAL_HEALTH: self._final_health}
        if step.kind not in handler:
            raise RefusedError(f"step {step.key} is not a multi-rack step")
        return handler[step.kind](plan)

    # --- helpers ------------------------------------------------------------
    def _racks(self) -> dict[int, str | None]:
        with self.kafka.admin() as admin:
            return admin.broker_racks()

    def _brokers(self, plan: MultiRackPlan) -> int:
        return len(plan.existing) + len(plan.new_nodes)

    def _settled(self, plan: MultiRackPlan, what: str, brokers: int | None = None) -> None:
        """Wait until ``brokers`` (default: the plan's existing and new ones) are
        registered and every partition has its whole replica set in ISR."""
        want = self._brokers(plan) if brokers is None else brokers
        self.kafka.wait(what, lambda: self.kafka.settled(want))

    def _reports(self, node: int, rack: str) -> None:
        def check() -> str | None:
            seen = self._racks().get(node, "(not registered)")
            return None if seen == rack else f"broker {node} reports rack {seen!r}"

        self.kafka.wait(f"waiting for broker {node} to report rack {rack}", check)

    # --- steps --------------------------------------------------------------
    def _preflight(self, plan: MultiRackPlan) -> str:
        brokers = sorted(self.kafka.registered_brokers())
        missing = [b for b in plan.existing if b not in brokers]
        if missing:
            raise RefusedError(f"preflight: broker(s) {missing} of the plan are not registered")
        # the new nodes are not started yet: the existing brokers only
        self._settled(plan, "preflight: waiting for every partition in ISR",
                      brokers=len(plan.existing))
        return f"brokers {brokers} registered, every partition in ISR"

    def _add_node(self, step: Step, plan: MultiRackPlan) -> str:
        from opskit.sandbox.scale import add_node

        assert step.node_id is not None
        rack = plan.rack_of(step.node_id)
        node = add_node(self.sb, "broker", step.node_id, wait_timeout=self.wait_s, rack=rack)
        self._reports(step.node_id, rack)
        return f"node {node.node_id} (broker) running on port {node.port} in rack {rack}"

    def _set_rack(self, step: Step, plan: MultiRackPlan) -> str:
        """Give node N its rack: stop it (SIGTERM: a controlled shutdown moves its
        leaders), rewrite ``broker.rack``, start it, wait until it reports the rack and
        every partition is back in ISR, give it its leaders back. Idempotent: a node
        reporting its rack is not restarted (a run killed after restarting it: the
        waits for ISR and the leaders are still done); a node a killed run left stopped
        is started. Refused for a node holding a partition's only in-sync replica."""
        from opskit.adapters.scaleout.runner import failpoint

        assert step.node_id is not None
        n, k, rack = step.node_id, self.kafka, plan.rack_of(step.node_id)
        nodes = {int(x["node_id"]): x for x in self.sb.status()["nodes"]}
        if n not in nodes:
            raise NotFoundError(f"sandbox {self.sb.name!r} has no node {n}")
        if nodes[n]["running"]:
            if nodes[n]["rack"] == rack and self._racks().get(n) == rack:
                # a resume after a kill between the restart and the step's end: the node's
                # partitions may still be catching up and its leaders elsewhere
                self._settled(plan, f"node {n} reports rack {rack}: waiting for every "
                              "partition in ISR")
                back = k.lead_again()
                return (f"node {n} reports rack {rack} already: not restarted; every "
                        f"partition in ISR{back}")
            self._settled(plan, f"before restarting node {n}: waiting for every partition "
                          "in ISR")
            alone = k.sole_in_sync(n)
            if alone:
                raise sole_in_sync_refusal(n, alone, "it", f" and is not in rack {rack} yet")
            self.sb.stop_node(n)
            failpoint("stopped", step.key)
            started = ""
        else:
            started = f"node {n} was stopped (an interrupted restart): "
        self.sb.set_rack(n, rack)             # the node is stopped: rewrites its file only
        self.sb.start_node(n, wait_timeout=self.wait_s)
        failpoint("restarted", step.key)
        self._reports(n, rack)
        self._settled(plan, f"after restarting node {n}: waiting for every partition in ISR")
        back = k.lead_again()
        return f"{started}node {n} restarted in rack {rack}; every partition in ISR{back}"

    def _spread(self, plan: MultiRackPlan) -> str:
        from opskit.adapters.scaleout.runner import failpoint

        k = self.kafka
        path = spread_plan_path(self.run_dir, self.run_id)
        if not k._plan_once(path, "--rebalance", "--throttle", self.throttle):
            return "every partition spread and replicas balanced already: nothing to move"
        failpoint("planned", "spread")
        k.opskit("reassign", "execute", str(path), "--throttle", self.throttle,
                 "--stall-timeout", f"{max(5.0, self.wait_s):g}", "--execute",
                 "--context", self.context, progress=True)
        est = spread_estimates(path)
        return (f"{est.get('replicas_moved')} replica(s) moved (lower bound "
                f"{est.get('replicas_lower_bound')}), {est.get('bytes_moved', 0):,} bytes; "
                f"plan {path.name}")

    def _elect(self, plan: MultiRackPlan) -> str:
        k = self.kafka
        k.lead_again()

        def check() -> str | None:
            with k.admin() as admin:
                meta = admin.metadata()
            away = [f"{t}-{p.partition}" for t, parts in meta.topics.items() for p in parts
                    if p.replicas and p.leader != p.replicas[0]]
            if away:
                k.lead_again()
                return f"{len(away)} partition(s) not led by their preferred replica"
            return None

        k.wait("waiting for preferred leaders", check)
        racks = dict(plan.racks)
        with k.admin() as admin:
            meta = admin.metadata()
        per: dict[str, int] = {}
        for parts in meta.topics.values():
            for p in parts:
                if p.leader >= 0:
                    per[racks.get(p.leader, "?")] = per.get(racks.get(p.leader, "?"), 0) + 1
        return ("every partition led by its preferred replica; leaders per rack "
                + ", ".join(f"{r}: {c}" for r, c in sorted(per.items())))

    def _verify(self, plan: MultiRackPlan) -> str:
        """From Metadata and DescribeCluster: every broker reports its rack, every
        partition spans min(RF, racks) racks; ``reassign verify`` of the spread plan: at
        its target, nothing in flight, no throttle left."""
        k = self.kafka
        racks = self._racks()
        wrong = {b: racks.get(b) for b, r in plan.racks if racks.get(b) != r}
        if wrong:
            raise InconsistentStateError(f"broker(s) report other racks than planned: {wrong}")
        with k.admin() as admin:
            meta = admin.metadata()
        reps = {f"{t}-{p.partition}": tuple(p.replicas) for t, parts in meta.topics.items()
                for p in parts}
        bad = spread_problems(reps, racks)
        if bad:
            raise InconsistentStateError(f"{len(bad)} partition(s) not spread over the racks: "
                                         + "; ".join(bad[:3]))
        path = spread_plan_path(self.run_dir, self.run_id)
        checked = ""
        if path.exists():
            k.opskit("reassign", "verify", str(path), "--context", self.context)
            checked = "; the spread plan at its target, no throttle left (reassign verify)"
        n_racks = len({r for r in racks.values() if r})
        return f"{len(reps)} partition(s) each span min(RF, {n_racks}) racks{checked}"

    def _final_health(self, plan: MultiRackPlan) -> str:
        from opskit.adapters.health.cluster import gather_health_input
        from opskit.core.health import HealthPolicy, evaluate_health
        from opskit.core.models import Severity

        k = self.kafka
        k.lead_again()

        def check() -> str | None:
            with k.admin() as admin:
                report = evaluate_health(gather_health_input(
                    admin, expected_brokers=self._brokers(plan)), HealthPolicy())
            bad = [f.message for f in report.findings if f.severity is not Severity.OK]
            return None if report.severity is Severity.OK else "; ".join(bad[:2]) or "not OK"

        k.wait("final health", check)
        return "health OK"


def spread_estimates(path: Path) -> dict[str, int]:
    """The estimates recorded in the spread's plan file ({} when there is none)."""
    from opskit.adapters.files.safe_read import parse_json, read_text

    if not path.exists():
        return {}
    data = parse_json(read_text(path, "spread plan"), str(path))
    est = data.get("opskit", {}).get("estimates", {}) if isinstance(data, dict) else {}
    return {k: int(v) for k, v in est.items() if isinstance(v, int)}

