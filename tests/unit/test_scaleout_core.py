"""Scale-out playbook, pure parts: window, plan, state machine, quorum upgrade plan,
Kubernetes objects; the journal file and the run lock."""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hip30_k8s import hip30_statefulset
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.adapters.files.run_lock import RunLock
from opskit.adapters.scaleout.journal import FileJournal
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
    nothing_to_do,
    transition,
)
from opskit.core.scaleout.plan import (
    ClusterFacts,
    QuorumKind,
    ScaleOutPlan,
    ScaleOutRequest,
    Step,
    StepKind,
    plan_scale_out,
)
from opskit.core.scaleout.quorum import plan_quorum_upgrade
from opskit.core.scaleout.window import parse_window
from opskit.errors import (
    InvalidInputError,
    RefusedError,
    ServiceUnavailableError,
    UsageError,
    WriteFailedError,
)


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
    # one old broker sends: its throttle caps the copy (not two receivers' throttles)
    # + 3 node restarts (the rolling restart), each counted as a node start
    assert p.estimated_seconds == pytest.approx(2_020_000 / 1_000_000 + 2 * 6 + 3 * 6 + 10)
    assert any(n.startswith("estimate 42 s = 2,020,000 bytes / (throttle 1,000,000 B/s x 1 "
                            "broker(s)") and "2 node start(s) x 6 s" in n
               and "3 node restart(s) x 6 s" in n for n in p.notes)
    # the rolling restart after the registry: broker-only nodes first, the controller
    # last, then the new-topic defaults are verified, then the final health
    assert [s.key for s in p.steps[-6:]] == ["update_registry", "restart_node:1",
                                             "restart_node:2", "restart_node:0",
                                             "verify_defaults", "final_health"]
    k8s = plan_scale_out(facts(), ScaleOutRequest(throttle_bytes_per_s=1_000_000,
                                                  rolling_restart=False))
    assert StepKind.RESTART_NODE not in [s.kind for s in k8s.steps]
    assert any("single point of failure" in n for n in p.notes)
    assert ScaleOutPlan.from_dict(p.to_dict()) == p


def test_the_estimate_copies_at_the_throttle_times_min_sources_receivers() -> None:
    from opskit.core.scaleout.plan import estimate_seconds

    req = ScaleOutRequest(throttle_bytes_per_s=2_000_000)
    # bench_scaleout.py's 3.7 run: 40.8 MB at 2 MB/s from one source, two broker-only nodes
    # (measured 35.1 s; the old model said 370 s)
    total, note = estimate_seconds(40_800_000, req, sources=1, receivers=2, voters=0)
    assert total == pytest.approx(20.4 + 2 * 6 + 10)
    assert "promotion" not in note and "2 node start(s)" in note
    # its 4.3.1 run: the same, and both new nodes promoted to voters (measured 50.2 s)
    total, note = estimate_seconds(40_800_000, req, sources=1, receivers=2, voters=2)
    assert total == pytest.approx(20.4 + 2 * 6 + 2 * 6 + 10)
    assert "2 voter promotion(s) x 6 s" in note
    # 3 -> 5: three senders, two receivers: two lanes; 2 -> 3: one receiver
    assert estimate_seconds(8_000_000, req, sources=3, receivers=2, voters=0)[0] == \
        pytest.approx(2 + 2 * 6 + 10)
    assert estimate_seconds(8_000_000, req, sources=2, receivers=1, voters=0)[0] == \
        pytest.approx(4 + 6 + 10)
    # nothing to copy: the fixed waits alone
    assert estimate_seconds(0, req, sources=1, receivers=2, voters=0)[0] == pytest.approx(22)
    # the waits are the request's: a slower host can say so
    slow = ScaleOutRequest(throttle_bytes_per_s=2_000_000, node_start_s=30,
                           playbook_overhead_s=20)
    assert estimate_seconds(0, slow, sources=1, receivers=2, voters=0)[0] == pytest.approx(80)


def test_dynamic_quorum_promotes_each_new_node_after_adding() -> None:
    p = plan_scale_out(facts(kafka_version="4.3.1", kraft_version=1, voters=(0,), brokers=(0,)),
                       ScaleOutRequest())
    keys = [s.key for s in p.steps]
    assert keys[:5] == ["preflight", "add_node:1", "add_node:2", "promote_voter:1",
                        "promote_voter:2"]
    assert p.new_node_roles == "broker,controller" and p.new_voters == (1, 2)


def test_node_ids_skip_taken_ids() -> None:
    p = plan_scale_out(facts(voters=(0, 3000), brokers=(0,)), ScaleOutRequest())
    assert p.new_nodes == (3001, 3002)


