"""Bring a topic registry file in line with a scaled-out cluster: the default
replication factor, and ``min.insync.replicas`` on every topic, so that
``opskit topics diff`` stays clean after the playbook.

The file is edited in place, field by field: only the values that change are
rewritten (found by their position in the parsed YAML), a missing key is inserted
as one new line in its mapping, and every other byte stays as it was, comments
(HIP-30's rationale for its ACLs, for instance) and key order included. The result
is parsed again and must equal the intended data, else nothing is written.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from opskit.adapters.files.safe_read import parse_yaml, read_text
from opskit.adapters.files.safe_write import write_file
from opskit.core.registry import parse_registry
from opskit.errors import InvalidInputError, RefusedError

MIN_ISR = "min.insync.replicas"


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def _key_value(mapping: yaml.MappingNode, key: str) -> yaml.Node | None:
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v  # type: ignore[no-any-return]
    return None


def _replace(node: yaml.Node, text: str) -> _Edit:
    return _Edit(node.start_mark.index, node.end_mark.index, text)


def _insert(src: str, mapping: yaml.MappingNode, key: str, value: str,
            nested: tuple[str, str] | None = None) -> _Edit:
    """A new ``key: value`` entry at the end of ``mapping`` (``nested``: the value is a
    one-entry block mapping ``{nested[0]: nested[1]}`` instead)."""
    if mapping.flow_style:
        close = mapping.end_mark.index - 1          # the "}"
        sep = ", " if mapping.value else ""
        body = f"{{{nested[0]}: {nested[1]}}}" if nested else value
        return _Edit(close, close, f"{sep}{key}: {body}")
    if not mapping.value:
        raise RefusedError("an empty block mapping cannot be extended in place")
    indent = " " * mapping.value[0][0].start_mark.column
    last = mapping.value[-1][1]
    # the end of the line that holds the last character of the mapping's last value
    at = src.find("\n", max(last.start_mark.index, last.end_mark.index - 1))
    at = len(src) if at < 0 else at
    line = f"\n{indent}{key}: {value}" if nested is None else \
        f"\n{indent}{key}:\n{indent}  {nested[0]}: {nested[1]}"
    return _Edit(at, at, line)


def _edits(src: str, root: yaml.Node | None, rf: int, min_isr: int) -> list[_Edit]:
    if not isinstance(root, yaml.MappingNode):
        raise RefusedError("the registry is not a mapping")
    edits: list[_Edit] = []
    defaults = _key_value(root, "defaults")
    if defaults is None:
        edits.append(_insert(src, root, "defaults", "", ("replication_factor", str(rf))))
    elif isinstance(defaults, yaml.MappingNode):
        cur = _key_value(defaults, "replication_factor")
        if cur is None:
            edits.append(_insert(src, defaults, "replication_factor", str(rf)))
        elif cur.value != str(rf):
            edits.append(_replace(cur, str(rf)))
    else:
        raise RefusedError("'defaults' is not a mapping")
    topics = _key_value(root, "topics")
    for topic in topics.value if isinstance(topics, yaml.SequenceNode) else ():
        if not isinstance(topic, yaml.MappingNode):
            raise RefusedError("a topic entry is not a mapping")
        cur = _key_value(topic, "replication_factor")
        if cur is not None and cur.value != str(rf):
            edits.append(_replace(cur, str(rf)))
        configs = _key_value(topic, "configs")
        want = f'"{min_isr}"'
        if configs is None or (isinstance(configs, yaml.ScalarNode) and configs.value in ("", "~", "null")):
            if configs is not None:   # "configs:" with no value: after its colon
                key = next(k for k, v in topic.value if v is configs)
                colon = src.find(":", key.end_mark.index)
                edits.append(_Edit(colon + 1, colon + 1, f" {{{MIN_ISR}: {want}}}"))
            else:
                edits.append(_insert(src, topic, "configs", "", (MIN_ISR, want)))
        elif isinstance(configs, yaml.MappingNode):
            got = _key_value(configs, MIN_ISR)
            if got is None:
                edits.append(_insert(src, configs, MIN_ISR, want))
            elif got.value != str(min_isr):
                edits.append(_replace(got, want))
        else:
            raise RefusedError("a topic's 'configs' is not a mapping")
    return edits


def _intended(data: Any, rf: int, min_isr: int) -> Any:
    data = copy.deepcopy(data)
    defaults = data.get("defaults") or {}
    defaults["replication_factor"] = rf
    data["defaults"] = defaults
    for topic in data.get("topics") or []:
        if "replication_factor" in topic:
            topic["replication_factor"] = rf
        configs = topic.get("configs") or {}
        configs[MIN_ISR] = str(min_isr)
        topic["configs"] = configs
    return data


def rewrite_registry_text(src: str, rf: int, min_isr: int, where: str = "registry") -> str:
    """``src`` with RF ``rf`` and min ISR ``min_isr``; everything else byte for byte."""
    data = parse_yaml(src, f"registry file {where}")
    parse_registry(data, source=where)  # refuse a file opskit could not read back
    edits = _edits(src, yaml.compose(src, Loader=yaml.SafeLoader), rf, min_isr)
    out = src
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        out = out[:e.start] + e.text + out[e.end:]
    try:
        same = parse_yaml(out, "rewritten registry") == _intended(data, rf, min_isr)
    except InvalidInputError:
        same = False
    if not same:
        raise RefusedError(f"registry file {where}: its layout could not be edited in place "
                           "(nothing written); set replication_factor and "
                           f"{MIN_ISR} by hand")
    parse_registry(parse_yaml(out, where), source=where)
    return out


def raise_registry(path: Path, rf: int, min_isr: int) -> bool:
    """Rewrite ``path`` with RF ``rf`` and min ISR ``min_isr`` in place (comments and
    order kept); False when it says so already."""
    src = read_text(path, "registry file")
    out = rewrite_registry_text(src, rf, min_isr, str(path))
    if out == src:
        return False
    write_file(path, out, what="registry file", mode=0o644)
    return True
