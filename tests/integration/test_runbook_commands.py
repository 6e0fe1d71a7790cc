"""Every ``opskit ...`` command written in runbooks/*.md runs against a real sandbox cluster.

Commands are taken from fenced code blocks; placeholders (``<group>``, ``<topic>``, ...)
are replaced with real names from the fixture. A command passes when it exits with a
documented non-error outcome: 0, or a health verdict (1 WARNING / 2 CRITICAL) with no
``opskit: error:`` line. Usage errors, refusals, crashes and hangs fail.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import commit, create_topic, produce, run_cli
from pd_receiver import routing_key

ROOT = Path(__file__).resolve().parents[2]
RUNBOOKS = ROOT / "runbooks"
PLACEHOLDER = re.compile(r"<([a-z-]+)>")


#: runbooks whose commands change the cluster they run on, each run by a test of its own
#: on a cluster of its own (not here, on the shared one); that test's SCENARIO_COMMANDS
#: lists what it runs
ROUTED = {"scale-out-1-to-3.md": Path(__file__).with_name("test_runbook_scaleout.py")}


def fenced_commands(md: Path) -> Iterator[tuple[int, str]]:
    """(line number, command) of every ``opskit ...`` line in a fenced block of ``md``."""
    in_fence = False
    for n, raw in enumerate(md.read_text().splitlines(), 1):
        line = raw.strip()
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence and line.startswith("opskit "):
            yield n, line


def routed_commands(md_name: str) -> frozenset[str]:
    """What the own test of a routed runbook runs (read from that test module)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_routed_{md_name.replace('-', '_')}",
                                                  ROUTED[md_name])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return frozenset(module.SCENARIO_COMMANDS)


def runbook_commands() -> dict[str, list[str]]:
    """Distinct command line -> where it appears (``file:line``), routed runbooks excepted."""
    found: dict[str, list[str]] = {}
    for md in sorted(RUNBOOKS.glob("*.md")):
        if md.name in ROUTED:
            continue
        for n, line in fenced_commands(md):
            found.setdefault(line, []).append(f"{md.name}:{n}")
    return found


COMMANDS = runbook_commands()


def test_runbooks_contain_commands_and_every_alert_runbook_has_one() -> None:
    assert len(COMMANDS) >= 15
    pages_with_commands = {w.split(":")[0] for where in COMMANDS.values() for w in where}
    for md in RUNBOOKS.glob("*.md"):
        if md.name == "Watchdog.md" or md.name in ROUTED:
            continue
        assert md.name in pages_with_commands, f"{md.name} has no opskit command"


def test_every_runbook_command_is_run_by_exactly_one_test() -> None:
    """Here (the shared cluster) or by the routed runbook's own test, never both, never
    neither: no command of a runbook is silently left unrun."""
    for md in sorted(RUNBOOKS.glob("*.md")):
        own = routed_commands(md.name) if md.name in ROUTED else frozenset()
        for n, line in fenced_commands(md):
            where = f"{md.name}:{n}"
            here = where in COMMANDS.get(line, [])
            routed = line.partition("#")[0].strip() in own
            assert here != routed, f"{where} {line!r}: run here {here}, by its own test {routed}"


def test_mutations_in_runbooks_are_dry_runs_unless_marked_execute() -> None:
    for md in RUNBOOKS.glob("*.md"):
        lines = md.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith("opskit ") and "--execute" in line:
                context = "\n".join(lines[max(0, i - 4):i]).lower()
                assert "execute step" in context, f"{md.name}:{i + 1} executes without saying so"


@pytest.fixture(scope="module")
def values(kafka: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    import uuid

    suffix = uuid.uuid4().hex[:8]
    topic, group = f"runbook_{suffix}", f"runbook-group-{suffix}"
    create_topic(kafka.bootstrap, topic, 2)
    produce(kafka.bootstrap, topic, {0: 40, 1: 40})
    commit(kafka.bootstrap, group, {(topic, 0): 10, (topic, 1): 5})
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    if "dead_letter" not in admin.list_topics(timeout=10).topics:
        for f in admin.create_topics([NewTopic("dead_letter", 1, 1)]).values():
            try:
                f.result(30)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise
    keyf = tmp_path_factory.mktemp("runbooks") / "pagerduty-routing-key"
    keyf.write_text(routing_key())
    # a reassignment plan (kafka-reassign-partitions JSON) the one-broker cluster already meets
    plan = keyf.parent / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [0]} for p in (0, 1)]}))
    yield {"group": group, "topic": topic, "routing-key-file": str(keyf),
           "dedup-key": f"opskit-dlq/sandbox/{topic}", "source-topic": topic,
           "plan-file": str(plan),
           "bootstrap": kafka.bootstrap}


@pytest.mark.parametrize("command", sorted(COMMANDS), ids=lambda c: COMMANDS[c][0])
def test_runbook_command_runs(command: str, values: dict[str, str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", values["bootstrap"])
    monkeypatch.chdir(ROOT)

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        assert name in values, f"unknown placeholder <{name}> in {COMMANDS[command]}"
        return values[name]

    argv = shlex.split(PLACEHOLDER.sub(sub, command))
    assert argv[0] == "opskit"
    r = run_cli(*argv[1:])
    assert "opskit: error:" not in r.err, f"{command} ({COMMANDS[command]}): {r.err}"
    assert r.code in (0, 1, 2), f"{command} ({COMMANDS[command]}) exit {r.code}: {r.err}"
