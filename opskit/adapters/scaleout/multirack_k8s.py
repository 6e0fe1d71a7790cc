"""The multi-rack playbook's steps on Kubernetes (``--platform kubernetes``), on HIP-30's
objects: the combined (controller) StatefulSet and the broker-only StatefulSet the
scale-out made beside it (:mod:`.k8s`).

Where ``broker.rack`` comes from: the bitnami image turns ``KAFKA_CFG_BROKER_RACK`` into
``broker.rack``. Pods of one StatefulSet share one template, so

- the broker-only StatefulSet carries the rack of each of its nodes in
  ``OPSKIT_BROKER_RACKS`` (``1=b,2=b,3=c``, node id -> rack), and its container's command
  (which already computes the node id from the pod's ordinal) exports
  ``KAFKA_CFG_BROKER_RACK`` from it: one line added after the node id's;
- the combined StatefulSet gets ``KAFKA_CFG_BROKER_RACK`` itself; its voters must then
  share one rack (HIP-30 runs one), else the plan is refused as not built.

A zone read from the node's topology label is not used: a pod cannot read its node's
labels through the downward API, and HIP-30's image has no init step that would.

Steps (the plan is :func:`opskit.core.scaleout.multirack.plan_multi_rack`'s):

- ``add_node:N``: the broker-only StatefulSet scaled to hold node N (never down; made
  from the combined one when there is none yet), the rack map in its template; waits
  for pod N Ready and broker N reporting its rack.
- ``set_rack:N``: the rack in the template of node N's StatefulSet (compare-and-set),
  then that one pod restarted (deleted: the broker-only StatefulSet is ``OnDelete``; the
  combined one, ``RollingUpdate``, replaces its pod itself), waiting for the new pod
  Ready, the broker reporting its rack and every partition back in ISR (failpoints: the
  restart's ``patched`` and ``stopped``, :mod:`.k8s_restart`, then ``restarted`` once the
  new pod is Ready, before those waits, as on a sandbox). Broker-only nodes first, the
  controller last (the plan's order). A broker reporting its rack under a template
  that gives it is not restarted (a resumed run), but the step still waits for every
  partition in ISR and gives it its leaders back; the only in-sync replica of anything
  is never restarted.
- ``preflight``, ``spread``, ``elect_leaders``, ``verify_spread``, ``final_health``: the
  Kafka steps of the local platform (:class:`.multirack.MultiRackSteps`); the spread's
  plan is also kept in a ConfigMap, so a run resumed elsewhere executes the same plan.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from opskit.adapters.k8s.api import KubeApi
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.k8s import RACKS_ENV, ConfigMapPlans, read_k8s_facts
from opskit.adapters.scaleout.k8s_restart import restart_pod, wait_for_pod
from opskit.adapters.scaleout.kafka_steps import sole_in_sync_refusal
from opskit.adapters.scaleout.multirack import MultiRackSteps, spread_plan_path
from opskit.core.scaleout import k8s as objs
from opskit.core.scaleout.multirack import (
    MultiRackPlan,
    MultiRackRequest,
    RackFacts,
    format_rack_map,
    parse_rack_map,
    plan_multi_rack,
)
from opskit.core.scaleout.plan import Step, StepKind
from opskit.errors import (
    InconsistentStateError,
    NotFoundError,
    RefusedError,
    UnsupportedError,
)
from opskit.sandbox.cluster import Sandbox

RACK_ENV = objs.env_name("broker.rack")          # KAFKA_CFG_BROKER_RACK
_NODE_ID_LINE = "export KAFKA_CFG_NODE_ID="
#: the line the broker-only container's command runs after it computed its node id
RACK_LINE = (f'for kv in ${{{RACKS_ENV}//,/ }}; do if [ "${{kv%%=*}}" = "$KAFKA_CFG_NODE_ID" ]; '
             f'then export {RACK_ENV}="${{kv#*=}}"; fi; done')


def journal_name(statefulset: str) -> str:
    """The ConfigMap of the multi-rack run's journal (the scale-out's stays apart)."""
    return objs.multirack_journal_name(statefulset)


# --- the templates (pure: dicts in, dicts out) ----------------------------------------

def _container(sts: Mapping[str, Any]) -> dict[str, Any]:
    return cast(dict[str, Any], objs.kafka_container(sts))


def _env_value(sts: Mapping[str, Any], name: str) -> str | None:
    for e in _container(sts).get("env", ()):
        if e.get("name") == name and "value" in e:
            return str(e["value"])
    return None


def _script(sts: Mapping[str, Any]) -> str:
    command = _container(sts).get("command") or []
    if len(command) != 3 or _NODE_ID_LINE not in str(command[2]):
        raise UnsupportedError(
            f"StatefulSet {sts.get('metadata', {}).get('name')!r}: its container's command does "
            "not compute the node id from the pod's ordinal (not a broker StatefulSet opskit "
            "made): a rack per pod cannot be set there")
    return str(command[2])


def with_broker_racks(broker_sts: Mapping[str, Any], racks: Mapping[int, str]) -> dict[str, Any]:
    """A copy of the broker-only StatefulSet whose pods take their rack from ``racks``
    (node id -> rack): ``OPSKIT_BROKER_RACKS`` set, the command's rack line added once.
    The same racks applied twice give the same object."""
    out = copy.deepcopy(dict(broker_sts))
    script = _script(out)
    container = _container(out)
    if RACK_LINE not in script:
        lines = script.split("\n")
        at = next(i for i, ln in enumerate(lines) if ln.startswith(_NODE_ID_LINE))
        lines.insert(at + 1, RACK_LINE)
        container["command"] = [*container["command"][:2], "\n".join(lines)]
    env: list[dict[str, Any]] = container["env"]
    value = format_rack_map(racks)
    for e in env:
        if e.get("name") == RACKS_ENV:
            e.pop("valueFrom", None)
            e["value"] = value
            break
    else:
        env.append({"name": RACKS_ENV, "value": value})
    return out


def template_rack(sts: Mapping[str, Any], node_id: int, combined: bool) -> str | None:
    """The rack the StatefulSet's template gives node ``node_id`` (None: none)."""
    if combined:
        return _env_value(sts, RACK_ENV)
    if RACK_LINE not in _script(sts):
        return _env_value(sts, RACK_ENV)
    got = parse_rack_map(_env_value(sts, RACKS_ENV) or "", RACKS_ENV) \
        if _env_value(sts, RACKS_ENV) else {}
    return got.get(node_id, _env_value(sts, RACK_ENV))


