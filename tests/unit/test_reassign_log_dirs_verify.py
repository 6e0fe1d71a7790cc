"""``reassign verify`` of a plan naming log directories and ``reassign uncordon`` after
several disk drains (:mod:`opskit.core.reassign.log_dir_exec`,
:mod:`opskit.cli.reassign.log_dirs`). The real-broker side is
``tests/integration/test_reassign_log_dirs_exec.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest
import typer

from opskit.cli.common import Output
from opskit.core.models import TopicPartition
from opskit.core.reassign.log_dir_exec import (
    V_DIFFERS,
    V_DONE,
    V_MISSING,
    V_MOVING,
    V_UNKNOWN,
    DirTarget,
    dir_targets,
    initial,
    newest_cordon_priors,
    verify_dir,
    verify_exit,
)
from opskit.core.reassign.log_dirs import DirMove, LogDir, Replica, plan_dir_drain
from opskit.core.reassign.model import parse_assignments
from opskit.errors import IncompleteError, KafkaOperationError

T0 = TopicPartition("t", 0)


def test_dir_targets_leave_any_out_and_normalise() -> None:
    a = parse_assignments({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 1], "log_dirs": ["any", "/d/b/"]},
        {"topic": "t", "partition": 1, "replicas": [1]}]})
    assert dir_targets(a) == (DirTarget(T0, 1, "/d/b"),)


def test_each_verdict_and_unknown_is_never_done() -> None:
    t = DirTarget(T0, 1, "/b")
    k = (T0, 1)
    assert verify_dir(t, {k: ("/b/", None)}, {}, {}) == (V_DONE, None)
    assert verify_dir(t, {k: ("/a", "/b")}, {}, {})[0] == V_MOVING
    assert verify_dir(t, {k: ("/a", None)}, {}, {}) == (V_DIFFERS, "in /a")
    assert verify_dir(t, {k: ("/b", "/c")}, {}, {})[0] == V_DIFFERS  # moving away again
    assert verify_dir(t, {}, {}, {})[0] == V_MISSING
    # the broker did not answer: unknown, even where an old answer would say done
    assert verify_dir(t, {k: ("/b", None)}, {1: "broker 1 did not answer"}, {}) == \
        (V_UNKNOWN, "broker 1 did not answer")
    # not found, but a directory of the broker is offline: it may be there
    assert verify_dir(t, {}, {}, {1: ("/x",)})[0] == V_UNKNOWN
    assert verify_exit([V_DONE], False) == 0
    assert verify_exit([V_DONE], True) == 1
    assert verify_exit([V_DONE, V_MOVING], False) == 1
    assert verify_exit([V_DONE, V_UNKNOWN], False) == 3
    assert verify_exit([V_MOVING, V_UNKNOWN], False) == 3
    assert verify_exit([V_UNKNOWN, V_DIFFERS], False) == 2
    assert verify_exit([V_MISSING], False) == 2


# --------------------------------------------------------------------------- verify, CLI


class _FakeDisk:
    """DescribeLogDirs and the throttle read, as broker 1 (two dirs) and broker 2 answer."""

    answers: ClassVar[dict[int, list[Replica]]] = {}
    failed: ClassVar[dict[int, str]] = {}
    throttle: ClassVar[dict[int, str | None]] = {}

    def __init__(self, ra: Any) -> None:
        pass

    def describe_each(self, brokers: Any) -> tuple[list[LogDir], list[Replica],
                                                   dict[int, str]]:
        ids = list(brokers)
        dirs = [LogDir(b, p) for b in ids if b not in self.failed for p in ("/a", "/b")]
        reps = [r for b in ids if b not in self.failed for r in self.answers.get(b, [])]
        return dirs, reps, {b: w for b, w in self.failed.items() if b in ids}

    def dynamic_values(self, key: str, brokers: Any) -> tuple[tuple[int, str | None], ...]:
        if "RAISE" in self.throttle.values():
            raise KafkaOperationError("DescribeConfigs: CLUSTER_AUTHORIZATION_FAILED")
        return tuple((b, self.throttle.get(b)) for b in brokers)


class _FakeRA:
    class admin:  # the attribute chain ReassignAdmin has
        @staticmethod
        def metadata() -> Any:
            return type("M", (), {"cluster_id": "c-verify"})()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def require(self) -> None:
        pass

    def in_flight(self) -> dict[Any, Any]:
        return {}

    def assignment(self) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[Any, Any],
                                  set[int]]:
        return {T0: (1, 2), TopicPartition("t", 1): (2, 1)}, {}, {1, 2}


def _plan(tmp_path: Path) -> str:
    dirs = [LogDir(1, "/a", 10**12, 10**11), LogDir(1, "/b", 10**12, 10**11)]
    reps = [Replica(T0, 1, "/a", 10), Replica(TopicPartition("t", 1), 1, "/a", 5),
            Replica(T0, 2, "/a", 10)]
    plan = plan_dir_drain(dirs, reps, [(1, "/a")], [1, 2],
                          {T0: (1, 2), TopicPartition("t", 1): (2, 1)})
    path = tmp_path / "disk.json"
    path.write_text(plan.to_json())
    return str(path)


def _verify(monkeypatch: pytest.MonkeyPatch, path: str, capsys: Any) -> tuple[int, Any]:
    import opskit.cli.reassign.log_dirs as cli

    monkeypatch.setattr(cli, "DiskAdmin", _FakeDisk)
    plan = cli.dir_plan_of(path)
    assert plan is not None
    code = 0
    try:
        cli.verify_log_dirs(plan, Output.json, _FakeRA())  # type: ignore[arg-type]
    except typer.Exit as e:
        code = e.exit_code
    except IncompleteError as e:
        code = 3
        print(json.dumps({"error": str(e)}))
    lines = capsys.readouterr().out.strip().splitlines()
    return code, [json.loads(x) for x in lines]


def test_verify_of_a_disk_plan_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: Any) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path / "state"))
    path = _plan(tmp_path)
    t1 = TopicPartition("t", 1)
    # both replicas of broker 1 still in /a: differs (not moved), exit 2
    _FakeDisk.answers = {1: [Replica(T0, 1, "/a", 10), Replica(t1, 1, "/a", 5)],
                         2: [Replica(T0, 2, "/a", 10)]}
    _FakeDisk.failed, _FakeDisk.throttle = {}, {}
    code, out = _verify(monkeypatch, path, capsys)
    assert code == 2
    assert [(r["partition"], r["broker"], r["state"]) for r in out[0]["replicas"]] == \
        [("t:0", 1, V_DIFFERS), ("t:1", 1, V_DIFFERS)]
    assert out[0]["log_dirs"] == [{"broker": 1, "dir": "/a", "cordoned": None, "replicas": 2}]
    # one copying: 1 (once the other is done)
    _FakeDisk.answers[1] = [Replica(T0, 1, "/b", 10), Replica(t1, 1, "/a", 5),
                            Replica(t1, 1, "/b", 1, future=True)]
    assert _verify(monkeypatch, path, capsys)[0] == 1
    # all in /b, a throttle left: 1; none: 0
    _FakeDisk.answers[1] = [Replica(T0, 1, "/b", 10), Replica(t1, 1, "/b", 5)]
    _FakeDisk.throttle = {1: "1000"}
    code, out = _verify(monkeypatch, path, capsys)
    assert code == 1 and out[0]["throttles_left"]
    _FakeDisk.throttle = {}
    code, out = _verify(monkeypatch, path, capsys)
    assert code == 0 and {r["state"] for r in out[0]["replicas"]} == {V_DONE}
    # the throttle cannot be read (no DescribeConfigs): 3, the replicas still shown
    _FakeDisk.throttle = {1: "RAISE"}
    code, out = _verify(monkeypatch, path, capsys)
    assert code == 3 and {r["state"] for r in out[0]["replicas"]} == {V_DONE}
    assert out[0]["throttle_unreadable"] and "could not be read" in out[1]["error"]
    _FakeDisk.throttle = {}
    # broker 1 does not answer: 3, never 0
    _FakeDisk.failed = {1: "broker 1 did not answer DescribeLogDirs: timed out"}
    code, out = _verify(monkeypatch, path, capsys)
    assert code == 3 and {r["state"] for r in out[0]["replicas"]} == {V_UNKNOWN}
    assert "could not be verified" in out[1]["error"]


def test_a_broker_plan_is_not_a_disk_plan(tmp_path: Path) -> None:
    from opskit.cli.reassign.log_dirs import dir_plan_of

    p = tmp_path / "p.json"
    p.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
                 '"replicas": [1, 2], "log_dirs": ["any", "any"]}]}')
    assert dir_plan_of(str(p)) is None
    p.write_text("{")  # malformed: the inter-broker reader says why
    assert dir_plan_of(str(p)) is None
    assert dir_plan_of(str(tmp_path / "absent.json")) is None
    # Kafka's JSON naming a directory is one
    p.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, '
                 '"replicas": [1, 2], "log_dirs": ["/b", "any"]}]}')
    got = dir_plan_of(str(p))
    assert got is not None and got.targets == (DirTarget(T0, 1, "/b"),) and got.drained == ()


# --------------------------------------------------------------------------- uncordon


def _finished_drain(root: Path, plan_id: str, prior: str | None, read_ts: float) -> None:
    """A finished disk drain of broker 1 that found ``prior`` at ``read_ts`` (journal time)."""
    from opskit.adapters.reassign.log_dir_runner import DiskJournal

    j = DiskJournal("c1", root=root)
    m = DirMove(T0, 1, "/a", "/b", 1)
    st = initial(plan_id, "/p.json", (m,), None, ((1, "/a"),), "kept", None)
    from dataclasses import replace

    j.save_disk(replace(st, cordon_prior=((1, prior),), done=True))
    d = j.dir(plan_id)
    (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in (
        {"ts": read_ts - 1, "kind": "start"},
        {"ts": read_ts, "kind": "cordon-read", "values": [[1, prior]]},
        {"ts": read_ts + 5, "kind": "done"})))


def test_uncordon_takes_the_newest_finished_disk_drain(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from opskit.cli.reassign.log_dirs import disk_cordon_prior

    root = tmp_path / "reassign-logdirs"
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    # drain 1 (older) found nothing cordoned and cordoned /a; drain 2 (newer) found /a and
    # added /c. Uncordoning lifts the newest drain's cordon: /a, what drain 2 found. The
    # newer one's journal sorts last by name and its files are written first (older mtime).
    _finished_drain(root, "dirs-bbbb", "/a", read_ts=2000.0)
    _finished_drain(root, "dirs-aaaa", None, read_ts=1000.0)
    os.utime(root / "c1" / "dirs-bbbb" / "state.json", (1, 1))
    assert disk_cordon_prior("c1", [1]) == {1: "/a"}
    assert disk_cordon_prior("c1", [2]) == {}
    # the other order of names: still by the journal's time
    _finished_drain(root, "dirs-0000", "/a,/c", read_ts=3000.0)
    assert disk_cordon_prior("c1", [1]) == {1: "/a,/c"}


def test_newest_cordon_priors_by_time_not_order() -> None:
    found = [(20.0, ((1, "/x"), (2, None))), (10.0, ((1, None),)), (30.0, ((2, "/y"),))]
    assert newest_cordon_priors(found, [1, 2, 3]) == {1: "/x", 2: "/y"}
    assert newest_cordon_priors(found[::-1], [1]) == {1: "/x"}
