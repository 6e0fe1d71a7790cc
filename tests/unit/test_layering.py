"""House rule: opskit.core is pure -- stdlib and opskit.core/opskit.errors only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "opskit" / "core"
ALLOWED_PREFIXES = ("opskit.core", "opskit.errors", "__future__")
FORBIDDEN_CALLS = {"print", "input", "exit"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def test_core_imports_only_stdlib_and_core():
    stdlib = sys.stdlib_module_names
    bad = []
    files = sorted(CORE.glob("*.py"))
    assert len(files) >= 5
    for f in files:
        for mod in _imports(f):
            top = mod.split(".")[0]
            if mod.startswith(ALLOWED_PREFIXES) or top in stdlib:
                continue
            bad.append(f"{f.name}: {mod}")
    assert bad == []


def test_core_has_no_io_or_clock():
    bad = []
    for f in sorted(CORE.glob("*.py")):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                bad.append(f"{f.name}:{node.lineno} {node.func.id}()")
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") :
                bad.append(f"{f.name}:{node.lineno} os.{node.attr}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("time", "now", "utcnow", "monotonic")
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in ("time", "datetime")):
                bad.append(f"{f.name}:{node.lineno} clock read")
    assert bad == []
