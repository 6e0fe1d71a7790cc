"""``opskit playbook multi-rack --platform kubernetes`` on the newest Kafka 4.x, against a
real kube-apiserver, under an idempotent acks=all producer and a consumer group: killed
at ``restarted:set_rack:1``, halted (and paged) by a pod that never comes back, aborted
by the operator, then finished by a new run.

HIP-30 after its scale-out, as test_playbook_multirack_k8s.py (3.7) has it: the combined
StatefulSet (node 0, the controller) and the broker-only one (nodes 1 and 2), every
broker in no rack; the playbook puts 0 in rack a, 1 and 2 in rack b and adds node 3 in
rack c. The test plays the StatefulSet controller and the kubelet with that file's
``RackKubelet`` over a 3-node static-quorum 4.x sandbox (nodes 1 and 2 are adopted as the
broker StatefulSet's pods 0 and 1). Every topic has RF 3 on brokers 0, 1, 2 (rack a and
b only), ``__consumer_offsets`` too, so the spread must give every partition a replica in
rack c.

1. ``--execute`` SIGKILLed at ``restarted:set_rack:1`` (pod 0 of the broker StatefulSet
   replaced and Ready, its broker in rack b, nothing waited for).
2. ``resume --stall-timeout 30``: ``set_rack:1`` finished without a second restart; in
   ``set_rack:2`` the kubelet never starts the replaced pod (broker 2 stopped, its pod
   never Ready): the run halts (exit 3), pages ``error`` once through the local Events
   API v2 receiver, and ``playbook status`` says it halted inside ``set_rack:2`` and why.
3. ``playbook abort --execute`` (the abort ConfigMap), the kubelet starts the pod again,
   ``resume``: ``set_rack:2`` finishes (its pod back in rack b), the run stops there,
   aborted (exit 5), pages ``info`` once; ``status`` says aborted by the operator.
4. A new ``multi-rack --execute`` plans what is left (node 0's rack, the spread: the same
   lower bound as the first dry run) and finishes: exit 0, no page.

At the end: every broker reports its rack (Metadata, DescribeCluster), every partition
spans 3 racks, the replicas moved equal the first dry run's lower bound, no throttle is
left, no acknowledged record was lost and the order per key was kept; each node was
restarted once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from helpers import CliResult, commit, produce, run_cli
from hip30_k8s import hip30_statefulset
from k8s_apiserver import ApiServer
from multirack_helpers import Workload, assert_workload, replicas
from pd_receiver import PagerDutyReceiver, routing_key
from test_playbook_multirack_k8s import BROKER_STS, STS, RackKubelet
from test_racks_reassign import _create_on, _throttles
from test_racks_sandbox import metadata_racks

from opskit.adapters.k8s.api import KubeApi, KubeTarget
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.scaleout.multirack_k8s import template_rack
from opskit.adapters.scaleout.runner import KILL_AT_ENV
from opskit.core.scaleout import k8s as objs
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block

ROOT = Path(__file__).resolve().parents[2]
NS = "hip30-mrack4"          # not test_playbook_multirack_k8s.py's: one API server may run both
JOURNAL = f"opskit-multirack-{STS}"
RACKS = {0: "a", 1: "b", 2: "b", 3: "c"}
#: RF 3, one replica on each of brokers 0, 1, 2 (racks a, b, b once placed)
TRIPLES = [[0, 1, 2], [1, 2, 0], [2, 0, 1]] * 2
STEPS = ["preflight", "add_node:3", "set_rack:1", "set_rack:2", "set_rack:0", "spread",
         "elect_leaders", "verify_spread", "final_health"]

pytestmark = [pytest.mark.kafka4, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def sandbox4() -> Iterator[Sandbox]:
    """Three nodes of the newest 4.x, static quorum (node 0 the only voter), no racks."""
    heap = os.environ.get("OPSKIT_SANDBOX_HEAP")
    os.environ["OPSKIT_SANDBOX_HEAP"] = "512m"        # four brokers on a shared machine
    name = f"k8smr4-{uuid.uuid4().hex[:6]}"
    sb = Sandbox(name)
    try:
        r = run_cli("sandbox", "up", "--name", name, "--brokers", "3", "--kafka-version", "4.x",
                    "--quorum", "static", "--port", str(free_port_block(3)))
        assert r.code == 0, r.out + r.err
        yield sb
    finally:
        sb.down()
        if heap is None:
            os.environ.pop("OPSKIT_SANDBOX_HEAP", None)
        else:
            os.environ["OPSKIT_SANDBOX_HEAP"] = heap


@pytest.fixture(scope="module")
def admin_api(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> KubeApi:
    token = tmp_path_factory.mktemp("kube-admin-mr4") / "token"
    token.write_text(apiserver.token)
    api = KubeApi(KubeTarget(host=apiserver.host, token_file=str(token),
                             ca_file=str(apiserver.ca_file)))
    from kubernetes import client

    api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    api.core.create_namespaced_service_account(NS, {"metadata": {"name": "default"}})
    return api


def _cli(apiserver: ApiServer, context: str | None, *args: str) -> list[str]:
    return [sys.executable, "-m", "opskit.cli.main", "playbook", *args, "--platform",
            "kubernetes", "--namespace", NS, "--statefulset", STS, "--kubeconfig",
            str(apiserver.kubeconfig())] + (["--context", context] if context else [])


def _run(cmd: list[str], kill_at: str | None = None,
         timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(KILL_AT_ENV, None)
    if kill_at is not None:
        env[KILL_AT_ENV] = kill_at
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          check=False, env=env)


def _journal(api: KubeApi) -> dict[str, Any]:
    got = api.read_configmap(NS, JOURNAL)
    return json.loads(got[0]["state.json"]) if got else {}


def _wait_lease_free(api: KubeApi, timeout: float = 120) -> None:
    """Until the run's Lease is released or expired (a killed run's lasts 30 s)."""
    from datetime import UTC, datetime

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


def _here(apiserver: ApiServer, context: str | None, *args: str) -> CliResult:
    """``opskit playbook ARGS`` on the Kubernetes platform, in this process (the commands
    that only read the journal or write the abort ConfigMap, and the dry run: a process
    of their own would cost more than their work on a loaded machine)."""
    return run_cli(*_cli(apiserver, context, *args)[3:])


def _status(apiserver: ApiServer) -> tuple[str, dict[str, Any]]:
    """``playbook status``: its table (runs of blanks as one: the console wraps long
    lines) and its JSON."""
    text = _here(apiserver, None, "status")
    assert text.code == 0, text.err
    js = _here(apiserver, None, "status", "--output", "json")
    assert js.code == 0, js.err
    return " ".join(text.out.split()), js.json()


def _steps(journal: dict[str, Any], step: str) -> list[str]:
    return [e["what"] for e in journal["journal"] if e["step"] == step]


def _racks_per_partition(admin: AdminClient, racks: dict[int, str]) -> dict[str, set[str]]:
    md = admin.list_topics(timeout=30)
    return {f"{t}-{p.id}": {racks[b] for b in p.replicas}
            for t, tm in md.topics.items() for p in tm.partitions.values()}


def test_multi_rack_4x_on_kubernetes_under_load_killed_halted_aborted_finished(
        apiserver: ApiServer, admin_api: KubeApi, sandbox4: Sandbox, tmp_path: Path) -> None:
    from opskit.sandbox.security import admin_context_name

    st = sandbox4.require()
    assert st.version.startswith("4.") and st.quorum == "static", (st.version, st.quorum)
    assert [(n.node_id, n.roles) for n in st.nodes] == [
        (0, "broker,controller"), (1, "broker"), (2, "broker")]
    context = admin_context_name(sandbox4.name, sandbox4.security(st))
    boot = st.bootstrap
    combined = hip30_statefulset()
    combined["metadata"]["namespace"] = NS  # type: ignore[index]
    container = combined["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    container["image"] = f"bitnami/kafka:{st.version}"
    assert admin_api.apply_statefulset(combined) == "created"
    broker = objs.broker_statefulset(combined, first_id=1, replicas=2, namespace=NS)
    admin_api.apply_service(objs.broker_headless_service(broker))
    assert admin_api.apply_statefulset(broker) == "created"
    key = routing_key()
    keyf = tmp_path / "routing-key"
    keyf.write_text(key)

    with RackKubelet(admin_api, sandbox4, NS) as kubelet, PagerDutyReceiver() as pd:
        page = ["--routing-key-file", str(keyf), "--pagerduty-url", pd.url,
                "--pagerduty-ca-file", str(pd.ca_file)]
        deadline = time.monotonic() + 300
        while not all(admin_api.pod_ready(NS, p) for p in
                      (f"{STS}-0", f"{BROKER_STS}-0", f"{BROKER_STS}-1")):
            assert not kubelet.errors, kubelet.errors
            assert time.monotonic() < deadline, "the pods of nodes 0, 1, 2 never Ready"
            time.sleep(0.5)
        assert kubelet.started == [1, 2] and kubelet.restarted == [], kubelet.started
        admin = AdminClient({"bootstrap.servers": boot})
        suffix = uuid.uuid4().hex[:6]
        topics = [f"mr4_orders_{suffix}", f"mr4_billing_{suffix}"]
        for t in topics:
            _create_on(admin, t, TRIPLES, {"min.insync.replicas": "2"})
            produce(boot, t, dict.fromkeys(range(len(TRIPLES)), 100), value=b"m" * 1000,
                    idempotent=True)
        commit(boot, f"mr4-init-{suffix}", {(topics[0], 0): 0})  # __consumer_offsets: RF 3
        before = replicas(admin)
        assert {len(r) for r in before.values()} == {3}, before
        assert any(t == "__consumer_offsets" for t, _ in before)

        # the dry run: the plan, nothing created or journaled
        racks_arg = ["--racks", "0=a,1=b,2=b"]
        dry = _here(apiserver, context, "multi-rack", *racks_arg, "--add-brokers", "3=c",
                    "--output", "json")
        assert dry.code == 0, dry.err
        plan = dry.json()["plan"]
        assert plan["steps"] == STEPS and plan["kafka_version"] == st.version, plan
        bound = plan["replicas_lower_bound"]
        # every partition has two replicas in rack b: one of them must go to rack c
        assert plan["replicas_to_move"] == bound >= len(before), plan
        assert admin_api.read_configmap(NS, JOURNAL) is None

        with Workload(boot, topics, f"mr4-group-{suffix}") as load:
            time.sleep(3)
            # 1. killed once node 1's new pod is Ready in rack b, before any wait
            run = _cli(apiserver, context, "multi-rack", *racks_arg, "--add-brokers", "3=c",
                       "--throttle", "5MB", "--stall-timeout", "600", *page, "--execute")
            r = _run(run, kill_at="restarted:set_rack:1")
            assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
            j = _journal(admin_api)
            assert j["in_flight"] == "set_rack:1" and j["done"] == ["preflight", "add_node:3"], j
            run_id = j["run_id"]
            assert kubelet.restarted == [1] and kubelet.started == [1, 2, 3], kubelet.restarted
            assert pd.events == []                       # a kill pages nothing

            # 2. resumed; node 2's replaced pod never starts: halted, paged once
            _wait_lease_free(admin_api)
            kubelet.hold.add(2)
            resume = _cli(apiserver, context, "resume", "--throttle", "5MB", *page)
            r = _run([*resume, "--stall-timeout", "30"])
            assert r.returncode == 3, r.stderr[-3000:]
            last = r.stderr.strip().splitlines()[-1]
            assert last.startswith(f"opskit: error: multi-rack {run_id} halted: set_rack:2: "
                                   f"waiting for pod {BROKER_STS}-1 Ready: still pod "
                                   f"{BROKER_STS}-1 not Ready after 30s"), last
            assert "node(s) 2, 0 are not in their rack yet" in last, last
            assert kubelet.held == [2] and kubelet.restarted == [1], kubelet.restarted
            assert pd.wait_for(lambda evs: len(evs) >= 1, timeout=30)
            (halted,) = pd.events
            assert halted["routing_key"] == key and halted["event_action"] == "trigger"
            assert halted["payload"]["severity"] == "error", halted
            assert halted["payload"]["summary"].startswith(
                f"multi-rack {run_id} halted at set_rack:2: waiting for pod {BROKER_STS}-1 "
                "Ready"), halted["payload"]
            assert key not in json.dumps({k: v for k, v in halted.items()
                                          if k != "routing_key"})
            text, js = _status(apiserver)
            assert js["phase"] == "halted" and js["in_flight"] == "set_rack:2", js
            assert js["done"] == ["preflight", "add_node:3", "set_rack:1"], js["done"]
            assert js["reason"].startswith(f"set_rack:2: waiting for pod {BROKER_STS}-1 Ready"), js
            assert f"multi-rack {run_id}: halted inside set_rack:2 (nothing runs it now) - " \
                   f"set_rack:2: waiting for pod {BROKER_STS}-1 Ready" in text, text
            assert "HALTED set_rack:2" in text, text
            details = {e["step"]: e["detail"] for e in js["journal"] if e["what"] == "finished"}
            assert "rack b already: not restarted" in details["set_rack:1"], details

            # 3. the operator aborts; the pod starts again; the resume finishes the step in
            # flight, then stops: aborted, paged once more
            ab = _here(apiserver, None, "abort", "--execute")
            assert ab.code == 0, ab.err
            assert f"run {run_id}: abort requested" in " ".join(ab.out.split()), ab.out
            assert admin_api.read_configmap(NS, f"opskit-scaleout-{STS}-abort") is not None
            kubelet.hold.clear()
            r = _run([*resume, "--stall-timeout", "600"])
            assert r.returncode == 5, r.stderr[-3000:]
            last = r.stderr.strip().splitlines()[-1]
            assert last.startswith(f"opskit: error: multi-rack {run_id} aborted at a safe "
                                   "point: aborted by the operator"), last
            assert "node(s) 0 are not in their rack yet" in last, last
            assert pd.wait_for(lambda evs: len(evs) >= 2, timeout=30)
            assert len(pd.events) == 2, pd.events
            aborted = pd.events[1]
            assert aborted["payload"]["severity"] == "info", aborted
            assert aborted["payload"]["summary"] == f"multi-rack {run_id} aborted after set_rack:2"
            assert admin_api.read_configmap(NS, f"opskit-scaleout-{STS}-abort") is None
            text, first = _status(apiserver)
            assert first["phase"] == "aborted" and first["in_flight"] is None, first
            assert first["reason"] == "aborted by the operator", first
            assert f"multi-rack {run_id}: aborted - aborted by the operator" in text, text
            assert first["done"] == ["preflight", "add_node:3", "set_rack:1", "set_rack:2"]
            assert _steps(first, "set_rack:1") == ["started", "resumed", "finished"]
            assert _steps(first, "set_rack:2") == [
                "started", "failed", "abort requested", "resumed", "finished"], first
            assert kubelet.restarted == [1, 2], kubelet.restarted
            assert [e["what"] for e in first["journal"] if e["step"] == "-"] == ["aborted"]

            # 4. a new run plans what is left and finishes it
            r = _run(_cli(apiserver, context, "multi-rack", "--racks", "0=a,1=b,2=b,3=c",
                          "--throttle", "5MB", "--stall-timeout", "600", *page, "--execute",
                          "--output", "json"))
            assert r.returncode == 0, r.stderr[-3000:]
            done = json.loads(r.stdout)
            rest = done["plan"]
            assert rest["steps"] == ["preflight", "set_rack:0", "spread", "elect_leaders",
                                     "verify_spread", "final_health"], rest["steps"]
            assert rest["replicas_lower_bound"] == rest["replicas_to_move"] == bound, rest
            consumed_mid = len(load.consumed)
            time.sleep(3)
            assert len(load.consumed) > consumed_mid  # the group still consumes
        assert not kubelet.errors, kubelet.errors
        assert kubelet.started == [1, 2, 3] and kubelet.restarted == [1, 2, 0], \
            kubelet.restarted
        assert len(pd.events) == 2, pd.events           # done: no page

    assert done["phase"] == "done" and done["run_id"] != run_id, done
    assert done["done"] == rest["steps"], done["done"]
    assert _journal(admin_api) == done
    details = {e["step"]: e["detail"] for e in done["journal"] if e["what"] == "finished"}
    assert "in rack a" in details["set_rack:0"] and "RollingUpdate" in details["set_rack:0"]
    assert details["spread"].startswith(f"{bound} replica(s) moved (lower bound {bound})"), \
        details["spread"]
    broker_live = admin_api.get_statefulset(NS, BROKER_STS)
    assert broker_live is not None and broker_live["spec"]["replicas"] == 3
    for n in (1, 2, 3):
        assert template_rack(broker_live, n, combined=False) == RACKS[n]
    live = admin_api.get_statefulset(NS, STS)
    assert live is not None and template_rack(live, 0, combined=True) == "a"

    # in Kafka: every broker reports its rack (Metadata and DescribeCluster), every
    # partition spans the 3 racks, as many replicas moved as the first dry run's bound,
    # no throttle left, no acknowledged record lost, the order per key kept
    admin = AdminClient({"bootstrap.servers": boot})
    assert metadata_racks(sandbox4) == RACKS
    described = admin.describe_cluster(request_timeout=30).result(60).nodes
    assert {int(n.id): n.rack for n in described} == RACKS
    with KafkaAdmin(sandbox4.connection()) as kadmin:
        assert kadmin.broker_racks() == RACKS
    spans = _racks_per_partition(admin, RACKS)
    assert spans and all(s == {"a", "b", "c"} for s in spans.values()), spans
    after = replicas(admin)
    assert set(after) == set(before)
    moved = sum(len(set(after[tp]) - set(before[tp])) for tp in before)
    assert moved == bound, (moved, bound)
    assert _throttles(admin, [0, 1, 2, 3], sorted({t for t, _ in after})) == {}
    assert_workload(load)
