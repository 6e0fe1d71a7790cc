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
