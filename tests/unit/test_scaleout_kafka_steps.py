"""The Kafka steps of a scale-out when ``reassign plan`` finds nothing to move.

``opskit reassign plan`` exits 0 and writes no plan file when the cluster already meets
the goal (a cluster without topics, leaders already balanced). The RF-raise step must
then succeed with "nothing to move" instead of executing a plan file that does not
exist (which failed the run with exit 4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Self

import pytest

from opskit.adapters.scaleout.kafka_steps import KafkaSteps
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.plan import ClusterFacts, ScaleOutPlan, ScaleOutRequest, plan_scale_out


def _plan() -> ScaleOutPlan:
    facts = ClusterFacts(kafka_version="3.7.2", kraft_version=0, voters=(0,), brokers=(0,))
    return plan_scale_out(facts, ScaleOutRequest(target_brokers=3))


def _steps(tmp_path: Path, calls: list[list[str]], write: bool) -> KafkaSteps:
    def cli(args: list[str]) -> int:
        calls.append(args)
        if args[:2] == ["reassign", "plan"] and write:
            out = Path(args[args.index("--write-plan") + 1])
            out.write_text(json.dumps({"version": 1, "partitions": []}))
        return 0

    return KafkaSteps(ConnectionConfig("127.0.0.1:1"), "ctx", tmp_path, "1MiB", cli=cli)


def test_raise_rf_with_nothing_to_move_executes_nothing(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    detail = _steps(tmp_path, calls, write=False).raise_rf(_plan())
    assert "nothing to move" in detail
    assert [c[:2] for c in calls] == [["reassign", "plan"]]
    assert not (tmp_path / "raise-rf.json").exists()


def test_raise_rf_executes_the_plan_it_wrote_and_a_resume_reuses_it(tmp_path: Path) -> None:
    calls: list[list[str]] = []
    steps = _steps(tmp_path, calls, write=True)
    # the min ISR hold recorded as this run found it (no topic above its RF): no Kafka
    (tmp_path / "min-isr-held.json").write_text('{"topics": {}, "restored": false}')
    steps.raise_rf(_plan())
    assert json.loads((tmp_path / "min-isr-held.json").read_text())["restored"] is True
    steps.raise_rf(_plan())  # a resumed run: the same plan file
    assert [c[:2] for c in calls] == [["reassign", "plan"], ["reassign", "execute"],
                                      ["reassign", "execute"]]


def test_the_copy_s_progress_lines_reach_the_operator(tmp_path: Path) -> None:
    """``reassign execute`` runs in-process; its stderr progress (what it waits for,
    bytes left) is passed on line by line instead of being swallowed until the end."""
    said: list[str] = []

    def cli(args: list[str]) -> int:
        import sys

        sys.stderr.write("opskit: reassign: 3/53 moves done, 1 in flight, 12.0 MB left")
        sys.stderr.write("; waiting for broker(s) 2 to come back\n")
        sys.stderr.write("opskit: throttles removed\n")
        return 0

    def say(line: str) -> None:      # as the CLI's: it prints to (the real) stderr
        import sys

        sys.stderr.write(line + "\n")
        said.append(line)

    steps = KafkaSteps(ConnectionConfig("127.0.0.1:1"), "ctx", tmp_path, "1MiB", cli=cli,
                       say=say)
    steps.opskit("reassign", "execute", "x.json", progress=True)
    assert said == [("  reassign: 3/53 moves done, 1 in flight, 12.0 MB left; waiting for "
                     "broker(s) 2 to come back"), "  throttles removed"]
    said.clear()
    steps.opskit("reassign", "plan")                 # without progress: kept for the log
    assert said == []


def _no_cli(argv: list[str]) -> int:
    raise AssertionError(f"no opskit command expected here: {argv}")


def test_a_long_wait_says_what_it_waits_for(tmp_path: Path) -> None:
    said: list[str] = []
    seen = iter(["broker(s) [2] not registered"] * 3 + [None])
    steps = KafkaSteps(ConnectionConfig("127.0.0.1:1"), "ctx", tmp_path, "1MiB",
                       say=said.append, progress_every_s=0.0, cli=_no_cli)
    steps.wait("waiting for the new brokers", lambda: next(seen))
    assert said and all("waiting for the new brokers: still broker(s) [2] not registered ("
                        in s for s in said)


class _Consumer:
    """A consumer whose commit fails with the given errors first, then succeeds."""

    def __init__(self, errors: list[int]) -> None:
        self.errors = list(errors)
        self.tries = 0

    def commit(self, offsets: object, asynchronous: bool) -> None:
        from confluent_kafka import KafkaError, KafkaException

        self.tries += 1
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))


def test_probe_commit_waits_for_a_moving_coordinator(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """After the rolling restart the group coordinator moves: NOT_COORDINATOR (seen in a
    CI run: the whole scale-out halted at verify_defaults) and a loading coordinator are
    retried; an error that is not about the coordinator fails at once."""
    from confluent_kafka import KafkaError

    import opskit.adapters.scaleout.probe as sk

    monkeypatch.setattr(sk.time, "sleep", lambda _s: None)
    steps = KafkaSteps(ConnectionConfig("127.0.0.1:1"), "ctx", tmp_path, "1MiB", wait_s=60.0,
                       cli=_no_cli)
    moving = _Consumer([KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS])
    assert sk.first_commit(steps, moving, object()) == "ok" and moving.tries == 3
    # the probe topic was just created: the coordinator's broker may not know it yet
    young = _Consumer([KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION])
    assert sk.first_commit(steps, young, object()) == "ok" and young.tries == 3
    denied = _Consumer([KafkaError.GROUP_AUTHORIZATION_FAILED])
    assert sk.first_commit(steps, denied, object()).startswith("failed: ") and denied.tries == 1
    steps.wait_s = 0.0  # the wait is over: a coordinator still moving fails the step
    late = _Consumer([KafkaError.NOT_COORDINATOR] * 5)
    assert "NOT_COORDINATOR" in sk.first_commit(steps, late, object()) and late.tries == 1


def test_the_probe_topic_s_rf_comes_from_the_answer_that_listed_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after the probe topic is created, brokers answer metadata with and without it
    in turn (each learns it from the controller on its own). The RF is taken from the
    first answer that lists it; a later answer without it once failed the run with an
    internal KeyError (exit 70)."""
    from types import SimpleNamespace

    answers = iter([{}, {"probe": [SimpleNamespace(replicas=[0, 1, 2])]}, {}, {}])

    class Admin:
        def __enter__(self) -> Self:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def metadata(self) -> SimpleNamespace:
            return SimpleNamespace(topics=next(answers))

    steps = _steps(tmp_path, [], write=False)
    monkeypatch.setattr(steps, "admin", Admin)
    monkeypatch.setattr("opskit.adapters.scaleout.kafka_steps.time.sleep", lambda _s: None)
    from opskit.adapters.scaleout.probe import probe_rf

    assert probe_rf(steps, "probe") == 3
    assert next(answers) == {}  # the next answer (without the topic) was never needed


