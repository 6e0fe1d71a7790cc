"""The exit line of a playbook run stopped inside the scale-out's ``raise_rf`` or the
multi-rack ``spread`` says about the replication throttles only what that step's
reassignment journal tells: set, never set, removed, or "may stay set" when it cannot be
known (it said "stay set" in every case, also when the step stopped before planning).

The journals are written here the way ``reassign execute`` writes them (its Journal
class, its event kinds); the whole path on a real broker, where the throttles are set, is
tests/integration/test_playbook_local.py (a broker stopped during the RF raise)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from opskit.adapters.reassign.journal import Journal
from opskit.adapters.scaleout.throttles import RAISE_RF_PLAN, step_throttles
from opskit.core.reassign.machine import initial_state
from opskit.core.reassign.machine_model import Move, Phase
from opskit.core.reassign.plan_input import parse_plan, plan_id
from opskit.core.scaleout.machine import (
    RunState,
    StepFailed,
    StepSucceeded,
    Tick,
    transition,
    unfinished_note,
)
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutRequest, plan_scale_out
from opskit.core.scaleout.throttles import Throttles, throttles_of
from opskit.errors import InconsistentStateError, OpskitError

PLAN = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [0, 1, 2]}]}
STAY = "the replication throttles stay set until 'opskit playbook resume' finishes the RF raise"


def _ev(kind: str, **f: Any) -> dict[str, Any]:
    return {"kind": kind, **f}


@pytest.mark.parametrize(("phase", "kinds", "want"), [
    (None, [], Throttles.NONE),                                  # never began
    ("baseline", ["start", "baseline"], Throttles.NONE),
    ("throttle", ["start", "baseline"], Throttles.NONE),        # killed before the request
    ("moving", ["start"], Throttles.NONE),                       # a plan moving no data
    ("throttle", ["start", "set_throttles"], Throttles.UNKNOWN),  # request sent, maybe applied
    ("moving", ["start", "set_throttles", "submit", "stopped"], Throttles.SET),
    ("elect", ["start", "set_throttles", "submit"], Throttles.SET),
    ("cleanup", ["start", "set_throttles", "submit", "elected"], Throttles.SET),
    ("cleanup", ["start", "set_throttles", "remove_throttles"], Throttles.UNKNOWN),
    ("done", ["start", "set_throttles", "remove_throttles", "finished"], Throttles.REMOVED),
    ("done", ["start", "set_throttles", "remove_throttles", "throttle_mismatch"],
     Throttles.UNKNOWN),
    # executed again: only the new execution counts (its throttles not set yet)
    ("baseline", ["start", "set_throttles", "remove_throttles", "finished", "start"],
     Throttles.NONE),
    ("moving", ["set_throttles", "submit"], Throttles.SET),      # no start line: all count
    ("nonsense", ["start", "set_throttles"], Throttles.UNKNOWN),
])
def test_the_journal_decides(phase: str | None, kinds: list[str], want: Throttles) -> None:
    assert throttles_of(phase, [_ev(k) for k in kinds]) is want


def _raise_rf_halted() -> RunState:
    plan = plan_scale_out(ClusterFacts("3.7.2", 0, (0,), (0,), topic_rf={"t": 1}),
                          ScaleOutRequest(throttle_bytes_per_s=10**7))
    s = RunState("so-1", plan)
    while True:
        s, (act,) = transition(s, Tick("t"))
        if act.step.key == "raise_rf":   # type: ignore[attr-defined]
            break
        s, _ = transition(s, StepSucceeded("t", act.step.key))  # type: ignore[attr-defined]
    s, _ = transition(s, StepFailed("t", "raise_rf", "opskit reassign plan exited 4: ..."))
    return s


def test_the_note_says_only_what_is_known() -> None:
    s = _raise_rf_halted()
    assert STAY in unfinished_note(s, Throttles.SET)
    none = unfinished_note(s, Throttles.NONE)
    assert "the RF raise stopped before setting any replication throttle" in none
    assert "stay set" not in none and "may" not in none
    assert "removed its replication throttles" in unfinished_note(s, Throttles.REMOVED)
    unknown = unfinished_note(s)                       # the default: not known
    assert "throttles may stay set" in unknown and STAY not in unknown, unknown


def _journal(root: Path, cluster: str, phase: Phase, kinds: list[str]) -> None:
    ex = parse_plan(json.dumps(PLAN))
    pid = plan_id(ex)
    j = Journal(cluster, root)
    move = Move(ex.moves[0].tp, (0,), (0, 1, 2))
    from dataclasses import replace

    j.save(replace(initial_state(pid, (move,), 10**7, None), phase=phase))
    for k in kinds:
        j.record(pid, k)


def test_read_from_the_plan_file_and_the_reassign_journal(tmp_path: Path) -> None:
    plan = tmp_path / "run" / RAISE_RF_PLAN
    root = tmp_path / "reassign"
    assert step_throttles(plan, "c1", root) is Throttles.NONE      # stopped before planning
    plan.parent.mkdir()
    plan.write_text(json.dumps(PLAN))
    assert step_throttles(plan, "c1", root) is Throttles.NONE      # planned, never executed
    assert step_throttles(plan, None, root) is Throttles.UNKNOWN   # cluster id unknown
    _journal(root, "c1", Phase.MOVING, ["start", "baseline", "set_throttles", "submit"])
    assert step_throttles(plan, "c1", root) is Throttles.SET
    assert step_throttles(plan, "other", root) is Throttles.NONE   # another cluster's journal
    _journal(root, "c1", Phase.DONE, ["remove_throttles", "finished"])
    assert step_throttles(plan, "c1", root) is Throttles.REMOVED
    plan.write_text("{not json")
    assert step_throttles(plan, "c1", root) is Throttles.UNKNOWN


def test_the_plan_file_name_is_the_one_raise_rf_writes(tmp_path: Path) -> None:
    """``KafkaSteps.raise_rf`` plans into ``RAISE_RF_PLAN``: here its ``reassign plan``
    writes the file then fails (exit 4, the missing-context case), and the step stops
    before it executes anything: nothing was set."""
    from opskit.adapters.scaleout.kafka_steps import KafkaSteps
    from opskit.core.connection import ConnectionConfig

    written: list[Path] = []

    def cli(args: list[str]) -> int:
        path = Path(args[args.index("--write-plan") + 1])
        path.write_text(json.dumps(PLAN))
        written.append(path)
        return 4

    steps = KafkaSteps(ConnectionConfig(bootstrap="127.0.0.1:9"), "sandbox-x",
                       tmp_path, "10MiB", cli=cli)
    with pytest.raises(InconsistentStateError):
        steps.raise_rf(_raise_rf_halted().plan)  # type: ignore[arg-type]
    assert written == [tmp_path / RAISE_RF_PLAN]
    assert step_throttles(written[0], "c1", tmp_path / "reassign") is Throttles.NONE


def _sandbox(name: str, cluster: str) -> Path:
    from opskit.sandbox.cluster import Sandbox, SandboxState

    sb = Sandbox(name)
    sb.root.mkdir(parents=True, exist_ok=True)
    sb.state_path.write_text(json.dumps(SandboxState(name, "3.7.2", cluster, 19790,
                                                     19791).to_dict()))
    return sb.playbook_dir


@pytest.mark.parametrize(("kinds", "phase", "want", "not_want"), [
    (None, None, "the RF raise stopped before setting any replication throttle", "stay set"),
    (["start", "baseline", "set_throttles", "submit"], Phase.MOVING, STAY, "may stay"),
])
def test_the_exit_line_of_a_halted_scale_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             kinds: list[str] | None, phase: Phase | None,
                                             want: str, not_want: str) -> None:
    """The exit of the CLI's run (``finish`` with what ``step_throttles`` read for the
    sandbox): exit 3, the line says what the journal says."""
    from opskit.cli.exits import exit_code_for
    from opskit.cli.playbook.run import finish
    from opskit.cli.playbook.run import step_throttles as cli_throttles

    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    run_dir = _sandbox("pbt", "cid-1")
    if kinds is not None and phase is not None:
        run_dir.mkdir(parents=True)
        (run_dir / RAISE_RF_PLAN).write_text(json.dumps(PLAN))
        _journal(tmp_path / "reassign", "cid-1", phase, kinds)
    end = _raise_rf_halted()
    with pytest.raises(OpskitError) as e:
        finish(end, lambda: None, cli_throttles("pbt", end, run_dir))
    assert exit_code_for(e.value) == 3
    assert want in str(e.value) and not_want not in str(e.value), str(e.value)
