"""Growing a running sandbox, the local half of the scale-out playbook: broker-only
nodes on a static quorum (Kafka 3.7, as HIP-30), controllers joining a dynamic
quorum as observers and then voters (Kafka 4.x), and the static voter set refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import run_cli

from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block
from opskit.sandbox.scale import voters


@pytest.fixture
def fresh(request: pytest.FixtureRequest, uniq: str) -> Iterator[Sandbox]:
    made: list[Sandbox] = []

    def make(version: str, quorum: str) -> Sandbox:
        sb = Sandbox(f"scale-{uniq}-{len(made)}")
        sb.up(brokers=1, version=version, port=free_port_block(1), quorum=quorum)
        made.append(sb)
        return sb

    yield make  # type: ignore[misc]
    for sb in made:
        sb.down()


def test_static_quorum_grows_by_broker_only_nodes(fresh) -> None:  # type: ignore[no-untyped-def]
    sb = fresh("3.7", "static")
    r = run_cli("sandbox", "add-node", "--name", sb.name)
    assert r.code == 0, r.err
    st = sb.require()
    assert [(n.node_id, n.roles) for n in st.nodes] == [(0, "broker,controller"), (1, "broker")]
    # idempotent: the same id again changes nothing
    assert run_cli("sandbox", "add-node", "--name", sb.name, "--node-id", "1").code == 0
    assert len(sb.require().nodes) == 2
    # a controller would change the static voter set: refused, nothing added
    r = run_cli("sandbox", "add-node", "--name", sb.name, "--role", "controller")
    assert r.code == 5 and "static" in r.err and len(r.err.strip().splitlines()) == 1
    assert len(sb.require().nodes) == 2
    assert voters(sb) == [0]
    from opskit.adapters.kafka.admin.client import KafkaAdmin

    assert sorted(b.node_id for b in KafkaAdmin(sb.connection()).metadata().brokers) == [0, 1]


@pytest.mark.kafka4
def test_dynamic_quorum_adds_voters_one_at_a_time(fresh) -> None:  # type: ignore[no-untyped-def]
    sb = fresh("4.x", "dynamic")
    assert voters(sb) == [0]
    for expected in ([0, 1], [0, 1, 2]):
        r = run_cli("sandbox", "add-node", "--name", sb.name, "--role", "controller")
        assert r.code == 0, r.err
        assert "now a voter" in r.out
        assert voters(sb) == expected
    # rerun for an existing voter: nothing to do
    r = run_cli("sandbox", "add-node", "--name", sb.name, "--role", "controller", "--node-id", "2")
    assert r.code == 0 and "now a voter" not in r.out
    assert voters(sb) == [0, 1, 2]


def test_dynamic_quorum_needs_kafka_3_9() -> None:
    r = run_cli("sandbox", "up", "--name", "never-made", "--kafka-version", "3.7",
                "--quorum", "dynamic", "--port", str(free_port_block(1)))
    assert r.code == 2 and "3.9" in r.err
