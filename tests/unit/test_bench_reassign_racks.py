"""The rack part of benchmarks/bench_reassign.py: its rack-violation counter, and its
exact minimum (a min-cost flow over partition classes) against the enumeration solver of
test_reassign_plan_racks on tiny topologies, for replicas and for bytes."""

from __future__ import annotations

import importlib
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from test_reassign_plan_racks import exact_minimum, tiny_case

bench = importlib.import_module("bench_reassign")

RACKS = {0: "a", 1: "b", 2: "c", 3: "a", 4: "b", 5: "c"}


def test_violations_count_partitions_not_spanning_min_rf_racks() -> None:
    assert bench.rack_violations([[0], [0, 1], [0, 1, 2], [3, 4, 2]], RACKS) == 0
    assert bench.rack_violations([[0, 3]], RACKS) == 1              # RF 2, both in a
    assert bench.rack_violations([[0, 3, 1], [1, 4, 0]], RACKS) == 2  # RF 3 in 2 racks
    assert bench.rack_violations([[0, 3, 1, 2]], RACKS) == 0        # RF 4 spans all 3
    assert bench.rack_violations([[0, 3, 1, 4]], RACKS) == 1        # RF 4 in 2 of 3
    assert bench.rack_violations([[0, 3]], {0: "a", 3: "a"}) == 0   # one rack: min(2, 1)


def test_rack_limit() -> None:
    assert bench.rack_limit(3, {"a": 2, "b": 2, "c": 2}) == 1
    assert bench.rack_limit(4, {"a": 2, "b": 2, "c": 2}) == 2
    assert bench.rack_limit(3, {"a": 3, "b": 1}) == 2  # b can hold one: a must hold two


def test_exact_minimum_equals_enumeration_on_tiny_topologies() -> None:
    rnd = random.Random(24)
    checked = infeasible = 0
    while checked < 150:
        topology, _goal, stay, drained = tiny_case(rnd)
        if drained:  # the flow places replicas on every broker of rack_of: no drains
            continue
        rack_of = {b.id: str(b.rack) for b in topology.brokers}
        current = [list(p.replicas) for p in topology.partitions]
        for weight in (lambda p: 1, lambda p: p.size_bytes):
            want = exact_minimum(topology, stay, True, weight)
            got = bench.exact_min_moves(current, rack_of, [weight(p) for p in topology.partitions])
            assert got == want, (current, rack_of, got, want)
            infeasible += want is None
        checked += 1
    assert infeasible < 2 * checked  # most cases have a balanced rack-spread result


def test_timed_commands_take_turns_run_by_run(tmp_path: Path) -> None:
    log = tmp_path / "order"
    cmds = [[sys.executable, "-c", f"open({str(log)!r}, 'a').write({name!r})"]
            for name in ("A", "B")]
    (a_walls, a_cpus), (b_walls, b_cpus) = bench._alternate_walls(cmds, 3)
    assert log.read_text() == "ABABAB"
    assert len(a_walls) == len(b_walls) == len(a_cpus) == len(b_cpus) == 3
    assert bench._median([3.0, 1.0, 2.0]) == 2.0


def test_a_failing_timed_command_stops_the_benchmark() -> None:
    with pytest.raises(SystemExit, match="failed"):
        bench._alternate_walls([[sys.executable, "-c", "raise SystemExit(3)"]], 1)


def test_a_timed_command_runs_in_its_source_tree(tmp_path: Path) -> None:
    log = tmp_path / "where"
    code = (f"import os; open({str(log)!r}, 'a').write(os.getcwd() + "
            f"'|' + os.environ.get('PYTHONPATH', '') + '\\n')")
    cmd = [sys.executable, "-c", code]
    bench._alternate_walls([cmd, cmd], 1, [None, tmp_path])
    here, there = log.read_text().splitlines()
    assert there == f"{tmp_path}|{tmp_path}"
    assert not here.startswith(f"{tmp_path}|")


def test_plans_compare_without_the_disks_free_space() -> None:
    def plan(replicas: list[int], capacity: int) -> dict[str, object]:
        return {"partitions": [{"topic": "t", "partition": 0, "replicas": replicas}],
                "opskit": {"estimates": {"replicas_moved": 1, "bytes_per_broker": {
                    "after": {"0": 5}, "capacity": {"0": capacity}}}}}

    assert bench._same_plan(plan([0, 1], 100), plan([0, 1], 99))
    assert not bench._same_plan(plan([0, 1], 100), plan([1, 0], 100))
