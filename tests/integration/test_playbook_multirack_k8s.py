"""``opskit playbook multi-rack --platform kubernetes`` end to end, against a real
kube-apiserver and a real Kafka 3.7 cluster.

HIP-30 after its scale-out: the combined StatefulSet (one pod, node 0, the controller)
and the broker-only StatefulSet opskit made beside it (nodes 1 and 2), every broker in no
rack. The playbook puts 0 in rack a, 1 and 2 in rack b, adds node 3 in rack c (the
broker-only StatefulSet scaled to 3) and spreads every partition over the three racks.

The API server has no kubelet, scheduler or controller manager. **This test plays the
StatefulSet controller and the kubelet** (``RackKubelet``): it creates the pods of both
StatefulSets through the API, backs each with a real local Kafka process of a 1-node
static-quorum 3.7 sandbox (node 0 stands in for HIP-30's combined pod; broker-only nodes
are added to it), replaces a deleted pod (broker-only, ``OnDelete``) or the pod of a
changed template (combined, ``RollingUpdate``) by restarting its broker, and marks pods
Ready through the status subresource. A broker's settings come from its pod's container
as the image would run it: the container's command script is run by bash (its final
``exec`` of the image's entrypoint replaced by ``env``) with the template's environment
and the pod's name, and the ``KAFKA_CFG_*`` variables it exports become the broker's
settings (``KAFKA_CFG_BROKER_RACK`` -> ``broker.rack``). Everything the playbook does
goes through the real API server and the real brokers.
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
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

import pytest
from confluent_kafka import Consumer, Producer
from helpers import cli_sandbox, create_topic
from hip30_k8s import hip30_statefulset
from k8s_apiserver import ApiServer

from opskit.adapters.k8s.api import KubeApi, KubeTarget
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.multirack_k8s import (
    RACK_LINE,
    template_rack,
    with_broker_racks,
)
from opskit.adapters.scaleout.runner import KILL_AT_ENV
from opskit.core.scaleout import k8s as objs
from opskit.core.scaleout.multirack import spread_problems
from opskit.sandbox.cluster import Sandbox

ROOT = Path(__file__).resolve().parents[2]
NS = "hip30-mrack"
STS = "insights-kafka"
BROKER_STS = f"{STS}-broker"
JOURNAL = f"opskit-multirack-{STS}"
RACKS = {0: "a", 1: "b", 2: "b", 3: "c"}

pytestmark = pytest.mark.timeout(1800)

#: variables the fake kubelet does not turn into broker settings: the sandbox node keeps
#: its own id, roles, listeners and voters (as the pod network would)
_OWN = {"KAFKA_CFG_NODE_ID", "KAFKA_CFG_PROCESS_ROLES", "KAFKA_CFG_CONTROLLER_QUORUM_VOTERS",
        "KAFKA_CFG_LISTENERS", "KAFKA_CFG_ADVERTISED_LISTENERS",
        "KAFKA_CFG_LISTENER_SECURITY_PROTOCOL_MAP"}


def _template_hash(sts: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(sts["spec"]["template"], sort_keys=True).encode()
                          ).hexdigest()[:16]


def container_settings(sts: dict[str, Any], pod: str) -> dict[str, str]:
    """The broker settings the pod's container would run with (the module docstring)."""
    c = sts["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    if c.get("command"):
        lines = c["command"][2].split("\n")
        assert lines[-1].startswith("exec "), lines[-1]
        out = subprocess.run(["bash", "-ec", "\n".join([*lines[:-1], "env -0"])],
                             env={**env, "POD_NAME": pod, "PATH": os.environ["PATH"]},
                             capture_output=True, check=True, timeout=30)
        env = dict(kv.split("=", 1) for kv in out.stdout.decode().split("\0") if "=" in kv)
    return {k[len("KAFKA_CFG_"):].lower().replace("_", "."): v for k, v in env.items()
            if k.startswith("KAFKA_CFG_") and k not in _OWN}


class RackKubelet:
    """Plays the StatefulSet controller + kubelet for both StatefulSets (see the module
    docstring) in ``namespace``; ``started``/``restarted`` record the node ids it started /
    restarted. A broker-only node in ``hold`` whose pod was deleted gets its new pod, never
    Ready: its broker is stopped and not started again (a pod that cannot start) until
    the node leaves ``hold``; ``held`` records those stops."""

    def __init__(self, api: KubeApi, sb: Sandbox, namespace: str = NS) -> None:
        self.api, self.sb, self.ns = api, sb, namespace
        self.hold: set[int] = set()
        self.held: list[int] = []
        self.errors: list[str] = []
        self.started: list[int] = []
        self.restarted: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rack-kubelet", daemon=True)

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
                self._sync_brokers()
            except Exception as e:  # noqa: BLE001 - kept and asserted by the test
                self.errors.append(f"{type(e).__name__}: {e}")

    def _make_pod(self, sts: dict[str, Any], name: str) -> None:
        template = sts["spec"]["template"]
        self.api.core.create_namespaced_pod(self.ns, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns,
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {"fake-kubelet/template": _template_hash(sts)}},
            "spec": copy.deepcopy(template["spec"])})

    def _ready(self, name: str) -> None:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.api.core.patch_namespaced_pod_status(name, self.ns, {"status": {
            "phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})

    def _restart_with(self, node_id: int, settings: dict[str, str]) -> None:
        """Stop the node (SIGTERM, as the kubelet stops a deleted pod's container), write
        the container's settings into its file, start it."""
        self.sb.stop_node(node_id)
        node = next(n for n in self.sb.require().nodes if n.node_id == node_id)
        keep = [ln for ln in node.config_path.read_text().splitlines()
                if ln.split("=", 1)[0] not in settings]
        node.config_path.write_text("\n".join([*keep, *(f"{k}={v}" for k, v in
                                                       settings.items())]) + "\n")
        self.sb.start_node(node_id, wait_timeout=180)
        self.restarted.append(node_id)

    def _sync_combined(self) -> None:
        sts = self.api.get_statefulset(self.ns, STS)
        if sts is None:
            return
        name = f"{STS}-0"
        if self.api.pod_uid(self.ns, name) is not None:
            pod = self.api.core.read_namespaced_pod(name, self.ns)
            if (pod.metadata.annotations or {}).get("fake-kubelet/template") == \
                    _template_hash(sts):
                return
            self.api.core.delete_namespaced_pod(name, self.ns)   # the rolling update
            self._make_pod(sts, name)
            self._restart_with(0, container_settings(sts, name))
        else:
            self._make_pod(sts, name)   # first sight: node 0 already runs (the sandbox)
        self._ready(name)

    def _sync_brokers(self) -> None:
        from opskit.sandbox.scale import add_node

        sts = self.api.get_statefulset(self.ns, BROKER_STS)
        if sts is None:
            return
        assert sts["spec"]["updateStrategy"]["type"] == "OnDelete"
        first = objs.broker_first_id(sts)
        for ordinal in range(int(sts["spec"]["replicas"])):     # in order, one at a time
            name = f"{BROKER_STS}-{ordinal}"
            ready = self.api.pod_ready(self.ns, name)
            if ready:
                continue
            if ready is None:
                self._make_pod(sts, name)
            node_id = first + ordinal
            if node_id in self.hold:
                if node_id not in self.held:
                    self.sb.stop_node(node_id)
                    self.held.append(node_id)
                return
            settings = container_settings(sts, name)
            if node_id in self.started:           # a deleted pod: its broker restarts
                self._restart_with(node_id, settings)
            else:                                 # a real broker-only process
                add_node(self.sb, "broker", node_id, wait_timeout=180,
                         rack=settings.get("broker.rack"))
                self.started.append(node_id)
            self._ready(name)
            return


# --- the pure pieces (no server) ---------------------------------------------------

def _broker_sts() -> dict[str, Any]:
    combined = hip30_statefulset()
    return objs.broker_statefulset(combined, first_id=1, replicas=2, namespace=NS)


def test_rack_map_in_the_broker_template_gives_each_pod_its_rack() -> None:
    sts = with_broker_racks(_broker_sts(), {1: "b", 2: "b", 3: "c"})
    assert with_broker_racks(sts, {1: "b", 2: "b", 3: "c"}) == sts       # applied twice: same
    script = sts["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert script.count(RACK_LINE) == 1 and script.split("\n")[-1].startswith("exec ")
    for ordinal, rack in ((0, "b"), (1, "b"), (2, "c")):
        pod = f"{BROKER_STS}-{ordinal}"
        assert container_settings(sts, pod)["broker.rack"] == rack, pod   # what bash exports
        assert template_rack(sts, 1 + ordinal, combined=False) == rack
    assert "broker.rack" not in container_settings(_broker_sts(), f"{BROKER_STS}-0")
    assert template_rack(_broker_sts(), 1, combined=False) is None
    # a node the map does not name keeps no rack; a combined template has none either
    assert "broker.rack" not in container_settings(
        with_broker_racks(_broker_sts(), {2: "b"}), f"{BROKER_STS}-0")
    assert template_rack(hip30_statefulset(), 0, combined=True) is None
    assert template_rack(objs.with_env(hip30_statefulset(), {"broker.rack": "a"}), 0,
                         combined=True) == "a"


# --- end to end ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sandbox37() -> Iterator[Sandbox]:
    heap = os.environ.get("OPSKIT_SANDBOX_HEAP")
    os.environ["OPSKIT_SANDBOX_HEAP"] = "512m"        # four brokers on a shared machine
    try:
        with cli_sandbox(f"k8smr{os.getpid()}", "--kafka-version", "3.7", "--quorum",
                         "static") as sb:
            yield sb
    finally:
        if heap is None:
            os.environ.pop("OPSKIT_SANDBOX_HEAP", None)
        else:
            os.environ["OPSKIT_SANDBOX_HEAP"] = heap


@pytest.fixture(scope="module")
def admin_api(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> KubeApi:
    token = tmp_path_factory.mktemp("kube-admin-mr") / "token"
    token.write_text(apiserver.token)
    api = KubeApi(KubeTarget(host=apiserver.host, token_file=str(token),
                             ca_file=str(apiserver.ca_file)))
    from kubernetes import client

    api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    api.core.create_namespaced_service_account(NS, {"metadata": {"name": "default"}})
    return api


def _cli(apiserver: ApiServer, context: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", "playbook", *args, "--platform",
            "kubernetes", "--namespace", NS, "--statefulset", STS, "--kubeconfig",
            str(apiserver.kubeconfig())] + (["--context", context] if context else [])


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


def _run(cmd: list[str], env: dict[str, str] | None = None,
         timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)


def test_multi_rack_on_kubernetes_killed_resumed(
        apiserver: ApiServer, admin_api: KubeApi, sandbox37: Sandbox, tmp_path: Path) -> None:
    from opskit.sandbox.security import admin_context_name

    st = sandbox37.require()
    context = admin_context_name(sandbox37.name, sandbox37.security(st))
    combined = hip30_statefulset()
    combined["metadata"]["namespace"] = NS  # type: ignore[index]
    assert admin_api.apply_statefulset(combined) == "created"
    # the broker-only StatefulSet as the scale-out made it (nodes 1 and 2, in no rack)
    broker = objs.broker_statefulset(combined, first_id=1, replicas=2, namespace=NS)
    admin_api.apply_service(objs.broker_headless_service(broker))
    assert admin_api.apply_statefulset(broker) == "created"

    with RackKubelet(admin_api, sandbox37) as kubelet:
        deadline = time.monotonic() + 600
        with KafkaAdmin(sandbox37.connection()) as admin:
            while sorted(b.node_id for b in admin.metadata().brokers) != [0, 1, 2]:
                assert not kubelet.errors, kubelet.errors
                assert time.monotonic() < deadline, "brokers 1 and 2 never registered"
                time.sleep(1)
            assert admin.broker_racks() == {0: None, 1: None, 2: None}
        topic = f"billing_{uuid.uuid4().hex[:6]}"
        create_topic(st.bootstrap, topic, 6, 3)
        p = Producer({"bootstrap.servers": st.bootstrap, "acks": "all",
                      "enable.idempotence": True})
        for i in range(20000):
            p.produce(topic, value=b"x" * 200, key=str(i % 50).encode())
        assert p.flush(60) == 0

        # the dry run: the plan, nothing created or journaled
        r = _run(_cli(apiserver, context, "multi-rack", "--racks", "0=a,1=b,2=b",
                      "--add-brokers", "3=c", "--output", "json"), timeout=300)
        assert r.returncode == 0, r.stderr
        plan = json.loads(r.stdout)["plan"]
        assert plan["steps"] == ["preflight", "add_node:3", "set_rack:1", "set_rack:2",
                                 "set_rack:0", "spread", "elect_leaders", "verify_spread",
                                 "final_health"], plan["steps"]
        assert plan["racks"] == {str(n): r for n, r in RACKS.items()}
        assert plan["replicas_to_move"] == plan["replicas_lower_bound"] > 0, plan
        assert admin_api.read_configmap(NS, JOURNAL) is None
        assert admin_api.get_statefulset(NS, BROKER_STS)["spec"]["replicas"] == 2  # type: ignore[index]

        # new node ids that are not the next ordinals of the broker StatefulSet: refused
        r = _run(_cli(apiserver, context, "multi-rack", "--racks", "0=a,1=b,2=b",
                      "--add-brokers", "5=c", "--execute"), timeout=300)
        assert r.returncode == 5 and "must be [3]" in r.stderr, r.stderr
        assert r.stderr.strip().count("\n") == 0, r.stderr
        assert admin_api.read_configmap(NS, JOURNAL) is None

        # --execute, killed inside set_rack:2 right after it deleted pod 1 (node 2)
        run = _cli(apiserver, context, "multi-rack", "--racks", "0=a,1=b,2=b",
                   "--add-brokers", "3=c", "--throttle", "5MiB", "--stall-timeout", "600",
                   "--execute")
        r = _run(run, env={**os.environ, KILL_AT_ENV: "stopped:set_rack:2"})
        assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
        j = _journal(admin_api)
        assert j["in_flight"] == "set_rack:2" and j["done"] == [
            "preflight", "add_node:3", "set_rack:1"], j
        run_id = j["run_id"]

        # resumed; killed again once the spread's plan is written (and kept in a ConfigMap)
        _wait_lease_free(admin_api)
        resume = _cli(apiserver, context, "resume", "--throttle", "5MiB",
                      "--stall-timeout", "600")
        r = _run(resume, env={**os.environ, KILL_AT_ENV: "planned:spread"})
        assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
        assert _journal(admin_api)["in_flight"] == "spread"
        kept = admin_api.read_configmap(NS, f"{JOURNAL}-plans")
        assert kept is not None and list(kept[0]) == [f"spread-{run_id}.json"], kept

        # status from another process: the multi-rack run, the spread in flight; once the
        # killed run's Lease has run out, "interrupted", never "running"
        _wait_lease_free(admin_api)
        r = _run(_cli(apiserver, "", "status", "--output", "json"), timeout=120)
        assert r.returncode == 0, r.stderr
        shown = json.loads(r.stdout)
        assert shown["in_flight"] == "spread" and shown["plan"]["playbook"] == "multi-rack"
        assert shown["process"]["state"] == "interrupted", shown.get("process")
        r = _run(_cli(apiserver, "", "status"), timeout=120)
        assert r.returncode == 0, r.stderr
        text = " ".join(r.stdout.split())
        assert "interrupted (its Lease, held by " in text and "was not renewed after" in text, text
        assert "INTERRUPTED" in text and "RUNNING" not in text, text

        # the next resume as a new pod would run it: an empty state directory, so the
        # spread's plan comes back from the ConfigMap
        fresh = {**os.environ, "OPSKIT_STATE": str(tmp_path / "fresh-pod-state")}
        r = _run(resume, env=fresh)
        assert r.returncode == 0, r.stderr[-3000:]
        restored = list((tmp_path / "fresh-pod-state").glob(
            f"playbooks/*/multi-rack/spread-{run_id}.json"))
        assert len(restored) == 1
        assert restored[0].read_text() == kept[0][f"spread-{run_id}.json"]
        assert not kubelet.errors, kubelet.errors
        assert kubelet.started == [1, 2, 3], kubelet.started
        # one restart per broker whose rack changed, broker-only nodes first, the
        # controller last; node 2 once (the resumed set_rack:2 found it in its rack)
        assert kubelet.restarted == [1, 2, 0], kubelet.restarted

    journal = _journal(admin_api)
    assert journal["phase"] == "done" and journal["run_id"] == run_id
    assert journal["done"] == plan["steps"], journal["done"]
    for killed in ("set_rack:2", "spread"):
        assert [e["what"] for e in journal["journal"] if e["step"] == killed] == [
            "started", "resumed", "finished"], killed
    details = {e["step"]: e["detail"] for e in journal["journal"] if e["what"] == "finished"}
    assert "StatefulSet insights-kafka-broker scaled (replicas 3)" in details["add_node:3"]
    assert "in rack a" in details["set_rack:0"] and "RollingUpdate" in details["set_rack:0"]
    # the killed run's pod came back in its rack (before or while the resume waited)
    assert ("rack b already: not restarted" in details["set_rack:2"]
            or "back in rack b (an interrupted restart)" in details["set_rack:2"]), details
    bound = plan["replicas_lower_bound"]
    assert details["spread"].startswith(f"{bound} replica(s) moved (lower bound {bound})"), \
        details["spread"]

    # the objects: the broker StatefulSet of 3 with the racks of its nodes, the combined
    # one with its rack
    broker_live = admin_api.get_statefulset(NS, BROKER_STS)
    assert broker_live is not None and broker_live["spec"]["replicas"] == 3
    for n in (1, 2, 3):
        assert template_rack(broker_live, n, combined=False) == RACKS[n]
    live = admin_api.get_statefulset(NS, STS)
    assert live is not None and template_rack(live, 0, combined=True) == "a"

    # in Kafka: every broker in its rack, every partition spans 3 racks, no throttle left,
    # every record still there
    with KafkaAdmin(sandbox37.connection()) as admin:
        racks = admin.broker_racks()
        assert racks == RACKS
        meta = admin.metadata()
        reps = {f"{t}-{p.partition}": tuple(p.replicas) for t, ps in meta.topics.items()
                for p in ps}
        assert spread_problems(reps, racks) == []
        assert all(len({racks[b] for b in r}) == 3 for t, r in reps.items()
                   if t.startswith(topic)), reps
        for b, cfg in admin.broker_configs([0, 1, 2, 3]).items():
            for k in ("leader.replication.throttled.rate", "follower.replication.throttled.rate"):
                assert cfg.get(k, (None, True))[0] is None, (b, k, cfg[k])
    # a second run with the same racks (before a consumer group creates __consumer_offsets):
    # the finished run is not resumed; the new plan has nothing to restart, add or move
    r = _run(_cli(apiserver, context, "multi-rack", "--racks", "0=a,1=b,2=b,3=c",
                  "--output", "json"), timeout=300)
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)["plan"]
    assert again["steps"] == ["preflight", "spread", "elect_leaders", "verify_spread",
                              "final_health"] and again["replicas_to_move"] == 0, again
    c = Consumer({"bootstrap.servers": st.bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 120
    while seen < 20000 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            seen += 1
    c.close()
    assert seen == 20000
