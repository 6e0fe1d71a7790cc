"""``opskit playbook ... --platform kubernetes`` end to end, against a real kube-apiserver
and a real Kafka 3.7 cluster.

The API server has no kubelet, scheduler or controller manager, so nothing turns a
StatefulSet into running pods. **This test plays the StatefulSet controller and the
kubelet** (``FakeKubelet``): it polls the broker-only StatefulSet the playbook
applies, creates its pods through the API, starts a real local Kafka broker process
for each (a broker-only node joining the 1-node static-quorum 3.7 sandbox that stands
in for HIP-30's combined pod, node id = first id + ordinal, read from the pod
template as the container's command would), and marks each pod Ready through the
status subresource. Everything the playbook itself does goes through the real API
server (with the CronJob's ServiceAccount and Role, not an admin) and the real
brokers.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

import pytest
import yaml
from confluent_kafka import Producer
from helpers import cli_sandbox, create_topic, run_cli
from hip30_k8s import hip30_statefulset
from k8s_apiserver import ApiServer

from opskit.adapters.k8s.api import KubeApi, KubeTarget
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.runner import KILL_AT_ENV
from opskit.core.scaleout.k8s import env_changes, with_env
from opskit.sandbox.cluster import Sandbox

ROOT = Path(__file__).resolve().parents[2]
NS = "hip30-pb"
STS = "insights-kafka"
BROKER_STS = f"{STS}-broker"
JOURNAL = f"opskit-scaleout-{STS}"

pytestmark = pytest.mark.timeout(1500)


#: KAFKA_CFG_* variables the fake kubelet does not turn into broker settings: the
#: sandbox node keeps its own id, roles, listeners and voters (as the pod network would)
_OWN = {"KAFKA_CFG_NODE_ID", "KAFKA_CFG_PROCESS_ROLES", "KAFKA_CFG_CONTROLLER_QUORUM_VOTERS",
        "KAFKA_CFG_LISTENERS", "KAFKA_CFG_ADVERTISED_LISTENERS",
        "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP"}


def _template_hash(sts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(sts["spec"]["template"], sort_keys=True).encode()
                          ).hexdigest()[:16]


class FakeKubelet:
    """Plays the StatefulSet controller + kubelet for both StatefulSets (see the module
    docstring). The broker-only one (``OnDelete``): pods created in order, each backed
    by a real broker process; a deleted pod is made again from the current template and
    its broker restarted. HIP-30's combined one (``RollingUpdate``, one pod played by
    the sandbox's node 0): its pod is replaced when its template changes. A restarted
    node gets the template's ``KAFKA_CFG_*`` values in its server.properties, as the
    bitnami image's entrypoint writes them (``KAFKA_CFG_FOO_BAR`` -> ``foo.bar``)."""

    def __init__(self, api: KubeApi, sb: Sandbox) -> None:
        self.api, self.sb = api, sb
        self.errors: list[str] = []
        self.started: list[int] = []
        self.restarted: list[int] = []
        self.allowed = 1      # pods it may create (the test opens the gate step by step)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-kubelet", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(180)

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            try:
                self._sync_combined()
                self._sync()
            except Exception as e:  # noqa: BLE001 - kept and asserted by the test
                self.errors.append(f"{type(e).__name__}: {e}")

    def _make_pod(self, sts: dict[str, Any], name: str) -> None:
        template = sts["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": NS,
                            "labels": dict(template["metadata"]["labels"]),
                            "annotations": {"fake-kubelet/template": _template_hash(sts)}},
               "spec": copy.deepcopy(template["spec"])}
        self.api.core.create_namespaced_pod(NS, pod)

    def _ready(self, name: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.api.core.patch_namespaced_pod_status(name, NS, {"status": {
            "phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})

    def _restart_with(self, node_id: int, sts: dict[str, Any]) -> None:
        """Stop the node (SIGTERM, as the kubelet stops a deleted pod's container), write
        the template's KAFKA_CFG_* settings into its file, start it."""
        env = {e["name"]: e["value"] for e in sts["spec"]["template"]["spec"]["containers"][0]
               ["env"] if "value" in e and e["name"].startswith("KAFKA_CFG_")
               and e["name"] not in _OWN}
        settings = {k[len("KAFKA_CFG_"):].lower().replace("_", "."): v for k, v in env.items()}
        self.sb.stop_node(node_id)
        node = next(n for n in self.sb.require().nodes if n.node_id == node_id)
        keep = [ln for ln in node.config_path.read_text().splitlines()
                if ln.split("=", 1)[0] not in settings]
        node.config_path.write_text("\n".join([*keep, *(f"{k}={v}" for k, v in
                                                       settings.items())]) + "\n")
        self.sb.start_node(node_id, wait_timeout=180)
        self.restarted.append(node_id)

    def _sync_combined(self) -> None:
        sts = self.api.get_statefulset(NS, STS)
        if sts is None:
            return
        name = f"{STS}-0"
        if self.api.pod_uid(NS, name) is not None:
            pod = self.api.core.read_namespaced_pod(name, NS)
            if (pod.metadata.annotations or {}).get("fake-kubelet/template") == \
                    _template_hash(sts):
                return
            assert (sts["spec"].get("updateStrategy") or {}).get(
                "type", "RollingUpdate") == "RollingUpdate"
            self.api.core.delete_namespaced_pod(name, NS)   # the rolling update
            self._make_pod(sts, name)
            self._restart_with(0, sts)
        else:
            self._make_pod(sts, name)   # first sight: node 0 already runs (the sandbox)
        self._ready(name)

    def _sync(self) -> None:
        from opskit.sandbox.scale import add_node

        sts = self.api.get_statefulset(NS, BROKER_STS)
        if sts is None:
            return
        template = sts["spec"]["template"]
        env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
        first = int(env["OPSKIT_BROKER_FIRST_ID"])
        assert env["KAFKA_CFG_PROCESS_ROLES"] == "broker"
        assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"
        for ordinal in range(min(int(sts["spec"]["replicas"]), self.allowed)):  # in order
            name = f"{BROKER_STS}-{ordinal}"
            ready = self.api.pod_ready(NS, name)
            if ready:
                continue
            if ready is None:
                self._make_pod(sts, name)
            node_id = first + ordinal
            if node_id in self.started:           # a deleted pod: its broker restarts
                self._restart_with(node_id, sts)
            else:
                add_node(self.sb, "broker", node_id)              # a real broker-only process
                self.started.append(node_id)
            self._ready(name)
            return


@pytest.fixture(scope="module")
def sandbox37() -> Iterator[Sandbox]:
    with cli_sandbox(f"k8spb{os.getpid()}", "--kafka-version", "3.7", "--quorum",
                     "static") as sb:
        yield sb


@pytest.fixture(scope="module")
def admin_api(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> KubeApi:
    token = tmp_path_factory.mktemp("kube-admin") / "token"
    token.write_text(apiserver.token)
    api = KubeApi(KubeTarget(host=apiserver.host, token_file=str(token),
                             ca_file=str(apiserver.ca_file)))
    from kubernetes import client

    api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    # the controller manager's ServiceAccount controller would create it (pods need it)
    api.core.create_namespaced_service_account(NS, {"metadata": {"name": "default"}})
    return api


def _cronjob_docs(tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "cronjob.yaml"
    r = run_cli("playbook", "cronjob", "--namespace", NS, "--statefulset", STS,
                "--image", "registry.example/opskit:1", "--schedule", "0 2 * * *",
                "--window", "02:00-05:00Z", "--context", "hip30", "--page", "--write", str(out))
    assert r.code == 0, r.err
    return [d for d in yaml.safe_load_all(out.read_text()) if d]


def _create(api: KubeApi, doc: dict[str, Any], dry_run: str | None) -> Any:
    from kubernetes import client

    kw: dict[str, Any] = {"dry_run": dry_run} if dry_run else {}
    rbac = client.RbacAuthorizationV1Api(api._api)
    fn = {"ServiceAccount": api.core.create_namespaced_service_account,
          "Role": rbac.create_namespaced_role, "RoleBinding": rbac.create_namespaced_role_binding,
          "CronJob": client.BatchV1Api(api._api).create_namespaced_cron_job}[doc["kind"]]
    return fn(NS, doc, **kw)


def _sa_kubeconfig(apiserver: ApiServer, api: KubeApi, path: Path) -> Path:
    """A kubeconfig with a token of the CronJob's ServiceAccount (TokenRequest API)."""
    tr = api.core.create_namespaced_service_account_token(
        "opskit-scaleout", NS, {"spec": {"expirationSeconds": 7200}})
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "t", "cluster": {"server": apiserver.host,
                                               "certificate-authority": str(apiserver.ca_file)}}],
        "users": [{"name": "sa", "user": {"token": tr.status.token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "t", "user": "sa",
                                                "namespace": NS}}]}))
    path.chmod(0o600)
    return path


def test_cronjob_manifest_passes_server_side_dry_run(admin_api: KubeApi, tmp_path: Path) -> None:
    docs = _cronjob_docs(tmp_path)
    assert [d["kind"] for d in docs] == ["ServiceAccount", "Role", "RoleBinding", "CronJob"]
    for doc in docs:   # validated and admitted by the real API server, nothing stored
        _create(admin_api, doc, "All")
    assert admin_api.core.list_namespaced_service_account(
        NS, field_selector="metadata.name=opskit-scaleout").items == []
    cron = docs[3]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    args = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert args[:5] == ["opskit", "playbook", "scale-out", "--platform", "kubernetes"]
    assert "--execute" in args and args[args.index("--window") + 1] == "02:00-05:00Z"
    # credentials: only a Secret mounted as a file, never an argument or a literal env value
    text = json.dumps(cron)
    assert "password" not in text.lower() and "sasl" not in text.lower()


def _cli(kubeconfig: Path, context: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", "playbook", *args, "--platform",
            "kubernetes", "--namespace", NS, "--statefulset", STS, "--kubeconfig",
            str(kubeconfig)] + (["--context", context] if context else [])


def _journal(api: KubeApi) -> dict[str, Any]:
    got = api.read_configmap(NS, JOURNAL)
    return json.loads(got[0]["state.json"]) if got else {}


def _wait_lease_free(api: KubeApi, timeout: float = 120) -> None:
    """Until the run's Lease is released or expired (a killed run's lasts 30 s)."""
    deadline = time.monotonic() + timeout
    while True:
        got = api.read_lease(NS, f"opskit-scaleout-{STS}")
        if got is None or not got[0].get("holderIdentity"):
            return
        renewed = datetime.fromisoformat(str(got[0]["renewTime"]))
        if (datetime.now(UTC) - renewed).total_seconds() > got[0]["leaseDurationSeconds"] + 1:
            return
        assert time.monotonic() < deadline, got
        time.sleep(1)


def _rv(api: KubeApi) -> tuple[str, str]:
    sts = api.get_statefulset(NS, BROKER_STS)
    svc = api.core.read_namespaced_service(f"{BROKER_STS}-headless", NS)
    assert sts is not None
    return sts["metadata"]["resourceVersion"], svc.metadata.resource_version


def test_scale_out_on_kubernetes_killed_resumed_idempotent(
        apiserver: ApiServer, admin_api: KubeApi, sandbox37: Sandbox, tmp_path: Path) -> None:
    from opskit.sandbox.security import admin_context_name

    st = sandbox37.require()
    context = admin_context_name(sandbox37.name, sandbox37.security(st))
    # HIP-30's combined StatefulSet (its one pod is played by the sandbox's node 0)
    combined = hip30_statefulset()
    combined["metadata"]["namespace"] = NS  # type: ignore[index]
    assert admin_api.apply_statefulset(combined) == "created"
    combined_rv = admin_api.get_statefulset(NS, STS)["metadata"]["resourceVersion"]  # type: ignore[index]
    # the playbook runs as the CronJob's ServiceAccount with its Role (least RBAC)
    for doc in _cronjob_docs(tmp_path)[:3]:
        _create(admin_api, doc, None)
    kubeconfig = _sa_kubeconfig(apiserver, admin_api, tmp_path / "sa-kubeconfig")
    create_topic(st.bootstrap, "billing", 3, 1)
    p = Producer({"bootstrap.servers": st.bootstrap, "acks": "all",
                  "enable.idempotence": True})
    for i in range(30000):      # ~6 MB: the RF raise takes seconds at 2 MiB/s
        p.produce("billing", value=b"x" * 200, key=str(i).encode())
    assert p.flush(60) == 0

    # dry run: the plan, nothing created
    r = subprocess.run(_cli(kubeconfig, context, "scale-out", "--output", "json"), cwd=ROOT,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)["plan"]
    assert plan["quorum"] == "static" and plan["new_nodes"] == [1, 2]
    assert plan["new_node_roles"] == "broker"
    assert admin_api.get_statefulset(NS, BROKER_STS) is None

    # a scheduled run outside its window: journaled, halted at the first safe point (before
    # any change), exit 5; the next run resumes this same run
    soon = datetime.now(UTC) + timedelta(hours=2)
    closed = f"{soon:%H}:00-{(soon + timedelta(hours=1)):%H}:00Z"
    r = subprocess.run(_cli(kubeconfig, context, "scale-out", "--window", closed, "--execute"),
                       cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 5 and "outside the maintenance window" in r.stderr, r.stderr
    halted = _journal(admin_api)
    assert halted["phase"] == "halted" and halted["done"] == [], halted
    assert admin_api.get_statefulset(NS, BROKER_STS) is None

    with FakeKubelet(admin_api, sandbox37) as kubelet:
        run = _cli(kubeconfig, context, "scale-out", "--throttle", "2MiB", "--execute")
        first = subprocess.Popen(run, cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while _journal(admin_api).get("in_flight") != "add_node:2":
                assert not kubelet.errors, kubelet.errors
                assert first.poll() is None, first.stderr.read().decode()[-800:]  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "add_node:2 never started"
                time.sleep(0.2)
            # a second run while the first is active: refused (its Lease), nothing changed
            rv_before = _rv(admin_api)
            second = subprocess.run(run, cwd=ROOT, capture_output=True, text=True,
                                    timeout=300, check=False)
            assert second.returncode == 5, second.stderr
            assert "another scale-out run" in second.stderr
            assert second.stderr.strip().count("\n") == 0, second.stderr
            assert _journal(admin_api).get("in_flight") == "add_node:2"
            # kill -9 the first run in the middle of add_node:2 (its pod is held back)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
            kubelet.allowed = 2
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait(30)
        assert _journal(admin_api)["done"] == ["preflight", "add_node:1"]
        assert _rv(admin_api)[1] == rv_before[1]   # the Service was not touched again

        # resume in another process (once the killed run's Lease expired); kill -9 it too,
        # inside the RF raise, once its reassignment plan is kept in the ConfigMap
        resume = _cli(kubeconfig, context, "resume", "--throttle", "2MiB")
        _wait_lease_free(admin_api)
        again = subprocess.Popen(resume, cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 600
            while not (_journal(admin_api).get("in_flight") == "raise_rf"
                       and "raise-rf.json" in (admin_api.read_configmap(
                           NS, f"{JOURNAL}-plans") or ({}, ""))[0]):
                assert again.poll() is None, again.stderr.read().decode()[-800:]  # type: ignore[union-attr]
                assert time.monotonic() < deadline, "raise_rf never started"
                time.sleep(0.1)
            os.killpg(again.pid, signal.SIGKILL)
            again.wait(30)
            rf_plan = admin_api.read_configmap(NS, f"{JOURNAL}-plans")[0]["raise-rf.json"]  # type: ignore[index]
        finally:
            if again.poll() is None:
                os.killpg(again.pid, signal.SIGKILL)
                again.wait(30)
        # the next run as a new CronJob pod would be: an empty state directory, so the RF
        # plan comes back from the ConfigMap
        _wait_lease_free(admin_api)
        fresh = {**os.environ, "OPSKIT_STATE": str(tmp_path / "fresh-pod-state")}
        # and kill -9 that one inside the rolling restart, right after it deleted pod 1 of
        # the broker StatefulSet (node 2)
        r = subprocess.run(resume, cwd=ROOT, capture_output=True, text=True, timeout=1200,
                           check=False, env={**fresh, KILL_AT_ENV: "stopped:restart_node:2"})
        assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
        assert _journal(admin_api)["in_flight"] == "restart_node:2"
        _wait_lease_free(admin_api)
        r = subprocess.run(resume, cwd=ROOT, capture_output=True, text=True, timeout=1200,
                           check=False, env=fresh)
        assert r.returncode == 0, r.stderr[-2000:]
        restored = list((tmp_path / "fresh-pod-state").glob("playbooks/*/raise-rf.json"))
        assert len(restored) == 1 and restored[0].read_text() == rf_plan   # the killed run's plan
        assert not kubelet.errors, kubelet.errors
        assert sorted(set(kubelet.started)) == [1, 2]
        # the rolling restart: broker-only nodes first, the single controller last, each
        # once (the resumed restart_node:2 found node 2 restarted already)
        assert kubelet.restarted == [1, 2, 0], kubelet.restarted

    journal = _journal(admin_api)
    assert journal["phase"] == "done" and journal["run_id"] == halted["run_id"]
    assert journal["done"][-5:] == ["restart_node:1", "restart_node:2", "restart_node:0",
                                    "verify_defaults", "final_health"], journal["done"]
    for killed in ("add_node:2", "raise_rf", "restart_node:2"):
        assert [e["what"] for e in journal["journal"] if e["step"] == killed] == [
            "started", "resumed", "finished"], killed
    assert all(journal["done"].count(k) == 1 for k in journal["done"])
    restarted = {e["step"]: e["detail"] for e in journal["journal"]
                 if e["step"].startswith("restart_node") and e["what"] == "finished"}
    assert "pod insights-kafka-0 restarted (StatefulSet insights-kafka replaces it" \
        in restarted["restart_node:0"], restarted
    assert "pod insights-kafka-broker-0 restarted (deleted it)" in restarted["restart_node:1"]
    assert "already: not restarted" in restarted["restart_node:2"], restarted

    # the objects: a broker-only StatefulSet of 2 beside the combined one, whose spec
    # changed only by the read-only settings in its env
    settings = {"default.replication.factor": "3", "offsets.topic.replication.factor": "3",
                "transaction.state.log.replication.factor": "3", "min.insync.replicas": "2"}
    broker = admin_api.get_statefulset(NS, BROKER_STS)
    assert broker is not None and broker["spec"]["replicas"] == 2
    assert broker["spec"]["serviceName"] == f"{BROKER_STS}-headless"
    live = admin_api.get_statefulset(NS, STS)
    assert live is not None and live["metadata"]["resourceVersion"] != combined_rv
    want = with_env(combined, settings)
    assert live["spec"]["template"]["spec"]["containers"][0]["env"] == \
        want["spec"]["template"]["spec"]["containers"][0]["env"]   # type: ignore[index]
    assert env_changes([live, broker], settings) == {}
    pods = sorted(p.metadata.name for p in admin_api.core.list_namespaced_pod(NS).items)
    assert pods == [f"{STS}-0", f"{BROKER_STS}-0", f"{BROKER_STS}-1"]

    # status from another process
    r = subprocess.run(_cli(kubeconfig, "", "status", "--output", "json"), cwd=ROOT,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and json.loads(r.stdout)["phase"] == "done", r.stderr

    # idempotent: the add-node steps run again change nothing (same resourceVersions)
    from opskit.adapters.files.config_file import resolve_connection
    from opskit.adapters.scaleout.k8s import K8sSteps
    from opskit.adapters.scaleout.kafka_steps import KafkaSteps
    from opskit.core.scaleout.plan import ScaleOutPlan, Step, StepKind

    rvs = _rv(admin_api)
    from opskit.cli.main import main

    steps = K8sSteps(admin_api, NS, STS, KafkaSteps(resolve_connection(None, context), context,
                                                   tmp_path / "run", "10MiB", wait_s=60,
                                                   cli=main))
    done_plan = ScaleOutPlan.from_dict(journal["plan"])
    for n in (1, 2):
        assert "StatefulSet insights-kafka-broker unchanged" in steps.run(
            Step(StepKind.ADD_NODE, n), done_plan)
    for n in (1, 2, 0):
        assert "already: not restarted" in steps.run(Step(StepKind.RESTART_NODE, n), done_plan)
    assert _rv(admin_api) == rvs
    # and the next scheduled run (the CronJob's command) finds nothing to do: one line,
    # exit 0, so the CronJob's Job does not fail every night
    r = subprocess.run(_cli(kubeconfig, context, "scale-out", "--window", "00:00-23:59Z",
                            "--execute"), cwd=ROOT,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"scale-out {journal['run_id']} finished at "
                                f"{journal['journal'][-1]['at']}; the cluster has 3 brokers: "
                                "nothing to do"), r.stdout
    assert _rv(admin_api) == rvs

    # end state in Kafka: 3 brokers, RF 3 and ISR 3 everywhere, min.insync.replicas 2, and
    # a topic created without an RF gets RF 3 (every broker runs the new defaults)
    with KafkaAdmin(sandbox37.connection()) as admin:
        probe = f"after-k8s-scale-out-{os.getpid()}"
        admin.create_topics([(probe, 3, -1, {})])
        deadline = time.monotonic() + 60
        while not admin.metadata().topics.get(probe):
            assert time.monotonic() < deadline, f"{probe} never listed"
            time.sleep(0.5)
        assert [len(p.replicas) for p in admin.metadata().topics[probe]] == [3, 3, 3]
        admin.delete_topics([probe])
        # the probe is deleted: its configs may be gone before its metadata
        meta = admin.metadata()
        topics = {t: ps for t, ps in meta.topics.items() if t != probe}
        assert sorted(b.node_id for b in meta.brokers) == [0, 1, 2]
        for t, parts in topics.items():
            for part in parts:
                assert len(part.replicas) == 3 and sorted(part.isr) == sorted(part.replicas), t
        assert admin.topic_configs(["billing"])["billing"]["min.insync.replicas"][0] == "2"
        for b, cfg in admin.broker_configs([0, 1, 2]).items():
            assert cfg["min.insync.replicas"][0] == "2", b
            for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
                assert cfg.get(k, (None, True))[1] or cfg[k][0] is None, (b, k, cfg[k])
        for t, cfg in admin.topic_configs(list(topics)).items():
            for k in ("leader.replication.throttled.replicas",
                      "follower.replication.throttled.replicas"):
                assert not (cfg.get(k, (None, True))[0] or ""), (t, k)


def test_abort_on_kubernetes_is_a_configmap_the_run_obeys_at_a_safe_point(
        apiserver: ApiServer, admin_api: KubeApi) -> None:
    """No Kafka here: the run's steps are recorded, not performed (the abort path is the
    runner's and the ConfigMaps' business)."""
    from kubernetes import client

    from opskit.adapters.scaleout.journal import ConfigMapJournal
    from opskit.adapters.scaleout.k8s import ConfigMapAbort
    from opskit.adapters.scaleout.runner import drive
    from opskit.core.scaleout.machine import RunState, Tick, transition
    from opskit.core.scaleout.plan import (
        ClusterFacts,
        ScaleOutPlan,
        ScaleOutRequest,
        Step,
        plan_scale_out,
    )

    ns, sts = "hip30-abort", "insights-kafka"
    admin_api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    store = ConfigMapJournal(admin_api, ns, f"opskit-scaleout-{sts}")
    state, _ = transition(RunState("run-abort", plan_scale_out(
        ClusterFacts("3.7.2", 0, (0,), (0,)), ScaleOutRequest())), Tick("t0"))
    version = store.save(state, None)          # a run killed while preflight was in flight
    cli = ["playbook", "abort", "--platform", "kubernetes", "--namespace", ns,
           "--statefulset", sts, "--kubeconfig", str(apiserver.kubeconfig())]
    r = run_cli(*cli)
    assert r.code == 0 and "would ask run run-abort" in r.out, r.err
    abort = ConfigMapAbort(admin_api, ns, sts)
    assert not abort.exists()                  # a dry run changed nothing
    r = run_cli(*cli, "--execute")
    assert r.code == 0 and abort.exists(), r.err

    ran: list[str] = []

    class Record:
        def run(self, step: Step, plan: ScaleOutPlan) -> str:
            ran.append(step.key)
            return "recorded"

    end = drive(state, version, store, Record(), abort_marker=abort)
    assert end.phase.value == "aborted" and ran == ["preflight"]  # in flight: finished first
    saved, _ = store.load()
    assert saved is not None and saved.phase.value == "aborted"
    r = run_cli("playbook", "status", "--platform", "kubernetes", "--namespace", ns,
                "--statefulset", sts, "--kubeconfig", str(apiserver.kubeconfig()),
                "--output", "json")
    assert r.code == 0 and r.json()["phase"] == "aborted", r.err
    r = run_cli(*cli, "--execute")             # nothing left to abort: one line, exit 4
    assert r.code == 4 and r.err.strip().count("\n") == 0, r.err


def test_dynamic_quorum_statefulset_is_unsupported_in_one_line(
        apiserver: ApiServer, admin_api: KubeApi, sandbox37: Sandbox) -> None:
    from kubernetes import client

    from opskit.sandbox.security import admin_context_name

    ns = "hip30-dynamic"
    admin_api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    sts = hip30_statefulset()
    sts["metadata"]["namespace"] = ns  # type: ignore[index]
    env = sts["spec"]["template"]["spec"]["containers"][0]["env"]  # type: ignore[index]
    env[:] = [e for e in env if e["name"] != "KAFKA_CFG_CONTROLLER_QUORUM_VOTERS"]
    env.append({"name": "KAFKA_CFG_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS",
                "value": "insights-kafka-0.insights-kafka.hanzo.svc:9094"})
    admin_api.apply_statefulset(sts)
    context = admin_context_name(sandbox37.name, sandbox37.security(sandbox37.require()))
    r = run_cli("playbook", "scale-out", "--platform", "kubernetes", "--namespace", ns,
                "--statefulset", STS, "--context", context, "--kubeconfig",
                str(apiserver.kubeconfig()), "--execute")
    assert r.code == 3 and "static quorum only" in r.err, r.err
    assert r.err.strip().count("\n") == 0, r.err
    assert admin_api.get_statefulset(ns, BROKER_STS) is None
    assert admin_api.read_configmap(ns, JOURNAL) is None   # nothing journaled, nothing made
