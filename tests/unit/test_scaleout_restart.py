"""The rolling restart's decisions (restart_node:N), with a sandbox and Kafka doubles:
the real restarts run in tests/integration/test_playbook_local.py (and test_playbook_k8s.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from opskit.adapters.scaleout.k8s import K8sSteps
from opskit.adapters.scaleout.kafka_steps import KafkaSteps
from opskit.adapters.scaleout.local import LocalSteps
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.plan import (
    ClusterFacts,
    ScaleOutPlan,
    ScaleOutRequest,
    Step,
    StepKind,
    plan_scale_out,
)
from opskit.errors import RefusedError


@dataclass
class FakeSandbox:
    running: dict[int, bool]
    name: str = "s"
    calls: list[str] = field(default_factory=list)

    def status(self) -> dict[str, Any]:
        return {"nodes": [{"node_id": n, "running": r} for n, r in self.running.items()]}

    def stop_node(self, n: int) -> None:
        self.calls.append(f"stop {n}")
        self.running[n] = False

    def start_node(self, n: int, wait_timeout: float = 0) -> None:
        self.calls.append(f"start {n}")
        self.running[n] = True


@dataclass
class FakeKafka:
    old: dict[int, dict[str, str | None]]     # node -> defaults it still runs with
    alone: dict[int, list[str]] = field(default_factory=dict)
    sb: FakeSandbox | None = None
    wait_s: float = 1.0

    def wait(self, what: str, check: Any) -> None:
        assert check() is None, what

    def settled(self, brokers: int) -> str | None:
        assert self.sb is not None
        down = [n for n, r in self.sb.running.items() if not r]
        return f"broker(s) {down} down" if down else None

    def runs_with_defaults(self, n: int, plan: ScaleOutPlan) -> dict[str, str | None]:
        assert self.sb is not None
        if self.sb.calls.count(f"start {n}") and f"stop {n}" in self.sb.calls:
            return {}                       # restarted: reads its rewritten file
        return self.old.get(n, {})

    def sole_in_sync(self, n: int) -> list[str]:
        return self.alone.get(n, [])

    def lead_again(self) -> str:
        assert self.sb is not None
        self.sb.calls.append("elect")
        return "; 2 partition(s) led by their preferred replica again"

    def after_restart(self, n: int, plan: ScaleOutPlan, brokers: int, not_applied: Any) -> str:
        # the shared sequence itself, on this double's answers
        return KafkaSteps.after_restart(self, n, plan, brokers, not_applied)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:   # the other steps: never called here
        def other(*_a: object) -> str:
            raise AssertionError(f"step {name} called")
        return other


def steps(tmp_path: Path, sb: FakeSandbox, kafka: FakeKafka) -> LocalSteps:
    s = LocalSteps(sb, ConnectionConfig("127.0.0.1:1"), "ctx", tmp_path, "1MiB",  # type: ignore[arg-type]
                   cli=lambda argv: 99)
    kafka.sb = sb
    s.kafka = kafka  # type: ignore[assignment]
    return s


def plan() -> ScaleOutPlan:
    return plan_scale_out(ClusterFacts("3.7.2", 0, (0,), (0,), topic_rf={"t": 1}),
                          ScaleOutRequest())


OLD = {"default.replication.factor": "1"}


def test_restarts_a_node_running_the_old_defaults(tmp_path: Path) -> None:
    sb = FakeSandbox({0: True, 1: True, 2: True})
    detail = steps(tmp_path, sb, FakeKafka({1: OLD})).run(Step(StepKind.RESTART_NODE, 1),
                                                          plan())
    # the restarted node gets its leaders back by a preferred election once it is in sync
    assert sb.calls == ["stop 1", "start 1", "elect"] and "node 1 restarted" in detail
    assert detail.endswith("led by their preferred replica again")


def test_a_node_with_the_new_defaults_is_not_restarted(tmp_path: Path) -> None:
    sb = FakeSandbox({0: True, 1: True, 2: True})
    detail = steps(tmp_path, sb, FakeKafka({})).run(Step(StepKind.RESTART_NODE, 1), plan())
    # not restarted, but a run resumed after this restart finished (killed before the
    # election) still gives the node its leaders back
    assert sb.calls == ["elect"] and "not restarted" in detail
    assert detail.endswith("led by their preferred replica again")


def test_a_node_a_killed_run_stopped_is_started_first(tmp_path: Path) -> None:
    sb = FakeSandbox({0: True, 1: False, 2: True})
    k = FakeKafka({1: OLD})
    detail = steps(tmp_path, sb, k).run(Step(StepKind.RESTART_NODE, 1), plan())
    assert sb.calls[0] == "start 1" and "was stopped" in detail


def test_the_last_in_sync_replica_is_never_restarted(tmp_path: Path) -> None:
    sb = FakeSandbox({0: True, 1: True, 2: True})
    k = FakeKafka({0: OLD}, alone={0: ["made_meanwhile-0"]})
    with pytest.raises(RefusedError, match="only in-sync replica.*made_meanwhile-0.*not "
                       "finished"):
        steps(tmp_path, sb, k).run(Step(StepKind.RESTART_NODE, 0), plan())
    assert sb.calls == []


@dataclass
class SharedSequence:
    """A Kafka double whose after-restart sequence only records how a runner called it."""

    calls: list[tuple[int, int, str]] = field(default_factory=list)
    wait_s: float = 1.0

    def wait(self, what: str, check: Any) -> None:
        assert check() is None, what

    def settled(self, brokers: int) -> str | None:
        return None

    def runs_with_defaults(self, n: int, plan: ScaleOutPlan) -> dict[str, str | None]:
        return dict(OLD)

    def sole_in_sync(self, n: int) -> list[str]:
        return []

    def after_restart(self, n: int, plan: ScaleOutPlan, brokers: int, not_applied: Any) -> str:
        self.calls.append((n, brokers, not_applied(dict(OLD))))
        return "; after the shared sequence"

    def __getattr__(self, name: str) -> Any:   # the other steps: never called here
        def other(*_a: object) -> str:
            raise AssertionError(f"{name} called")
        return other


@dataclass
class FakeKube:
    """The Kubernetes API as a restart of HIP-30's combined pod uses it."""

    sts: dict[str, Any]
    uid: str = "uid-1"
    replaced: list[str] = field(default_factory=list)

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.sts if name == self.sts["metadata"]["name"] else None

    def pod_uid(self, namespace: str, pod: str) -> str | None:
        return self.uid

    def pod_ready(self, namespace: str, pod: str) -> bool:
        return True

    def replace_statefulset(self, manifest: dict[str, Any]) -> None:
        self.replaced.append(manifest["metadata"]["name"])
        self.uid = "uid-2"                     # RollingUpdate: a new pod replaces the old


