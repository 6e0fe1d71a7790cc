"""Restarting one broker's pod on Kubernetes: the part the scale-out
(:mod:`opskit.adapters.scaleout.k8s`, new read-only defaults) and the multi-rack change
(:mod:`opskit.adapters.scaleout.multirack_k8s`, a node's new rack) share.

Each decides first whether the pod needs a restart and refuses one that would take a
partition offline (its only in-sync replica); then :func:`restart_pod` reads the pod's
uid, replaces the StatefulSet when its template changes (compare-and-set on its
resourceVersion), passes the ``patched`` failpoint, deletes the pod (SIGTERM: a
controlled shutdown) -- or, with a changed template under RollingUpdate, lets the
StatefulSet controller replace it --, passes the ``stopped`` failpoint, and waits for a
new Ready pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opskit.adapters.k8s.api import KubeApi
from opskit.adapters.scaleout.kafka_steps import KafkaSteps
from opskit.core.scaleout import k8s as objs
from opskit.errors import NotFoundError


@dataclass(frozen=True)
class PodRestart:
    """How a pod was restarted, in the words of the step's detail."""

    #: "deleted it", or "StatefulSet <name> replaces it (RollingUpdate)"
    how: str
    #: "StatefulSet <name> updated, " when its template was replaced, else ""
    updated: str


def wait_for_pod(api: KubeApi, kafka: KafkaSteps, namespace: str, pod: str,
                 old_uid: str | None, what: str, absent: str) -> None:
    """Wait (``kafka``'s bound) until pod ``pod`` exists, is not the pod ``old_uid`` (when
    given) and is Ready. ``what``: the wait's description; ``absent``: what is missing
    while there is no such pod."""
    def check() -> str | None:
        uid = api.pod_uid(namespace, pod)
        if uid is None:
            return absent
        if old_uid is not None and uid == old_uid:
            return f"pod {pod} not replaced yet"
        return None if api.pod_ready(namespace, pod) else f"pod {pod} not Ready"

    kafka.wait(what, check)


def restart_pod(api: KubeApi, kafka: KafkaSteps, namespace: str, step_key: str, node: int,
                pod: str, sts: dict[str, Any], want: dict[str, Any], template_ok: bool, *,
                waiting: str, absent: str) -> PodRestart:
    """Restart pod ``pod`` of node ``node`` (StatefulSet ``sts``; ``want``: the same with
    the wanted template, replaced first unless ``template_ok``) and wait for a new Ready
    pod (``waiting``, ``absent``: see :func:`wait_for_pod`)."""
    from opskit.adapters.scaleout.runner import failpoint

    uid = api.pod_uid(namespace, pod)
    if uid is None:
        raise NotFoundError(f"pod {namespace}/{pod} (node {node}) not found")
    if not template_ok:
        api.replace_statefulset(want)     # compare-and-set on its resourceVersion
    failpoint("patched", step_key)
    how = "deleted it"
    if template_ok or objs.update_strategy(want) == "OnDelete":
        api.delete_pod(namespace, pod, uid)   # SIGTERM: controlled shutdown
    else:
        how = f"StatefulSet {sts['metadata']['name']} replaces it (RollingUpdate)"
    failpoint("stopped", step_key)
    wait_for_pod(api, kafka, namespace, pod, uid, waiting, absent)
    updated = "" if template_ok else f"StatefulSet {sts['metadata']['name']} updated, "
    return PodRestart(how, updated)
