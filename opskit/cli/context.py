"""``opskit context``: named cluster connections, the way kubectl does it."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.files.config_file import OpskitConfig
from opskit.cli.common import Output, OutputOpt, emit, stdout
from opskit.errors import NotFoundError

app = typer.Typer(help="Named cluster connections in ~/.config/opskit/config.yaml.",
                  no_args_is_help=True)


@app.command("list")
def list_(output: OutputOpt = Output.table) -> int:
    """List contexts; the current one is marked."""
    cfg = OpskitConfig.load()
    rows = [{"name": n, "current": n == cfg.current_context, "bootstrap": e.get("bootstrap"),
             "security": _protocol(e)}
            for n, e in sorted(cfg.contexts.items())]

    def table(c: Console) -> None:
        t = Table(box=None, header_style="bold")
        for col in ("CURRENT", "NAME", "BOOTSTRAP", "SECURITY"):
            t.add_column(col)
        for r in rows:
            t.add_row("*" if r["current"] else "", str(r["name"]), str(r["bootstrap"]),
                      str(r["security"]))
        c.print(t if rows else f"no contexts in {cfg.path}")

    emit(rows, output, table)
    return 0


def _protocol(entry: dict[str, Any]) -> str:
    """A context's security protocol; of an imported context, the one its file names."""
    if entry.get("command_config") is None:
        return str((entry.get("security") or {}).get("protocol", "PLAINTEXT"))
    from opskit.adapters.files.command_config import load_command_config
    from opskit.errors import OpskitError

    try:
        return load_command_config(str(entry["command_config"])).settings.security_protocol
    except OpskitError:
        return "? (its properties file is unusable)"


@app.command("use")
def use(name: Annotated[str, typer.Argument(help="context name")]) -> int:
    """Make NAME the current context."""
    cfg = OpskitConfig.load()
    cfg.context(name)  # exists and valid
    cfg.current_context = name
    cfg.save()
    stdout().print(f"current context: {name}")
    return 0


@app.command("show")
def show(
    name: Annotated[str | None, typer.Argument(help="context name (default: current)")] = None,
    output: OutputOpt = Output.table,
) -> int:
    """Show a context's settings, secrets masked."""
    cfg = OpskitConfig.load()
    target = name or cfg.current_context
    if not target:
        raise NotFoundError("no current context; run 'opskit context use NAME'")
    data: dict[str, Any] = {"name": target, **cfg.context(target).masked()}
    data.pop("source", None)
    if cfg.contexts[target].get("command_config") is not None:
        data["command_config"] = cfg.contexts[target]["command_config"]

    def table(c: Console) -> None:
        for k, v in data.items():
            c.print(f"{k}: {v}")

    emit(data, output, table)
    return 0


@app.command("set")
def set_(
    name: Annotated[str, typer.Argument(help="context name")],
    bootstrap: Annotated[str, typer.Option("--bootstrap-server", "-b", help="host:port[,...]")],
    client_id: Annotated[str, typer.Option(help="client id")] = "opskit",
    security_protocol: Annotated[str, typer.Option(help="PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")] = "PLAINTEXT",
    sasl_mechanism: Annotated[str | None, typer.Option(help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")] = None,
    username: Annotated[str | None, typer.Option(help="SASL username")] = None,
    password_file: Annotated[str | None, typer.Option(help="file holding the SASL password")] = None,
    ca: Annotated[str | None, typer.Option(help="TLS CA file")] = None,
    cert: Annotated[str | None, typer.Option(help="TLS client certificate")] = None,
    key: Annotated[str | None, typer.Option(help="TLS client key")] = None,
    use_it: Annotated[bool, typer.Option("--use", help="also make it current")] = False,
) -> int:
    """Create or replace a context (passwords are referenced by file, never stored inline)."""
    sec: dict[str, Any] = {"protocol": security_protocol.upper()}
    for k, v in (("sasl_mechanism", sasl_mechanism), ("username", username),
                 ("password_file", password_file), ("ca", ca), ("cert", cert), ("key", key)):
        if v is not None:
            sec[k] = v
    cfg = OpskitConfig.load()
    cfg.set_context(name, bootstrap, client_id, sec if len(sec) > 1 or sec["protocol"] != "PLAINTEXT" else None)
    if use_it or not cfg.current_context:
        cfg.current_context = name
    cfg.save()
    stdout().print(f"context {name} saved in {cfg.path}")
    return 0


@app.command("import")
def import_(
    file: Annotated[str, typer.Argument(
        help="Kafka client properties file, the one Kafka's tools take with --command-config",
        show_default=False)],
    name: Annotated[str, typer.Option("--name", help="context name")],
    bootstrap: Annotated[str | None, typer.Option(
        "--bootstrap-server", "-b", help="host:port[,...] (default: the file's bootstrap.servers)",
        show_default=False)] = None,
    use_it: Annotated[bool, typer.Option("--use", help="also make it current")] = False,
) -> int:
    """Create or replace a context from a Kafka client properties file. The context names
    the file: its security settings and password stay there (read on each use, never copied)."""
    import os
    import sys

    from opskit.adapters.files.command_config import load_command_config
    from opskit.adapters.files.config_file import context_to_connection

    loaded = load_command_config(file)
    if loaded.settings.ignored:
        sys.stderr.write(f"opskit: warning: {loaded.source}: not used by opskit: "
                         f"{', '.join(loaded.settings.ignored)}\n")
    conn = loaded.connection(bootstrap)
    entry: dict[str, Any] = {"bootstrap": conn.bootstrap, "client_id": conn.client_id,
                             "command_config": os.path.abspath(file)}
    context_to_connection(name, entry)  # usable before anything is written
    cfg = OpskitConfig.load()
    cfg.contexts[name] = entry
    if use_it or not cfg.current_context:
        cfg.current_context = name
    cfg.save()
    stdout().print(f"context {name} saved in {cfg.path} ({conn.security_protocol}, security "
                   f"settings read from {entry['command_config']})")
    return 0


@app.command("delete")
def delete(name: Annotated[str, typer.Argument(help="context name")]) -> int:
    """Remove a context."""
    cfg = OpskitConfig.load()
    if name not in cfg.contexts:
        raise NotFoundError(f"unknown context {name!r}")
    del cfg.contexts[name]
    if cfg.current_context == name:
        cfg.current_context = None
    cfg.save()
    stdout().print(f"context {name} deleted")
    return 0


