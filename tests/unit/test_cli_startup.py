"""Start-up: ``--help``, ``--version`` and an unknown command import no command module;
running or asking help of one command imports only that one; the root help lists every
command with its own summary; every connecting command takes ``--command-config``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from opskit.cli.main import COMMANDS, SUMMARIES, app, register_all

ROOT = Path(__file__).resolve().parents[2]

#: modules only some commands need; none of them belongs in the root help's start-up
HEAVY = ("confluent_kafka", "kafka", "grafanalib", "pagerduty", "prometheus_client",
         "kubernetes", "yaml", "opskit.adapters.kafka.admin.client")


def _modules_after(args: list[str]) -> tuple[int, set[str]]:
    code = ("import json, sys\n"
            "from opskit.cli.main import main\n"
            "import io, contextlib\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
            f"    rc = main({args!r})\n"
            "print(json.dumps([rc, sorted(sys.modules)]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True, timeout=120).stdout
    rc, mods = json.loads(out.splitlines()[-1])
    return rc, set(mods)


def _command_modules(mods: set[str]) -> set[str]:
    return {m for m in mods if m in {module for module, _, _ in COMMANDS.values()}}


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["lgg"], []])
def test_root_help_version_and_typos_import_no_command(args: list[str]) -> None:
    rc, mods = _modules_after(args)
    assert rc in (0, 2)
    assert _command_modules(mods) == set()
    assert not [m for m in mods if m.split(".")[0] in HEAVY or m in HEAVY]


def test_one_command_imports_only_itself() -> None:
    rc, mods = _modules_after(["context", "--help"])
    assert rc == 0
    assert _command_modules(mods) == {"opskit.cli.context"}
    rc, mods = _modules_after(["lag", "--help"])
    assert _command_modules(mods) == {"opskit.cli.lag"}


def test_summaries_are_the_commands_own() -> None:
    """The root help shows SUMMARIES without importing the commands: they must be the
    first paragraph of each command's own help (update SUMMARIES when a help changes)."""
    register_all()
    root = typer.main.get_command(app)
    assert list(SUMMARIES) == list(COMMANDS)
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        assert (cmd.help or "").split("\n\n")[0] == SUMMARIES[name], name


def test_every_connecting_command_takes_command_config() -> None:
    from opskit.cli.main import _command

    register_all()
    seen = []

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if isinstance(subs, dict):
            for n, sub in subs.items():
                walk(sub, path + [n])
            return
        opts = {o for p in cmd.params for o in getattr(p, "opts", ())}  # type: ignore[attr-defined]
        if "--bootstrap-server" in opts and "--context" in opts:
            assert "--command-config" in opts, path
            seen.append(" ".join(path))

    walk(_command(), [])
    assert {"lag", "health", "throughput", "snapshot", "offsets reset", "topics apply",
            "reassign execute", "dlq watch", "exporter", "replay"} <= set(seen)


def test_reassign_plan_imports_only_the_plan_command() -> None:
    """``opskit reassign plan`` registers only plan (execute's state machine and the
    control commands' reads are not imported); any other reassign line, the group's help
    included, has every command, in help order."""
    group = "opskit.cli.reassign"
    _, mods = _modules_after(["reassign", "plan", "--help"])
    assert {f"{group}.plan", f"{group}.commands"} <= mods
    assert not {f"{group}.execute", f"{group}.control", "opskit.core.reassign.machine"} & mods
    _, mods = _modules_after(["reassign", "status", "--help"])
    assert {f"{group}.execute", f"{group}.control"} <= mods
    code = ("import io, contextlib\n"
            "from opskit.cli.main import main\n"
            "for args in (['reassign', 'plan', '--help'], ['reassign', '--help']):\n"
            "    out = io.StringIO()\n"
            "    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
            "        main(args)\n"
            "print(out.getvalue())\n")
    helped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True, timeout=120).stdout
    names = ["plan", "execute", "status", "cancel", "uncordon", "verify"]
    at = [helped.find(f" {n} ") for n in names]
    assert -1 not in at and at == sorted(at), helped


def test_reassign_plan_loads_the_planner_and_no_http_client_at_start_up() -> None:
    """The planner's own modules are loaded when a plan is made (in a thread while the
    cluster is read), not to parse the command line; a Kafka bootstrap does not load the
    HTTP client (StreamNest's), an HTTP one still is refused (exit 3)."""
    _, mods = _modules_after(["reassign", "plan", "--help"])
    assert not {"opskit.core.reassign.plan", "opskit.core.reassign.flow",
                "opskit.core.reassign.byteflow", "opskit.core.reassign.leaders"} & mods
    assert "http.client" not in mods
    rc, mods = _modules_after(["reassign", "plan", "--rebalance", "-b", "http://127.0.0.1:9"])
    assert rc == 3 and "opskit.adapters.http.streamnest" in mods
