"""The reassignment journal on a local directory: state round trip, audit log, lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from opskit.adapters.reassign.journal import Journal
from opskit.core.models import TopicPartition
from opskit.core.reassign.machine import ExecState, Move, Phase, initial_state
from opskit.errors import InvalidInputError, RefusedError


def _state(pid: str = "p1") -> ExecState:
    return initial_state(pid, (Move(TopicPartition("t", 0), (1,), (1, 2)),), 1000, 2)


def test_state_saved_and_loaded(tmp_path: Path) -> None:
    j = Journal("cluster/1", root=tmp_path)
    st = _state()
    j.save(st)
    assert j.load("p1") == st
    assert j.load("other") is None
    assert [s.plan_id for s in j.executions()] == ["p1"]
    assert (j.dir("p1") / "state.json").exists()
    assert not [p for p in j.dir("p1").iterdir() if p.name.startswith(".")]  # no temp left


def test_submissions_counted_from_the_event_log(tmp_path: Path) -> None:
    j = Journal("c", root=tmp_path)
    j.record("p1", "submit", partitions=[["t", 0], ["t", 1]])
    j.record("p1", "submit", partitions=[["t", 2]])
    with open(j.dir("p1") / "events.jsonl", "a") as f:
        f.write('{"kind": "submit", "partitions": [["t"')  # a line cut by kill -9
    assert j.submissions("p1") == {TopicPartition("t", 0): 1, TopicPartition("t", 1): 1,
                                   TopicPartition("t", 2): 1}


def test_second_holder_of_the_lock_is_refused(tmp_path: Path) -> None:
    j = Journal("c", root=tmp_path)
    with j.lock("p1"), pytest.raises(RefusedError, match="another opskit process"), \
            j.lock("p1"):
        pass
    with j.lock("p1"):  # released
        pass


def test_unreadable_state_is_one_line_error(tmp_path: Path) -> None:
    j = Journal("c", root=tmp_path)
    j.dir("p1").mkdir(parents=True)
    (j.dir("p1") / "state.json").write_text('{"plan_id": 1}')
    with pytest.raises(InvalidInputError, match="unreadable"):
        j.load("p1")


def test_unfinished_first(tmp_path: Path) -> None:
    from dataclasses import replace

    j = Journal("c", root=tmp_path)
    done = replace(_state("a"), phase=Phase.DONE)
    j.save(done)
    j.save(_state("b"))
    assert [s.plan_id for s in j.executions()] == ["b", "a"]
