"""What a Spark lag replay submitted to Kubernetes asks of the cluster: pure data.

``spark-submit --master k8s://... --deploy-mode cluster`` creates the driver pod
itself (Spark's own Kubernetes client) and the driver creates the executor pods.
opskit shapes both through Spark's pod templates
(``spark.kubernetes.{driver,executor}.podTemplateFile``) so that every pod:

- runs under a ServiceAccount of its own (the driver needs to create executor pods);
- meets the Kubernetes "restricted" Pod Security Standard (non-root, no privilege
  escalation, every capability dropped, the runtime's seccomp profile), so it is
  admitted in a namespace that enforces it;
- gets the Kafka password from a Secret as an environment variable
  (``OPSKIT_KAFKA_PASSWORD``), never on a command line: the job builds the SASL
  login from it (``--kafka-password-env``), so neither ``ps`` on the node nor the pod
  spec's ``args`` show it.

Nothing here talks to Kubernetes; the adapter writes the templates to files and the
tests hand the result to a real API server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from opskit.core.k8s_names import dns_label_problem, dns_subdomain_problem
from opskit.errors import UsageError

#: the environment variable the driver and executors read the Kafka password from
PASSWORD_ENV = "OPSKIT_KAFKA_PASSWORD"
#: container names Spark looks for in the templates (its defaults, set explicitly)
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
#: the user the apache/spark images run as
SPARK_UID = 185
APP_LABEL = "opskit-lag-replay"

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$")


@dataclass(frozen=True)
class K8sReplayTarget:
    """Where and how the replay runs on Kubernetes."""

    namespace: str
    image: str
    service_account: str = "spark"
    #: a Secret in ``namespace`` holding the Kafka password (None: no SASL password)
    kafka_secret: str | None = None
    kafka_secret_key: str = "password"
    executors: int = 2
    executor_memory: str = "2g"
    driver_memory: str = "1g"
    cpu_request: str = "500m"
    #: the job file inside the image (``local://`` = already in the image)
    job_uri: str = "local:///opt/opskit/lag_replay.py"

    def validate(self) -> None:
        for what, value, problem in (
                ("namespace", self.namespace, dns_label_problem(self.namespace)),
                ("service account", self.service_account,
                 dns_subdomain_problem(self.service_account)),
                ("secret", self.kafka_secret, None if self.kafka_secret is None
                 else dns_subdomain_problem(self.kafka_secret))):
            if problem is not None:
                raise UsageError(f"Kubernetes {what} {value!r} {problem}")
        if not self.image or any(c.isspace() for c in self.image):
            raise UsageError(f"container image {self.image!r} is not valid")
        if not 1 <= self.executors <= 1000:
            raise UsageError(f"executors must be 1-1000, not {self.executors}")
        if not _QUANTITY.match(self.cpu_request):
            raise UsageError(f"cpu request {self.cpu_request!r} is not a Kubernetes quantity")
        if not self.job_uri.startswith(("local://", "s3a://", "https://", "hdfs://")):
            raise UsageError("the job file must be a URI the driver pod can read "
                             f"(local:// in the image, s3a://, https://), not {self.job_uri!r}")


def _container_security() -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": SPARK_UID, "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}


def _pod(target: K8sReplayTarget, role: str, container: str) -> dict[str, Any]:
    env: list[dict[str, Any]] = []
    if target.kafka_secret is not None:
        env.append({"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": {
            "name": target.kafka_secret, "key": target.kafka_secret_key}}})
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True, "runAsUser": SPARK_UID, "fsGroup": SPARK_UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": container,
            "image": target.image,
            "env": env,
            "resources": {"requests": {"cpu": target.cpu_request}},
            "securityContext": _container_security(),
        }],
    }
    if role == "driver":
        spec["serviceAccountName"] = target.service_account
    else:
        # executors never call the API server: no token mounted
        spec["automountServiceAccountToken"] = False
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": {"app.kubernetes.io/name": APP_LABEL,
                                    "app.kubernetes.io/component": role}},
            "spec": spec}


def driver_pod_template(target: K8sReplayTarget) -> dict[str, Any]:
    """The driver's pod template (a ``v1/Pod`` manifest)."""
    target.validate()
    return _pod(target, "driver", DRIVER_CONTAINER)


def executor_pod_template(target: K8sReplayTarget) -> dict[str, Any]:
    """The executors' pod template (a ``v1/Pod`` manifest)."""
    target.validate()
    return _pod(target, "executor", EXECUTOR_CONTAINER)


def submit_conf(target: K8sReplayTarget, driver_template: str,
                executor_template: str) -> dict[str, str]:
    """``--conf`` settings for ``spark-submit --master k8s://... --deploy-mode cluster``.

    ``driver_template`` / ``executor_template`` are the paths the templates were
    written to (read by spark-submit on this machine, and by the driver in the pod
    through the ConfigMap Spark creates for them)."""
    target.validate()
    return {
        "spark.kubernetes.namespace": target.namespace,
        "spark.kubernetes.container.image": target.image,
        "spark.kubernetes.authenticate.driver.serviceAccountName": target.service_account,
        "spark.kubernetes.driver.podTemplateFile": driver_template,
        "spark.kubernetes.executor.podTemplateFile": executor_template,
        "spark.kubernetes.driver.podTemplateContainerName": DRIVER_CONTAINER,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
        "spark.executor.instances": str(target.executors),
        "spark.executor.memory": target.executor_memory,
        "spark.driver.memory": target.driver_memory,
        "spark.kubernetes.driver.label.app.kubernetes.io/name": APP_LABEL,
        "spark.kubernetes.executor.label.app.kubernetes.io/name": APP_LABEL,
    }


def rbac_manifests(target: K8sReplayTarget) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding the driver needs (create executor pods, the
    services and config maps Spark makes for them), scoped to the namespace."""
    target.validate()
    name = f"{APP_LABEL}-driver"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": target.service_account, "namespace": target.namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": name, "namespace": target.namespace},
         "rules": [
             {"apiGroups": [""], "resources": ["pods", "services", "configmaps",
                                               "persistentvolumeclaims"],
              "verbs": ["create", "get", "list", "watch", "delete", "deletecollection",
                        "patch"]},
         ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": name, "namespace": target.namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": target.service_account,
                       "namespace": target.namespace}]},
    ]
