"""Write the Kubernetes pod templates of a Spark lag replay and the ``spark-submit``
settings that use them (see :mod:`opskit.core.replay_k8s`)."""

from __future__ import annotations

from pathlib import Path

import yaml

from opskit.adapters.files.safe_write import write_file
from opskit.core.replay_k8s import (
    K8sReplayTarget,
    driver_pod_template,
    executor_pod_template,
    submit_conf,
)


def write_pod_templates(target: K8sReplayTarget, directory: Path) -> tuple[Path, Path]:
    """Write ``driver-pod.yaml`` and ``executor-pod.yaml`` into ``directory``."""
    out = []
    for name, manifest in (("driver-pod.yaml", driver_pod_template(target)),
                           ("executor-pod.yaml", executor_pod_template(target))):
        path = directory / name
        write_file(path, yaml.safe_dump(manifest, sort_keys=False), what="pod template",
                   mode=0o644)
        out.append(path)
    return out[0], out[1]


def k8s_submit_conf(target: K8sReplayTarget, directory: Path) -> dict[str, str]:
    """The templates written into ``directory`` and the ``--conf`` settings using them."""
    driver, executor = write_pod_templates(target, directory)
    return submit_conf(target, str(driver), str(executor))
