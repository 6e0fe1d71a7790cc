"""Build ``dashboards/*.dashboard.py`` into the checked-in ``dashboards/*.json``.

Each source defines ``build(runbook_base: str) -> grafanalib.core.Dashboard`` (and
``dashboard = build()`` so grafanalib's own ``generate-dashboard`` works too).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from grafanalib._gen import DashboardEncoder

from opskit.adapters.files.safe_read import read_text
from opskit.adapters.files.safe_write import write_file
from opskit.errors import InvalidInputError, NotFoundError

SUFFIX = ".dashboard.py"


def sources(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise NotFoundError(f"dashboards directory {directory} not found")
    found = sorted(directory.glob(f"*{SUFFIX}"))
    if not found:
        raise NotFoundError(f"no *{SUFFIX} files in {directory}")
    return found


def output_path(source: Path) -> Path:
    return source.with_name(source.name[: -len(SUFFIX)] + ".json")


def build(source: Path, runbook_base: str) -> dict[str, Any]:
    """The dashboard JSON model of one source file."""
    spec = importlib.util.spec_from_file_location(f"opskit_dashboard_{source.stem}", source)
    if spec is None or spec.loader is None:
        raise InvalidInputError(f"cannot load {source}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, "build", None)
        if not callable(fn):
            raise InvalidInputError(f"{source.name} defines no build(runbook_base) function")
        data: dict[str, Any] = json.loads(json.dumps(fn(runbook_base).to_json_data(),
                                                     cls=DashboardEncoder))
    except InvalidInputError:
        raise
    # a source file is code: its sys.exit() or any error is its problem, never opskit's exit
    except (Exception, SystemExit) as e:
        raise InvalidInputError(f"{source.name}: {type(e).__name__}: {e}") from e
    return data


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True, indent=2) + "\n"


def generate(directory: Path, runbook_base: str, check: bool = False) -> list[Path]:
    """Write (or with ``check``, only compare) every dashboard; returns the stale outputs."""
    stale: list[Path] = []
    for src in sources(directory):
        out = output_path(src)
        text = render(build(src, runbook_base))
        if out.is_file() and read_text(out, "dashboard") == text:
            continue
        stale.append(out)
        if not check:
            write_file(out, text, what="dashboard", mode=0o644)
    return stale


def panels(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel of a dashboard model, rows and their children included."""
    out: list[dict[str, Any]] = []
    for p in data.get("panels", []):
        out.append(p)
        out.extend(p.get("panels", []) or [])
    return out
