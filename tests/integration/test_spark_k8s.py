"""Spark lag replay on Kubernetes against a real kube-apiserver (built by
scripts/install-k8s.sh; etcd + kube-apiserver on loopback, no kubelet).

What is real: the API server's validation and admission (the namespace enforces the
"restricted" Pod Security Standard), RBAC, and Spark's own Kubernetes submission
client (``spark-submit --master k8s://... --deploy-mode cluster``) creating the driver
pod. What is not: no kubelet runs, so the driver pod is created and stays Pending;
nothing here runs the job in a pod (the job itself is tested on local and standalone
Spark).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from k8s_apiserver import ApiServer

from opskit.adapters.spark.k8s import k8s_submit_conf, write_pod_templates
from opskit.core.replay_k8s import PASSWORD_ENV, K8sReplayTarget, rbac_manifests
from opskit.errors import UsageError

NS = "data"
PASSWORD = "s3cret-replay-password-7f1c"


@pytest.fixture(scope="module")
def namespace(apiserver: ApiServer) -> str:
    """The replay namespace, enforcing the restricted Pod Security Standard, with the
    driver's RBAC and the Kafka password Secret created through the real client."""
    from kubernetes import client, utils

    api = apiserver.client()
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(
        name=NS, labels={"pod-security.kubernetes.io/enforce": "restricted",
                         "pod-security.kubernetes.io/enforce-version": "latest"})))
    # no controller manager runs here: play its ServiceAccount controller, which creates
    # "default" in every namespace of a real cluster
    core.create_namespaced_service_account(NS, client.V1ServiceAccount(
        metadata=client.V1ObjectMeta(name="default")))
    target = K8sReplayTarget(namespace=NS, image="apache/spark:4.0.0-python3")
    utils.create_from_yaml(api, yaml_objects=rbac_manifests(target))
    core.create_namespaced_secret(NS, client.V1Secret(
        metadata=client.V1ObjectMeta(name="kafka-replay"), string_data={"password": PASSWORD}))
    return NS


def _target(**kw: object) -> K8sReplayTarget:
    base: dict[str, object] = {"namespace": NS, "image": "apache/spark:4.0.0-python3",
                               "kafka_secret": "kafka-replay"}
    base.update(kw)
    return K8sReplayTarget(**base)  # type: ignore[arg-type]


def test_pod_templates_pass_server_side_dry_run_under_restricted(
        apiserver: ApiServer, namespace: str, tmp_path: Path) -> None:
    import yaml
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(apiserver.client())
    driver, executor = write_pod_templates(_target(), tmp_path)
    for path in (driver, executor):
        manifest = yaml.safe_load(path.read_text())
        manifest["metadata"]["name"] = f"dry-run-{path.stem}"
        created = core.create_namespaced_pod(namespace, manifest, dry_run="All")
        assert created.metadata.name == f"dry-run-{path.stem}"
        env = created.spec.containers[0].env
        assert [e.name for e in env] == [PASSWORD_ENV]
        assert env[0].value is None and env[0].value_from.secret_key_ref.name == "kafka-replay"
    # dry run stored nothing
    assert core.list_namespaced_pod(namespace).items == []
    # the admission check is real: the same pod without its security settings is refused
    bad = yaml.safe_load(driver.read_text())
    bad["metadata"]["name"] = "insecure"
    del bad["spec"]["securityContext"]
    del bad["spec"]["containers"][0]["securityContext"]
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(namespace, bad, dry_run="All")
    assert e.value.status == 403 and "restricted" in str(e.value.body)


def test_driver_service_account_may_create_executor_pods(apiserver: ApiServer,
                                                         namespace: str) -> None:
    from kubernetes import client

    authz = client.AuthorizationV1Api(apiserver.client())

    def allowed(verb: str, resource: str, ns: str) -> bool:
        review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{NS}:spark",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
            resource_attributes=client.V1ResourceAttributes(
                namespace=ns, verb=verb, resource=resource)))
        return bool(authz.create_subject_access_review(review).status.allowed)

    assert allowed("create", "pods", NS) and allowed("create", "configmaps", NS)
    assert not allowed("create", "pods", "default")      # scoped to its namespace
    assert not allowed("get", "secrets", NS)              # reads no secrets itself


