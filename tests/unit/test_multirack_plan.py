"""The multi-rack playbook's pure part: its plan (steps, order, refusals, the predicted
spread and its lower bound) and its run through the scale-out's state machine (killed
anywhere and resumed: each step finishes once, in order)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.core.reassign.model import Broker, PartitionState, Topology
from opskit.core.scaleout.machine import (
    Finish,
    Phase,
    RunState,
    RunStep,
    StepFailed,
    StepSucceeded,
    Tick,
    transition,
    unfinished_note,
)
from opskit.core.scaleout.multirack import (
    MultiRackPlan,
    MultiRackRequest,
    RackFacts,
    parse_rack_map,
    plan_multi_rack,
    spread_problems,
)
from opskit.core.scaleout.plan import StepKind
from opskit.core.scaleout.throttles import Throttles
from opskit.errors import RefusedError, UsageError

NOW = datetime(2026, 11, 27, tzinfo=UTC)


def topo(racks: dict[int, str | None], parts: list[list[int]], size: int = 1000) -> Topology:
    return Topology(tuple(Broker(b, r) for b, r in sorted(racks.items())),
                    tuple(PartitionState(f"t{i // 4}", i % 4, tuple(r), tuple(r), r[0], size)
                          for i, r in enumerate(parts)))


PAIRS = [[0, 1], [1, 0], [0, 1], [1, 0], [0, 1], [1, 0]]
TRIPLES = [[0, 1, 2], [1, 2, 0], [2, 0, 1]]


def facts(racks: dict[int, str | None] | None = None, parts: list[list[int]] | None = None,
          **kw: object) -> RackFacts:
    t = topo(racks if racks is not None else {0: None, 1: None, 2: None},
             parts if parts is not None else PAIRS + TRIPLES)
    return RackFacts("3.7.2", (0,), t, **kw)  # type: ignore[arg-type]


def plan(f: RackFacts | None = None, racks: str = "0=a,1=b,2=c",
         add: str | None = None) -> MultiRackPlan:
    req = MultiRackRequest(parse_rack_map(racks, "--racks"),
                           parse_rack_map(add, "--add-brokers") if add else {})
    return plan_multi_rack(f or facts(), req, NOW)


def test_rack_maps_parse_or_name_the_bad_item() -> None:
    assert parse_rack_map("0=a, 1=b,2=zone-1.x", "--racks") == {0: "a", 1: "b", 2: "zone-1.x"}
    for bad in ("0", "a=0", "0=", "0=a b", "0=a,0=b", "-1=a", "0=a,,1=b"):
        with pytest.raises(UsageError, match="--racks"):
            parse_rack_map(bad, "--racks")


def test_steps_restart_broker_only_nodes_first_and_the_controller_last() -> None:
    p = plan()
    assert [s.key for s in p.steps] == [
        "preflight", "set_rack:1", "set_rack:2", "set_rack:0", "spread", "elect_leaders",
        "verify_spread", "final_health"]
    assert dict(p.racks) == {0: "a", 1: "b", 2: "c"}
    assert dict(p.racks_before) == {0: None, 1: None, 2: None}


def test_a_broker_already_in_its_rack_is_not_restarted_and_new_nodes_come_first() -> None:
    f = facts({0: "a", 1: "a", 2: "a"})
    p = plan(f, "0=a,1=b,2=c", add="4=b,3=a")
    keys = [s.key for s in p.steps]
    assert keys[:5] == ["preflight", "add_node:3", "add_node:4", "set_rack:1", "set_rack:2"]
    assert "set_rack:0" not in keys and p.new_nodes == (3, 4)


def test_the_predicted_spread_moves_the_lower_bound() -> None:
    # no racks now; after a, b, c the RF 2 pairs on brokers 0 and 1 are spread already
    # (2 racks) but broker 2 holds 3 replicas to the others' 9: balance moves 4
    p = plan()
    assert p.unspread_before == 0 and p.rack_replicas_lower_bound == 0
    assert p.replicas_to_move == p.replicas_lower_bound == 4
    assert p.bytes_to_copy == p.bytes_lower_bound == 4000
    # four brokers in racks a, b, c, a with pairs on 0 and 3 (both in rack a): each moves one
    f = facts({0: "a", 1: "b", 2: "c", 3: "a"}, [[0, 3], [3, 0], [0, 3], [3, 0]])
    q = plan(f, "0=a,1=b,2=c,3=a")
    assert q.unspread_before == 4 and q.rack_replicas_lower_bound == 4
    assert q.replicas_to_move == q.replicas_lower_bound
    assert [s.kind for s in q.steps].count(StepKind.SET_RACK) == 0
    assert any("unequal numbers of brokers" in n for n in q.notes)


@pytest.mark.parametrize(("f", "racks", "add", "err", "msg"), [
    (facts(problems=("1 under-replicated partition",)), "0=a,1=b,2=c", None, RefusedError,
     "not healthy"),
    (facts(reassignment_in_progress=True), "0=a,1=b,2=c", None, RefusedError, "in progress"),
    (facts(), "0=a,1=b", None, RefusedError, "does not name broker.s. 2"),
    (facts(), "0=a,1=b,2=c,7=a", None, RefusedError, "broker.s. 7, not registered"),
    (facts(), "0=a,1=b,2=c", "2=a", RefusedError, "already in the cluster"),
    (facts(), "0=a,1=a,2=a", None, UsageError, "at least two racks"),
    (facts({0: None, 1: None}, [[0, 1]]), "0=a,1=b", None, None, ""),   # planned
])
def test_refusals(f: RackFacts, racks: str, add: str | None, err: type[Exception] | None,
                  msg: str) -> None:
    if err is None:
        plan(f, racks, add)
        return
    with pytest.raises(err, match=msg):
        plan(f, racks, add)


def test_racks_that_cannot_hold_the_highest_rf_are_refused() -> None:
    # RF 3 over 2 racks allows 2 per rack; racks a (1 broker) and b (1 broker) hold 2
    f = facts({0: None, 1: None, 2: None}, TRIPLES)
    plan(f, "0=a,1=a,2=b")                    # a: 2 brokers, b: 1: room 3
    f4 = facts({0: None, 1: None, 2: None, 3: None}, [[0, 1, 2, 3]])
    with pytest.raises(RefusedError, match="cannot be spread"):
        plan(f4, "0=a,1=a,2=a,3=b")           # RF 4, limit 2 per rack: a 2 + b 1 = 3


def test_a_broker_to_restart_holding_a_sole_in_sync_replica_is_refused_up_front() -> None:
    f = facts({0: None, 1: None, 2: None}, [[0], [1, 2], [2]])
    with pytest.raises(RefusedError, match=r"broker\(s\) 0, 2 hold the only in-sync replica "
                       r"of 2 partition\(s\) \(t0-0, t0-2\)"):
        plan(f)
    # a broker keeping its rack is not restarted: its RF 1 partitions do not matter
    plan(facts({0: "a", 1: None, 2: "c"}, [[0], [1, 2], [2]]))


def test_the_plan_round_trips_through_the_journal() -> None:
    p = plan(facts({0: "a", 1: None, 2: None}), add="3=a")
    s = RunState("mr-1", p)
    back = RunState.from_dict(s.to_dict())
    assert back.plan == p and isinstance(back.plan, MultiRackPlan)
    assert back.plan.rack_of(3) == "a"


def test_spread_problems_names_partitions_short_of_their_racks() -> None:
    racks: dict[int, str | None] = {0: "a", 1: "b", 2: "c", 3: "a"}
    assert spread_problems({"t-0": (0, 1, 2), "t-1": (1, 3)}, racks) == []
    assert spread_problems({"t-0": (0, 3, 1), "t-1": (0, 3)}, racks) == [
        "t-0 on [0, 3, 1] spans 2 rack(s)", "t-1 on [0, 3] spans 1 rack(s)"]
    # a broker without a rack counts as none
    assert spread_problems({"t-0": (0, 1)}, {0: "a", 1: None, 2: "b"}) == [
        "t-0 on [0, 1] spans 1 rack(s)"]


def _drive(s: RunState) -> tuple[RunState, tuple[object, ...]]:
    return transition(s, Tick("t"))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=40))
def test_killed_anywhere_then_resumed_finishes_each_step_once(kills: list[int]) -> None:
    saved = RunState.from_dict(RunState("mr-1", plan()).to_dict())
    finished: list[str] = []
    for k in kills + [99] * 20:
        s = RunState.from_dict(saved.to_dict())             # a new process reads the journal
        s, acts = _drive(s)
        saved = s
        if any(isinstance(a, Finish) for a in acts):
            break
        (act,) = acts
        assert isinstance(act, RunStep) and act.step.key not in finished
        if k == 0:
            continue                                         # killed mid-step
        s, _ = transition(s, StepSucceeded("t", act.step.key))
        saved = s
        finished.append(act.step.key)
    assert saved.phase is Phase.DONE
    assert finished == [x.key for x in saved.plan.steps]


def test_a_stopped_run_says_what_it_leaves_unfinished() -> None:
    s = RunState("mr-1", plan())
    s, _ = _drive(s)                       # preflight
    s, _ = transition(s, StepSucceeded("t", "preflight"))
    s, _ = _drive(s)                       # set_rack:1 in flight
    note = unfinished_note(s)
    assert "node(s) 1, 2, 0 are not in their rack yet" in note, note
    for key in ("set_rack:1", "set_rack:2", "set_rack:0"):
        if s.in_flight != key:
            s, _ = _drive(s)
        s, _ = transition(s, StepSucceeded("t", key))
    s, acts = _drive(s)
    assert s.in_flight == "spread"
    note = unfinished_note(s, Throttles.SET)
    assert "throttles stay set until 'opskit playbook resume' finishes the spread" in note
    assert "the spread stopped before setting any" in unfinished_note(s, Throttles.NONE)
    assert "not in their rack" not in note
    s, acts = transition(s, StepFailed("t", "spread", "broker 2 down"))
    assert any("multi-rack mr-1 halted at spread" in getattr(a, "summary", "") for a in acts)
