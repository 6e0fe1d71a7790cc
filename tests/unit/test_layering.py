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
        "import confluent_kafka\nfrom opskit.adapters.offsets.admin import OffsetsAdmin\n"
        "from opskit.cli import main\nimport opskit.exporter.assemble\nfrom ...sandbox import x\n"
        "from ..models import TopicPartition\nimport json\n"
    )
    stdlib = sys.stdlib_module_names
    refused = [m for m in _imports(mod, tmp_path)
               if not (m.startswith(ALLOWED_PREFIXES) or m.split(".")[0] in stdlib)]
    assert refused == ["confluent_kafka", "opskit.adapters.offsets.admin", "opskit.cli",
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


# --- the whole package: no import circles, layers point down -------------------------

PACKAGE = CORE.parent
#: layer of each top-level part of opskit: a module may import its own layer or lower ones
LAYERS = {"errors": 0, "paths": 0, "redact": 0, "core": 1, "adapters": 2, "sandbox": 2,
          "registry": 2, "exporter": 3, "dashboards": 3, "cli": 4}
#: breaches allowed (none): a new one fails the test below
KNOWN_BREACHES: set[tuple[str, str]] = set()


def _module_name(f: Path, repo: Path) -> str:
    parts = f.relative_to(repo).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph(root: Path) -> dict[str, set[str]]:
    """module -> the opskit modules it imports, anywhere in it (top level, inside a
    function, under TYPE_CHECKING): each is an edge a circle can run through."""
    repo = root.parent
    files = {_module_name(f, repo): f for f in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        out: set[str] = set()
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            wanted: list[str] = []
            if isinstance(node, ast.Import):
                wanted = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = f.relative_to(repo).with_suffix("").parts[: -node.level]
                    mod = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    mod = node.module or ""
                # "from package import module" names the module itself
                wanted = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod
                          for a in node.names]
            for w in wanted:
                while w and w not in files:  # "a.b.attr" -> the module "a.b"
                    w = w.rpartition(".")[0]
                if w and w != name:
                    out.add(w)
        graph[name] = out
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected parts of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                part = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    part.append(w)
                    if w == v:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def _breaches(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    def layer(mod: str) -> int | None:
        parts = mod.split(".")
        return LAYERS.get(parts[1]) if len(parts) > 1 else None

    # (a ``__main__`` module is an entry point, like the CLI: it may call the CLI)
    return {(a, b) for a, targets in graph.items() for b in targets
            if not a.endswith(".__main__") and (la := layer(a)) is not None and (lb := layer(b)) is not None and lb > la}


def test_no_import_circles() -> None:
    graph = _graph(PACKAGE)
    assert len(graph) > 150 and "opskit.adapters.kafka.confluent" in graph["opskit.adapters.kafka.admin.client"]
    assert _circles(graph) == []


def test_layers_point_down() -> None:
    graph = _graph(PACKAGE)
    assert set(LAYERS) >= {_module_name(f, PACKAGE.parent).split(".")[1]
                           for f in PACKAGE.glob("*") if f.suffix == ".py" or f.is_dir()
                           if f.name not in ("__init__.py", "__pycache__")}
    assert _breaches(graph) == KNOWN_BREACHES


def test_the_circle_and_layer_checks_catch_what_they_should(tmp_path: Path) -> None:
    """A circle through a function-level import and a TYPE_CHECKING import, and an
    adapter importing the CLI, are found."""
    root = tmp_path / "opskit"
    for d in ("core", "adapters", "cli"):
        (root / d).mkdir(parents=True)
        (root / d / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "core" / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                        "    from opskit.core.b import B\n")
    (root / "core" / "b.py").write_text("def f():\n    from . import a\n")
    (root / "adapters" / "x.py").write_text("def g():\n    from opskit.cli.main import main\n")
    (root / "cli" / "main.py").write_text("from opskit.adapters import x\n")
    graph = _graph(root)
    assert graph["opskit.core.a"] == {"opskit.core.b"}
    assert sorted(map(tuple, _circles(graph))) == [("opskit.adapters.x", "opskit.cli.main"),
                                                   ("opskit.core.a", "opskit.core.b")]
    assert _breaches(graph) == {("opskit.adapters.x", "opskit.cli.main")}
