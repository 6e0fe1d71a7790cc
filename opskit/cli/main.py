"""The ``opskit`` command."""

from __future__ import annotations

import atexit
import errno
import fcntl
import gc
import logging
import os
import sys
import traceback
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # the typer installed for type checking vendors click
    from typer import _click as click
else:
    try:  # typer >= 0.2x vendors its own click
        from typer import _click as click
    except ImportError:  # pragma: no cover - older typer uses the click package
        import click

from opskit import __version__
from opskit.cli import exits
from opskit.cli.common import STATE, setup_logging
from opskit.errors import OpskitError
from opskit.redact import redact

app = typer.Typer(
    name="opskit",
    help="Operations and observability for Kafka (HIP-30): lag, health, topics, sandbox clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"opskit {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks and client logs")] = False,
    log_format: Annotated[str, typer.Option("--log-format", help="text or json")] = "text",
) -> None:
    STATE.debug = debug
    STATE.log_format = log_format
    setup_logging(debug, log_format)


#: every command, in help order: name -> (module, attribute, is a command group).
#: Running one command imports only its own module, not every command's
#: dependencies (the exporter, paging, Spark ...): ``opskit lag`` starts quicker.
COMMANDS: dict[str, tuple[str, str, bool]] = {
    "lag": ("opskit.cli.lag", "lag", False),
    "throughput": ("opskit.cli.throughput", "throughput", False),
    "snapshot": ("opskit.cli.snapshot", "snapshot", False),
    "health": ("opskit.cli.health", "health", False),
    "replay": ("opskit.cli.replay", "replay", False),
    "exporter": ("opskit.cli.exporter", "exporter", False),
    "context": ("opskit.cli.context", "app", True),
    "sandbox": ("opskit.cli.sandbox", "app", True),
    "topics": ("opskit.cli.topics", "app", True),
    "acls": ("opskit.cli.acls", "app", True),
    "offsets": ("opskit.cli.offsets.commands", "app", True),
    "dr": ("opskit.cli.dr", "app", True),
    "alerts": ("opskit.cli.alerts", "app", True),
    "dashboards": ("opskit.cli.dashboards", "app", True),
    "page": ("opskit.cli.page", "app", True),
    "dlq": ("opskit.cli.dlq", "app", True),
    "reassign": ("opskit.cli.reassign.commands", "app", True),
    "playbook": ("opskit.cli.playbook.commands", "app", True),
    "completion": ("opskit.cli.completion", "completion", False),
}
#: the first paragraph of each command's help, as ``opskit --help`` lists it: the root
#: help, ``--version``, completion of command names and an unknown command show these
#: without importing any command (tests/unit/test_cli_startup.py checks them against
#: the commands' own help)
SUMMARIES: dict[str, str] = {
    "lag": "Consumer lag: committed offset, log start/end, lag in messages and in time per "
           "partition.",
    "throughput": "Messages/s and bytes/s written per topic, messages/s consumed per group and "
                  "topic.",
    "snapshot": "One document of the cluster's state: brokers, controller, partitions, groups, "
                "lag.",
    "health": "Cluster health: brokers vs expected, controller and KRaft quorum, URP, min-ISR, "
              "offline\npartitions, preferred-leader imbalance and reassignments in progress.",
    "replay": "Replay a consumer group's backlog with Spark (plan, run, verify, commit).",
    "exporter": "Serve Prometheus metrics on /metrics (kafka_exporter-compatible names plus "
                "opskit_*),\nwith /healthz and /ready. Runs until interrupted.",
    "context": "Named cluster connections in ~/.config/opskit/config.yaml.",
    "sandbox": "Local real Kafka clusters (KRaft, JVM processes on 127.0.0.1).",
    "topics": "Compare and reconcile topics with a registry (HIP-30 by default).",
    "acls": "HIP-30 ACLs as code: compare, apply, lint; what a monitor needs.",
    "offsets": "Reset consumer group offsets (with backup and undo), restore, export, import.",
    "dr": "Disaster recovery: snapshot topics, ACLs and group positions; restore them on "
          "another cluster.",
    "alerts": "Prometheus alerting rules and Alertmanager routing for Kafka.",
    "dashboards": "Grafana dashboards (grafanalib sources -> checked-in JSON).",
    "page": "Trigger, acknowledge or resolve PagerDuty incidents (Events API v2).",
    "dlq": "Dead-letter topic monitoring and paging (HIP-30 dead-letter-monitor).",
    "reassign": "Move partition replicas: plan (minimal movement), execute (throttled, "
                "resumable), status, cancel, verify.",
    "playbook": "Scheduled, resumable cluster playbooks (scale-out from 1 to 3 brokers, multi-rack).",
    "completion": "Print the shell completion script for bash, zsh or fish.",
}
_registered: list[str] = []
#: global options that take a value (to find the subcommand on the line)
_VALUE_OPTIONS = {"--log-format"}


def _add(name: str) -> None:
    import importlib

    module, attr, group = COMMANDS[name]
    target = getattr(importlib.import_module(module), attr)
    if group:
        app.add_typer(target, name=name)
    else:
        app.command(name)(target)
    _registered.append(name)


def register_all() -> None:
    """Register every command, in help order (for tests that inspect ``app``)."""
    if _registered != list(COMMANDS):
        app.registered_commands.clear()
        app.registered_groups.clear()
        _registered.clear()
        for name in COMMANDS:
            _add(name)
    for name in COMMANDS:
        _load_in_group(name, None)


def _subcommand_at(args: list[str]) -> int | None:
    """Where the subcommand is on the line (None: there is none)."""
    skip = False
    for i, a in enumerate(args):
        if skip:
            skip = False
        elif a in _VALUE_OPTIONS:
            skip = True
        elif not a.startswith("-"):
            return i
    return None


def _subcommand(args: list[str]) -> str | None:
    at = _subcommand_at(args)
    return None if at is None else args[at]


def _register_for(args: list[str]) -> None:
    """Import only the command the line runs (its ``--help`` too); the root help,
    ``--version`` and an unknown command import none (see :data:`SUMMARIES`). A group
    whose module has ``load_for(command)`` imports its own commands as the line needs."""
    at = _subcommand_at(args)
    name = None if at is None else args[at]
    if name in COMMANDS and name not in _registered:
        _add(name)
    if at is not None and name in _registered:
        rest = args[at + 1:]
        _load_in_group(name, rest[0] if rest and not rest[0].startswith("-") else None)


def _load_in_group(name: str, command: str | None) -> None:
    """Let group ``name`` register what ``command`` (None: all of its commands) needs."""
    module, _, group = COMMANDS[name]
    load = getattr(sys.modules.get(module), "load_for", None) if group else None
    if load is not None and load(command):
        _built.clear()  # the group gained commands: build the click command again


#: the checked click command per set of registered commands (tests run main() many times)
_built: dict[tuple[str, ...], click.Command] = {}


def _command() -> click.Command:
    """The app as a click command, every parameter checked (``cli/validate.py``); the
    commands not imported stand in with their name and summary, in help order."""
    from opskit.cli.common import add_command_config
    from opskit.cli.validate import harden, hardened_command

    key = tuple(_registered)
    if key not in _built:
        _built.clear()
        cmd = harden(add_command_config(hardened_command(app)))
        real = getattr(cmd, "commands", None)
        if isinstance(real, dict):
            cmd.commands = {  # type: ignore[attr-defined]
                name: real.get(name) or _Summary(name) for name in COMMANDS}
        _built[key] = cmd
    return _built[key]


class _Summary(typer.core.TyperCommand):
    """A command not imported on this run: its name and help summary, for the root help,
    completion of command names and typo suggestions. Never run (``_register_for``
    imports the command a line names)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, help=SUMMARIES[name])

    def invoke(self, ctx: click.Context) -> Any:  # pragma: no cover - guarded above
        raise RuntimeError(f"command {self.name} was not loaded")


def _err(msg: str) -> None:
    sys.stderr.write(f"opskit: error: {msg}\n")


#: what stdout's failure says (exit 8: the output could not be written)
_STDOUT_CLOSED = "standard output is closed: nothing was done (give opskit somewhere to write)"
_STDOUT_BROKEN = "standard output was closed while writing (broken pipe): the output is incomplete"


def _stdout_unusable() -> bool:
    """Whether fd 1 is closed or not writable (``opskit lag >&-``, ``1<&0``). Python sets
    ``sys.stdout`` to None when fd 1 was closed at start; a file opened later could then
    get fd 1 and receive the output."""
    if sys.stdout is None:
        return True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests)
        return False
    try:
        mode = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
    except OSError:
        return True
    return mode == os.O_RDONLY


def _now_devnull(was: bool) -> bool:
    """Whether fd 1 is /dev/null now and was not (``was``) when the command started:
    rich's broken-pipe handling points it there before it exits 1."""
    if was:
        return False
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (tests)
        return False


def _stdout_gone() -> None:
    """After a broken pipe: point fd 1 at /dev/null so the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app and turn every outcome into one exit code."""
    if sys.stderr is None:  # 2>&- : nowhere to say anything; never write into a reused fd 2
        return exits.WRITE_FAILED
    if _stdout_unusable():
        _err(_STDOUT_CLOSED)
        return exits.WRITE_FAILED
    if os.environ.get("_OPSKIT_COMPLETE"):  # a shell asks (opskit completion SHELL)
        return _complete()
    args = list(argv if argv is not None else sys.argv[1:])
    streams = (sys.stdout, sys.stderr)
    debug = "--debug" in args
    if debug:
        # accepted anywhere on the line, not only before the subcommand
        args = ["--debug"] + [a for a in args if a != "--debug"]
    _forget_command_config()
    null_at_start = _now_devnull(False)
    try:
        _register_for(args)
        rv = _command()(args=args, prog_name="opskit", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
        if code == exits.INTERRUPTED:  # Ctrl-C: typer returns a bare 130; say so
            _err("interrupted")
        sys.stdout.flush()  # a broken pipe shows here, not after the exit code is chosen
    except typer.Exit as e:
        code = e.exit_code
    except click.exceptions.NoArgsIsHelpError:
        code = exits.USAGE  # help was printed
    except typer.Abort:
        _err("aborted")
        code = exits.INTERRUPTED
    except click.exceptions.ClickException as e:
        ctx = getattr(e, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        _err(e.format_message().replace("\n", " ") + hint)
        code = exits.USAGE
    except OpskitError as e:
        if debug:
            sys.stderr.write(redact(traceback.format_exc()))
        _err(str(e).splitlines()[0] if str(e) else type(e).__name__)
        code = exits.exit_code_for(e)
    except KeyboardInterrupt:
        _err("interrupted")
        code = exits.INTERRUPTED
    except SystemExit as e:
        if sys.stdout is streams[0] and not (e.code == 1 and _now_devnull(null_at_start)):
            code = _internal(RuntimeError(f"exit {e.code} requested"), debug)  # a bug
        else:  # EPIPE on stdout: click wrapped both streams and exited 1, or rich's
            # console (typer's help) pointed fd 1 at /dev/null and exited 1
            sys.stdout, sys.stderr = streams
            _stdout_gone()
            _err(_STDOUT_BROKEN)
            code = exits.WRITE_FAILED
    except BrokenPipeError:
        _stdout_gone()
        _err(_STDOUT_BROKEN)
        code = exits.WRITE_FAILED
    except OSError as e:
        if e.errno != errno.EBADF or not _stdout_unusable():
            code = _internal(e, debug)
        else:
            _err(_STDOUT_CLOSED.replace("nothing was done", "the output is incomplete"))
            code = exits.WRITE_FAILED
    except Exception as e:  # noqa: BLE001 - last resort, never a bare traceback
        code = _internal(e, debug)
    _forget_command_config()
    try:
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        _stdout_gone()
        if code == exits.OK:
            _err(_STDOUT_BROKEN)
            code = exits.WRITE_FAILED
    return code


def _internal(e: Exception, debug: bool) -> int:
    if debug:
        sys.stderr.write(redact(traceback.format_exc()))
    _err(f"internal error: {type(e).__name__}: {e} (rerun with --debug and report it)")
    return exits.INTERNAL


def _complete() -> int:
    """Answer a completion request: only the command on the line is imported."""
    from opskit.cli import completion

    request = completion.request_words()
    _register_for(request[0] if request else [])
    return completion.complete(completion.add_name_completion(_command()))


def _forget_command_config() -> None:
    """A ``--command-config`` holds for one run (tests call main() many times)."""
    properties = sys.modules.get("opskit.adapters.files.command_config")
    if properties is not None:
        properties.use(None)


def run() -> None:
    """Console entry point. Every command has finished its work (contexts closed,
    files written) when ``main`` returns, so the interpreter's teardown (freeing
    every module and object one by one, ~0.1-0.2 s after a large report) is
    skipped: flush the standard streams and end the process."""
    # The objects created so far (modules, classes: ~100k) live for the whole process:
    # freeze them out of the cyclic collector, and collect young objects less often.
    # A report of 20,000 group partitions allocates a few hundred thousand short-lived
    # objects; with the defaults the collector rescans them many times (~10% of a run).
    # Long-running commands (exporter, --watch) still collect, only less often.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (BrokenPipeError, OSError):
            pass
    atexit._run_exitfuncs()  # what a normal exit would still run (safety nets)
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    run()
