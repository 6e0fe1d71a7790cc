"""Write the Kubernetes pod templates of a Spark lag replay and the ``spark-submit``
settings that use them (see :mod:`opskit.core.replay_k8s`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from opskit.core.replay_k8s import (
    K8sReplayTarget,
    driver_pod_template,
    executor_pod_template,
    submit_conf,
)
from opskit.errors import InvalidInputError


def write_pod_templates(target: K8sReplayTarget, directory: Path) -> tuple[Path, Path]:
    """Write ``driver-pod.yaml`` and ``executor-pod.yaml`` into ``directory``."""
    out = []
    for name, manifest in (("driver-pod.yaml", driver_pod_template(target)),
                           ("executor-pod.yaml", executor_pod_template(target))):
        path = directory / name
        try:
            directory.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".yaml.tmp")
            tmp.write_text(yaml.safe_dump(manifest, sort_keys=False))
            tmp.replace(path)
        except OSError as e:
            raise InvalidInputError(f"cannot write the pod template {path}: {e.strerror}") from e
        out.append(path)
    return out[0], out[1]


def k8s_submit_conf(target: K8sReplayTarget, directory: Path) -> dict[str, str]:
    """The templates written into ``directory`` and the ``--conf`` settings using them."""
    driver, executor = write_pod_templates(target, directory)
    return submit_conf(target, str(driver), str(executor))