def broker_only_racks(plan: MultiRackPlan, voters: set[int]) -> dict[int, str]:
    return {n: r for n, r in plan.racks if n not in voters}


# --- facts and the plan ---------------------------------------------------------------

def read_rack_facts(api: KubeApi, namespace: str, statefulset: str,
                    admin: KafkaAdmin) -> RackFacts:
    """Preflight facts: version and voters from HIP-30's StatefulSet, the rest (racks as
    the brokers report them, health, reassignments) from Kafka."""
    from opskit.adapters.reassign.topology import read_topology

    facts = read_k8s_facts(api, namespace, statefulset, admin)
    got = read_topology(admin)
    if got.racks_unavailable:
        raise InconsistentStateError(f"preflight: {got.racks_unavailable}: the brokers' racks "
                                     "must be known to plan the spread")
    return RackFacts(facts.kafka_version, facts.voters, got.topology, facts.problems,
                     facts.reassignment_in_progress)


def plan_for(api: KubeApi, namespace: str, statefulset: str, admin: KafkaAdmin,
             request: MultiRackRequest) -> MultiRackPlan:
    """The plan, or RefusedError / UnsupportedError when the StatefulSets cannot carry
    it (nothing is changed)."""
    plan = plan_multi_rack(read_rack_facts(api, namespace, statefulset, admin), request,
                           datetime.now(UTC))
    check_objects(api, namespace, statefulset, plan)
    return plan


