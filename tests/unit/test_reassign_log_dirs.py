"""The pure planning and execution rules of a log-directory drain
(:mod:`opskit.core.reassign.log_dirs`, :mod:`opskit.core.reassign.log_dir_exec`)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opskit.core.models import TopicPartition
from opskit.core.reassign.log_dir_exec import (
    DONE,
    FAILED,
    PENDING,
    SUBMITTED,
    DiskExec,
    initial,
    judge,
    merge_cordon,
)
from opskit.core.reassign.log_dirs import (
    MIN_FREE_PCT,
    DirMove,
    LogDir,
    Replica,
    parse_disk_plan,
    parse_log_dir_targets,
    plan_dir_drain,
)
from opskit.core.reassign.plan_input import parse_plan
from opskit.errors import InvalidInputError, NotFoundError, RefusedError, UsageError

GB = 1000**3
TB = 1000 * GB


def _dirs(broker: int, n: int, total: int = TB, usable: int = TB // 2,
          shared: bool = False) -> list[LogDir]:
    """n directories of one broker, each its own volume (different figures) unless shared."""
    return [LogDir(broker, f"/d{i}", total + (0 if shared else i), usable) for i in range(n)]


def _reps(broker: int, layout: dict[str, list[int]]) -> list[Replica]:
    out = []
    for path, sizes in layout.items():
        for i, size in enumerate(sizes):
            out.append(Replica(TopicPartition(f"t{path[-1]}", i), broker, path, size))
    return out


def _meta(reps: list[Replica]) -> dict[TopicPartition, tuple[int, ...]]:
    return {r.tp: (r.broker,) for r in reps}


def test_targets_parse_and_refuse_malformed() -> None:
    assert parse_log_dir_targets("1:/a/b/,0:/c") == ((0, "/c"), (1, "/a/b"))
    for bad in ("1:relative", "x:/a", "/a", "1:/a,", "-1:/a"):
        with pytest.raises(UsageError, match="BROKER:DIR"):
            parse_log_dir_targets(bad)


def test_every_replica_leaves_byte_balanced_and_refusals() -> None:
    dirs = _dirs(0, 3)
    reps = _reps(0, {"/d0": [50, 40, 30, 20, 10], "/d1": [5], "/d2": []})
    plan = plan_dir_drain(dirs, reps, [(0, "/d0")], [0], _meta(reps))
    assert {m.tp for m in plan.moves} == {r.tp for r in reps if r.path == "/d0"}
    assert all(m.source == "/d0" and m.target in ("/d1", "/d2") for m in plan.moves)
    assert plan.after[(0, "/d0")] == 0
    assert sum(plan.after.values()) == sum(plan.before.values())
    assert abs(plan.after[(0, "/d1")] - plan.after[(0, "/d2")]) <= 50  # the largest replica
    assert (plan.after[(0, "/d1")], plan.after[(0, "/d2")]) in ((75, 80), (80, 75))
    # not registered, unknown dir, only dir, offline dir, a move in flight
    with pytest.raises(NotFoundError, match="broker 3 is not registered"):
        plan_dir_drain(dirs, reps, [(3, "/d0")], [0], _meta(reps))
    with pytest.raises(NotFoundError, match="no log directory /nope"):
        plan_dir_drain(dirs, reps, [(0, "/nope")], [0], _meta(reps))
    with pytest.raises(RefusedError, match="only log directory"):
        plan_dir_drain(_dirs(0, 1), [], [(0, "/d0")], [0], {})
    with pytest.raises(RefusedError, match="no other online, uncordoned"):
        plan_dir_drain(dirs, reps, [(0, "/d0"), (0, "/d1"), (0, "/d2")], [0], _meta(reps))
    offline = [LogDir(0, "/d0", error_code=57), *dirs[1:]]
    with pytest.raises(RefusedError, match="offline"):
        plan_dir_drain(offline, reps, [(0, "/d0")], [0], _meta(reps))
    moving = [*reps, Replica(TopicPartition("t0", 0), 0, "/d1", 3, future=True)]
    with pytest.raises(RefusedError, match="in flight"):
        plan_dir_drain(dirs, moving, [(0, "/d0")], [0], _meta(reps))


def test_cordoned_dirs_are_not_targets() -> None:
    dirs = [LogDir(0, "/d0", TB, TB), LogDir(0, "/d1", TB + 1, TB, cordoned=True),
            LogDir(0, "/d2", TB + 2, TB)]
    reps = _reps(0, {"/d0": [5, 5, 5]})
    plan = plan_dir_drain(dirs, reps, [(0, "/d0")], [0], _meta(reps))
    assert {m.target for m in plan.moves} == {"/d2"}


def test_space_refusal_keeps_min_free_and_counts_a_shared_volume_once() -> None:
    total = 100 * GB
    floor = total * MIN_FREE_PCT // 100
    # two target dirs of 10 GB free each (own volumes): 21 GB cannot go, 9+9 can
    dirs = [LogDir(0, "/d0", total + 9, total), LogDir(0, "/d1", total, floor + 10 * GB),
            LogDir(0, "/d2", total + 1, floor + 10 * GB)]
    ok = _reps(0, {"/d0": [9 * GB, 9 * GB]})
    plan = plan_dir_drain(dirs, ok, [(0, "/d0")], [0], _meta(ok))
    assert {m.target for m in plan.moves} == {"/d1", "/d2"}
    big = _reps(0, {"/d0": [11 * GB]})
    with pytest.raises(RefusedError, match=r"lack the space: 11.00 GB to move, 20.00 GB free"):
        plan_dir_drain(dirs, big, [(0, "/d0")], [0], _meta(big))
    # the same two dirs on one volume (same figures): 10 GB free in all, not 20
    shared = [LogDir(0, "/d0", 2 * total, total), LogDir(0, "/d1", total, floor + 10 * GB),
              LogDir(0, "/d2", total, floor + 10 * GB)]
    with pytest.raises(RefusedError, match="lack the space"):
        plan_dir_drain(shared, ok, [(0, "/d0")], [0], _meta(ok))
    unknown = [LogDir(0, "/d0"), LogDir(0, "/d1")]
    some = _reps(0, {"/d0": [1]})
    with pytest.raises(RefusedError, match="does not report the space"):
        plan_dir_drain(unknown, some, [(0, "/d0")], [0], _meta(some))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 10**9), min_size=0, max_size=40), st.integers(2, 5),
       st.integers(0, 2**31))
def test_balance_bound_property(sizes: list[int], ndirs: int, seed: int) -> None:
    """Drained dir empty, bytes kept, and the remaining dirs within the largest replica
    moved of each other when they started empty."""
    rng = random.Random(seed)
    dirs = _dirs(0, ndirs, total=10**15, usable=10**14)
    reps = _reps(0, {"/d0": sizes})
    rng.shuffle(reps)
    plan = plan_dir_drain(dirs, reps, [(0, "/d0")], [0], _meta(reps))
    assert plan.after[(0, "/d0")] == 0 and len(plan.moves) == len(sizes)
    rest = [plan.after[(0, f"/d{i}")] for i in range(1, ndirs)]
    assert sum(rest) == sum(sizes)
    assert max(rest) - min(rest) <= max(sizes, default=0)


def test_plan_file_is_kafka_json_and_round_trips() -> None:
    dirs = _dirs(0, 2) + _dirs(1, 2)
    reps = [Replica(TopicPartition("t", 0), 0, "/d0", 7),
            Replica(TopicPartition("t", 0), 1, "/d0", 7)]
    plan = plan_dir_drain(dirs, reps, [(0, "/d0"), (1, "/d0")], [0, 1],
                          {TopicPartition("t", 0): (1, 0)})
    doc = json.loads(plan.to_json())
    assert doc["version"] == 1
    assert doc["partitions"] == [{"topic": "t", "partition": 0, "replicas": [1, 0],
                                  "log_dirs": ["/d1", "/d1"]}]
    back = parse_disk_plan(plan.to_json())
    assert back is not None and back.moves == plan.moves and back.plan_id() == plan.plan_id()
    assert back.before == plan.before and back.after == plan.after
    # the inter-broker reader refuses it (another format), so no mix-up is possible
    with pytest.raises(InvalidInputError, match="opskit/log-dir-drain"):
        parse_plan(plan.to_json())
    assert parse_disk_plan('{"version": 1, "partitions": []}') is None
    bad = json.loads(plan.to_json())
    bad["opskit"]["moves"][0]["to"] = "relative"
    with pytest.raises(InvalidInputError, match="absolute"):
        parse_disk_plan(json.dumps(bad))


def test_merge_cordon_and_judge() -> None:
    assert merge_cordon(None, ["/a"]) == "/a"
    assert merge_cordon("/b", ["/a", "/b/"]) == "/b,/a"
    assert merge_cordon(" * ", ["/a"]) == "*"
    m = DirMove(TopicPartition("t", 0), 0, "/a", "/b", 1)
    k = (m.tp, 0)
    assert judge(m, {k: ("/b", None)}) == (DONE, None)
    assert judge(m, {k: ("/a", "/b")}) == (SUBMITTED, None)
    assert judge(m, {k: ("/a", None)}) == (PENDING, None)
    assert judge(m, {k: ("/c", None)})[0] == FAILED
    assert judge(m, {})[0] == FAILED


def test_exec_state_round_trips() -> None:
    m = DirMove(TopicPartition("t", 0), 0, "/a", "/b", 1)
    s = initial("p", "/plan.json", (m,), 100, ((0, "/a"),), "planned", None)
    s = s.with_status(0, SUBMITTED)
    assert DiskExec.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.cordon_wanted() == {0: "/a"}


def test_next_moves_keeps_max_in_flight_per_broker_largest_first() -> None:
    from opskit.core.reassign.log_dir_exec import next_moves

    moves = tuple(DirMove(TopicPartition("t", i), i % 2, "/a", "/b", size)
                  for i, size in enumerate((5, 50, 7, 70, 9)))
    s = initial("p", "/p.json", moves, None, ((0, "/a"), (1, "/a")), "unsupported", None)
    assert next_moves(s, list(s.status)) == [3, 4]  # the largest of each broker
    statuses = [PENDING, PENDING, PENDING, SUBMITTED, DONE]
    assert next_moves(s, statuses) == [2]  # broker 1 busy; broker 0: 7 > 5
    two = initial("p", "/p.json", moves, None, (), "unsupported", None, max_moves=2)
    assert sorted(next_moves(two, list(two.status))) == [1, 2, 3, 4]


def test_journal_cancel_counts_since_the_last_start_and_state_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from opskit.adapters.reassign.log_dir_runner import DiskJournal

    j = DiskJournal("c1", root=tmp_path)
    assert not j.cancel_requested("p")
    j.record("p", "start")
    j.record("p", "cancel")
    assert j.cancel_requested("p")
    j.record("p", "start")  # a new run of the same plan after the cancelled one
    assert not j.cancel_requested("p")
    m = DirMove(TopicPartition("t", 0), 0, "/a", "/b", 1)
    s = initial("p", "/p.json", (m,), None, ((0, "/a"),), "planned", None)
    j.save_disk(s)
    assert j.load_disk("p") == s and j.disk_executions() == [s]
    (j.dir("p") / "state.json").write_text("{")
    with pytest.raises(InvalidInputError, match="unreadable"):
        j.load_disk("p")
