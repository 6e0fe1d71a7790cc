"""The scale-out playbook's steps on a local sandbox (``--platform local``).

The local-only steps live here (start a node, promote it to a voter, the sandbox's
preflight facts, the read-only defaults in the nodes' server.properties, the cluster
default through Kafka's own kafka-configs); the steps that only talk to Kafka are
shared with the Kubernetes runner (:mod:`opskit.adapters.scaleout_kafka`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from opskit.adapters.kafka_admin import KafkaAdmin
from opskit.adapters.scaleout_kafka import (
    BLOCKING_CHECKS,
    STATIC_DEFAULTS,
    KafkaSteps,
    read_kafka_facts,
)
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutPlan, Step, StepKind
from opskit.errors import InconsistentStateError
from opskit.sandbox.cluster import Sandbox

__all__ = ["BLOCKING_CHECKS", "STATIC_DEFAULTS", "LocalSteps", "read_local_facts"]


def read_local_facts(sb: Sandbox, admin: KafkaAdmin) -> ClusterFacts:
    """Preflight facts of a sandbox: version, quorum, voters, brokers, health, data."""
    from opskit.sandbox.scale import voters

    st = sb.require()
    return read_kafka_facts(admin, kafka_version=st.version,
                            kraft_version=1 if st.quorum == "dynamic" else 0,
                            voters=tuple(voters(sb, st)))


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
    kafka: KafkaSteps = field(init=False)

    def __post_init__(self) -> None:
        self.kafka = KafkaSteps(self.conn, self.context, self.run_dir, self.throttle,
                                self.registry, self.wait_s, self.cli)

    def run(self, step: Step, plan: ScaleOutPlan) -> str:
        k = self.kafka
        handler: dict[StepKind, Callable[[ScaleOutPlan], str]] = {
            StepKind.PREFLIGHT: k.preflight, StepKind.WAIT_REGISTERED: k.wait_registered,
            StepKind.RAISE_RF: k.raise_rf, StepKind.VERIFY_ISR: k.verify_isr,
            StepKind.ELECT_LEADERS: k.elect_leaders, StepKind.SET_MIN_ISR: self._min_isr,
            StepKind.UPDATE_REGISTRY: k.update_registry, StepKind.FINAL_HEALTH: k.final_health,
        }
        if step.kind is StepKind.ADD_NODE:
            return self._add_node(step, plan)
        if step.kind is StepKind.PROMOTE_VOTER:
            return self._promote(step)
        return handler[step.kind](plan)

    # --- local steps ----------------------------------------------------------
    def _add_node(self, step: Step, plan: ScaleOutPlan) -> str:
        from opskit.sandbox.scale import add_node

        assert step.node_id is not None
        role = "broker" if plan.new_node_roles == "broker" else "controller"
        node = add_node(self.sb, role, step.node_id)
        return f"node {node.node_id} ({node.roles}) running on port {node.port}"

    def _promote(self, step: Step) -> str:
        from opskit.sandbox.scale import promote_controller, voters

        assert step.node_id is not None
        changed = promote_controller(self.sb, step.node_id)
        return (f"node {step.node_id} {'is now' if changed else 'was already'} a voter; "
                f"voters {voters(self.sb)}")

    def _min_isr(self, plan: ScaleOutPlan) -> str:
        want = str(plan.min_insync_replicas)
        topics = self.kafka.set_topic_min_isr(plan)
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
        return (f"min.insync.replicas={want} on {topics} topic(s) and {where}; "
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
            with self.kafka.admin() as admin:
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
