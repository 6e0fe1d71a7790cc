"""The multi-rack playbook's plan: from brokers in no rack (or in the wrong ones) to
every broker in its rack and every partition spread over the racks (pure).

Steps, one journaled step each (the scale-out's machine runs them):

- ``preflight``: every broker of the plan registered, the cluster healthy;
- ``add_node:N``: a new broker started in its rack (``--add-brokers N=RACK``);
- ``set_rack:N``: one per existing broker whose rack differs: ``broker.rack`` rewritten,
  the node restarted, back in ISR; broker-only nodes first, controller voters last;
- ``spread``: the rack-aware rebalance (``plan_reassignment(REBALANCE)`` with the racks),
  planned once into the run directory and executed by the reassignment engine;
- ``elect_leaders``, ``verify_spread`` (every partition spans min(RF, racks) racks, no
  throttle left), ``final_health``.

The plan also predicts the spread from the assignment as it is now and the racks asked
for: the replicas it moves and the lower bound no plan reaching the same goal can go
below (``opskit.core.reassign.racks``). Restarts move no replica, so the ``spread`` step,
which plans again from the cluster once every broker reports its rack, finds the same
assignment (unless a topic is created or changed meanwhile).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from opskit.core.reassign.model import Broker, Goal, GoalKind, Policy, Topology
from opskit.core.reassign.plan import plan_reassignment
from opskit.core.scaleout.plan import Step, StepKind, refuse_unhealthy
from opskit.core.scaleout.window import Window
from opskit.errors import RefusedError, UsageError

_RACK = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def parse_rack_map(text: str, flag: str) -> dict[int, str]:
    """``0=a,1=b,2=c`` -> ``{0: "a", 1: "b", 2: "c"}`` (UsageError naming ``flag``)."""
    out: dict[int, str] = {}
    for item in (i.strip() for i in text.split(",")):
        node, sep, rack = item.partition("=")
        node, rack = node.strip(), rack.strip()
        if not sep or not node.isdigit() or not _RACK.match(rack):
            raise UsageError(f"{flag}: {item[:80]!r} is not NODE=RACK (a broker id, '=', a rack "
                             "name of letters, digits, '.', '_', '-'), e.g. 0=a,1=b,2=c")
        if int(node) in out:
            raise UsageError(f"{flag}: broker {int(node)} is named twice")
        out[int(node)] = rack
    return out


def format_rack_map(racks: Mapping[int, str]) -> str:
    return ",".join(f"{n}={r}" for n, r in sorted(racks.items()))


@dataclass(frozen=True)
class RackFacts:
    """What preflight read from the cluster (the adapter fills it)."""

    kafka_version: str
    voters: tuple[int, ...]
    topology: Topology                  # brokers with the racks they report now
    problems: tuple[str, ...] = ()      # URP, offline, under-min-ISR ... (empty: healthy)
    reassignment_in_progress: bool = False


@dataclass(frozen=True)
class MultiRackRequest:
    racks: Mapping[int, str]                        # every registered broker's rack
    add_brokers: Mapping[int, str] = field(default_factory=dict)   # new id -> rack
    throttle_bytes_per_s: int = 50 * 1024 * 1024
    window: Window | None = None
    node_start_s: float = 6.0           # as the scale-out's (measured there)
    playbook_overhead_s: float = 10.0


@dataclass(frozen=True)
class MultiRackPlan:
    kafka_version: str
    existing: tuple[int, ...]
    new_nodes: tuple[int, ...]
    racks: tuple[tuple[int, str], ...]            # every broker's rack at the end
    racks_before: tuple[tuple[int, str | None], ...]
    steps: tuple[Step, ...]
    #: the spread predicted from the assignment now (see the module docstring)
    replicas_to_move: int
    replicas_lower_bound: int
    rack_replicas_lower_bound: int
    bytes_to_copy: int
    bytes_lower_bound: int
    unspread_before: int
    estimated_seconds: float
    notes: tuple[str, ...]
    playbook: ClassVar[str] = "multi-rack"

    def rack_of(self, node_id: int) -> str:
        return dict(self.racks)[node_id]

    def to_dict(self) -> dict[str, Any]:
        return {"playbook": self.playbook, "kafka_version": self.kafka_version,
                "existing": list(self.existing), "new_nodes": list(self.new_nodes),
                "racks": {str(n): r for n, r in self.racks},
                "racks_before": {str(n): r for n, r in self.racks_before},
                "steps": [s.key for s in self.steps],
                "replicas_to_move": self.replicas_to_move,
                "replicas_lower_bound": self.replicas_lower_bound,
                "rack_replicas_lower_bound": self.rack_replicas_lower_bound,
                "bytes_to_copy": self.bytes_to_copy, "bytes_lower_bound": self.bytes_lower_bound,
                "unspread_before": self.unspread_before,
                "estimated_seconds": self.estimated_seconds, "notes": list(self.notes)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> MultiRackPlan:
        return MultiRackPlan(
            str(d["kafka_version"]), tuple(d["existing"]), tuple(d["new_nodes"]),
            tuple(sorted((int(n), str(r)) for n, r in d["racks"].items())),
            tuple(sorted((int(n), None if r is None else str(r))
                         for n, r in d["racks_before"].items())),
            tuple(Step.from_key(k) for k in d["steps"]), int(d["replicas_to_move"]),
            int(d["replicas_lower_bound"]), int(d["rack_replicas_lower_bound"]),
            int(d["bytes_to_copy"]), int(d["bytes_lower_bound"]), int(d["unspread_before"]),
            float(d["estimated_seconds"]), tuple(d["notes"]))


def _names(ids: Any) -> str:
    return ", ".join(map(str, sorted(ids)))


def plan_multi_rack(facts: RackFacts, request: MultiRackRequest, now: datetime) -> MultiRackPlan:
    """The steps that put every broker in its rack and spread every partition over the
    racks, or RefusedError / UsageError (nothing is changed)."""
    if request.throttle_bytes_per_s <= 0:
        raise UsageError("the replication throttle must be positive")
    if not request.racks:
        raise UsageError("--racks: name every broker's rack, e.g. 0=a,1=b,2=c")
    refuse_unhealthy(facts.problems, facts.reassignment_in_progress,
                     "restarts and moves add load", "spreading over racks")
    now_racks = facts.topology.racks()
    present = sorted(now_racks)
    unknown = sorted(set(request.racks) - set(present))
    if unknown:
        raise RefusedError(f"--racks names broker(s) {_names(unknown)}, not registered (brokers "
                           f"{_names(present)}); new brokers go in --add-brokers")
    missing = sorted(set(present) - set(request.racks))
    if missing:
        raise RefusedError(f"preflight: --racks does not name broker(s) {_names(missing)}: "
                           "every registered broker needs its rack")
    taken = set(present) | set(facts.voters)
    clash = sorted(set(request.add_brokers) & taken)
    if clash:
        raise RefusedError(f"--add-brokers {_names(clash)}: node id(s) already in the cluster "
                           f"(brokers {_names(present)}, voters {_names(facts.voters)})")
    final = {**request.racks, **request.add_brokers}
    per_rack = Counter(final.values())
    if len(per_rack) < 2:
        raise UsageError(f"--racks puts every broker in rack {next(iter(per_rack))}: name at "
                         "least two racks (nothing to spread over one)")
    parts = facts.topology.partitions
    top_rf = max((len(p.replicas) for p in parts), default=0)
    if top_rf:
        limit = math.ceil(top_rf / len(per_rack))
        room = sum(min(n, limit) for n in per_rack.values())
        if room < top_rf:
            raise RefusedError(
                f"preflight: a partition with RF {top_rf} cannot be spread over racks "
                + ", ".join(f"{r} ({n} broker(s))" for r, n in sorted(per_rack.items()))
                + f" with at most {limit} replica(s) per rack; add brokers (--add-brokers)")

    voters = set(facts.voters)
    change = [n for n in present if now_racks[n] != request.racks[n]]
    order = [n for n in change if n not in voters] + [n for n in change if n in voters]
    alone = [f"{p.topic}-{p.partition}" for p in parts
             if len(set(p.isr)) == 1 and p.isr[0] in change]
    if alone:
        holders = sorted({p.isr[0] for p in parts if len(set(p.isr)) == 1 and p.isr[0] in change})
        raise RefusedError(
            f"preflight: broker(s) {_names(holders)} hold the only in-sync replica of "
            f"{len(alone)} partition(s) (" + ", ".join(alone[:3])
            + (f", +{len(alone) - 3} more" if len(alone) > 3 else "") + "): restarting them "
            "to set their rack would take those offline; raise their replication factor first "
            "(opskit reassign plan --replication-factor)")
    new_nodes = sorted(request.add_brokers)
    steps = [Step(StepKind.PREFLIGHT), *[Step(StepKind.ADD_NODE, n) for n in new_nodes],
             *[Step(StepKind.SET_RACK, n) for n in order], Step(StepKind.SPREAD),
             Step(StepKind.ELECT_LEADERS), Step(StepKind.VERIFY_SPREAD),
             Step(StepKind.FINAL_HEALTH)]

    target = Topology(tuple(Broker(n, r) for n, r in sorted(final.items())), parts,
                      facts.topology.min_insync)
    spread = plan_reassignment(target, Goal(GoalKind.REBALANCE),
                               Policy(respect_racks=True,
                                      throttle_bytes_per_s=request.throttle_bytes_per_s), now)
    est = spread.estimates
    copy_s = est.duration_s or 0.0
    waits = (len(new_nodes) + len(order)) * request.node_start_s
    total = copy_s + waits + request.playbook_overhead_s
    notes = [(f"estimate {total:.0f} s = the spread's copy ({copy_s:.0f} s at the throttle, "
             f"the busiest broker's bytes) + {len(new_nodes) + len(order)} node start(s) x "
             f"{request.node_start_s:g} s + {request.playbook_overhead_s:g} s of the playbook's "
             "own work (the scale-out's measured figures; not measured for this playbook)")]
    if len(set(per_rack.values())) > 1:
        notes.append("racks hold unequal numbers of brokers ("
                     + ", ".join(f"{r}: {n}" for r, n in sorted(per_rack.items()))
                     + "): every partition is spread, but replica counts per broker cannot all "
                     "be balanced")
    if order:
        notes.append(f"node(s) {_names(order)} restart one at a time to take their rack "
                     "(broker-only nodes first, controller voters last); each waits for every "
                     "partition back in ISR, and a node holding a partition's only in-sync "
                     "replica is refused")
    notes.append("the spread is planned again from the cluster once every broker reports its "
                 "rack (kept in the run directory; a resume executes that same plan): the "
                 "figures here are its prediction from the assignment now")
    return MultiRackPlan(
        facts.kafka_version, tuple(present), tuple(new_nodes), tuple(sorted(final.items())),
        tuple(sorted(now_racks.items())), tuple(steps), est.replicas_moved,
        est.replicas_lower_bound, est.rack_replicas_lower_bound or 0, est.bytes_moved,
        est.bytes_lower_bound, est.unspread_before or 0, total, tuple(notes))


def spread_problems(replicas: Mapping[str, tuple[int, ...]],
                    racks: Mapping[int, str | None]) -> list[str]:
    """Partitions (``"topic-N"`` -> replicas) that do not span min(RF, racks) racks, with
    the racks they span; a replica on a broker without a known rack counts as none."""
    n_racks = len({r for r in racks.values() if r is not None})
    bad = []
    for tp, reps in sorted(replicas.items()):
        spanned = {racks.get(b) for b in reps} - {None}
        if len(spanned) < min(len(reps), n_racks):
            bad.append(f"{tp} on {list(reps)} spans {len(spanned)} rack(s)")
    return bad
