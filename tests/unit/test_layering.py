"""House rules for ``opskit.core``: pure (stdlib, opskit.core and opskit.errors only; no
adapters, CLI, exporter or client library; no I/O, no clock) and made of small modules of
one concept each."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "opskit" / "core"
ALLOWED_PREFIXES = ("opskit.core", "opskit.errors", "__future__")
FORBIDDEN_CALLS = {"print", "input", "exit"}
#: lines a module under opskit/core may have (HOUSE_STYLE: "a few hundred lines at most")
MAX_CORE_MODULE_LINES = 600


def _core_files() -> list[Path]:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) >= 20, files  # the packages (offset_reset/, status/, timing/) are walked
    return files


def _imports(path: Path, repo: Path = CORE.parents[1]) -> list[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.relative_to(repo).with_suffix("").parts[: -node.level]
                out.append(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                out.append(node.module)
    return out


def _name(f: Path) -> str:
    return str(f.relative_to(CORE))


def test_core_imports_only_stdlib_and_core() -> None:
    stdlib = sys.stdlib_module_names
    bad = []
    for f in _core_files():
        for mod in _imports(f):
            top = mod.split(".")[0]
            if mod.startswith(ALLOWED_PREFIXES) or top in stdlib:
                continue
            bad.append(f"{_name(f)}: {mod}")
    assert bad == []


def test_the_import_check_refuses_adapters_cli_exporter_and_clients(tmp_path: Path) -> None:
    """The rule above catches an adapter, CLI, exporter, sandbox or client import."""
    mod = tmp_path / "opskit" / "core" / "sub" / "mod.py"
    mod.parent.mkdir(parents=True)
    mod.write_text(
        "import confluent_kafka\nfrom opskit.adapters.offsets_admin import OffsetsAdmin\n"
        "from opskit.cli import main\nimport opskit.exporter.assemble\nfrom ...sandbox import x\n"
        "from ..models import TopicPartition\nimport json\n"
    )
    stdlib = sys.stdlib_module_names
    refused = [m for m in _imports(mod, tmp_path)
               if not (m.startswith(ALLOWED_PREFIXES) or m.split(".")[0] in stdlib)]
    assert refused == ["confluent_kafka", "opskit.adapters.offsets_admin", "opskit.cli",
                       "opskit.exporter.assemble", "opskit.sandbox"]


def test_core_has_no_io_or_clock() -> None:
    bad = []
    for f in _core_files():
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in FORBIDDEN_CALLS):
                bad.append(f"{_name(f)}:{node.lineno} {node.func.id}()")
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
                bad.append(f"{_name(f)}:{node.lineno} os.{node.attr}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("time", "now", "utcnow", "monotonic")
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in ("time", "datetime")):
                bad.append(f"{_name(f)}:{node.lineno} clock read")
    assert bad == []


def test_core_modules_stay_small() -> None:
    """One concept per module: none grows past MAX_CORE_MODULE_LINES (split it by concept)."""
    big = {_name(f): n for f in _core_files()
           if (n := len(f.read_text().splitlines())) > MAX_CORE_MODULE_LINES}
    assert big == {}, f"modules over {MAX_CORE_MODULE_LINES} lines: {big}"
