"""Where opskit keeps its files. Environment variables override the defaults."""

from __future__ import annotations

import os
from pathlib import Path


def config_file() -> Path:
    """``$OPSKIT_CONFIG`` or ``~/.config/opskit/config.yaml``."""
    env = os.environ.get("OPSKIT_CONFIG")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "opskit" / "config.yaml"


def cache_dir() -> Path:
    """``$OPSKIT_CACHE`` or ``~/.cache/opskit``: Kafka jars and other downloads."""
    env = os.environ.get("OPSKIT_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "opskit"


def state_dir() -> Path:
    """``$OPSKIT_STATE`` or ``~/.local/share/opskit``: sandboxes, backups, manifests."""
    env = os.environ.get("OPSKIT_STATE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "opskit"
