"""Load a topic registry YAML file (the packaged HIP-30 one by default)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from opskit.core.registry import Registry, parse_registry
from opskit.errors import InvalidInputError, NotFoundError

DEFAULT_REGISTRY = "hip30.yaml"


def default_registry_path() -> Path:
    return Path(str(resources.files("opskit.registry").joinpath(DEFAULT_REGISTRY)))


def load_registry(path: Path | None) -> Registry:
    p = path or default_registry_path()
    try:
        text = p.read_text()
    except FileNotFoundError as e:
        raise NotFoundError(f"registry file {p} does not exist") from e
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"cannot read registry file {p}: {e}") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "syntax error"
        raise InvalidInputError(f"registry file {p}{where}: invalid YAML ({problem})") from e
    return parse_registry(data, source=str(p))
