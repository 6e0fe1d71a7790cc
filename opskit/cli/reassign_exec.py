"""``opskit reassign execute|status|cancel|verify``: not built yet (see opskit.cli.reassign)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add ``execute``, ``status``, ``cancel`` and ``verify`` to the ``reassign`` command group."""
