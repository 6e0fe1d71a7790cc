"""Bring a topic registry file in line with a scaled-out cluster: the default
replication factor, and ``min.insync.replicas`` on every topic, so that
``opskit topics diff`` stays clean after the playbook."""

from __future__ import annotations

from pathlib import Path

import yaml

from opskit.adapters.safe_read import parse_yaml, read_text
from opskit.adapters.safe_write import write_file
from opskit.core.registry import parse_registry

HEADER = ("# HIP-30 topic registry, as code. Rewritten by `opskit playbook scale-out` after\n"
          "# the cluster reached RF {rf} and min.insync.replicas {isr} (comments of the\n"
          "# previous file are not kept; see git history).\n")


def raise_registry(path: Path, rf: int, min_isr: int) -> bool:
    """Rewrite ``path`` with RF ``rf`` and min ISR ``min_isr``; False when already so."""
    data = parse_yaml(read_text(path, "registry file"), f"registry file {path}")
    parse_registry(data, source=str(path))  # refuse a file opskit could not read back
    changed = False
    defaults = data.setdefault("defaults", {}) or {}
    data["defaults"] = defaults
    if defaults.get("replication_factor") != rf:
        defaults["replication_factor"] = rf
        changed = True
    for topic in data.get("topics") or []:
        if "replication_factor" in topic and topic["replication_factor"] != rf:
            topic["replication_factor"] = rf
            changed = True
        configs = topic.setdefault("configs", {}) or {}
        topic["configs"] = configs
        if str(configs.get("min.insync.replicas")) != str(min_isr):
            configs["min.insync.replicas"] = str(min_isr)
            changed = True
    if changed:
        parse_registry(data, source=str(path))
        write_file(path, HEADER.format(rf=rf, isr=min_isr)
                   + yaml.safe_dump(data, sort_keys=False), what="registry file", mode=0o644)
    return changed
