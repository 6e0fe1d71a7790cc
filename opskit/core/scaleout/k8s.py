"""Kubernetes objects of a scale-out on HIP-30's deployment (pure: dicts in, dicts out).

HIP-30 runs one bitnami-style StatefulSet in KRaft combined mode (broker + the single
controller). Scaling that StatefulSet to 3 would start two more *combined* nodes that
are not in the static voter list, so the playbook leaves it alone and creates a
**broker-only** StatefulSet beside it: same image, cluster id and voter list,
``process.roles=broker``, node ids outside the voter set (``<first id> + ordinal``),
its own headless Service for stable pod names, and its own selector (never
overlapping the combined StatefulSet's).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from opskit.errors import InvalidInputError, UnsupportedError

JOURNAL_KEY = "state.json"
MANAGED_BY = {"app.kubernetes.io/managed-by": "opskit"}

_ENV_DROP = {"KAFKA_CFG_NODE_ID", "KAFKA_CFG_PROCESS_ROLES", "KAFKA_CFG_LISTENERS",
             "KAFKA_CFG_ADVERTISED_LISTENERS", "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP"}


def _env(container: Mapping[str, Any]) -> dict[str, str]:
    return {str(e["name"]): str(e.get("value", "")) for e in container.get("env", ())
            if "value" in e}


def kafka_container(sts: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Kafka container of a StatefulSet (the one with KAFKA_CFG_* settings)."""
    containers = sts.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    for c in containers:
        if any(str(e.get("name", "")).startswith("KAFKA_CFG_") for e in c.get("env", ())):
            return c  # type: ignore[no-any-return]
    raise InvalidInputError(f"StatefulSet {sts.get('metadata', {}).get('name')!r} has no "
                            "container with KAFKA_CFG_* settings (not a bitnami-style Kafka)")


def combined_facts(sts: Mapping[str, Any]) -> dict[str, Any]:
    """Roles, voters and listeners of HIP-30's combined StatefulSet."""
    env = _env(kafka_container(sts))
    roles = env.get("KAFKA_CFG_PROCESS_ROLES", "")
    voters = env.get("KAFKA_CFG_CONTROLLER_QUORUM_VOTERS", "")
    ids = [int(m) for m in re.findall(r"(\d+)@", voters)]
    return {"name": sts["metadata"]["name"], "roles": roles, "voters": voters,
            "voter_ids": ids, "replicas": int(sts.get("spec", {}).get("replicas", 1)),
            "bootstrap_servers": env.get("KAFKA_CFG_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS", "")}


def broker_statefulset(combined: Mapping[str, Any], *, first_id: int, replicas: int,
                       namespace: str) -> dict[str, Any]:
    """The broker-only StatefulSet to create beside ``combined`` (static quorum)."""
    facts = combined_facts(combined)
    if not facts["voters"]:
        raise UnsupportedError(
            "the StatefulSet has no KAFKA_CFG_CONTROLLER_QUORUM_VOTERS: a dynamic quorum "
            "(controller.quorum.bootstrap.servers) is not handled on Kubernetes yet")
    if first_id <= max(facts["voter_ids"], default=-1):
        raise InvalidInputError(f"broker ids from {first_id} would overlap the voter set "
                                f"({', '.join(map(str, facts['voter_ids']))})")
    name = f"{facts['name']}-broker"
    headless = f"{name}-headless"
    src = kafka_container(combined)
    env = [e for e in src.get("env", ()) if e.get("name") not in _ENV_DROP]
    env += [
        {"name": "KAFKA_CFG_PROCESS_ROLES", "value": "broker"},
        {"name": "KAFKA_CFG_LISTENERS", "value": "PLAINTEXT://:9092"},
        {"name": "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP",
         "value": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"},
        {"name": "OPSKIT_BROKER_FIRST_ID", "value": str(first_id)},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    container = copy.deepcopy(dict(src))
    container["env"] = env
    # node id = first id + pod ordinal; advertised name = the pod's stable DNS name
    container["command"] = ["/bin/bash", "-ec",
                            ('export KAFKA_CFG_NODE_ID=$(( OPSKIT_BROKER_FIRST_ID + '
                            '${POD_NAME##*-} ))\n'
                            'export KAFKA_CFG_ADVERTISED_LISTENERS="PLAINTEXT://${POD_NAME}.'
                            f'{headless}.{namespace}.svc.cluster.local:9092"\n'
                            'exec /opt/bitnami/scripts/kafka/entrypoint.sh '
                            '/opt/bitnami/scripts/kafka/run.sh')]
    container.pop("args", None)
    container["ports"] = [{"name": "client", "containerPort": 9092}]
    labels = {"app.kubernetes.io/name": name,
              "app.kubernetes.io/part-of": str(facts["name"]),
              "app.kubernetes.io/component": "broker", **MANAGED_BY}
    spec_src = combined.get("spec", {})
    pod_spec = copy.deepcopy(dict(spec_src.get("template", {}).get("spec", {})))
    pod_spec["containers"] = [container] + [c for c in pod_spec["containers"]
                                            if c.get("name") != container.get("name")]
    sts: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "serviceName": headless,
            "podManagementPolicy": "OrderedReady",
            # opskit restarts these pods itself, one at a time, once every partition is
            # back in ISR (a RollingUpdate would roll on Ready alone)
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }
    if spec_src.get("volumeClaimTemplates"):
        sts["spec"]["volumeClaimTemplates"] = copy.deepcopy(spec_src["volumeClaimTemplates"])
    return sts


def broker_first_id(broker_sts: Mapping[str, Any]) -> int:
    """The node id of pod 0 of a broker-only StatefulSet opskit created."""
    value = _env(kafka_container(broker_sts)).get("OPSKIT_BROKER_FIRST_ID", "")
    if not (value.isascii() and value.isdigit()):
        raise InvalidInputError(f"StatefulSet {broker_sts.get('metadata', {}).get('name')!r} "
                                "has no OPSKIT_BROKER_FIRST_ID: not one opskit created")
    return int(value)


def broker_headless_service(broker_sts: Mapping[str, Any]) -> dict[str, Any]:
    name = broker_sts["spec"]["serviceName"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": broker_sts["metadata"]["namespace"],
                         "labels": dict(broker_sts["metadata"]["labels"])},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": dict(broker_sts["spec"]["selector"]["matchLabels"]),
                     "ports": [{"name": "client", "port": 9092, "targetPort": 9092}]}}


