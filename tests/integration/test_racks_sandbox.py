"""``sandbox up --racks`` / ``add-node [--rack]`` on real Kafka 3.7 and 4.x: every broker
reports the rack it was put in, in Metadata (what clients and Kafka's own tools see) and
in DescribeCluster (what ``opskit reassign plan`` reads), and ``sandbox status`` shows it.
"""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli

from opskit.cli import exits
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.ports import free_port_block


def metadata_racks(sb: Sandbox) -> dict[int, str | None]:
    """broker id -> rack as Kafka's own ``kafka-broker-api-versions.sh`` prints the brokers
    a Metadata response lists ("127.0.0.1:9092 (id: 0 rack: a) -> ...", 4.x adds
    "isFenced: false" after the rack)."""
    from opskit.sandbox.dist import ensure_kafka_dist

    st = sb.require()
    dist = ensure_kafka_dist(st.version)
    out = None
    for cls in ("kafka.admin.BrokerApiVersionsCommand",
                "org.apache.kafka.tools.BrokerApiVersionsCommand"):
        out = dist.run_tool(cls, "--bootstrap-server", st.bootstrap, timeout=180)
        if out.returncode == 0:
            break
    assert out is not None and out.returncode == 0, (out.stderr if out else "")[-500:]
    found = re.findall(r"\(id: (\d+) rack: ([^) ]+)[^)]*\) ->", out.stdout)
    assert found, out.stdout[-500:]
    return {int(b): (None if rack == "null" else rack) for b, rack in found}


def opskit_racks(bootstrap: str) -> dict[int, str | None]:
    """broker id -> rack as ``reassign plan`` reads them (DescribeCluster)."""
    from opskit.adapters.kafka.admin.client import KafkaAdmin
    from opskit.adapters.reassign.topology import read_topology
    from opskit.core.connection import ConnectionConfig

    with KafkaAdmin(ConnectionConfig(bootstrap), timeout=15) as admin:
        read = read_topology(admin)
    assert read.racks_unavailable is None
    return read.topology.racks()


@pytest.mark.parametrize(("version", "brokers", "racks", "added", "want"), [
    # 3 nodes in 2 racks cycle a, b, a; an added node continues the cycle (b)
    ("3.7", 3, "a,b", [[]], {0: "a", 1: "b", 2: "a", 3: "b"}),
    # one node; an added node in a rack of its own (--rack)
    ("4.x", 1, "zone-x,zone-y", [["--rack", "zone-z"]], {0: "zone-x", 1: "zone-z"}),
])
def test_brokers_report_their_racks(version: str, brokers: int, racks: str,
                                    added: list[list[str]], want: dict[int, str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSKIT_SANDBOX_HEAP", "512m")
    name = f"racks{version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
    r = run_cli("sandbox", "up", "--name", name, "--brokers", str(brokers), "--racks", racks,
                "--kafka-version", version, "--port", str(free_port_block(brokers)),
                "--no-context")
    sb = Sandbox(name)
    try:
        assert r.code == 0, r.out + r.err
        first = {b: want[b] for b in range(brokers)}
        assert "racks " + " ".join(f"{b}:{k}" for b, k in first.items()) in r.out, r.out
        assert metadata_racks(sb) == first

        # the same racks again: idempotent; other racks: refused, nothing changed
        again = run_cli("sandbox", "up", "--name", name, "--racks", racks, "--no-context")
        assert again.code == 0 and "already running" in again.out, again.out + again.err
        other = run_cli("sandbox", "up", "--name", name, "--racks", "q", "--no-context")
        assert other.code == exits.SANDBOX and f"exists with racks {racks}" in other.err, other.err
        assert other.err.strip().count("\n") == 0

        for extra in added:
            a = run_cli("sandbox", "add-node", "--name", name, *extra)
            assert a.code == 0, a.out + a.err
            assert f"in rack {want[max(want)]}" in a.out or len(added) > 1, a.out
        bootstrap = sb.require().bootstrap
        assert metadata_racks(sb) == want
        assert opskit_racks(bootstrap) == want

        s = run_cli("sandbox", "status", "--name", name, "-o", "json")
        assert s.code == 0, s.err
        assert {n["node_id"]: n["rack"] for n in s.json()["nodes"]} == want
        assert s.json()["racks"] == racks.split(",")
        table = run_cli("sandbox", "status", "--name", name)
        for node, rack in want.items():
            assert f"node {node} " in table.out and f"rack {rack} " in table.out, table.out
    finally:
        sb.down()