def test_after_a_restart_wait_check_the_defaults_then_lead_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The end of every platform's restart_node:N, in this order: a settled cluster, the
    node's defaults, its leaders back; defaults not applied fail the step in the
    platform's words and elect nothing."""
    from opskit.errors import InconsistentStateError

    done: list[str] = []
    still: dict[str, str | None] = {"default.replication.factor": "1"}
    steps = KafkaSteps(ConnectionConfig("127.0.0.1:1"), "ctx", tmp_path, "1MiB", cli=_no_cli)
    monkeypatch.setattr(steps, "wait", lambda what, check: done.append(f"wait: {what}")
                        or check())
    monkeypatch.setattr(steps, "settled", lambda brokers: done.append(f"settled {brokers}"))
    monkeypatch.setattr(steps, "runs_with_defaults",
                        lambda n, plan: done.append(f"defaults of {n}") or dict(still))
    monkeypatch.setattr(steps, "lead_again", lambda: done.append("elect") or "; 2 back")

    def words(values: dict[str, str | None]) -> str:
        return f"node 2 still runs {values}"

    with pytest.raises(InconsistentStateError, match="^node 2 still runs "
                       "{'default.replication.factor': '1'}$"):
        steps.after_restart(2, _plan(), 3, words)
    assert done == [("wait: after restarting node 2: waiting for every partition in ISR and a "
                     "settled controller"), "settled 3", "defaults of 2"]
    done.clear()
    still.clear()
    assert steps.after_restart(2, _plan(), 3, words) == "; 2 back"
    assert done[1:] == ["settled 3", "defaults of 2", "elect"]
