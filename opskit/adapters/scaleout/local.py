"""The scale-out playbook's steps on a local sandbox (``--platform local``).

The local-only steps live here (start a node, promote it to a voter, the sandbox's
preflight facts, the read-only defaults in the nodes' server.properties, the cluster
default through Kafka's own kafka-configs); the steps that only talk to Kafka are
shared with the Kubernetes runner (:mod:`opskit.adapters.scaleout.kafka_steps`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.kafka_steps import (
    BLOCKING_CHECKS,
    STATIC_DEFAULTS,
    KafkaSteps,
    read_kafka_facts,
    sole_in_sync_refusal,
)
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutPlan, Step, StepKind
from opskit.core.scaleout.quorum import QuorumUpgradePlan, plan_quorum_upgrade
from opskit.errors import InconsistentStateError, RefusedError
from opskit.sandbox.cluster import Sandbox

__all__ = ["BLOCKING_CHECKS", "STATIC_DEFAULTS", "LocalSteps", "quorum_upgrade_plan",
           "read_local_facts", "upgrade_quorum"]


def read_local_facts(sb: Sandbox, admin: KafkaAdmin) -> ClusterFacts:
    """Preflight facts of a sandbox: version, quorum (the cluster's finalized
    kraft.version), voters, brokers, health, data."""
    from opskit.adapters.kafka.kraft_features import read_kraft_version
    from opskit.sandbox.scale import voters

    st = sb.require()
    kraft = read_kraft_version(admin.conn)
    if kraft >= 1 and st.quorum == "static":
        raise RefusedError(
            f"the cluster's kraft.version is {kraft} (a dynamic quorum) but sandbox "
            f"{sb.name!r} still names static voters in its nodes' files: it was upgraded "
            "outside opskit (kafka-features upgrade --release-version does it, KAFKA-21426); "
            f"run 'opskit playbook upgrade-quorum --sandbox {sb.name} --execute' to record it")
    return read_kafka_facts(admin, kafka_version=st.version, kraft_version=kraft,
                            voters=tuple(voters(sb, st)))


def quorum_upgrade_plan(sb: Sandbox) -> QuorumUpgradePlan:
    """What ``playbook upgrade-quorum`` would do on sandbox ``sb`` (RefusedError: nothing)."""
    from opskit.adapters.kafka.kraft_features import read_kraft_version
    from opskit.sandbox.scale import voters

    st = sb.require()
    return plan_quorum_upgrade(st.version, read_kraft_version(sb.connection()),
                               tuple(voters(sb, st)), files_static=st.quorum == "static")


def upgrade_quorum(sb: Sandbox, plan: QuorumUpgradePlan, record: Path) -> dict[str, Any]:
    """Raise kraft.version to 1, verify it and the voters, rewrite the nodes' files, and
    append what was done to ``record`` (JSON). Rerunnable: a cluster already at 1 only
    gets its files rewritten."""
    import json
    from datetime import UTC, datetime

    from opskit.adapters.files.safe_read import parse_json, read_text
    from opskit.adapters.files.safe_write import write_file
    from opskit.adapters.kafka.kraft_features import read_kraft_version, upgrade_kraft_version
    from opskit.sandbox.scale import use_dynamic_quorum_config, voters

    conn = sb.connection()
    if read_kraft_version(conn) < 1:
        upgrade_kraft_version(conn)
    after = read_kraft_version(conn)
    now_voters = tuple(voters(sb))
    if after < 1 or now_voters != plan.voters:
        raise InconsistentStateError(f"after the upgrade kraft.version reads {after} and the "
                                     f"voters {list(now_voters)} (expected 1 and "
                                     f"{list(plan.voters)})")
    files = use_dynamic_quorum_config(sb)
    entry = {"at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
             "what": "kraft.version 0 -> 1" if not plan.files_only
             else "kraft.version was 1 already (upgraded outside opskit): files only",
             "kafka_version": plan.kafka_version, "kraft_version_before": plan.kraft_version,
             "kraft_version_after": after, "voters": list(now_voters),
             "files_rewritten": files,
             "restart_needed": "each node reads controller.quorum.bootstrap.servers at its "
                               "next restart; running nodes keep working meanwhile"}
    history: list[Any] = []
    if record.exists():
        old = parse_json(read_text(record, "quorum upgrade record"), str(record))
        history = list(old.get("history", [])) if isinstance(old, dict) else []
    write_file(record, json.dumps({"history": [*history, entry]}, indent=1),
               what="quorum upgrade record", mode=0o644)
    return entry


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
    say: Callable[[str], None] | None = None
    kafka: KafkaSteps = field(init=False)
    #: opskit's CLI entry point (see KafkaSteps.cli)
    cli: Callable[[list[str]], int] = field(kw_only=True)

    def __post_init__(self) -> None:
        self.kafka = KafkaSteps(self.conn, self.context, self.run_dir, self.throttle,
                                self.registry, self.wait_s, cli=self.cli, say=self.say)

    def run(self, step: Step, plan: ScaleOutPlan) -> str:
        k = self.kafka
        handler: dict[StepKind, Callable[[ScaleOutPlan], str]] = {
            StepKind.PREFLIGHT: k.preflight, StepKind.WAIT_REGISTERED: k.wait_registered,
            StepKind.RAISE_RF: k.raise_rf, StepKind.VERIFY_ISR: k.verify_isr,
            StepKind.ELECT_LEADERS: k.elect_leaders, StepKind.SET_MIN_ISR: self._min_isr,
            StepKind.UPDATE_REGISTRY: k.update_registry, StepKind.FINAL_HEALTH: k.final_health,
            StepKind.VERIFY_DEFAULTS: k.verify_defaults,
        }
        if step.kind is StepKind.ADD_NODE:
            return self._add_node(step, plan)
        if step.kind is StepKind.PROMOTE_VOTER:
            return self._promote(step)
        if step.kind is StepKind.RESTART_NODE:
            return self._restart(step, plan)
        return handler[step.kind](plan)

    # --- local steps ----------------------------------------------------------
    def _add_node(self, step: Step, plan: ScaleOutPlan) -> str:
        from opskit.sandbox.scale import add_node

        assert step.node_id is not None
        role = "controller" if step.node_id in plan.new_voters else "broker"
        node = add_node(self.sb, role, step.node_id)
        return f"node {node.node_id} ({node.roles}) running on port {node.port}"

    def _promote(self, step: Step) -> str:
        from opskit.sandbox.scale import promote_controller, voters

        assert step.node_id is not None
        changed = promote_controller(self.sb, step.node_id)
        return (f"node {step.node_id} {'is now' if changed else 'was already'} a voter; "
                f"voters {voters(self.sb)}")

    def _restart(self, step: Step, plan: ScaleOutPlan) -> str:
        """Restart node N with its rewritten server.properties, once every partition is
        in ISR and the controller settled, and wait for the same again. Idempotent: a
        node that reports the new defaults already is not restarted; a node a killed
        run had stopped is started first. Never restarts a node that holds the only
        in-sync replica of a partition (refused)."""
        from opskit.adapters.scaleout.runner import failpoint

        assert step.node_id is not None
        n, k = step.node_id, self.kafka
        brokers = len(set(plan.existing) | set(plan.new_nodes))
        running = {int(x["node_id"]): bool(x["running"]) for x in self.sb.status()["nodes"]}
        if n not in running:
            raise RefusedError(f"sandbox {self.sb.name!r} has no node {n} to restart")
        started = ""
        if not running[n]:          # stopped by an earlier, killed run of this step
            self.sb.start_node(n, wait_timeout=k.wait_s)
            started = f"node {n} was stopped (an interrupted restart): started it; "
        k.wait(f"before restarting node {n}: waiting for every partition in ISR and a "
               "settled controller", lambda: k.settled(brokers))
        old = k.runs_with_defaults(n, plan)
        values = ", ".join(f"{d}={plan.target_rf}" for d in STATIC_DEFAULTS)
        if not old:  # a resumed run whose restart finished: its leaders may still be away
            return f"{started}node {n} runs with {values} already: not restarted{k.lead_again()}"
        alone = k.sole_in_sync(n)
        if alone:
            still = ", ".join(f"{key}={v}" for key, v in old.items())
            raise sole_in_sync_refusal(n, alone, "it", "; the scale-out is not finished (node "
                                       f"{n} still runs {still})")
        self.sb.stop_node(n)            # SIGTERM: a controlled shutdown moves its leaders
        failpoint("stopped", step.key)
        self.sb.start_node(n, wait_timeout=k.wait_s)
        back = k.after_restart(n, plan, brokers, lambda still: (
            f"node {n} was restarted but reports {still}: its server.properties does not set "
            f"{values}"))
        return f"{started}node {n} restarted, runs with {values}; every partition in ISR{back}"

    def _min_isr(self, plan: ScaleOutPlan) -> str:
        want = str(plan.min_insync_replicas)
        topics = self.kafka.set_topic_min_isr(plan)
        where = self._cluster_default("min.insync.replicas", want)
        # read-only broker settings: in the nodes' files for their next start
        from opskit.adapters.files.safe_write import write_file

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
        kafka-configs (--entity-default) sets it: through the client listener when it is
        plaintext, else (a secured 4.x sandbox) through the controllers' listener
        (``--bootstrap-controller``, KIP-919), which a sandbox keeps plaintext on 127.0.0.1
        with its ANONYMOUS principal a super user. A secured 3.x sandbox gets per-broker
        values (its brokers accept them)."""
        from opskit.sandbox.dist import ensure_kafka_dist

        st = self.sb.require()
        target = ("--bootstrap-server", st.bootstrap)
        if st.security != "plaintext":
            if int(st.version.split(".")[0]) < 4:
                with self.kafka.admin() as admin:
                    admin.alter_broker_configs(sorted(n.node_id for n in st.nodes),
                                               {key: value})
                return "on every broker (dynamic per-broker values)"
            target = ("--bootstrap-controller", ",".join(
                f"127.0.0.1:{st.controller_port_of(c)}" for c in st.controllers))
        out = ensure_kafka_dist(st.version).run_tool(
            "kafka.admin.ConfigCommand", *target, "--entity-type", "brokers",
            "--entity-default", "--alter", "--add-config", f"{key}={value}", timeout=120)
        if out.returncode != 0:
            lines = (out.stderr or out.stdout).strip().splitlines()
            raise InconsistentStateError(f"kafka-configs --entity-default {key}={value} failed: "
                                         f"{lines[-1] if lines else out.returncode}")
        return "as the cluster-wide dynamic default (new topics)"