def test_spark_submit_creates_the_driver_pod(apiserver: ApiServer, namespace: str,
                                             tmp_path: Path) -> None:
    """The real spark-submit (PySpark's Kubernetes client) submits to the real API server:
    the driver pod it creates carries opskit's template (restricted security, password
    from the Secret, the service account) and was admitted by the restricted namespace."""
    from kubernetes import client

    from opskit.adapters.spark.submit import spark_submit_binary

    token_file = tmp_path / "token"
    token_file.write_text(apiserver.token)
    token_file.chmod(0o600)
    conf = k8s_submit_conf(_target(executors=1), tmp_path / "templates")
    conf.update({
        "spark.kubernetes.submission.waitAppCompletion": "false",
        "spark.kubernetes.authenticate.submission.oauthTokenFile": str(token_file),
        "spark.kubernetes.authenticate.submission.caCertFile": str(apiserver.ca_file),
        "spark.kubernetes.file.upload.path": str(tmp_path / "upload"),
    })
    spec = json.dumps({"replay_id": "r-k8s-test", "pipeline": "events", "ranges": []})
    cmd = [spark_submit_binary(), "--master", f"k8s://{apiserver.host}",
           "--deploy-mode", "cluster", "--name", "opskit-lag-replay"]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += ["local:///opt/opskit/lag_replay.py", "--spec", spec, "--bootstrap",
            "kafka-bootstrap.kafka:9092", "--output", "s3a://replays/test",
            "--kafka-password-env", PASSWORD_ENV]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert r.returncode == 0, r.stderr[-3000:]

    core = client.CoreV1Api(apiserver.client())
    pods = core.list_namespaced_pod(namespace,
                                    label_selector="app.kubernetes.io/name=opskit-lag-replay")
    assert len(pods.items) == 1, [p.metadata.name for p in pods.items]
    pod = pods.items[0]
    assert pod.metadata.labels["spark-role"] == "driver"
    assert pod.spec.service_account_name == "spark"
    assert pod.status.phase == "Pending"  # no kubelet here: nothing runs it
    c = next(c for c in pod.spec.containers if c.name == "spark-kubernetes-driver")
    assert c.image == "apache/spark:4.0.0-python3"
    assert c.security_context.allow_privilege_escalation is False
    assert c.security_context.capabilities.drop == ["ALL"]
    pw = next(e for e in c.env if e.name == PASSWORD_ENV)
    assert pw.value is None and pw.value_from.secret_key_ref.name == "kafka-replay"
    assert "local:///opt/opskit/lag_replay.py" in c.args
    assert "--kafka-password-env" in c.args
    # the password is nowhere in what Spark stored: pod, its config maps
    dumped = json.dumps(apiserver.client().sanitize_for_serialization(pod))
    for cm in core.list_namespaced_config_map(namespace).items:
        dumped += json.dumps(cm.data or {})
    assert PASSWORD not in dumped


def test_bad_targets_are_usage_errors(tmp_path: Path) -> None:
    for kw in ({"namespace": "Data_NS"}, {"image": ""}, {"image": "a b"},
               {"service_account": "-x"}, {"executors": 0}, {"cpu_request": "lots"},
               {"job_uri": "/opt/job.py"}, {"kafka_secret": "UPPER"}):
        with pytest.raises(UsageError):
            write_pod_templates(_target(**kw), tmp_path)


def test_opskit_replay_submits_to_kubernetes(apiserver: ApiServer, namespace: str, kafka: Any,
                                             tmp_path: Path, uniq: str) -> None:
    """``opskit replay --master k8s://... --deploy-mode cluster`` writes the pod templates
    and submits through the real spark-submit; the driver pod it creates carries them. No
    kubelet runs the driver, so no result ever comes back: opskit says so (exit 3) and
    commits nothing, the group keeps its offsets."""
    from helpers import commit, create_topic, produce, run_cli
    from kubernetes import client
    from replay_helpers import committed

    topic, group = f"k8s_replay_{uniq}", f"k8s-replay-{uniq}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: 30, 1: 30})
    commit(kafka.bootstrap, group, {(topic, 0): 10, (topic, 1): 10})
    token_file = tmp_path / "token"
    token_file.write_text(apiserver.token)
    r = run_cli("replay", "-g", group, "-t", topic, "-b", kafka.bootstrap,
                "--master", f"k8s://{apiserver.host}", "--deploy-mode", "cluster",
                "--k8s-namespace", namespace, "--k8s-image", "apache/spark:4.0.0-python3",
                "--k8s-kafka-secret", "kafka-replay", "--kafka-username", "replay",
                "--conf", "spark.kubernetes.submission.waitAppCompletion=false",
                "--conf", f"spark.kubernetes.authenticate.submission.oauthTokenFile={token_file}",
                "--conf", f"spark.kubernetes.authenticate.submission.caCertFile={apiserver.ca_file}",
                "--output-dir", str(tmp_path / "out"), "--execute", "--yes")
    assert r.code == 3, r.err
    assert "no result was found" in r.err and "nothing committed" in r.err
    assert committed(kafka, group, topic) == {0: 10, 1: 10}
    core = client.CoreV1Api(apiserver.client())
    pods = core.list_namespaced_pod(namespace, label_selector="spark-role=driver").items
    mine = [p for p in pods if any(topic in a for c in p.spec.containers for a in (c.args or []))]
    assert len(mine) == 1
    c = next(c for c in mine[0].spec.containers if c.name == "spark-kubernetes-driver")
    assert "--kafka-password-env" in c.args and "replay" in c.args
    assert next(e for e in c.env if e.name == PASSWORD_ENV).value_from.secret_key_ref.key == \
        "password"
    assert not any("/.cache/opskit/spark-jars" in a for a in c.args)   # jars are in the image
    templates = list((tmp_path / "out").glob("*/k8s/driver-pod.yaml"))
    assert len(templates) == 1
