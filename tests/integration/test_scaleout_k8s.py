"""Scale-out on Kubernetes, against a real kube-apiserver (no kubelet, no controller
manager: objects are validated and stored, pods are not created or run).

Covers the Kubernetes objects of the playbook on their own: the broker-only
StatefulSet and its headless Service applied beside HIP-30's combined StatefulSet,
idempotently, and the run journal in a ConfigMap resumed by another process with
compare-and-set refusing a stale writer. The whole run on Kubernetes (with a played
kubelet and real brokers) is tests/integration/test_playbook_k8s.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hip30_k8s import hip30_statefulset
from k8s_apiserver import ApiServer

from opskit.adapters.k8s.api import KubeApi, KubernetesError, KubeTarget
from opskit.adapters.scaleout.journal import ConfigMapJournal
from opskit.core.scaleout.k8s import broker_headless_service, broker_statefulset
from opskit.core.scaleout.machine import RunState, StepSucceeded, Tick, transition
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutRequest, plan_scale_out
from opskit.errors import RefusedError

ROOT = Path(__file__).resolve().parents[2]
NS = "hanzo"


@pytest.fixture(scope="module")
def kube(apiserver: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> KubeApi:
    token = tmp_path_factory.mktemp("kube") / "token"
    token.write_text(apiserver.token)
    api = KubeApi(KubeTarget(host=apiserver.host, token_file=str(token),
                             ca_file=str(apiserver.ca_file)))
    from kubernetes import client

    api.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    return api


def test_broker_statefulset_is_created_once_and_rerun_changes_nothing(kube: KubeApi) -> None:
    assert kube.apply_statefulset(hip30_statefulset()) == "created"
    live_combined = kube.get_statefulset(NS, "insights-kafka")
    assert live_combined is not None
    sts = broker_statefulset(live_combined, first_id=1, replicas=2, namespace=NS)
    assert kube.apply_statefulset(sts) == "created"
    assert kube.apply_service(broker_headless_service(sts)) == "created"
    rv = kube.get_statefulset(NS, "insights-kafka-broker")["metadata"]["resourceVersion"]  # type: ignore[index]
    # a rerun of the step: nothing changes, not even the resourceVersion
    assert kube.apply_statefulset(sts) == "unchanged"
    assert kube.apply_service(broker_headless_service(sts)) == "unchanged"
    assert kube.get_statefulset(NS, "insights-kafka-broker")["metadata"][  # type: ignore[index]
        "resourceVersion"] == rv
    # the combined StatefulSet was left alone (never scaled: its new pods could not vote)
    after = kube.get_statefulset(NS, "insights-kafka")
    assert after is not None and after["spec"]["replicas"] == 1
    # a different size is a patch, not a second object
    bigger = broker_statefulset(live_combined, first_id=1, replicas=3, namespace=NS)
    assert kube.apply_statefulset(bigger) == "patched"
    live = kube.get_statefulset(NS, "insights-kafka-broker")
    assert live is not None and live["spec"]["replicas"] == 3
    names = [s.metadata.name for s in kube.apps.list_namespaced_stateful_set(NS).items]
    assert sorted(names) == ["insights-kafka", "insights-kafka-broker"]


def test_journal_in_a_configmap_resumes_in_another_process(kube: KubeApi,
                                                           apiserver: ApiServer,
                                                           tmp_path: Path) -> None:
    plan = plan_scale_out(ClusterFacts("3.7.2", 0, (0,), (0,)), ScaleOutRequest())
    journal = ConfigMapJournal(kube, NS, "journal-test")
    assert journal.load() == (None, None)
    s = RunState("run-k8s", plan)
    s, _ = transition(s, Tick("t0"))                 # preflight started
    v1 = journal.save(s, None)
    with pytest.raises(RefusedError):                 # a second run creating it too
        journal.save(s, None)

    # another process (the next scheduled run) resumes from the ConfigMap
    token = tmp_path / "token"
    token.write_text(apiserver.token)
    code = f"""
import json, sys
from opskit.adapters.k8s.api import KubeApi, KubeTarget
from opskit.adapters.scaleout.journal import ConfigMapJournal
from opskit.core.scaleout.machine import StepSucceeded, Tick, transition
api = KubeApi(KubeTarget(host={apiserver.host!r}, token_file={str(token)!r},
                         ca_file={str(apiserver.ca_file)!r}))
j = ConfigMapJournal(api, {NS!r}, "journal-test")
s, v = j.load()
s, acts = transition(s, Tick("t1"))
key = acts[0].step.key
s, _ = transition(s, StepSucceeded("t2", key))
j.save(s, v)
print(json.dumps({{"resumed": key, "done": list(s.done)}}))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, check=False, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out == {"resumed": "preflight", "done": ["preflight"]}
    # the first process, still holding v1, is refused: it cannot overwrite the newer journal
    s_stale, _ = transition(s, StepSucceeded("t3", "preflight"))
    with pytest.raises(RefusedError, match="another run"):
        journal.save(s_stale, v1)
    loaded, _ = journal.load()
    assert loaded is not None and loaded.done == ("preflight",)


def test_wrong_token_is_a_one_line_kubernetes_error(apiserver: ApiServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("not-the-token")
    api = KubeApi(KubeTarget(host=apiserver.host, token_file=str(token),
                             ca_file=str(apiserver.ca_file)))
    with pytest.raises(KubernetesError, match="401") as e:
        api.get_statefulset(NS, "insights-kafka")
    assert "\n" not in str(e.value) and "not-the-token" not in str(e.value)