@pytest.mark.parametrize("kw,req,msg", [
    ({"problems": ("2 under-replicated partitions",)}, {}, "not healthy"),
    ({"reassignment_in_progress": True}, {}, "reassignment is in progress"),
    ({}, {"controllers": 3}, "static controller voter set"),
    ({"kraft_version": 1}, {"controllers": 4}, "cannot make 4 voters"),
    ({"kraft_version": 1, "voters": (0, 1, 2), "brokers": (0, 1)}, {"controllers": 2},
     "never removes"),
    ({"brokers": (0, 1, 2), "topic_rf": {"llm_usage": 3, "__consumer_offsets": 3}}, {},
     "already has 3 brokers"),
    ({"free_disk_bytes": 100}, {}, "free"),
])
def test_refusals(kw: dict[str, object], req: dict[str, object], msg: str) -> None:
    with pytest.raises(RefusedError, match=msg):
        plan_scale_out(facts(**kw), ScaleOutRequest(**req))  # type: ignore[arg-type]


def test_enough_brokers_but_topics_below_the_rf_finishes_without_adding_nodes() -> None:
    # an aborted run (or nodes added by hand): brokers are there, RF 3 and min ISR are not
    p = plan_scale_out(facts(brokers=(0, 1, 2)), ScaleOutRequest(throttle_bytes_per_s=10**6))
    assert p.new_nodes == () and p.existing == (0, 1, 2)
    kinds = [s.kind for s in p.steps]
    assert StepKind.ADD_NODE not in kinds and StepKind.PROMOTE_VOTER not in kinds
    assert kinds[-10:] == [StepKind.RAISE_RF, StepKind.VERIFY_ISR, StepKind.ELECT_LEADERS,
                           StepKind.SET_MIN_ISR, StepKind.UPDATE_REGISTRY,
                           *[StepKind.RESTART_NODE] * 3, StepKind.VERIFY_DEFAULTS,
                           StepKind.FINAL_HEALTH]
    assert p.bytes_to_copy == 2 * 1_000_000 + 2 * 10_000
    assert "finishes the scale-out" in p.notes[0] and "__consumer_offsets" in p.notes[0]
    # a dynamic quorum: no node to promote either
    dyn = plan_scale_out(facts(brokers=(0, 1, 2), kraft_version=1), ScaleOutRequest())
    assert dyn.new_voters == () and StepKind.PROMOTE_VOTER not in [s.kind for s in dyn.steps]


def test_static_refusal_names_the_reason_and_the_fix() -> None:
    with pytest.raises(RefusedError) as e:
        plan_scale_out(facts(), ScaleOutRequest(controllers=3))
    assert "cannot do on a live cluster" in str(e.value)
    assert "opskit playbook upgrade-quorum" in str(e.value)
    # asking for the voters it has is no change: planned, broker-only
    p = plan_scale_out(facts(), ScaleOutRequest(controllers=1))
    assert p.new_voters == () and p.new_node_roles == "broker"


def test_controllers_bounds_how_many_new_nodes_become_voters() -> None:
    dyn = facts(kafka_version="4.3.1", kraft_version=1)
    p = plan_scale_out(dyn, ScaleOutRequest(target_brokers=5, controllers=3))
    assert p.new_nodes == (1, 2, 3, 4) and p.new_voters == (1, 2)
    assert [s.key for s in p.steps if s.kind is StepKind.PROMOTE_VOTER] == \
        ["promote_voter:1", "promote_voter:2"]
    assert p.roles_of(1) == "broker,controller" and p.roles_of(3) == "broker"
    assert ScaleOutPlan.from_dict(p.to_dict()) == p
    none = plan_scale_out(dyn, ScaleOutRequest(controllers=1))
    assert none.new_voters == () and StepKind.PROMOTE_VOTER not in [s.kind for s in none.steps]
    even = plan_scale_out(dyn, ScaleOutRequest(controllers=2))
    assert even.new_voters == (1,) and any("odd number" in n for n in even.notes)
    with pytest.raises(UsageError):
        plan_scale_out(dyn, ScaleOutRequest(controllers=0))


def test_a_journal_without_per_node_roles_reads_as_before() -> None:
    p = plan_scale_out(facts(kraft_version=1), ScaleOutRequest())
    old = p.to_dict()
    del old["new_voters"]
    assert ScaleOutPlan.from_dict(old).new_voters == (1, 2)


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


def finished(s: RunState) -> RunState:
    while True:
        s, acts = transition(s, Tick("2026-11-24T02:07:00Z"))
        if isinstance(acts[0], Finish):
            return s
        s, _ = transition(s, StepSucceeded("t", acts[0].step.key))  # type: ignore[attr-defined]


def test_a_finished_run_whose_target_holds_leaves_nothing_to_do() -> None:
    s = new_state()
    assert nothing_to_do(None, [0, 1, 2], 3) is None            # no journal: plan as usual
    assert nothing_to_do(s, [0, 1, 2], 3) is None               # not done yet: resume it
    s = finished(s)
    assert nothing_to_do(s, [0, 1, 2], 3) == (
        "scale-out run-1 finished at 2026-11-24T02:07:00Z; the cluster has 3 brokers: "
        "nothing to do")
    assert nothing_to_do(s, [0, 1, 2, 3], 3) is not None        # more than the target: fine
    # the cluster no longer meets the finished run's target: plan (or refuse) as today
    assert nothing_to_do(s, [0, 1], 3) is None
    assert nothing_to_do(s, [0, 1, 5], 3) is None               # one of its brokers is gone
    assert nothing_to_do(s, [0, 1, 2], 4) is None               # more brokers asked for now
    assert nothing_to_do(replace(s, phase=Phase.ABORTED), [0, 1, 2], 3) is None


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


