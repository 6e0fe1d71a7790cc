"""The ``opskit`` command."""

from __future__ import annotations

import sys
import traceback
from typing import Annotated

import typer

try:  # typer >= 0.2x vendors its own click
    from typer import _click as click  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - older typer uses the click package
    import click  # type: ignore[no-redef]

from opskit import __version__
from opskit.cli import exits
from opskit.cli.common import STATE, setup_logging
from opskit.errors import OpskitError

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


def _register() -> None:
    from opskit.cli import context, dr, lag, offsets, sandbox, topics
    from opskit.cli import health
    from opskit.cli import snapshot, throughput

    app.command("lag")(lag.lag)
    app.command("throughput")(throughput.throughput)
    app.command("snapshot")(snapshot.snapshot)
    app.command("health")(health.health)
    app.add_typer(context.app, name="context")
    app.add_typer(sandbox.app, name="sandbox")
    app.add_typer(topics.app, name="topics")
    app.add_typer(offsets.app, name="offsets")
    app.add_typer(dr.app, name="dr")


_register()


def _err(msg: str) -> None:
    sys.stderr.write(f"opskit: error: {msg}\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app and turn every outcome into one exit code."""
    args = list(argv if argv is not None else sys.argv[1:])
    debug = "--debug" in args
    if debug:
        # accepted anywhere on the line, not only before the subcommand
        args = ["--debug"] + [a for a in args if a != "--debug"]
    try:
        rv = app(args=args, prog_name="opskit", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
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
            traceback.print_exc()
        _err(str(e).splitlines()[0] if str(e) else type(e).__name__)
        code = exits.exit_code_for(e)
    except KeyboardInterrupt:
        _err("interrupted")
        code = exits.INTERRUPTED
    except BrokenPipeError:
        code = exits.OK
    except Exception as e:  # noqa: BLE001 - last resort, never a bare traceback
        if debug:
            traceback.print_exc()
        _err(f"internal error: {type(e).__name__}: {e} (rerun with --debug and report it)")
        code = exits.INTERNAL
    sys.stdout.flush()
    return code


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
