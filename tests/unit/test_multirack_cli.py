"""``opskit playbook multi-rack`` refuses bad input (Kubernetes options too) in one line,
before it reads a cluster or writes anything (no Kafka needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli


@pytest.mark.parametrize(("args", "code", "text"), [
    (["--racks", "0=a,1=b", "--platform", "kubernetes"], 2,
     "--platform kubernetes needs --namespace, --statefulset, --context"),
    (["--racks", "0=a,1=b", "--namespace", "ns"], 2, "--namespace need(s) --platform kubernetes"),
    (["--racks", "0=a,1=b", "--platform", "aws"], 2, "--platform 'aws'"),
    (["--racks", "0=a,1"], 2, "--racks: '1' is not NODE=RACK"),
    (["--racks", "0=a,1=b", "--add-brokers", "3=a b"], 2, "--add-brokers"),
    (["--racks", "0=a,1=b", "--throttle", "fast"], 2, "throttle"),
    (["--racks", "0=a,1=b", "--window", "25:00-26:00Z"], 2, "window"),
    (["--racks", "0=a,1=b", "--sandbox", "nothere"], 4, "no sandbox named"),
])
def test_refused_in_one_line_and_nothing_written(args: list[str], code: int, text: str,
                                                 tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    r = run_cli("playbook", "multi-rack", *args, "--execute")
    assert r.code == code, (r.code, r.err)
    assert r.err.startswith("opskit: error:") and r.err.count("\n") == 1, r.err
    assert text in r.err, r.err
    assert not (tmp_path / "playbooks").exists()


def test_status_resume_abort_without_a_run_are_not_found(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    for cmd in (["status"], ["resume"], ["abort", "--execute"]):
        r = run_cli("playbook", *cmd, "--sandbox", "nothere")
        assert r.code == 4 and "playbook run" in r.err, (cmd, r.err)


def test_preflight_waits_for_the_existing_brokers_only(tmp_path: Path) -> None:
    """The new nodes of ``--add-brokers`` start after preflight: it must not wait for them
    (it did: 300 s, then a halt, on a 3 -> 6 run by hand)."""
    from datetime import UTC, datetime

    from opskit.adapters.scaleout.multirack import MultiRackSteps
    from opskit.core.reassign.model import Broker, PartitionState, Topology
    from opskit.core.scaleout.multirack import MultiRackRequest, RackFacts, plan_multi_rack
    from opskit.core.scaleout.plan import Step, StepKind

    topo = Topology(tuple(Broker(b, None) for b in (0, 1, 2)),
                    (PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, 10),))
    plan = plan_multi_rack(RackFacts("3.7.2", (0,), topo),
                           MultiRackRequest({0: "a", 1: "b", 2: "c"}, {3: "a", 4: "b"}),
                           datetime.now(UTC))
    asked: list[int] = []

    class Kafka:
        def registered_brokers(self) -> set[int]:
            return {0, 1, 2}

        def settled(self, expected: int) -> str | None:
            asked.append(expected)
            return None if expected <= 3 else f"brokers registered 3 < expected {expected}"

        def wait(self, what: str, check: object) -> None:
            assert callable(check) and check() is None, what

    steps = MultiRackSteps.__new__(MultiRackSteps)
    steps.kafka = Kafka()  # type: ignore[assignment]
    assert "registered" in steps.run(Step(StepKind.PREFLIGHT), plan)
    assert asked == [3]


def test_set_rack_resumed_on_a_node_already_in_its_rack_still_waits_for_isr() -> None:
    """A run killed after ``set_rack:N`` restarted node N in its rack, before the step
    waited for every partition in ISR: the resume does not restart the node again, but
    still waits for the ISR and gives the node its leaders back (it returned at once, so
    the next step could start with the node's partitions still catching up)."""
    from datetime import UTC, datetime

    from opskit.adapters.scaleout.multirack import MultiRackSteps
    from opskit.core.reassign.model import Broker, PartitionState, Topology
    from opskit.core.scaleout.multirack import MultiRackRequest, RackFacts, plan_multi_rack
    from opskit.core.scaleout.plan import Step, StepKind

    topo = Topology(tuple(Broker(b, None) for b in (0, 1, 2)),
                    (PartitionState("t", 0, (0, 1, 2), (0, 1, 2), 0, 10),))
    plan = plan_multi_rack(RackFacts("3.7.2", (0,), topo),
                           MultiRackRequest({0: "a", 1: "b", 2: "c"}), datetime.now(UTC))
    calls: list[str] = []

    class Kafka:
        def settled(self, expected: int) -> str | None:
            calls.append(f"settled {expected}")
            return None

        def wait(self, what: str, check: object) -> None:
            assert callable(check) and check() is None, what

        def lead_again(self) -> str:
            calls.append("lead_again")
            return "; 1 leader(s) moved back"

    class Sb:
        name = "s"

        def status(self) -> dict[str, object]:
            return {"nodes": [{"node_id": i, "running": True, "rack": r}
                              for i, r in ((0, None), (1, "b"), (2, None))]}

        def stop_node(self, n: int) -> None:
            calls.append(f"stop {n}")

    steps = MultiRackSteps.__new__(MultiRackSteps)
    steps.kafka = Kafka()  # type: ignore[assignment]
    steps.sb = Sb()  # type: ignore[assignment]
    steps._racks = lambda: {0: None, 1: "b", 2: None}  # type: ignore[method-assign]
    detail = steps.run(Step(StepKind.SET_RACK, 1), plan)
    assert calls == ["settled 3", "lead_again"], calls  # no stop: not restarted again
    assert "not restarted" in detail and "every partition in ISR" in detail, detail
