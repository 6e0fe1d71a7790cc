"""A scale-out on Kubernetes refuses a broker StatefulSet that holds a multi-rack run's
per-node rack map: its add_node rebuilds the StatefulSet from the combined one and would
drop the racks (the brokers it restarts would come back without them)."""

from __future__ import annotations

from typing import Any

import pytest
from hip30_k8s import hip30_statefulset

from opskit.adapters.scaleout.k8s import K8sSteps, carries_rack_map
from opskit.adapters.scaleout.multirack_k8s import with_broker_racks
from opskit.core.scaleout import k8s as objs
from opskit.errors import RefusedError

NS = "hip30"


class Api:
    """get_statefulset only: the combined StatefulSet and the broker-only one."""

    def __init__(self, broker: dict[str, Any]) -> None:
        self.sets = {"kafka": dict(hip30_statefulset()), "kafka-broker": broker}

    def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.sets.get(name)


def _broker() -> dict[str, Any]:
    return objs.broker_statefulset(dict(hip30_statefulset()), first_id=1, replicas=2,
                                   namespace=NS)


def test_the_rack_map_is_seen_only_where_a_multi_rack_run_set_it() -> None:
    assert not carries_rack_map(_broker())
    assert carries_rack_map(with_broker_racks(_broker(), {1: "b", 2: "c"}))


def test_a_scale_out_refuses_a_broker_statefulset_with_racks() -> None:
    steps = K8sSteps(Api(with_broker_racks(_broker(), {1: "b", 2: "c"})), NS, "kafka",
                     kafka=None)  # type: ignore[arg-type]  # refused before any Kafka step
    with pytest.raises(RefusedError, match="multi-rack --add-brokers"):
        steps._preflight(None)  # type: ignore[arg-type]  # refused before the plan is read


@pytest.mark.parametrize("resumed_after", ["the new pod came up", "the old pod was deleted"])
def test_set_rack_resumed_on_a_pod_already_in_its_rack_still_waits_for_isr(
        resumed_after: str) -> None:
    """A run killed after ``set_rack:N`` restarted node N's pod in its rack, before the
    step waited for every partition in ISR: the resume does not restart the pod again, but
    still waits for the ISR and gives the node its leaders back. Whether the broker reports
    its rack at once (the first check) or only once the ISR settled (an interrupted
    restart: the second check), it returned without the election (and, the first time,
    without the ISR wait), so the next step could restart another broker with node N's
    partitions still catching up."""
    from datetime import UTC, datetime

    from opskit.adapters.scaleout.multirack_k8s import K8sMultiRackSteps
    from opskit.core.reassign.model import Broker, PartitionState, Topology
    from opskit.core.scaleout.multirack import MultiRackRequest, RackFacts, plan_multi_rack
    from opskit.core.scaleout.plan import Step, StepKind

    topo = Topology(tuple(Broker(b, None) for b in (0, 1, 2)),
                    (PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, 10),))
    plan = plan_multi_rack(RackFacts("3.7.2", (0,), topo),
                           MultiRackRequest({0: "a", 1: "b", 2: "c"}), datetime.now(UTC))
    calls: list[str] = []
    in_rack = resumed_after == "the new pod came up"

    class Kafka:
        def settled(self, expected: int) -> str | None:
            nonlocal in_rack
            calls.append(f"settled {expected}")
            in_rack = True           # the interrupted restart's pod is back by now
            return None

        def wait(self, what: str, check: object) -> None:
            assert callable(check) and check() is None, what

        def lead_again(self) -> str:
            calls.append("lead_again")
            return "; 1 partition(s) led by their preferred replica again"

        def sole_in_sync(self, n: int) -> list[str]:
            calls.append(f"sole_in_sync {n}")
            return []

    sets = {"insights-kafka": dict(hip30_statefulset()),
            "insights-kafka-broker": with_broker_racks(_broker(), {1: "b", 2: "c"})}

    class RestartApi:
        def get_statefulset(self, namespace: str, name: str) -> dict[str, Any] | None:
            return sets.get(name)

        def __getattr__(self, name: str) -> Any:      # pod_uid, delete_pod, replace_...
            calls.append(name)
            raise AssertionError(f"the pod was restarted again ({name})")

    steps = K8sMultiRackSteps.__new__(K8sMultiRackSteps)
    steps.kafka = Kafka()  # type: ignore[assignment]
    steps.api = RestartApi()  # type: ignore[assignment]
    steps.namespace, steps.statefulset = NS, "insights-kafka"
    steps._racks = lambda: {0: None, 1: "b" if in_rack else None,  # type: ignore[method-assign]
                            2: None}
    detail = steps.run(Step(StepKind.SET_RACK, 1), plan)
    assert calls == ["settled 3", "lead_again"], calls
    assert "pod insights-kafka-broker-0" in detail and "every partition in ISR" in detail, detail
    assert ("not restarted" if resumed_after == "the new pod came up"
            else "an interrupted restart") in detail, detail
