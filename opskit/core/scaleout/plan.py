"""Preflight judgement and the ordered steps of a scale-out.

The decision that matters most is how new nodes join the KRaft controller quorum:

- **static quorum** (``kraft.version`` 0: Kafka 3.7, or 3.9+/4.x formatted with
  ``controller.quorum.voters``): the voter set cannot change on a live cluster (two
  new empty voters would form a majority without the committed metadata). New nodes
  join as **broker-only** nodes (``process.roles=broker``), same cluster id, node ids
  outside the voter set, voters unchanged. The single controller stays a single
  point of failure; the fix is to make the quorum dynamic first (Kafka 4.1+:
  ``kafka-features upgrade --feature kraft.version=1``, its own explicit step, never
  implied by a release-version upgrade) and then add controllers.
- **dynamic quorum** (``kraft.version`` 1, formatted ``--standalone`` or
  ``--initial-controllers``): new nodes are formatted ``--no-initial-controllers``,
  start as observers, and each becomes a voter (``add-controller``) only after it
  caught up, one at a time.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from opskit.core.scaleout.window import Window
from opskit.errors import RefusedError, UsageError

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state")


class QuorumKind(enum.Enum):
    STATIC = "static"
    DYNAMIC = "dynamic"


class StepKind(enum.Enum):
    PREFLIGHT = "preflight"
    ADD_NODE = "add_node"                # start (local) / create (Kubernetes) one new node
    PROMOTE_VOTER = "promote_voter"      # dynamic quorum: wait caught up, add-controller
    WAIT_REGISTERED = "wait_registered"  # every new broker registered, unfenced, healthy
    RAISE_RF = "raise_rf"                # through the reassignment engine, throttled
    VERIFY_ISR = "verify_isr"            # ISR == RF everywhere
    ELECT_LEADERS = "elect_leaders"      # preferred leaders; spread within 1
    SET_MIN_ISR = "set_min_isr"          # min.insync.replicas=2, new-topic defaults
    UPDATE_REGISTRY = "update_registry"  # the HIP-30 registry says RF 3 / min ISR 2
    RESTART_NODE = "restart_node"        # one node restarted with its rewritten file
    VERIFY_DEFAULTS = "verify_defaults"  # a topic made without an RF gets RF 3; a commit works
    FINAL_HEALTH = "final_health"        # health OK and the report
    # multi-rack (core/scaleout/multirack.py)
    SET_RACK = "set_rack"                # broker.rack rewritten, that node restarted
    SPREAD = "spread"                    # the rack-aware rebalance, throttled
    VERIFY_SPREAD = "verify_spread"      # every partition spans min(RF, racks) racks


@dataclass(frozen=True)
class Step:
    kind: StepKind
    node_id: int | None = None

    @property
    def key(self) -> str:
        return self.kind.value if self.node_id is None else f"{self.kind.value}:{self.node_id}"

    @staticmethod
    def from_key(key: str) -> Step:
        kind, _, node = key.partition(":")
        return Step(StepKind(kind), int(node) if node else None)


@dataclass(frozen=True)
class ClusterFacts:
    """What preflight read from the cluster (the adapter fills it)."""

    kafka_version: str
    kraft_version: int                  # 0 static voter set, 1 dynamic
    voters: tuple[int, ...]
    brokers: tuple[int, ...]            # registered broker ids
    problems: tuple[str, ...] = ()      # URP, offline, under-min-ISR ... (empty: healthy)
    reassignment_in_progress: bool = False
    topic_rf: Mapping[str, int] = field(default_factory=dict)  # internal topics included
    topic_bytes: Mapping[str, int] = field(default_factory=dict)  # bytes of one replica
    free_disk_bytes: int | None = None  # per new node, when known

    @property
    def quorum(self) -> QuorumKind:
        return QuorumKind.DYNAMIC if self.kraft_version >= 1 else QuorumKind.STATIC


@dataclass(frozen=True)
class ScaleOutRequest:
    target_brokers: int = 3
    throttle_bytes_per_s: int = 50 * 1024 * 1024
    window: Window | None = None
    min_insync_replicas: int = 2
    #: controller voters wanted in the end (``--controllers``); None: every new node of a
    #: dynamic quorum becomes a voter, a static voter set stays as it is. More voters than a
    #: static quorum has is refused (unsafe on a live cluster); on a dynamic quorum it bounds
    #: how many new nodes become voters (the rest join as broker-only nodes)
    controllers: int | None = None
    #: the duration model's fixed waits (s), measured by benchmarks/bench_scaleout.py on a
    #: shared 2-core machine at load 3-12 (docs/benchmarks.md): a new node's format + JVM
    #: start until registered (2.5-6.2 s), a dynamic quorum's catch-up + add-controller
    #: (5.4-6.1 s), the playbook's own work besides both and the copy (process start,
    #: preflight, reassignment commands, leader step, configs: 6-10 s)
    node_start_s: float = 6.0
    voter_promotion_s: float = 6.0
    playbook_overhead_s: float = 10.0
    #: restart every node, one at a time, so the read-only defaults it was given
    #: (default.replication.factor, offsets.topic.replication.factor, ...) take effect;
    #: False where the runner cannot (Kubernetes: an operator's rolling update)
    rolling_restart: bool = True


@dataclass(frozen=True)
class ScaleOutPlan:
    quorum: QuorumKind
    kafka_version: str
    existing: tuple[int, ...]
    new_nodes: tuple[int, ...]
    new_node_roles: str                 # "broker", "broker,controller" or a per-node summary
    steps: tuple[Step, ...]
    target_rf: int
    min_insync_replicas: int
    bytes_to_copy: int
    estimated_seconds: float
    notes: tuple[str, ...]
    #: the new nodes that become controller voters (dynamic quorum only)
    new_voters: tuple[int, ...] = ()
    playbook: ClassVar[str] = "scale-out"

    def roles_of(self, node_id: int) -> str:
        """``process.roles`` of new node ``node_id``."""
        return "broker,controller" if node_id in self.new_voters else "broker"

    def to_dict(self) -> dict[str, Any]:
        return {"quorum": self.quorum.value, "kafka_version": self.kafka_version,
                "existing": list(self.existing), "new_nodes": list(self.new_nodes),
                "new_node_roles": self.new_node_roles, "steps": [s.key for s in self.steps],
                "target_rf": self.target_rf, "min_insync_replicas": self.min_insync_replicas,
                "bytes_to_copy": self.bytes_to_copy,
                "estimated_seconds": self.estimated_seconds,
                "notes": list(self.notes), "new_voters": list(self.new_voters)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> ScaleOutPlan:
        return ScaleOutPlan(
            QuorumKind(d["quorum"]), str(d["kafka_version"]), tuple(d["existing"]),
            tuple(d["new_nodes"]), str(d["new_node_roles"]),
            tuple(Step.from_key(k) for k in d["steps"]), int(d["target_rf"]),
            int(d["min_insync_replicas"]), int(d["bytes_to_copy"]),
            float(d["estimated_seconds"]), tuple(d["notes"]),
            # journals written before per-node roles: every new node of a dynamic quorum
            tuple(d["new_voters"]) if "new_voters" in d else (
                tuple(d["new_nodes"]) if d["quorum"] == QuorumKind.DYNAMIC.value else ()))


def refuse_unhealthy(problems: tuple[str, ...], reassigning: bool, load: str,
                     before: str) -> None:
    """A playbook's preflight refusals (RefusedError, nothing changed): an unhealthy
    cluster (the first three problems named) or a partition reassignment in flight."""
    if problems:
        raise RefusedError("preflight: the cluster is not healthy ("
                           + "; ".join(problems[:3])
                           + (f"; +{len(problems) - 3} more" if len(problems) > 3 else "")
                           + f"): fix it first, {load}")
    if reassigning:
        raise RefusedError("preflight: a partition reassignment is in progress; let it finish "
                           f"(opskit reassign status) before {before}")


def plan_scale_out(facts: ClusterFacts, request: ScaleOutRequest) -> ScaleOutPlan:
    """The steps that take the cluster to ``request.target_brokers`` brokers with
    RF = min(3, brokers) everywhere, or RefusedError (nothing is changed)."""
    if not 2 <= request.target_brokers <= 32:
        raise UsageError(f"--brokers {request.target_brokers}: expected 2-32")
    if request.throttle_bytes_per_s <= 0:
        raise UsageError("the replication throttle must be positive")
    refuse_unhealthy(facts.problems, facts.reassignment_in_progress,
                     "a scale-out adds load", "scaling out")
    quorum = facts.quorum
    voters_now = len(set(facts.voters))
    if request.controllers is not None:
        if request.controllers < 1:
            raise UsageError(f"--controllers {request.controllers}: expected 1 or more")
        if quorum is QuorumKind.STATIC and request.controllers != voters_now:
            raise RefusedError(
                f"--controllers {request.controllers}: this plan would change the static "
                f"controller voter set ({voters_now} voter(s): "
                f"{', '.join(map(str, sorted(set(facts.voters))))}), which Kafka cannot do on a "
                "live cluster (new empty voters could elect a leader without the committed "
                "metadata); new nodes join as broker-only nodes. Fix: make the quorum dynamic "
                "first (Kafka 4.1+: opskit playbook upgrade-quorum), then scale out with "
                "--controllers")
        if request.controllers < voters_now:
            raise RefusedError(f"--controllers {request.controllers}: the quorum has "
                               f"{voters_now} voters already; a scale-out never removes one")
    present = sorted(set(facts.brokers))
    target_rf = min(3, request.target_brokers)
    short = sorted(t for t, rf in facts.topic_rf.items() if rf < target_rf)
    if len(present) >= request.target_brokers and not short:
        raise RefusedError(f"the cluster already has {len(present)} brokers "
                           f"({', '.join(map(str, present))}) and every topic RF "
                           f"{target_rf}; nothing to scale out")
    # enough brokers but topics below the RF (an aborted run, nodes added by hand): the
    # plan finishes the scale-out without adding nodes
    taken = set(facts.voters) | set(facts.brokers)
    new_nodes: list[int] = []
    candidate = max(taken, default=-1) + 1
    while len(present) + len(new_nodes) < request.target_brokers:
        if candidate not in taken:
            new_nodes.append(candidate)
        candidate += 1
    new_voters: tuple[int, ...] = ()
    if quorum is QuorumKind.DYNAMIC:
        wanted = len(new_nodes) if request.controllers is None else \
            request.controllers - voters_now
        if wanted > len(new_nodes):
            raise RefusedError(
                f"--controllers {request.controllers}: {voters_now} voter(s) + "
                f"{len(new_nodes)} new node(s) cannot make {request.controllers} voters; "
                "ask for more --brokers or fewer --controllers")
        new_voters = tuple(new_nodes[:wanted])

    steps: list[Step] = [Step(StepKind.PREFLIGHT)]
    steps += [Step(StepKind.ADD_NODE, n) for n in new_nodes]
    steps += [Step(StepKind.PROMOTE_VOTER, n) for n in new_voters]
    steps += [Step(StepKind.WAIT_REGISTERED), Step(StepKind.RAISE_RF),
              Step(StepKind.VERIFY_ISR), Step(StepKind.ELECT_LEADERS),
              Step(StepKind.SET_MIN_ISR), Step(StepKind.UPDATE_REGISTRY)]
    restarts = restart_order(present, new_nodes, (*facts.voters, *new_voters)) \
        if request.rolling_restart else ()
    steps += [Step(StepKind.RESTART_NODE, n) for n in restarts]
    if restarts:
        steps.append(Step(StepKind.VERIFY_DEFAULTS))
    steps.append(Step(StepKind.FINAL_HEALTH))

    # data to copy: every topic whose RF grows gets (target - current) new replicas
    bytes_to_copy = sum(max(0, target_rf - rf) * int(facts.topic_bytes.get(t, 0))
                        for t, rf in facts.topic_rf.items())
    estimated, estimate_note = estimate_seconds(
        bytes_to_copy, request, sources=len(present), receivers=len(new_nodes),
        voters=len(new_voters), restarts=len(restarts))

    notes: list[str] = []
    if not new_nodes:
        notes.append(
            f"the cluster already has {len(present)} brokers: this run adds no node and "
            f"finishes the scale-out: RF {target_rf} for {len(short)} topic(s) below it ("
            + ", ".join(short[:5]) + (f", +{len(short) - 5} more" if len(short) > 5 else "")
            + f"), then min.insync.replicas={request.min_insync_replicas}")
    elif quorum is QuorumKind.STATIC:
        notes.append(
            f"static quorum (voters {', '.join(map(str, facts.voters))}): new nodes "
            f"{', '.join(map(str, new_nodes))} join as broker-only nodes; the controller "
            "remains a single point of failure. To remove it: on Kafka 4.1+ make the quorum "
            "dynamic (its own, explicit step: opskit playbook upgrade-quorum), then scale out "
            "with --controllers")
    else:
        if new_voters:
            notes.append(f"dynamic quorum: new node(s) {', '.join(map(str, new_voters))} start "
                         "as observers and each is added as a voter (add-controller) only "
                         "after it caught up, one at a time")
        rest = [n for n in new_nodes if n not in new_voters]
        if rest:
            notes.append(f"new node(s) {', '.join(map(str, rest))} join as broker-only nodes "
                         f"(--controllers {request.controllers})")
        final = voters_now + len(new_voters)
        if final % 2 == 0:
            notes.append(f"{final} voters tolerate no more failures than {final - 1}: an odd "
                         "number of controllers is usual")
    per_node = sum(int(facts.topic_bytes.get(t, 0)) for t in facts.topic_rf)
    if facts.free_disk_bytes is not None and per_node * 1.1 > facts.free_disk_bytes:
        raise RefusedError(f"preflight: each new node must hold about {per_node:,} bytes "
                           f"(+10%) but has {facts.free_disk_bytes:,} free")
    notes.append(estimate_note)
    notes.append("min.insync.replicas is raised to "
                 f"{request.min_insync_replicas} only after ISR = {target_rf} everywhere")
    if not new_voters:
        roles = "broker"
    elif len(new_voters) == len(new_nodes):
        roles = "broker,controller"
    else:
        roles = (f"broker,controller ({', '.join(map(str, new_voters))}); broker "
                 f"({', '.join(str(n) for n in new_nodes if n not in new_voters)})")
    return ScaleOutPlan(quorum, facts.kafka_version, tuple(present), tuple(new_nodes), roles,
                        tuple(steps), target_rf, request.min_insync_replicas,
                        bytes_to_copy, estimated, tuple(notes), new_voters)


def restart_order(present: list[int], new_nodes: list[int],
                  voters: tuple[int, ...]) -> tuple[int, ...]:
    """Every node once, one at a time: broker-only nodes first, controller voters last
    (a single static controller's restart is the one that pauses leader elections)."""
    nodes = sorted({*present, *new_nodes})
    return (*[n for n in nodes if n not in voters], *[n for n in nodes if n in voters])


def estimate_seconds(bytes_to_copy: int, request: ScaleOutRequest, *, sources: int,
                     receivers: int, voters: int, restarts: int = 0) -> tuple[float, str]:
    """The plan's duration estimate and the note naming its assumptions.

    The copy: the replication throttle caps each broker, leader side (what it sends) and
    follower side (what it receives), so the copy runs at throttle x min(sources,
    receivers): the old brokers send, the new nodes receive (1 -> 3: one source, the
    throttle once, not twice). Then the fixed waits per new node and per new voter, and
    the playbook's own work, as measured (``ScaleOutRequest``'s defaults)."""
    lanes = max(1, min(sources, receivers))
    copy_s = bytes_to_copy / (request.throttle_bytes_per_s * lanes)
    waits_s = (receivers + restarts) * request.node_start_s \
        + voters * request.voter_promotion_s
    total = copy_s + waits_s + request.playbook_overhead_s
    promo = (f" + {voters} voter promotion(s) x {request.voter_promotion_s:g} s"
             if voters else "")
    if restarts:
        promo += (f" + {restarts} node restart(s) x {request.node_start_s:g} s (counted as "
                  "a node start; not measured separately)")
    note = (f"estimate {total:.0f} s = {bytes_to_copy:,} bytes / (throttle "
            f"{request.throttle_bytes_per_s:,} B/s x {lanes} broker(s) copying at once) "
            f"= {copy_s:.0f} s + {receivers} node start(s) x {request.node_start_s:g} s"
            f"{promo} + {request.playbook_overhead_s:g} s of the playbook's own work; the "
            "fixed times were measured on a shared 2-core test machine (docs/benchmarks.md): "
            "a busier or slower host starts nodes slower (24-33 s per node seen at load 24-36), "
            "and Kafka's throttle copied at about 0.67 of its rate there")
    return total, note