def journal_configmap(name: str, namespace: str, state_json: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "opskit-scaleout", **MANAGED_BY}},
            "data": {JOURNAL_KEY: state_json}}


def broker_ids(first_id: int, replicas: int) -> Sequence[int]:
    return tuple(range(first_id, first_id + replicas))


# --- names and small objects of a run on Kubernetes ------------------------------

def journal_name(statefulset: str) -> str:
    """The ConfigMap holding the journal of the scale-out of ``statefulset``."""
    return f"opskit-scaleout-{statefulset}"


def multirack_journal_name(statefulset: str) -> str:
    """The ConfigMap holding the journal of the multi-rack run on ``statefulset`` (apart
    from the scale-out's, which the scheduled scale-out reads every night)."""
    return f"opskit-multirack-{statefulset}"


def abort_name(statefulset: str) -> str:
    """The ConfigMap whose presence asks the run to stop at its next safe point (its own
    object, so that ``playbook abort`` never bumps the journal's resourceVersion)."""
    return f"opskit-scaleout-{statefulset}-abort"


def lease_name(statefulset: str) -> str:
    """The coordination.k8s.io Lease held by the one active run."""
    return f"opskit-scaleout-{statefulset}"


def abort_configmap(statefulset: str, namespace: str, run_id: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": abort_name(statefulset), "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "opskit-scaleout", **MANAGED_BY}},
            "data": {"run_id": run_id}}


def lease(statefulset: str, namespace: str, holder: str, duration_s: int,
          renew_time: str) -> dict[str, Any]:
    """``renew_time``: RFC 3339 with microseconds (``2026-01-01T00:00:00.000000Z``)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease_name(statefulset), "namespace": namespace,
                         "labels": {"app.kubernetes.io/name": "opskit-scaleout", **MANAGED_BY}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s,
                     "renewTime": renew_time}}


def env_name(setting: str) -> str:
    """The bitnami image's environment variable of a broker setting."""
    return "KAFKA_CFG_" + setting.upper().replace(".", "_")


def env_changes(statefulsets: Sequence[Mapping[str, Any]],
                wanted: Mapping[str, str]) -> dict[str, dict[str, str | None]]:
    """Per StatefulSet, the ``KAFKA_CFG_*`` variables whose value differs from
    ``wanted`` (setting -> value): name -> current value (None when unset)."""
    out: dict[str, dict[str, str | None]] = {}
    for sts in statefulsets:
        env = _env(kafka_container(sts))
        diff = {env_name(k): env.get(env_name(k)) for k, v in wanted.items()
                if env.get(env_name(k)) != v}
        if diff:
            out[str(sts["metadata"]["name"])] = diff
    return out


def with_env(sts: Mapping[str, Any], settings: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``sts`` whose Kafka container sets each broker setting of ``settings``
    (setting -> value) through its ``KAFKA_CFG_*`` variable: replaced where the
    variable is set, appended in ``settings``' order where it is not (deterministic, so
    the same change applied twice gives the same object)."""
    out = copy.deepcopy(dict(sts))
    container = kafka_container(out)
    env: list[dict[str, Any]] = container["env"]   # kafka_container: it has KAFKA_CFG_*
    for setting, value in settings.items():
        name = env_name(setting)
        for e in env:
            if e.get("name") == name:
                e.pop("valueFrom", None)
                e["value"] = value
                break
        else:
            env.append({"name": name, "value": value})
    return out


def voter_pods(combined: Mapping[str, Any]) -> dict[int, str]:
    """Node id -> pod name of the combined StatefulSet's voters, read from
    ``KAFKA_CFG_CONTROLLER_QUORUM_VOTERS`` (``0@insights-kafka-0.insights-kafka...:9094``):
    the pods whose name is ``<StatefulSet>-<ordinal>``, the first label of the host."""
    name = str(combined["metadata"]["name"])
    out: dict[int, str] = {}
    for node, host in re.findall(r"(\d+)@([^:,\s]+)", combined_facts(combined)["voters"]):
        pod = host.split(".", 1)[0]
        if re.fullmatch(re.escape(name) + r"-\d+", pod):
            out[int(node)] = pod
    return out


def update_strategy(sts: Mapping[str, Any]) -> str:
    """``RollingUpdate`` (Kubernetes' default) or ``OnDelete``."""
    return str((sts.get("spec", {}).get("updateStrategy") or {}).get("type") or "RollingUpdate")
