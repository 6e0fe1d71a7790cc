"""The Kubernetes side of a Spark lag replay: pod templates and the job's SASL login."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from opskit.core.replay_k8s import (
    PASSWORD_ENV,
    K8sReplayTarget,
    driver_pod_template,
    executor_pod_template,
    submit_conf,
)

ROOT = Path(__file__).resolve().parents[2]


def _job():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("lag_replay", ROOT / "spark_jobs" / "lag_replay.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_templates_carry_no_password_and_restricted_security() -> None:
    t = K8sReplayTarget(namespace="data", image="img:1", kafka_secret="kafka")
    d, e = driver_pod_template(t), executor_pod_template(t)
    assert d["spec"]["serviceAccountName"] == "spark"
    assert e["spec"]["automountServiceAccountToken"] is False
    for pod in (d, e):
        c = pod["spec"]["containers"][0]
        assert c["env"] == [{"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": {
            "name": "kafka", "key": "password"}}}]
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    # no secret configured: no env at all
    assert driver_pod_template(K8sReplayTarget("data", "img"))["spec"]["containers"][0]["env"] == []
    conf = submit_conf(t, "/d.yaml", "/e.yaml")
    assert conf["spark.kubernetes.driver.podTemplateFile"] == "/d.yaml"
    assert conf["spark.executor.instances"] == "2"


def test_job_builds_the_login_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job()
    monkeypatch.setenv("PW", 'p"w\\x')
    args = argparse.Namespace(bootstrap="b:9092", kafka_option=["sasl.mechanism=SCRAM-SHA-512",
                                                                 "security.protocol=SASL_SSL"],
                              kafka_password_env="PW", kafka_username="replay")
    opts = job.kafka_options(args)
    assert opts["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="replay" password="p\\"w\\\\x";')
    monkeypatch.delenv("PW")
    with pytest.raises(SystemExit, match="PW is not set"):
        job.kafka_options(args)
