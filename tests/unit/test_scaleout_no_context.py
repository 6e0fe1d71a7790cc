"""``playbook scale-out`` on a sandbox without its opskit context (``sandbox up
--no-context``) is refused up front, exit 4, before it reads the cluster or writes a
journal, as ``playbook multi-rack`` is: the RF raise runs ``reassign plan``/``execute``
through that context, and without it the run added its nodes and then halted inside
raise_rf (exit 3), seen on a real 3.7 sandbox. ``resume`` of a journaled run refuses
the same way. No Kafka is needed: the sandbox here is its state file only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli

from opskit.sandbox.cluster import Node, Sandbox, SandboxState


@pytest.fixture()
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sandbox:
    monkeypatch.setenv("OPSKIT_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("OPSKIT_CONFIG", str(tmp_path / "config.yaml"))   # no context in it
    sb = Sandbox("pbc")
    sb.root.mkdir(parents=True)
    # a port nothing listens on: a command that got as far as Kafka would fail there
    st = SandboxState("pbc", "3.7.2", "cid-1", 19798, 19799,
                      [Node(0, "broker,controller", 19798, str(sb.root / "node-0"))])
    sb.state_path.write_text(json.dumps(st.to_dict()))
    return sb


def _refused(args: list[str], sb: Sandbox) -> str:
    r = run_cli("playbook", *args, "--sandbox", sb.name)
    assert r.code == 4, (r.code, r.err)
    assert r.err.startswith("opskit: error:") and r.err.count("\n") == 1, r.err
    assert "opskit context 'sandbox-pbc'" in r.err and "--no-context" in r.err, r.err
    return r.err


@pytest.mark.parametrize("execute", [["--execute"], []])
def test_scale_out_refuses_before_anything(sandbox: Sandbox, execute: list[str]) -> None:
    err = _refused(["scale-out", "--throttle", "10MiB", *execute], sandbox)
    assert "the RF raise" in err
    assert not sandbox.playbook_dir.exists()          # no journal, no run lock


def test_multi_rack_refuses_the_same_way(sandbox: Sandbox) -> None:
    _refused(["multi-rack", "--racks", "0=a", "--execute"], sandbox)
    assert not sandbox.playbook_dir.exists()


def test_resume_of_a_journaled_scale_out_refuses(sandbox: Sandbox) -> None:
    from opskit.adapters.scaleout.journal import FileJournal
    from opskit.core.scaleout.machine import Phase, RunState
    from opskit.core.scaleout.plan import ClusterFacts, ScaleOutRequest, plan_scale_out

    plan = plan_scale_out(ClusterFacts("3.7.2", 0, (0,), (0,), topic_rf={"t": 1}),
                          ScaleOutRequest(throttle_bytes_per_s=10**7))
    journal = FileJournal(sandbox.playbook_dir / "journal.json")
    journal.save(RunState("so-1", plan, Phase.HALTED, done=("preflight",),
                          in_flight="add_node:1"), None)
    before = journal.path.read_bytes()
    _refused(["resume"], sandbox)
    _refused(["scale-out", "--execute"], sandbox)
    assert journal.path.read_bytes() == before
    assert not (sandbox.playbook_dir / "run.lock").exists()
