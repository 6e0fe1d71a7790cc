"""Scale-out playbook, pure parts: window, plan, state machine, Kubernetes objects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hip30_k8s import hip30_statefulset
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.adapters.scaleout_journal import FileJournal
from opskit.core.scaleout.k8s import broker_headless_service, broker_statefulset, combined_facts
from opskit.core.scaleout.machine import (
    AbortRequested,
    Finish,
    Halt,
    Page,
    Phase,
    RunState,
    RunStep,
    StepFailed,
    StepSucceeded,
    Tick,
    transition,
)
from opskit.core.scaleout.plan import (
    ClusterFacts,
    QuorumKind,
    ScaleOutPlan,
    ScaleOutRequest,
    StepKind,
    plan_scale_out,
)
from opskit.core.scaleout.window import parse_window
from opskit.errors import InvalidInputError, RefusedError, UsageError


def at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 11, 24, h, m, tzinfo=UTC)


# --- window ----------------------------------------------------------------------

def test_window_inside_outside_and_across_midnight() -> None:
    w = parse_window("02:00-05:00Z")
    assert str(w) == "02:00-05:00Z"
    assert w.contains(at(2)) and w.contains(at(4, 59)) and not w.contains(at(5))
    assert w.closes_in(at(4, 30)) == timedelta(minutes=30)
    assert w.closes_in(at(6)) is None and w.opens_in(at(6)) == timedelta(hours=20)
    night = parse_window("22:00-02:00")
    assert night.contains(at(23)) and night.contains(at(1)) and not night.contains(at(12))
    assert night.closes_in(at(23)) == timedelta(hours=3)
    assert parse_window("20:00-24:00Z").contains(at(23, 59))


@pytest.mark.parametrize("bad", ["", "2-5", "02:00-02:00", "25:00-01:00", "02:00-05:60",
                                 "02:00_05:00", "02:00-05:00+01", "24:00-01:00"])
def test_bad_windows_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_window(bad)


# --- plan ----------------------------------------------------------------------------

def facts(**kw: object) -> ClusterFacts:
    base: dict[str, object] = {
        "kafka_version": "3.7.2", "kraft_version": 0, "voters": (0,), "brokers": (0,),
        "topic_rf": {"llm_usage": 1, "__consumer_offsets": 1, "already": 3},
        "topic_bytes": {"llm_usage": 1_000_000, "__consumer_offsets": 10_000, "already": 5}}
    base.update(kw)
    return ClusterFacts(**base)  # type: ignore[arg-type]


def test_static_quorum_adds_broker_only_nodes_outside_the_voters() -> None:
    p = plan_scale_out(facts(), ScaleOutRequest(throttle_bytes_per_s=1_000_000))
    assert p.quorum is QuorumKind.STATIC and p.new_nodes == (1, 2)
    assert p.new_node_roles == "broker"
    kinds = [s.kind for s in p.steps]
    assert StepKind.PROMOTE_VOTER not in kinds
    assert kinds.index(StepKind.RAISE_RF) < kinds.index(StepKind.VERIFY_ISR) \
        < kinds.index(StepKind.SET_MIN_ISR)                     # min ISR only after ISR = 3
    assert p.bytes_to_copy == 2 * 1_000_000 + 2 * 10_000        # (3 - 1) x bytes, RF-3 skipped
    assert p.estimated_seconds == pytest.approx(2_020_000 / 2 / 1_000_000 + 120 * 3)
    assert any("single point of failure" in n for n in p.notes)
    assert ScaleOutPlan.from_dict(p.to_dict()) == p


def test_dynamic_quorum_promotes_each_new_node_after_adding() -> None:
    p = plan_scale_out(facts(kafka_version="4.3.1", kraft_version=1, voters=(0,), brokers=(0,)),
                       ScaleOutRequest())
    keys = [s.key for s in p.steps]
    assert keys[:5] == ["preflight", "add_node:1", "add_node:2", "promote_voter:1",
                        "promote_voter:2"]
    assert p.new_node_roles == "broker,controller"


def test_node_ids_skip_taken_ids() -> None:
    p = plan_scale_out(facts(voters=(0, 3000), brokers=(0,)), ScaleOutRequest())
    assert p.new_nodes == (3001, 3002)


@pytest.mark.parametrize("kw,req,msg", [
    ({"problems": ("2 under-replicated partitions",)}, {}, "not healthy"),
    ({"reassignment_in_progress": True}, {}, "reassignment is in progress"),
    ({}, {"change_static_voters": True}, "static controller voter set"),
    ({"brokers": (0, 1, 2)}, {}, "already has 3 brokers"),
    ({"free_disk_bytes": 100}, {}, "free"),
])
def test_refusals(kw: dict[str, object], req: dict[str, object], msg: str) -> None:
    with pytest.raises(RefusedError, match=msg):
        plan_scale_out(facts(**kw), ScaleOutRequest(**req))  # type: ignore[arg-type]


def test_dynamic_quorum_may_change_voters() -> None:
    plan_scale_out(facts(kraft_version=1), ScaleOutRequest(change_static_voters=True))


# --- state machine ---------------------------------------------------------------

def new_state() -> RunState:
    return RunState("run-1", plan_scale_out(facts(), ScaleOutRequest()))


def drive(s: RunState, window: bool = True) -> tuple[RunState, list[object]]:
    s, acts = transition(s, Tick("t", window))
    return s, list(acts)


def test_a_run_goes_step_by_step_to_done() -> None:
    s = new_state()
    ran = []
    while True:
        s, acts = drive(s)
        if isinstance(acts[0], Finish):
            break
        (act,) = acts
        assert isinstance(act, RunStep)
        ran.append(act.step.key)
        s, _ = transition(s, StepSucceeded("t", act.step.key))
    assert ran == [x.key for x in s.plan.steps] and s.phase is Phase.DONE
    assert transition(s, Tick("t")) == (s, ())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=60))
def test_killed_anywhere_then_resumed_finishes_each_step_once(kills: list[int]) -> None:
    """A runner persists the state before acting; a kill loses only what came after
    the last save. Steps are re-run only when they were in flight, never after
    they were recorded finished."""
    saved = RunState.from_dict(new_state().to_dict())
    finished: list[str] = []
    executions: dict[str, int] = {}
    for k in kills + [99] * 40:
        s = RunState.from_dict(saved.to_dict())             # a new process reads the journal
        s, acts = drive(s)
        saved = s                                            # saved before acting
        if any(isinstance(a, Finish) for a in acts):
            break
        (act,) = acts
        assert isinstance(act, RunStep)
        assert act.step.key not in finished                  # never a finished step again
        executions[act.step.key] = executions.get(act.step.key, 0) + 1
        if k == 0:
            continue                                         # killed mid-step
        s, _ = transition(s, StepSucceeded("t", act.step.key))
        saved = s
        finished.append(act.step.key)
    assert saved.phase is Phase.DONE
    assert finished == [x.key for x in saved.plan.steps]


def test_window_closed_halts_between_steps_and_pages_once() -> None:
    s = new_state()
    s, (act,) = drive(s)
    s, _ = transition(s, StepSucceeded("t", act.step.key))   # preflight done
    s, acts = drive(s, window=False)
    assert s.phase is Phase.HALTED and isinstance(acts[-1], Halt)
    assert any(isinstance(a, Page) and a.severity == "warning" for a in acts)
    s, acts = drive(s, window=False)                          # the next closed run: no page
    assert [type(a) for a in acts] == [Halt]
    s, acts = drive(s, window=True)
    assert isinstance(acts[0], RunStep) and acts[0].step.key == "add_node:1"


def test_a_step_in_flight_is_finished_even_outside_the_window() -> None:
    s, _ = drive(new_state())                 # preflight started, then the process died
    assert s.in_flight == "preflight"
    s, acts = drive(s, window=False)
    assert isinstance(acts[0], RunStep) and acts[0].resumed and acts[0].step.key == "preflight"


def test_failure_halts_with_the_step_kept_in_flight_and_pages() -> None:
    s = new_state()
    s, (act,) = drive(s)
    s, acts = transition(s, StepFailed("t", act.step.key, "broker 1 not registered"))
    assert s.phase is Phase.HALTED and s.in_flight == act.step.key
    assert isinstance(acts[0], Page) and acts[0].severity == "error"
    s, acts2 = transition(s, StepFailed("t", act.step.key, "boom", retryable=False))
    assert s.phase is Phase.FAILED and acts2[0].severity == "critical"  # type: ignore[union-attr]
    s, (again,) = drive(s)
    assert isinstance(again, RunStep) and again.step.key == act.step.key


def test_abort_waits_for_the_step_in_flight() -> None:
    s = new_state()
    s, (act,) = drive(s)
    s, acts = transition(s, AbortRequested("t"))
    assert acts == () and s.phase is Phase.RUNNING
    s, acts = transition(s, StepSucceeded("t", act.step.key))
    assert s.phase is Phase.ABORTED and isinstance(acts[-1], Finish)
    idle = new_state()
    idle, acts = transition(idle, AbortRequested("t"))
    assert idle.phase is Phase.ABORTED


def test_a_foreign_step_result_is_a_bug() -> None:
    s, _ = drive(new_state())
    with pytest.raises(ValueError):
        transition(s, StepSucceeded("t", "raise_rf"))


# --- journal file ------------------------------------------------------------------

def test_file_journal_compare_and_set(tmp_path: Path) -> None:
    j = FileJournal(tmp_path / "journal.json")
    assert j.load() == (None, None)
    s = new_state()
    v1 = j.save(s, None)
    loaded, v = j.load()
    assert loaded == s and v == v1
    s2, _ = drive(s)
    v2 = j.save(s2, v1)
    with pytest.raises(RefusedError, match="another run"):
        j.save(s2, v1)                                     # a second run still on v1
    assert j.load() == (s2, v2)
    (tmp_path / "bad.json").write_text('{"version": "1", "state": {"run_id": 1}}')
    with pytest.raises(InvalidInputError):
        FileJournal(tmp_path / "bad.json").load()


# --- Kubernetes objects --------------------------------------------------------------

def test_broker_statefulset_keeps_voters_and_cluster_id() -> None:
    combined = hip30_statefulset()
    assert combined_facts(combined)["voter_ids"] == [0]
    sts = broker_statefulset(combined, first_id=1, replicas=2, namespace="hanzo")
    c = sts["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["KAFKA_CFG_PROCESS_ROLES"] == "broker"
    assert env["KAFKA_CFG_CONTROLLER_QUORUM_VOTERS"].startswith("0@")
    assert env["KAFKA_KRAFT_CLUSTER_ID"] == "abc" and env["OPSKIT_BROKER_FIRST_ID"] == "1"
    assert "KAFKA_CFG_NODE_ID" not in env                     # computed from the ordinal
    assert sts["spec"]["selector"]["matchLabels"] != {"app": "insights-kafka"}
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"][
        "storage"] == "50Gi"
    svc = broker_headless_service(sts)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["metadata"]["name"] == sts["spec"]["serviceName"]
    with pytest.raises(InvalidInputError):
        broker_statefulset(combined, first_id=0, replicas=2, namespace="hanzo")