def test_both_runners_end_a_restart_with_the_shared_kafka_sequence(tmp_path: Path) -> None:
    """Waiting for a settled cluster, checking the defaults and taking the leaders back
    after a restart is KafkaSteps.after_restart on both platforms; each runner passes
    the node, the brokers to wait for, and its own words for defaults not applied."""
    from hip30_k8s import hip30_statefulset

    p, brokers = plan(), 3
    assert len(set(p.existing) | set(p.new_nodes)) == brokers
    local = SharedSequence()
    sb = FakeSandbox({0: True, 1: True, 2: True})
    detail = steps(tmp_path, sb, local).run(Step(StepKind.RESTART_NODE, 1), p)  # type: ignore[arg-type]
    assert sb.calls == ["stop 1", "start 1"] and detail.endswith("; after the shared sequence")
    assert [c[:2] for c in local.calls] == [(1, brokers)]
    assert local.calls[0][2].startswith("node 1 was restarted but reports "
                                        "{'default.replication.factor': '1'}: its "
                                        "server.properties does not set")

    kube = SharedSequence()
    api = FakeKube(hip30_statefulset())
    k8s = K8sSteps(api, "hanzo", "insights-kafka", kube)  # type: ignore[arg-type]
    detail = k8s.run(Step(StepKind.RESTART_NODE, 0), p)
    assert api.replaced == ["insights-kafka"] and detail.endswith("; after the shared sequence")
    assert [c[:2] for c in kube.calls] == [(0, brokers)]
    assert kube.calls[0][2].startswith("pod insights-kafka-0 was restarted but node 0 reports "
                                       "default.replication.factor=1: its StatefulSet sets")


def test_k8s_a_pod_already_restarted_gets_its_leaders_back(tmp_path: Path) -> None:
    """Resumed after a kill between the pod's restart and the election: the pod runs with
    the settings and its StatefulSet has them, so it is not restarted again, but its
    preferred leaders are elected back (the shared sequence's last step)."""
    from hip30_k8s import hip30_statefulset

    p = plan()
    sb = FakeSandbox({0: True, 1: True, 2: True})
    kafka = FakeKafka({})
    kafka.sb = sb
    k8s = K8sSteps(FakeKube(hip30_statefulset()), "hanzo", "insights-kafka", kafka)  # type: ignore[arg-type]
    api = FakeKube(k8s._with_settings(hip30_statefulset(), p))
    k8s = K8sSteps(api, "hanzo", "insights-kafka", kafka)  # type: ignore[arg-type]
    detail = k8s.run(Step(StepKind.RESTART_NODE, 0), p)
    assert api.replaced == [] and "already: not restarted" in detail
    assert sb.calls == ["elect"] and detail.endswith("led by their preferred replica again")
