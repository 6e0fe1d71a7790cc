"""Shared CLI plumbing: global state, option types, connection, rendering."""

from __future__ import annotations

import errno
import json
import logging
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from opskit.errors import UsageError
from opskit.redact import RedactingFilter

if TYPE_CHECKING:
    from rich.console import Console

    from opskit.adapters.files.config_file import OpskitConfig
    from opskit.adapters.kafka.admin.client import KafkaAdmin


class Output(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


class GlobalState:
    debug = False
    log_format = "text"


STATE = GlobalState()

OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml")]
BootstrapOpt = Annotated[
    str | None,
    typer.Option("--bootstrap-server", "-b", help="host:port[,host:port]; overrides contexts",
                 show_default=False),
]
ContextOpt = Annotated[
    str | None, typer.Option("--context", help="named context from the opskit config file",
                             show_default=False)
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0.5, max=600, help="seconds to wait for Kafka")
]


def execute_option(what: str = "make the changes") -> Any:
    """``--execute``, the flag that turns a command's dry run into the change."""
    return typer.Option("--execute", help=f"{what} (default: dry run)")


ExecuteOpt = Annotated[bool, execute_option()]
ApplyPlanOpt = Annotated[bool, execute_option("apply the plan")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
#: where offset backups go (ACL backups have their own option in ``opskit acls``)
def _backup_dir(value: Path | None) -> Path | None:
    """A ``--backup-dir`` that exists must be a directory, and so must its parents:
    refused before anything is read or printed (the backup is written before a change)."""
    if value is not None:
        for d in (value, *value.parents):
            if d.exists() and not d.is_dir():
                raise typer.BadParameter(f"{d} is not a directory")
            if d.exists():
                break
    return value


BackupDirOpt = Annotated[
    Path | None,
    typer.Option("--backup-dir", help="where backups go (default: <state dir>/backups)",
                 show_default=False, callback=_backup_dir),
]


def registry_argument(what: str = "registry YAML") -> Any:
    """The optional registry file argument; without it the packaged HIP-30 registry."""
    return typer.Argument(help=f"{what} (default: the packaged HIP-30 registry)",
                          show_default=False)


RegistryArg = Annotated[Path | None, registry_argument()]

# the clients are imported when a command connects, not by every command (nor --help)
AdminT = TypeVar("AdminT", bound="KafkaAdmin")


def stdout() -> Console:
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handling exits 1 silently; the CLI says it in one line (exit 8)
            raise BrokenPipeError(errno.EPIPE, "broken pipe")

    # tables are not squeezed to 80 columns when piped to a file or a pager
    return StdoutConsole(soft_wrap=True, width=None if sys.stdout.isatty() else 220)


def stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)


def connect(bootstrap: str | None, context: str | None, timeout: float) -> KafkaAdmin:
    from opskit.adapters.kafka.admin.client import KafkaAdmin

    return connect_as(KafkaAdmin, bootstrap, context, timeout)


def connect_as(kind: type[AdminT], bootstrap: str | None, context: str | None, timeout: float,
               *, kafka_python: bool = False) -> AdminT:
    """An admin of ``kind`` on the connection the options and contexts name. ``kafka_python``:
    it also talks through kafka-python, whose connection chatter only ``--debug`` shows."""
    from opskit.adapters.files.config_file import resolve_connection

    if kafka_python:
        from opskit.adapters.kafka.kafka_python import quiet_kafka_python

        quiet_kafka_python(STATE.debug)
    return kind(resolve_connection(bootstrap, context), timeout=timeout)


def load_config() -> OpskitConfig:
    from opskit.adapters.files.config_file import OpskitConfig

    return OpskitConfig.load()


def emit(data: Any, output: Output, table: Callable[[Console], None]) -> None:
    """Data on stdout in the requested format; tables only for ``-o table``."""
    if output is Output.json:
        # indented for a person at a terminal; compact when piped (jq, scripts)
        write_json(data, indent=sys.stdout.isatty())
    elif output is Output.yaml:
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    else:
        table(stdout())


