"""The CronJob that runs the scale-out playbook on a schedule inside the cluster, and
the ServiceAccount, Role and RoleBinding with the least RBAC it needs (pure).

The job runs ``opskit playbook scale-out --platform kubernetes ... --window W
--execute``: inside the window it starts or resumes the run (journal in a
ConfigMap), outside it stops at a safe point. ``concurrencyPolicy: Forbid`` keeps
Kubernetes from starting a second job while one runs, and the run's Lease refuses one
anyway. Kafka credentials come from a Secret holding an opskit config file (its
contexts), mounted read-only, and with ``page`` the PagerDuty routing key from the same
Secret (a halted or failed run pages); nothing secret is on the command line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from opskit.core.k8s_names import dns_label_problem
from opskit.core.scaleout import k8s as objs
from opskit.errors import UsageError

CONFIG_DIR = "/etc/opskit"
ROUTING_KEY = "pagerduty-routing-key"
STATE_DIR = "/var/lib/opskit"
_CRON_FIELD = re.compile(r"^[-*/,0-9A-Za-z?]+$")


@dataclass(frozen=True)
class CronJobSpec:
    namespace: str
    statefulset: str
    image: str
    schedule: str                 # five cron fields, e.g. "0 2 * * *"
    window: str                   # e.g. "02:00-05:00Z" (already validated)
    context: str                  # the opskit context in the Secret's config file
    config_secret: str            # Secret with key config.yaml (opskit contexts)
    brokers: int = 3
    throttle: str = "50MiB"
    name: str = "opskit-scaleout"
    page: bool = False            # the Secret also holds key pagerduty-routing-key


def _check(spec: CronJobSpec) -> None:
    for what, value in (("--namespace", spec.namespace), ("--statefulset", spec.statefulset),
                        ("--config-secret", spec.config_secret), ("--name", spec.name)):
        # a CronJob's name leaves 11 characters for its Jobs' suffix: at most 52
        problem = dns_label_problem(value, 47 if what == "--statefulset" else 52)
        if problem is not None:
            raise UsageError(f"{what} {value!r} {problem}")
    fields = spec.schedule.split()
    if not (len(fields) == 5 and all(_CRON_FIELD.match(f) for f in fields)
            or spec.schedule.strip() in ("@daily", "@hourly", "@weekly")):
        raise UsageError(f"--schedule {spec.schedule!r}: expected five cron fields, e.g. "
                         "'0 2 * * *'")
    if not spec.image.strip() or any(c.isspace() for c in spec.image):
        raise UsageError(f"--image {spec.image!r}: expected an image reference")


def playbook_args(spec: CronJobSpec) -> list[str]:
    return ["opskit", "playbook", "scale-out", "--platform", "kubernetes",
            "--namespace", spec.namespace, "--statefulset", spec.statefulset,
            "--context", spec.context, "--brokers", str(spec.brokers),
            "--throttle", spec.throttle, "--window", spec.window,
            *(["--routing-key-file", f"{CONFIG_DIR}/{ROUTING_KEY}"] if spec.page else []),
            "--execute"]


def rbac_rules(statefulset: str, brokers: int = 3) -> list[dict[str, Any]]:
    """What the runner calls, and nothing else; names pinned wherever Kubernetes allows
    it (``create`` cannot be limited by name). The rolling restart updates HIP-30's
    combined StatefulSet (its ``KAFKA_CFG_*`` env, compare-and-set) and deletes one
    pod at a time: pods named ``<StatefulSet>-<ordinal>`` up to ``brokers`` of each."""
    broker = f"{statefulset}-broker"
    journal = objs.journal_name(statefulset)
    pods = [f"{name}-{i}" for name in (statefulset, broker) for i in range(brokers)]
    return [
        {"apiGroups": ["apps"], "resources": ["statefulsets"],
         "resourceNames": [statefulset, broker], "verbs": ["get"]},
        {"apiGroups": ["apps"], "resources": ["statefulsets"],
         "resourceNames": [broker], "verbs": ["patch"]},
        {"apiGroups": ["apps"], "resources": ["statefulsets"],
         "resourceNames": [statefulset, broker], "verbs": ["update"]},
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": pods,
         "verbs": ["delete"]},
        {"apiGroups": ["apps"], "resources": ["statefulsets"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["services"],
         "resourceNames": [f"{broker}-headless"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": [journal, f"{journal}-plans", objs.abort_name(statefulset)],
         "verbs": ["get", "update", "delete"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        # read only: a scale-out is refused while a multi-rack run is unfinished
        {"apiGroups": [""], "resources": ["configmaps"],
         "resourceNames": [objs.multirack_journal_name(statefulset)], "verbs": ["get"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": [objs.lease_name(statefulset)], "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]


def cronjob_objects(spec: CronJobSpec) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding and CronJob, in the order to apply them."""
    _check(spec)
    labels = {"app.kubernetes.io/name": spec.name, **objs.MANAGED_BY}
    meta: dict[str, Any] = {"namespace": spec.namespace, "labels": labels}
    sa = {"apiVersion": "v1", "kind": "ServiceAccount",
          "metadata": {"name": spec.name, **meta}, "automountServiceAccountToken": True}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": spec.name, **meta}, "rules": rbac_rules(spec.statefulset, spec.brokers)}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": spec.name, **meta},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": spec.name},
               "subjects": [{"kind": "ServiceAccount", "name": spec.name,
                             "namespace": spec.namespace}]}
    container = {
        "name": "opskit", "image": spec.image, "imagePullPolicy": "IfNotPresent",
        "command": playbook_args(spec),
        "env": [{"name": "OPSKIT_CONFIG", "value": f"{CONFIG_DIR}/config.yaml"},
                {"name": "OPSKIT_STATE", "value": STATE_DIR}],
        "volumeMounts": [{"name": "opskit-config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "opskit-state", "mountPath": STATE_DIR}],
        "securityContext": {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"memory": "512Mi"}},
    }
    cron = {
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": spec.name, **meta},
        "spec": {
            "schedule": spec.schedule, "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 600,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
            "jobTemplate": {"spec": {
                # a failed or halted run is not retried by the Job: the journal makes the
                # next scheduled run resume it
                "backoffLimit": 0,
                "template": {"metadata": {"labels": dict(labels)}, "spec": {
                    "serviceAccountName": spec.name, "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 1001,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                    "volumes": [
                        {"name": "opskit-config",
                         "secret": {"secretName": spec.config_secret, "defaultMode": 0o400,
                                    "items": [{"key": k, "path": k} for k in (
                                        "config.yaml", *([ROUTING_KEY] if spec.page else []))]}},
                        {"name": "opskit-state", "emptyDir": {}}],
                }},
            }},
        },
    }
    return [sa, role, binding, cron]
