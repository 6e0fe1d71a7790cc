"""The scale-out playbook's steps on Kubernetes (``--platform kubernetes``), on
HIP-30's objects: a bitnami-style combined StatefulSet with a static quorum.

- ``add_node:N`` applies the broker-only StatefulSet (opskit.core.scaleout.k8s) with
  enough replicas for node N (never fewer than it has: a rerun changes nothing), and
  its headless Service, then waits for pod N Ready and broker N registered in Kafka.
  The combined StatefulSet is never scaled (its new pods could not vote).
- The Kafka steps are shared with the local runner (:mod:`.kafka_steps`); the
  reassignment plans are also kept in a ConfigMap so a new CronJob pod executes the
  same plan.
- The read-only broker defaults (``default.replication.factor`` and the internal
  topics' RF, plus ``min.insync.replicas``) reach the brokers through a **rolling
  restart**, one ``restart_node:N`` step per node: broker-only nodes first, the
  combined (controller) pod last. Each step waits for every partition in ISR and a
  settled controller, refuses to restart the only in-sync replica of anything, sets
  the ``KAFKA_CFG_*`` values in the pod's StatefulSet, and restarts that one pod:
  opskit deletes it (the broker-only StatefulSet is ``OnDelete``, so only opskit rolls
  it); a StatefulSet under ``RollingUpdate`` (HIP-30's combined one) replaces its
  pod itself when its template changes. Then it waits for the new pod Ready, every
  partition in ISR again and the broker reporting the new values. ``verify_defaults``
  creates a probe topic without an RF (RF 3 expected) and makes a first commit.
  Journaled plans of earlier versions (no restart steps) still name the variables.
- The journal is a ConfigMap (compare-and-set); one run at a time holds a
  coordination.k8s.io Lease (a second concurrent run is refused); an abort request is
  a ConfigMap of its own.
- A dynamic quorum (no ``KAFKA_CFG_CONTROLLER_QUORUM_VOTERS``) is not supported here.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from opskit.adapters.k8s.api import KubeApi
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.k8s_restart import restart_pod
from opskit.adapters.scaleout.kafka_steps import (
    STATIC_DEFAULTS,
    KafkaSteps,
    read_kafka_facts,
    sole_in_sync_refusal,
)
from opskit.core.scaleout import k8s as objs
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutPlan, Step, StepKind
from opskit.errors import InconsistentStateError, NotFoundError, RefusedError, UnsupportedError

log = logging.getLogger(__name__)

PLANS_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
#: the broker StatefulSet's per-node rack map, set by ``playbook multi-rack`` (multirack_k8s)
RACKS_ENV = "OPSKIT_BROKER_RACKS"


def carries_rack_map(sts: dict[str, Any]) -> bool:
    """Whether a StatefulSet's first container sets the multi-rack per-node rack map."""
    containers = sts.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []
    return any(e.get("name") == RACKS_ENV for c in containers[:1] for e in c.get("env") or ())