def check_objects(api: KubeApi, namespace: str, statefulset: str, plan: MultiRackPlan) -> None:
    """Every broker of the plan runs in a pod opskit can find and give its rack: a voter
    of the combined StatefulSet (all of them in one rack) or an ordinal of the broker-only
    one; the new nodes are that one's next ordinals."""
    combined = api.get_statefulset(namespace, statefulset)
    if combined is None:
        raise NotFoundError(f"StatefulSet {namespace}/{statefulset} not found")
    voters = objs.voter_pods(combined)
    rack = {n: r for n, r in plan.racks}
    voter_racks = {rack[n] for n in voters if n in rack}
    if len(voter_racks) > 1:
        raise UnsupportedError(
            f"not built: the voters of StatefulSet {statefulset} in different racks ("
            + ", ".join(f"{n}={rack[n]}" for n in sorted(voters) if n in rack)
            + "): its pods share one template, which sets one KAFKA_CFG_BROKER_RACK; put them "
            "in one rack")
    broker_sts = f"{statefulset}-broker"
    live = api.get_statefulset(namespace, broker_sts)
    first, have = None, 0
    if live is not None:
        labels = live.get("metadata", {}).get("labels") or {}
        if not all(labels.get(k) == v for k, v in objs.MANAGED_BY.items()):
            raise RefusedError(f"StatefulSet {namespace}/{broker_sts} exists and was not "
                               "created by opskit: refusing to take it over")
        first = objs.broker_first_id(live)
        have = int(live.get("spec", {}).get("replicas") or 0)
        _script(live)
    stray = [n for n in plan.existing if n not in voters
             and (first is None or not first <= n < first + have)]
    if stray:
        raise RefusedError(f"preflight: broker(s) {stray} run in no pod of StatefulSet "
                           f"{statefulset} (voters {sorted(voters)}) or {broker_sts}"
                           + (f" (nodes {first}..{first + have - 1})"
                              if first is not None and have else "")
                           + ": their rack cannot be set here")
    if plan.new_nodes:
        start = first + have if first is not None else min(plan.new_nodes)
        want = list(range(start, start + len(plan.new_nodes)))
        if list(plan.new_nodes) != want or (first is None and start <= max(voters, default=-1)):
            raise RefusedError(
                f"--add-brokers {list(plan.new_nodes)}: a StatefulSet numbers its pods without "
                f"gaps, so the new nodes of {broker_sts} must be {want}"
                + ("" if first is not None else " (above the voters' ids)"))


# --- the steps ------------------------------------------------------------------------