@pytest.mark.parametrize(("error", "phase", "severity"), [
    (WriteFailedError("cannot write registry file r.yaml: Permission denied"), Phase.FAILED,
     "critical"),                                  # an operator must act first
    (ServiceUnavailableError("broker 1 timed out"), Phase.HALTED, "error"),   # retry later
])
def test_the_runner_fails_for_good_on_a_file_it_cannot_write(
        tmp_path: Path, error: Exception, phase: Phase, severity: str) -> None:
    from opskit.adapters.scaleout.runner import drive as run

    class Steps:
        def run(self, step: Step, plan: ScaleOutPlan) -> str:
            if step.kind is StepKind.UPDATE_REGISTRY:
                raise error
            return "ok"

    pages: list[Page] = []
    end = run(new_state(), None, FileJournal(tmp_path / "j.json"), Steps(), pager=pages.append)
    assert end.phase is phase and end.in_flight == "update_registry"
    (page,) = pages
    assert page.severity == severity and "at update_registry: " in page.summary
    assert str(error) in page.summary


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


def test_a_stopped_run_says_what_it_leaves_unfinished() -> None:
    """The exit line of a run that stopped before its end: throttles of an RF raise in
    flight stay set until resume/abort; nodes not restarted still give new topics the
    old RF (the cluster is not finished)."""
    from opskit.core.scaleout.machine import unfinished_note
    from opskit.core.scaleout.throttles import Throttles

    s = new_state()
    while True:
        s, (act,) = drive(s)
        assert isinstance(act, RunStep)
        if act.step.key == "raise_rf":
            break
        s, _ = transition(s, StepSucceeded("t", act.step.key))
    s, _ = transition(s, StepFailed("t", "raise_rf", "no progress for 300s: waiting for "
                                    "broker(s) 2 to come back"))
    note = unfinished_note(s, Throttles.SET)     # (what the RF raise's journal said)
    assert "throttles stay set until 'opskit playbook resume'" in note
    assert "throttles may stay set" in unfinished_note(s)   # not known: not asserted
    assert "abort" in note and "node(s) 1, 2, 0 still run without the new read-only" in note
    while True:
        s, acts = drive(s)
        (act,) = acts
        assert isinstance(act, RunStep)
        if act.step.key == "restart_node:0":
            break
        s, _ = transition(s, StepSucceeded("t", act.step.key))
    s, _ = transition(s, StepFailed("t", "restart_node:0", "refused", retryable=False))
    note = unfinished_note(s)
    assert "throttles" not in note and "the cluster is not finished: node(s) 0 still" in note
    s = finished(s)
    assert unfinished_note(s) == ""


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


# --- run lock ----------------------------------------------------------------------

def test_run_lock_refuses_a_second_run_and_names_the_holder(tmp_path: Path) -> None:
    lock = tmp_path / "run.lock"
    with (RunLock(lock, "playbook scale-out so-1"),
          pytest.raises(RefusedError, match=r"another run is active \(pid \d+ .*so-1"),
          RunLock(lock, "playbook scale-out so-2")):
        pass
    with RunLock(lock, "playbook scale-out so-3"):       # released: the next run gets it
        assert "so-3" in lock.read_text()


def test_a_lock_left_by_a_killed_run_does_not_block(tmp_path: Path) -> None:
    lock = tmp_path / "run.lock"
    code = ("import sys, time; sys.path.insert(0, sys.argv[2]);"
            "from pathlib import Path; from opskit.adapters.files.run_lock import RunLock;"
            "l = RunLock(Path(sys.argv[1]), 'killed run'); l.__enter__();"
            "print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(lock),
                              str(Path(__file__).resolve().parents[2])],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        with pytest.raises(RefusedError, match="killed run"):
            RunLock(lock, "second").__enter__()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    assert "killed run" in lock.read_text()               # the stale file is still there
    with RunLock(lock, "resume"):
        pass


# --- quorum upgrade ------------------------------------------------------------------

def test_quorum_upgrade_needs_4_1_and_a_static_quorum() -> None:
    with pytest.raises(RefusedError, match="4.1"):
        plan_quorum_upgrade("3.7.2", 0, (0,), files_static=True)
    with pytest.raises(RefusedError, match="4.1"):
        plan_quorum_upgrade("4.0.1", 0, (0,), files_static=True)
    with pytest.raises(RefusedError, match="already dynamic"):
        plan_quorum_upgrade("4.3.1", 1, (0,), files_static=False)
    p = plan_quorum_upgrade("4.3.1", 0, (0,), files_static=True)
    assert not p.files_only and any("irreversible" in a for a in p.actions)
    # upgraded outside opskit (KAFKA-21426): only the files are brought in line
    q = plan_quorum_upgrade("4.3.1", 1, (0,), files_static=True)
    assert q.files_only and not any("UpdateFeatures" in a for a in q.actions)