def write_json(data: Any, indent: bool = False) -> None:
    """One JSON document and a newline on stdout.

    orjson when installed (a dependency; about 5x faster than the json module on a
    report of 20,000 partitions), else the json module. Both write the same values;
    orjson keeps non-ASCII characters as UTF-8 instead of ``\\u`` escapes and
    writes NaN as null. Values JSON cannot represent are written as ``str(value)``.
    """
    try:
        import orjson
    except ImportError:  # pragma: no cover - orjson is a dependency
        orjson = None  # type: ignore[assignment]
    if orjson is not None:
        # dates and dataclasses go through str() as with the json module
        opts = (orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATETIME
                | orjson.OPT_PASSTHROUGH_DATACLASS)
        if indent:
            opts |= orjson.OPT_INDENT_2
        raw: bytes | None = None
        # string keys first (about 25% faster), keys of other types (ints) when needed
        for extra in (0, orjson.OPT_NON_STR_KEYS):
            try:
                raw = orjson.dumps(data, default=str, option=opts | extra)
                break
            except TypeError:  # e.g. an integer beyond 64 bits: the json module takes it
                continue
        if raw is not None:
            buf = getattr(sys.stdout, "buffer", None)
            if buf is not None:
                sys.stdout.flush()
                buf.write(raw)
                buf.flush()
            else:  # a text-only stream (tests capturing output)
                sys.stdout.write(raw.decode("utf-8"))
            return
    if indent:
        text = json.dumps(data, indent=2, default=str)
    else:
        text = json.dumps(data, separators=(",", ":"), default=str)
    sys.stdout.write(text + "\n")


def fmt_int(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


def fmt_bytes(n: float) -> str:
    """Bytes in decimal units (1,000 B = 1 KB), as the reassign commands show them."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def fmt_duration(s: float | None) -> str:
    """Seconds as 1h05m / 4m09s; ``unknown`` for None."""
    if s is None:
        return "unknown"
    s = round(s)
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def setup_logging(debug: bool, log_format: str) -> None:
    level = logging.DEBUG if debug else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        class JsonFormatter(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                return json.dumps({
                    "ts": self.formatTime(record), "level": record.levelname,
                    "logger": record.name, "msg": record.getMessage(),
                })
        handler.setFormatter(JsonFormatter())
    elif log_format == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        raise UsageError(f"--log-format must be text or json, not {log_format!r}")
    # every record, from any library, with every configured secret masked
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # librdkafka's own chatter (connection refused, ...) only with --debug
    logging.getLogger("opskit.librdkafka").setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)
    # the PagerDuty package logs its own retry lines; opskit's one error line says it
    logging.getLogger("pagerduty").setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)
    # urllib3's "Retrying (...)" lines (the kubernetes client): opskit's error line says it
    logging.getLogger("urllib3").setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)


# ----- --command-config: Kafka's client properties file, on every connecting command -----

COMMAND_CONFIG_HELP = ("Kafka client properties file, as Kafka's tools take it (bootstrap.servers, "
                       "security.protocol, sasl.*, ssl.truststore.*)")


def _read_command_config(ctx: Any, param: Any, value: str | None) -> None:
    """Read ``--command-config`` as soon as it is parsed: a malformed file is one line
    (exit 2) before the command starts; properties opskit does not use are named in one
    warning line."""
    from opskit.adapters.files import command_config
    command_config.use(None)
    if value is None:
        return
    if ctx.resilient_parsing:  # shell completion: names from this file's cluster, quietly
        from opskit.errors import OpskitError

        try:
            command_config.use(command_config.load_command_config(value))
        except OpskitError:
            pass
        return
    loaded = command_config.load_command_config(value)
    if loaded.settings.ignored:
        sys.stderr.write(f"opskit: warning: {loaded.source}: not used by opskit: "
                         f"{', '.join(loaded.settings.ignored)}\n")
    command_config.use(loaded)


_COMMAND_CONFIG_PARAM: list[Any] = []


def command_config_param() -> Any:
    """The ``--command-config FILE`` option (made once, shared by the commands)."""
    if not _COMMAND_CONFIG_PARAM:
        probe = typer.Typer()

        @probe.command()
        def _probe(command_config: Annotated[str | None, typer.Option(
                "--command-config", help=COMMAND_CONFIG_HELP, show_default=False)] = None) -> None:
            """probe"""

        param = typer.main.get_command(probe).params[0]
        param.expose_value = False
        param.callback = _read_command_config
        _COMMAND_CONFIG_PARAM.append(param)
    return _COMMAND_CONFIG_PARAM[0]


def add_command_config(cmd: Any) -> Any:
    """Give every connecting command of ``cmd`` (one with both ``--bootstrap-server`` and
    ``--context``) the ``--command-config`` option, right after ``--context``; one place
    instead of a parameter in every command."""
    subs = getattr(cmd, "commands", None)
    if isinstance(subs, dict):
        for sub in subs.values():
            add_command_config(sub)
        return cmd
    opts = {o: i for i, p in enumerate(cmd.params) for o in getattr(p, "opts", ())}
    if "--bootstrap-server" in opts and "--context" in opts and "--command-config" not in opts:
        cmd.params.insert(opts["--context"] + 1, command_config_param())
    return cmd
