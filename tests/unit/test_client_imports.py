"""The heavy client libraries are imported from one package each (issue #26): `kubernetes`
only under opskit/adapters/k8s/; `pyspark` only under opskit/adapters/spark/ (which asks its
version and where its spark-submit is; the Spark job itself lives in spark_jobs/, run by
spark-submit); py4j nowhere. Lazy imports inside functions count too."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPSKIT = ROOT / "opskit"
#: top-level library -> the one package (relative to the repo) that may import it; None: none
CONFINED: dict[str, str | None] = {
    "kubernetes": "opskit/adapters/k8s/",
    "pyspark": "opskit/adapters/spark/",
    "py4j": None,
}


def _libraries(path: Path) -> set[str]:
    """Top-level names of the absolute imports in ``path``, anywhere in the module."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def _breaches(files: list[Path], root: Path) -> list[str]:
    found = []
    for f in files:
        rel = str(f.relative_to(root))
        for lib in sorted(_libraries(f) & CONFINED.keys()):
            home = CONFINED[lib]
            if home is None or not rel.startswith(home):
                found.append(f"{rel} imports {lib}")
    return found


def test_heavy_clients_are_imported_from_one_package_each() -> None:
    files = sorted(OPSKIT.rglob("*.py"))
    assert len(files) > 150
    assert _breaches(files, ROOT) == []
    # the one home really is the one that imports it
    for lib, home in (("kubernetes", "k8s"), ("pyspark", "spark")):
        assert any(lib in _libraries(f) for f in (OPSKIT / "adapters" / home).glob("*.py"))


def test_the_check_sees_a_lazy_import_outside_the_home(tmp_path: Path) -> None:
    pkg = tmp_path / "opskit" / "cli"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("def f():\n    from kubernetes import client\n    import pyspark.sql\n")
    home = tmp_path / "opskit" / "adapters" / "k8s"
    home.mkdir(parents=True)
    (home / "api.py").write_text("import kubernetes\n")
    assert _breaches(sorted(tmp_path.rglob("*.py")), tmp_path) == [
        "opskit/cli/x.py imports kubernetes", "opskit/cli/x.py imports pyspark"]
