"""``sandbox up --racks``: which node goes in which rack, bad rack names, old state files.

The brokers really being in those racks (Metadata, DescribeCluster) is checked on Kafka
3.7 and 4.x in ``tests/integration/test_racks_sandbox.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli

from opskit.errors import UsageError
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.state import Node, SandboxState, parse_rack, parse_racks, rack_of_index


def test_racks_cycle_over_the_nodes() -> None:
    racks = parse_racks("a,b,c")
    assert [rack_of_index(racks, i) for i in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]
    two = parse_racks(" us-east-1a , us-east-1b")
    assert [rack_of_index(two, i) for i in range(3)] == ["us-east-1a", "us-east-1b", "us-east-1a"]
    per_node = parse_racks("a,a,b")  # one rack per node: a list as long as the nodes
    assert [rack_of_index(per_node, i) for i in range(3)] == ["a", "a", "b"]
    assert rack_of_index([], 0) is None


def test_next_rack_continues_the_cycle() -> None:
    st = SandboxState("r", "3.7.2", "cid", 1, 2, racks=["a", "b"])
    for i in range(3):
        st.nodes.append(Node(i, "broker", 10 + i, f"/x/{i}", rack=st.next_rack()))
    assert [n.rack for n in st.nodes] == ["a", "b", "a"]
    assert st.next_rack() == "b"
    assert SandboxState("r", "3.7.2", "cid", 1, 2).next_rack() is None


@pytest.mark.parametrize("text", ["", "a,,b", "a b", "a,b=c", "x" * 65, "ä"])
def test_bad_rack_names_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="--racks"):
        parse_racks(text)


def test_one_rack_for_one_node() -> None:
    assert parse_rack("eu-1") == "eu-1"
    with pytest.raises(UsageError, match="one rack"):
        parse_rack("a,b")


def test_state_round_trips_and_old_state_has_no_racks(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    sb = Sandbox("racks")
    st = SandboxState("racks", "3.7.2", "cid", 1, 2, racks=["a", "b"],
                      nodes=[Node(0, "broker,controller", 1, "/x/0", rack="a")])
    sb.save(st)
    back = sb.load()
    assert back is not None and back.racks == ["a", "b"] and back.nodes[0].rack == "a"
    # a state file written before racks existed
    old = st.to_dict()
    del old["racks"]
    del old["nodes"][0]["rack"]
    legacy = SandboxState.from_dict(old)
    assert legacy.racks == [] and legacy.nodes[0].rack is None


@pytest.mark.parametrize("args", [["up", "--racks", "a b"], ["up", "--racks", ""],
                                  ["add-node", "--rack", "a,b"]])
def test_cli_bad_racks_one_line_exit_2(args: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path))
    r = run_cli("sandbox", *args, "--name", "nothere")
    assert r.code == 2, r.out + r.err
    assert "rack" in r.err and r.err.strip().count("\n") == 0, r.err
    assert not (tmp_path / "sandbox" / "nothere").exists()