def _combined(api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    sts = api.get_statefulset(namespace, name)
    if sts is None:
        raise NotFoundError(f"StatefulSet {namespace}/{name} not found")
    return sts


def read_k8s_facts(api: KubeApi, namespace: str, statefulset: str,
                   admin: KafkaAdmin) -> ClusterFacts:
    """Preflight facts: the quorum and version from HIP-30's StatefulSet, the rest from
    Kafka. A dynamic quorum is refused as unsupported on Kubernetes."""
    sts = _combined(api, namespace, statefulset)
    facts = objs.combined_facts(sts)
    if not facts["voters"]:
        raise UnsupportedError(
            f"StatefulSet {namespace}/{statefulset} has no KAFKA_CFG_CONTROLLER_QUORUM_VOTERS "
            "(a dynamic quorum): the Kubernetes runner handles HIP-30's static quorum only")
    if "controller" not in str(facts["roles"]):
        raise UnsupportedError(f"StatefulSet {namespace}/{statefulset} has process roles "
                               f"{facts['roles']!r}: expected HIP-30's combined broker,controller")
    image = str(objs.kafka_container(sts).get("image", ""))
    version = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "unknown"
    return read_kafka_facts(admin, kafka_version=version, kraft_version=0,
                            voters=tuple(facts["voter_ids"]))


class ConfigMapAbort:
    """The abort request of a run: a ConfigMap of its own (``exists()`` for the runner)."""

    def __init__(self, api: KubeApi, namespace: str, statefulset: str) -> None:
        self.api, self.namespace, self.statefulset = api, namespace, statefulset

    def exists(self) -> bool:
        return self.api.read_configmap(self.namespace, objs.abort_name(self.statefulset)) is not None

    def request(self, run_id: str) -> None:
        if not self.exists():
            self.api.write_configmap(objs.abort_configmap(self.statefulset, self.namespace,
                                                          run_id), None)

    def clear(self) -> None:
        self.api.delete_configmap(self.namespace, objs.abort_name(self.statefulset))


class ConfigMapPlans:
    """Keeps the reassignment plan files in a ConfigMap (a PlanStore)."""

    def __init__(self, api: KubeApi, namespace: str, statefulset: str) -> None:
        self.api, self.namespace = api, namespace
        self.name = f"{objs.journal_name(statefulset)}-plans"

    def restore(self, path: Path) -> None:
        from opskit.adapters.files.safe_write import write_file

        got = self.api.read_configmap(self.namespace, self.name)
        if got is not None and path.name in got[0]:
            write_file(path, got[0][path.name], what="reassignment plan")

    def keep(self, path: Path) -> None:
        if not PLANS_KEY_RE.match(path.name):
            raise InconsistentStateError(f"plan file name {path.name!r} is not a ConfigMap key")
        got = self.api.read_configmap(self.namespace, self.name)
        data, version = got if got is not None else ({}, None)
        manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "labels": dict(objs.MANAGED_BY)},
                    "data": {**data, path.name: path.read_text()}}
        self.api.write_configmap(manifest, version)


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(str(text))


