"""``opskit dashboards generate``: Grafana JSON from the grafanalib sources."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from opskit.dashboards.common import DEFAULT_RUNBOOK_BASE
from opskit.dashboards.generate import generate as generate_all
from opskit.dashboards.generate import sources

app = typer.Typer(help="Grafana dashboards (grafanalib sources -> checked-in JSON).",
                  no_args_is_help=True)


@app.command("generate")
def generate(
    directory: Annotated[Path, typer.Option("--dir", help="directory of *.dashboard.py")] =
        Path("dashboards"),
    runbook_base_url: Annotated[str, typer.Option(
        "--runbook-base-url", envvar="OPSKIT_RUNBOOK_BASE_URL",
        help="where the runbooks/*.md pages are served")] = DEFAULT_RUNBOOK_BASE,
    check: Annotated[bool, typer.Option("--check", help="write nothing; exit 1 if a file is stale")]
        = False,
) -> int:
    """Write dashboards/*.json from dashboards/*.dashboard.py."""
    stale = generate_all(directory, runbook_base_url, check=check)
    verb = "stale" if check else "written"
    for p in stale:
        sys.stdout.write(f"{verb}: {p}\n")
    if not stale:
        sys.stdout.write(f"up to date: {len(sources(directory))} dashboards in {directory}\n")
    return 1 if (check and stale) else 0
