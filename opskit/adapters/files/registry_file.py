"""Load a topic registry YAML file (the packaged HIP-30 one by default)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from opskit.adapters.files.safe_read import parse_yaml, read_text
from opskit.core.registry import Registry, parse_registry

DEFAULT_REGISTRY = "hip30.yaml"


def default_registry_path() -> Path:
    return Path(str(resources.files("opskit.registry").joinpath(DEFAULT_REGISTRY)))


def load_registry(path: Path | None) -> Registry:
    p = path or default_registry_path()
    data = parse_yaml(read_text(p, "registry file"), f"registry file {p}")
    return parse_registry(data, source=str(p))
