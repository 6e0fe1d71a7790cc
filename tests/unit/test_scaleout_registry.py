"""The scale-out's registry rewrite keeps every comment, the key order and every line
it does not need to change (HIP-30's ACL rationale lives in comments)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from opskit.adapters.scaleout.registry import raise_registry, rewrite_registry_text
from opskit.core.registry import parse_registry
from opskit.errors import InvalidInputError, RefusedError

REGISTRY = Path(__file__).resolve().parents[2] / "opskit" / "registry" / "hip30.yaml"


def comments(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.lstrip().startswith("#") or " #" in ln]


def test_packaged_registry_keeps_every_comment_line_and_order(tmp_path: Path) -> None:
    path = tmp_path / "hip30.yaml"
    src = REGISTRY.read_text()
    path.write_text(src)
    assert raise_registry(path, 3, 2) is True
    out = path.read_text()
    # every comment line of the original is there, in the same order (the defaults'
    # trailing comment only has its value changed)
    kept = [ln.replace("replication_factor: 1 ", "replication_factor: 3 ") for ln in comments(src)]
    assert comments(out) == kept
    assert "HIP-30's ACL table" in out
    # every original line is still there, in order, except the one changed value
    old_lines = src.splitlines()
    new_lines = out.splitlines()
    it = iter(new_lines)
    for ln in old_lines:
        want = ln.replace("replication_factor: 1 ", "replication_factor: 3 ")
        assert any(n == want for n in it), f"line lost or moved: {ln!r}"
    reg = parse_registry(yaml.safe_load(out), source="t")
    assert all(t.replication_factor == 3 for t in reg.topics)
    assert all(t.configs.get("min.insync.replicas") == "2" for t in reg.topics)
    data = yaml.safe_load(out)
    assert list(data) == list(yaml.safe_load(src))            # top-level key order kept
    assert [t["name"] for t in data["topics"]] == [t["name"] for t in yaml.safe_load(src)["topics"]]
    # a second rewrite changes nothing
    assert raise_registry(path, 3, 2) is False
    assert path.read_text() == out


def test_existing_values_flow_mappings_and_missing_defaults() -> None:
    src = ("# head\n"
           "topics:   # the list\n"
           "  - name: a_topic\n"
           "    partitions: 2\n"
           "    retention: 7d\n"
           "    replication_factor: 1   # keep me\n"
           "    configs: {cleanup.policy: delete}  # flow\n"
           "  - name: b_topic\n"
           "    partitions: 1\n"
           "    retention: 1d\n"
           "    configs:\n"
           "      min.insync.replicas: '1'  # was one\n"
           "      retention.bytes: '10'\n"
           "# tail\n")
    out = rewrite_registry_text(src, 3, 2)
    data = yaml.safe_load(out)
    assert data["defaults"] == {"replication_factor": 3}
    a, b = data["topics"]
    assert a["replication_factor"] == 3
    assert a["configs"] == {"cleanup.policy": "delete", "min.insync.replicas": "2"}
    assert b["configs"] == {"min.insync.replicas": "2", "retention.bytes": "10"}
    for c in ("# head", "# the list", "# keep me", "# flow", "# was one", "# tail"):
        assert c in out, c


def test_null_configs_get_the_value() -> None:
    src = "topics:\n  - name: a_topic\n    partitions: 1\n    retention: 1d\n    configs:\n"
    out = rewrite_registry_text(src, 3, 2)
    assert yaml.safe_load(out)["topics"][0]["configs"] == {"min.insync.replicas": "2"}


def test_a_layout_it_cannot_edit_writes_nothing(tmp_path: Path) -> None:
    """An alias shared by the defaults and a topic: editing it twice would garble the
    file; the rewrite is parsed again and refused, the file left as it was."""
    path = tmp_path / "r.yaml"
    src = ("defaults: {replication_factor: &rf 1}  # shared\ntopics:\n  - name: a_topic\n"
           "    partitions: 1\n    retention: 1d\n    replication_factor: *rf\n")
    path.write_text(src)
    with pytest.raises(RefusedError, match="could not be edited in place"):
        raise_registry(path, 3, 2)
    assert path.read_text() == src


def test_not_a_registry_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        rewrite_registry_text("- 1\n- 2\n", 3, 2)