@dataclass
class RunLease:
    """One active run per StatefulSet: a Lease renewed by a thread while the run lives.
    A run killed without releasing it blocks the next one for at most ``duration_s``."""

    api: KubeApi
    namespace: str
    statefulset: str
    holder: str
    duration_s: int = 30
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _version: str | None = None

    def acquire(self) -> None:
        now = datetime.now(UTC)
        got = self.api.read_lease(self.namespace, objs.lease_name(self.statefulset))
        version = None
        if got is not None:
            spec, version = got
            other = spec.get("holderIdentity") or ""
            renewed = _parse_time(spec.get("renewTime"))
            until = (renewed + timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
                     if renewed else None)
            if other and other != self.holder and until is not None and until > now:
                raise RefusedError(
                    f"another scale-out run ({other}) is active on {self.namespace}/"
                    f"{self.statefulset} (its lease runs until {until:%H:%M:%SZ}); if it was "
                    "killed, run again after that time")
        manifest = objs.lease(self.statefulset, self.namespace, self.holder, self.duration_s,
                              _rfc3339(now))
        self._version = self.api.write_lease(manifest, version)  # 409: lost a race, refused
        self._thread = threading.Thread(target=self._renew, name="scaleout-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.duration_s / 3):
            try:
                self._version = self.api.write_lease(
                    objs.lease(self.statefulset, self.namespace, self.holder, self.duration_s,
                               _rfc3339(datetime.now(UTC))), self._version)
            except Exception as e:  # noqa: BLE001 - the journal's CAS stops a usurped run
                log.warning("scale-out lease not renewed: %s", e)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._version is not None:
            try:  # expire it now so the next run need not wait
                self.api.write_lease(objs.lease(self.statefulset, self.namespace, "",
                                                self.duration_s,
                                                _rfc3339(datetime.now(UTC))), self._version)
            except Exception as e:  # noqa: BLE001 - it expires by itself
                log.warning("scale-out lease not released: %s", e)


def lease_state(api: KubeApi, namespace: str, statefulset: str,
                now: datetime | None = None) -> dict[str, Any]:
    """Whether a live run holds the StatefulSet's run Lease (``RunLease``), for
    ``playbook status``: {"state": "running", "holder", "until"} while its holder renews
    it, else {"state": "interrupted", "lease": why} (no Lease, released, or not renewed
    since its duration ran out: the run's process is gone)."""
    now = now or datetime.now(UTC)
    got = api.read_lease(namespace, objs.lease_name(statefulset))
    if got is None:
        return {"state": "interrupted", "lease": "no run holds its Lease"}
    spec = got[0]
    holder = spec.get("holderIdentity") or ""
    renewed = _parse_time(spec.get("renewTime"))
    until = (renewed + timedelta(seconds=int(spec.get("leaseDurationSeconds") or 0))
             if renewed else None)
    if not holder or until is None:
        return {"state": "interrupted", "lease": "no run holds its Lease"}
    if until > now:
        return {"state": "running", "holder": holder, "until": f"{until:%H:%M:%SZ}"}
    return {"state": "interrupted",
            "lease": f"its Lease, held by {holder}, was not renewed after {until:%H:%M:%SZ}"}


@dataclass
class K8sSteps:
    """Runs one step of ``plan`` on Kubernetes; returns a one-line detail."""

    api: KubeApi
    namespace: str
    statefulset: str                  # HIP-30's combined StatefulSet
    kafka: KafkaSteps

    @property
    def broker_sts(self) -> str:
        return f"{self.statefulset}-broker"

    def run(self, step: Step, plan: ScaleOutPlan) -> str:
        k = self.kafka
        if step.kind is StepKind.PREFLIGHT:
            return self._preflight(plan)
        if step.kind is StepKind.ADD_NODE:
            assert step.node_id is not None
            return self._add_node(step.node_id, plan)
        if step.kind is StepKind.PROMOTE_VOTER:
            raise UnsupportedError("a dynamic quorum is not supported on Kubernetes")
        if step.kind is StepKind.WAIT_REGISTERED:
            self._wait_pods(plan.new_nodes, plan)
            return k.wait_registered(plan)
        if step.kind is StepKind.SET_MIN_ISR:
            return self._min_isr(plan)
        if step.kind is StepKind.RESTART_NODE:
            assert step.node_id is not None
            return self._restart(step, plan)
        return {StepKind.RAISE_RF: k.raise_rf, StepKind.VERIFY_ISR: k.verify_isr,
                StepKind.ELECT_LEADERS: k.elect_leaders,
                StepKind.UPDATE_REGISTRY: k.update_registry,
                StepKind.VERIFY_DEFAULTS: k.verify_defaults,
                StepKind.FINAL_HEALTH: k.final_health}[step.kind](plan)

    # --- the rolling restart ----------------------------------------------------
    @staticmethod
    def restart_settings(plan: ScaleOutPlan) -> dict[str, str]:
        """The read-only settings a restart applies (setting -> value)."""
        return {**{k: str(plan.target_rf) for k in STATIC_DEFAULTS},
                "min.insync.replicas": str(plan.min_insync_replicas)}

    def _pod_of(self, node_id: int, plan: ScaleOutPlan) -> tuple[dict[str, Any], str]:
        """(the live StatefulSet, the pod name) running node ``node_id``."""
        combined = _combined(self.api, self.namespace, self.statefulset)
        voters = objs.voter_pods(combined)
        if node_id in voters:
            return combined, voters[node_id]
        live = self.api.get_statefulset(self.namespace, self.broker_sts)
        if live is None:
            raise NotFoundError(f"StatefulSet {self.namespace}/{self.broker_sts} not found: "
                                f"no pod runs node {node_id}")
        ordinal = node_id - objs.broker_first_id(live)
        if not 0 <= ordinal < int(live.get("spec", {}).get("replicas") or 0):
            raise NotFoundError(f"no pod of StatefulSet {self.broker_sts} or of the voters of "
                                f"{self.statefulset} runs node {node_id}")
        return live, f"{self.broker_sts}-{ordinal}"

    def _with_settings(self, sts: dict[str, Any], plan: ScaleOutPlan) -> dict[str, Any]:
        """``sts`` as it should be: the combined one with the settings in its env; the
        broker-only one made anew from that combined one (so a later ``add_node`` rerun
        computes the very same object and changes nothing), ``OnDelete``, same replicas."""
        wanted = self.restart_settings(plan)
        name = sts["metadata"]["name"]
        if name == self.statefulset:
            return objs.with_env(sts, wanted)
        combined = objs.with_env(_combined(self.api, self.namespace, self.statefulset), wanted)
        made = objs.broker_statefulset(combined, first_id=objs.broker_first_id(sts),
                                       replicas=int(sts["spec"]["replicas"]),
                                       namespace=self.namespace)
        out = dict(sts)
        out["spec"] = {**sts["spec"], "template": made["spec"]["template"],
                       "updateStrategy": made["spec"]["updateStrategy"]}
        return out

    def _restart(self, step: Step, plan: ScaleOutPlan) -> str:
        """Restart the pod of node N with the read-only settings in its StatefulSet (see
        the module docstring). Idempotent: a broker that reports the settings already is
        not restarted; a killed run's half-done restart is finished."""
        assert step.node_id is not None
        n, k = step.node_id, self.kafka
        brokers = len(set(plan.existing) | set(plan.new_nodes))
        sts, pod = self._pod_of(n, plan)
        k.wait(f"before restarting node {n} (pod {pod}): waiting for every partition in ISR "
               "and a settled controller", lambda: k.settled(brokers))
        values = ", ".join(f"{key}={v}" for key, v in self.restart_settings(plan).items())
        want = self._with_settings(sts, plan)
        template_ok = objs.env_changes([sts], self.restart_settings(plan)) == {} and \
            objs.update_strategy(sts) == objs.update_strategy(want)
        old = k.runs_with_defaults(n, plan)
        if not old and template_ok:  # a resumed run's finished restart: leaders may be away
            return (f"node {n} (pod {pod}) runs with {values} already: not restarted"
                    f"{k.lead_again()}")
        alone = k.sole_in_sync(n)
        if alone:
            raise sole_in_sync_refusal(n, alone, f"pod {pod}", "; the scale-out is not finished")
        done = restart_pod(self.api, k, self.namespace, step.key, n, pod, sts, want, template_ok,
                           waiting=f"restarting node {n}: waiting for a new pod {pod} Ready",
                           absent=f"pod {pod} not replaced yet")
        back = k.after_restart(n, plan, brokers, lambda still: (
            f"pod {pod} was restarted but node {n} reports "
            + ", ".join(f"{key}={v}" for key, v in still.items())
            + f": its StatefulSet sets {values}; does the image read KAFKA_CFG_* variables?"))
        return (f"node {n}: {done.updated}pod {pod} restarted ({done.how}), runs with {values}; "
                f"every partition in ISR{back}")

    def _first_id(self, plan: ScaleOutPlan) -> int:
        """Node id of pod 0: the live broker StatefulSet's (a later scale-out appends
        pods, never renumbers running brokers), else the plan's first new node."""
        live = self.api.get_statefulset(self.namespace, self.broker_sts)
        first = objs.broker_first_id(live) if live is not None else min(plan.new_nodes)
        start = min(plan.new_nodes) - first
        if start < 0 or tuple(plan.new_nodes) != tuple(objs.broker_ids(min(plan.new_nodes),
                                                                        len(plan.new_nodes))):
            raise UnsupportedError(
                f"new node ids {list(plan.new_nodes)} are not the next ordinals of StatefulSet "
                f"{self.broker_sts} (pod 0 is node {first}): a StatefulSet numbers its pods "
                "0, 1, 2, ... without gaps")
        return first

    def _preflight(self, plan: ScaleOutPlan) -> str:
        _combined(self.api, self.namespace, self.statefulset)
        live = self.api.get_statefulset(self.namespace, self.broker_sts)
        if live is not None:
            labels = live.get("metadata", {}).get("labels") or {}
            if not all(labels.get(k) == v for k, v in objs.MANAGED_BY.items()):
                raise RefusedError(f"StatefulSet {self.namespace}/{self.broker_sts} exists and "
                                   "was not created by opskit: refusing to take it over")
            if carries_rack_map(live):
                raise RefusedError(
                    f"StatefulSet {self.namespace}/{self.broker_sts} holds its brokers' racks "
                    f"({RACKS_ENV}, set by a multi-rack run): a scale-out would rebuild it "
                    "without them; add brokers with `opskit playbook multi-rack --add-brokers`")
        first = self._first_id(plan)
        have = int((live or {}).get("spec", {}).get("replicas") or 0)
        if min(plan.new_nodes) - first > have:
            raise RefusedError(f"StatefulSet {self.broker_sts} has {have} pod(s) (nodes "
                               f"{first}..{first + have - 1}); new node {min(plan.new_nodes)} "
                               "would leave a gap of pods with node ids outside the plan")
        return self.kafka.preflight(plan)

    def _add_node(self, node_id: int, plan: ScaleOutPlan) -> str:
        first = self._first_id(plan)
        ordinal = node_id - first
        combined = _combined(self.api, self.namespace, self.statefulset)
        live = self.api.get_statefulset(self.namespace, self.broker_sts)
        have = int((live or {}).get("spec", {}).get("replicas") or 0)
        replicas = max(have, ordinal + 1)   # a rerun of an earlier node never scales down
        sts = objs.broker_statefulset(combined, first_id=first, replicas=replicas,
                                      namespace=self.namespace)
        svc = self.api.apply_service(objs.broker_headless_service(sts))
        done = self.api.apply_statefulset(sts)
        self._wait_pods((node_id,), plan)
        self.kafka.wait_registered(plan, (node_id,))
        return (f"StatefulSet {self.broker_sts} {done} (replicas {replicas}), Service "
                f"{sts['spec']['serviceName']} {svc}; pod {self.broker_sts}-{ordinal} Ready, "
                f"broker {node_id} registered")

    def _wait_pods(self, nodes: tuple[int, ...], plan: ScaleOutPlan) -> None:
        first = self._first_id(plan)
        pods = [f"{self.broker_sts}-{n - first}" for n in nodes]

        def check() -> str | None:
            state = {p: self.api.pod_ready(self.namespace, p) for p in pods}
            missing = [p for p, ok in state.items() if ok is None]
            unready = [p for p, ok in state.items() if ok is False]
            if missing:
                return f"pod(s) {missing} not created"
            return f"pod(s) {unready} not Ready" if unready else None

        self.kafka.wait(f"waiting for pods {pods}", check)

    def _min_isr(self, plan: ScaleOutPlan) -> str:
        want = str(plan.min_insync_replicas)
        topics = self.kafka.set_topic_min_isr(plan)
        with self.kafka.admin() as admin:
            brokers = sorted(b.node_id for b in admin.metadata().brokers)
            admin.alter_broker_configs(brokers, {"min.insync.replicas": want})
        wanted = {**{k: str(plan.target_rf) for k in STATIC_DEFAULTS},
                  "min.insync.replicas": want}
        found = [s for s in (self.api.get_statefulset(self.namespace, n)
                             for n in (self.statefulset, self.broker_sts)) if s is not None]
        changes = objs.env_changes(found, wanted)
        if any(s.kind is StepKind.RESTART_NODE for s in plan.steps):
            rolled = ("read-only settings: the rolling restart sets them in the StatefulSets "
                      "and restarts one pod at a time")
        elif changes:
            restart = "; ".join(f"StatefulSet {name}: " + ", ".join(
                f"{var}={wanted_value(var, wanted)} (now {cur or 'unset'})"
                for var, cur in env.items()) for name, env in changes.items())
            rolled = (f"read-only settings NOT changed (a rolling restart of the single "
                      f"controller is an operator's decision): set {restart}")
        else:
            rolled = "the StatefulSets' env already has the read-only defaults"
        return (f"min.insync.replicas={want} on {topics} topic(s) and on brokers {brokers} "
                f"(dynamic per-broker values); {rolled}")


def wanted_value(var: str, wanted: dict[str, str]) -> str:
    return next(v for k, v in wanted.items() if objs.env_name(k) == var)