@dataclass
class K8sMultiRackSteps(MultiRackSteps):
    """Runs one step of a :class:`MultiRackPlan` on Kubernetes (the module docstring).
    The Kafka steps are the local platform's; ``sb`` is not used (no sandbox here)."""

    api: KubeApi = field(kw_only=True)
    namespace: str = field(kw_only=True)
    statefulset: str = field(kw_only=True)     # HIP-30's combined StatefulSet

    def __post_init__(self) -> None:
        super().__post_init__()
        plans = ConfigMapPlans(self.api, self.namespace, self.statefulset)
        plans.name = f"{journal_name(self.statefulset)}-plans"   # beside the run's journal
        self.kafka.plans = plans

    @property
    def broker_sts(self) -> str:
        return f"{self.statefulset}-broker"

    def run(self, step: Step, plan: MultiRackPlan) -> str:
        if step.kind is StepKind.PREFLIGHT:
            check_objects(self.api, self.namespace, self.statefulset, plan)
            return super().run(step, plan)
        if step.kind is StepKind.ADD_NODE:
            return self._add_pod(step, plan)
        if step.kind is StepKind.SET_RACK:
            return self._restart_in_rack(step, plan)
        if step.kind is StepKind.VERIFY_SPREAD and self.kafka.plans is not None:
            path = spread_plan_path(self.run_dir, self.run_id)
            if not path.exists():
                self.kafka.plans.restore(path)
        return super().run(step, plan)

    # --- helpers ------------------------------------------------------------
    def _combined(self) -> dict[str, Any]:
        sts = self.api.get_statefulset(self.namespace, self.statefulset)
        if sts is None:
            raise NotFoundError(f"StatefulSet {self.namespace}/{self.statefulset} not found")
        return sts

    def _pod_of(self, node_id: int) -> tuple[dict[str, Any], str, bool]:
        """(the live StatefulSet, the pod name, whether it is the combined one)."""
        combined = self._combined()
        voters = objs.voter_pods(combined)
        if node_id in voters:
            return combined, voters[node_id], True
        live = self.api.get_statefulset(self.namespace, self.broker_sts)
        if live is None:
            raise NotFoundError(f"StatefulSet {self.namespace}/{self.broker_sts} not found: "
                                f"no pod runs node {node_id}")
        ordinal = node_id - objs.broker_first_id(live)
        if not 0 <= ordinal < int(live.get("spec", {}).get("replicas") or 0):
            raise NotFoundError(f"no pod of StatefulSet {self.broker_sts} or of the voters of "
                                f"{self.statefulset} runs node {node_id}")
        return live, f"{self.broker_sts}-{ordinal}", False

    def _wanted(self, sts: dict[str, Any], combined: bool, plan: MultiRackPlan) -> dict[str, Any]:
        if combined:
            voters = set(objs.voter_pods(sts))
            racks = {r for n, r in plan.racks if n in voters}
            return objs.with_env(sts, {"broker.rack": next(iter(racks))})
        return with_broker_racks(sts, broker_only_racks(plan, set(self._voters())))

    def _voters(self) -> list[int]:
        return sorted(objs.voter_pods(self._combined()))

    def _wait_pod(self, pod: str) -> None:
        wait_for_pod(self.api, self.kafka, self.namespace, pod, None,
                     f"waiting for pod {pod} Ready", f"pod {pod} not created")

    # --- steps --------------------------------------------------------------
    def _add_pod(self, step: Step, plan: MultiRackPlan) -> str:
        """Scale the broker-only StatefulSet to hold node N (made from the combined one
        when there is none), the racks in its template. A rerun changes nothing."""
        assert step.node_id is not None
        n, rack = step.node_id, plan.rack_of(step.node_id)
        racks = broker_only_racks(plan, set(self._voters()))
        live = self.api.get_statefulset(self.namespace, self.broker_sts)
        if live is None:
            first = min(plan.new_nodes)
            made = with_broker_racks(objs.broker_statefulset(
                self._combined(), first_id=first, replicas=n - first + 1,
                namespace=self.namespace), racks)
            svc = self.api.apply_service(objs.broker_headless_service(made))
            done = f"{self.api.apply_statefulset(made)}, Service {made['spec']['serviceName']} {svc}"
            replicas = n - first + 1
        else:
            first = objs.broker_first_id(live)
            have = int(live.get("spec", {}).get("replicas") or 0)
            replicas = max(have, n - first + 1)
            want = with_broker_racks(live, racks)
            want["spec"]["replicas"] = replicas
            if replicas == have and want["spec"]["template"] == live["spec"]["template"]:
                done = "unchanged"
            else:
                self.api.replace_statefulset(want)     # compare-and-set on its resourceVersion
                done = "scaled" if replicas != have else "updated"
        pod = f"{self.broker_sts}-{n - first}"
        self._wait_pod(pod)
        self._reports(n, rack)
        return (f"StatefulSet {self.broker_sts} {done} (replicas {replicas}); pod {pod} Ready, "
                f"broker {n} registered in rack {rack}")

    def _restart_in_rack(self, step: Step, plan: MultiRackPlan) -> str:
        from opskit.adapters.scaleout.runner import failpoint

        assert step.node_id is not None
        n, k, rack = step.node_id, self.kafka, plan.rack_of(step.node_id)
        sts, pod, combined = self._pod_of(n)
        want = self._wanted(sts, combined, plan)
        template_ok = template_rack(sts, n, combined) == rack and \
            (combined or _env_value(sts, RACKS_ENV) == _env_value(want, RACKS_ENV))
        if template_ok and self._racks().get(n) == rack:
            # a resume after a kill between the restart and the step's end: the node's
            # partitions may still be catching up and its leaders elsewhere
            self._settled(plan, f"node {n} (pod {pod}) reports rack {rack}: waiting for "
                          "every partition in ISR")
            back = k.lead_again()
            return (f"node {n} (pod {pod}) reports rack {rack} already: not restarted; every "
                    f"partition in ISR{back}")
        self._settled(plan, f"before restarting node {n} (pod {pod}): waiting for every "
                      "partition in ISR")
        if template_ok and self._racks().get(n) == rack:     # an interrupted restart's pod
            back = k.lead_again()
            return (f"node {n} (pod {pod}) back in rack {rack} (an interrupted restart); every "
                    f"partition in ISR{back}")
        alone = k.sole_in_sync(n)
        if alone:
            raise sole_in_sync_refusal(n, alone, f"pod {pod}", f" and is not in rack {rack} yet")
        done = restart_pod(self.api, k, self.namespace, step.key, n, pod, sts, want, template_ok,
                           waiting=f"waiting for pod {pod} Ready", absent=f"pod {pod} not created")
        failpoint("restarted", step.key)     # the new pod Ready, nothing else waited for
        self._reports(n, rack)
        self._settled(plan, f"after restarting node {n}: waiting for every partition in ISR")
        back = k.lead_again()
        return f"node {n}: {done.updated}pod {pod} restarted ({done.how}) in rack {rack}; " \
               f"every partition in ISR{back}"


def steps_for(api: KubeApi, namespace: str, statefulset: str, *, conn: Any, context: str,
              run_dir: Any, throttle: str, run_id: str, wait_s: float, say: Any,
              cli: Any) -> K8sMultiRackSteps:
    """The step runner of a run on Kubernetes (no sandbox: ``sb`` is never read)."""
    return K8sMultiRackSteps(cast(Sandbox, None), conn, context, run_dir, throttle, run_id,
                             wait_s=wait_s, say=say, cli=cli, api=api, namespace=namespace,
                             statefulset=statefulset)
