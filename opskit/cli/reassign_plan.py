"""``opskit reassign plan``: not built yet (see opskit.cli.reassign)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the ``reassign`` command group."""
