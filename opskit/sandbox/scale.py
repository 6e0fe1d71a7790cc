"""Grow a running sandbox: add a broker-only node, or (dynamic quorum) a controller.

The local half of the scale-out playbook. Every operation is idempotent: adding a
node that is already in the sandbox starts it if it is down and otherwise does
nothing; promoting a node that is already a voter does nothing.

- Static quorum (``controller.quorum.voters``; Kafka 3.7): only broker-only nodes
  can be added. A controller would change the static voter set, which Kafka cannot
  do on a live cluster: refused.
- Dynamic quorum (Kafka 3.9+/4.x, formatted ``--standalone``): a new controller is
  formatted ``--no-initial-controllers``, starts as an observer, and becomes a voter
  through ``kafka-metadata-quorum add-controller`` only once it caught up (the
  leader refuses earlier; opskit retries until the deadline).
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

from opskit.errors import RefusedError, SandboxError, UsageError
from opskit.sandbox.cluster import Sandbox
from opskit.sandbox.dist import ensure_kafka_dist
from opskit.sandbox.ports import free_port_block
from opskit.sandbox.processes import pid_runs
from opskit.sandbox.state import Node, SandboxState, parse_rack

log = logging.getLogger(__name__)

_QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


def add_node(sb: Sandbox, role: str = "broker", node_id: int | None = None,
             wait_timeout: float = 120.0, rack: str | None = None) -> Node:
    """Add (or restart) one node; returns it once every broker is registered. A new node
    goes in ``rack``, by default the next of the sandbox's racks (none without racks)."""
    if role not in ("broker", "controller"):
        raise UsageError(f"--role must be broker or controller, not {role!r}")
    st = sb.require()
    if role == "controller" and st.quorum != "dynamic":
        raise RefusedError(
            "this sandbox has a static controller quorum (controller.quorum.voters): adding a "
            "controller would change the static voter set, which Kafka cannot do on a live "
            "cluster; add broker-only nodes (--role broker), or use a dynamic quorum "
            "(sandbox up --quorum dynamic, Kafka 3.9+)")
    dist = ensure_kafka_dist(st.version)
    existing = next((n for n in st.nodes if n.node_id == node_id), None)
    if existing is not None:
        want = "broker" if role == "broker" else "broker,controller"
        if existing.roles != want:
            raise RefusedError(f"node {node_id} exists with roles {existing.roles}, not {want}")
        if rack is not None and parse_rack(rack) != existing.rack:
            raise RefusedError(f"node {node_id} exists in rack {existing.rack or '(none)'}, "
                               f"not {rack}")
        if not pid_runs(existing.pid, existing.config_path):
            # a run killed between starting the JVM and saving its pid left it running
            # unrecorded: adopt it rather than start a second JVM for the same node
            running = _find_node_pid(existing.config_path)
            if running is not None:
                existing.pid = running
            else:
                sb._start_node(dist, existing)
            sb.save(st)
        sb._wait_ready(st, wait_timeout)
        return existing
    new_id = node_id if node_id is not None else max(n.node_id for n in st.nodes) + 1
    if new_id < 0:
        raise UsageError(f"node id must be >= 0, not {new_id}")
    controller = role == "controller"
    port = free_port_block(1)
    node = Node(new_id, "broker,controller" if controller else "broker", port,
                str(sb.root / f"node-{new_id}"),
                controller_port=free_port_block(1) if controller else None,
                rack=parse_rack(rack) if rack is not None else st.next_rack())
    st.nodes.append(node)
    try:
        # a new controller joins as an observer: it must not claim to be a voter
        sb._format(dist, st, node, extra=("--no-initial-controllers",) if controller else ())
        sb.save(st)
        sb._start_node(dist, node)
        sb.save(st)
        sb._wait_ready(st, wait_timeout)
    except BaseException:
        sb._stop_node(node)
        st.nodes.remove(node)
        sb.save(st)
        raise
    log.info("added node %s (%s) on port %s", new_id, node.roles, port)
    return node


def _find_node_pid(config_path: Path) -> int | None:
    """The pid of a live JVM started with this node's config, if any (Linux /proc)."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and pid_runs(int(d.name), config_path):
            return int(d.name)
    return None


def use_dynamic_quorum_config(sb: Sandbox) -> list[str]:
    """After kraft.version was raised to 1: record the sandbox's quorum as dynamic, and
    replace ``controller.quorum.voters`` by ``controller.quorum.bootstrap.servers`` in
    every node's server.properties (Kafka's documented configuration for a dynamic
    quorum), applied at each node's next restart. Idempotent. Returns the files changed."""
    from opskit.adapters.files.safe_write import write_file

    st = sb.require()
    st.quorum = "dynamic"
    servers = ",".join(f"127.0.0.1:{st.controller_port_of(c)}" for c in st.controllers)
    changed = []
    for node in st.nodes:
        text = node.config_path.read_text()
        lines = [f"controller.quorum.bootstrap.servers={servers}"
                 if ln.startswith("controller.quorum.voters=") else ln
                 for ln in text.splitlines()]
        new = "\n".join(lines) + "\n"
        if new != text:
            write_file(node.config_path, new, what="node config", mode=0o600)
            changed.append(str(node.config_path))
    sb.save(st)
    return changed


def voters(sb: Sandbox, st: SandboxState | None = None) -> list[int]:
    """Node ids of the current voters (``kafka-metadata-quorum describe --status``)."""
    st = st or sb.require()
    dist = ensure_kafka_dist(st.version)
    first = st.controllers[0]
    out = dist.run_tool(_QUORUM_TOOL, "--bootstrap-controller",
                        f"127.0.0.1:{st.controller_port_of(first)}", "describe", "--status",
                        timeout=60)
    if out.returncode != 0:
        raise SandboxError(f"kafka-metadata-quorum describe failed: "
                           f"{(out.stderr or out.stdout).strip()[-300:]}")
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("CurrentVoters")), "")
    found = re.findall(r'"id":\s*(\d+)', line) or re.findall(r"\b(\d+)\b", line.split(":", 1)[-1])
    return sorted({int(x) for x in found})


def promote_controller(sb: Sandbox, node_id: int, timeout: float = 180.0) -> bool:
    """Make node ``node_id`` a voter once it caught up. False when it already was one."""
    st = sb.require()
    if st.quorum != "dynamic":
        raise RefusedError("a static controller quorum cannot gain voters on a live cluster")
    node = next((n for n in st.nodes if n.node_id == node_id), None)
    if node is None or "controller" not in node.roles:
        raise UsageError(f"node {node_id} is not a controller node of sandbox {sb.name!r}")
    if node_id in voters(sb, st):
        return False
    dist = ensure_kafka_dist(st.version)
    leader_port = st.controller_port_of(st.controllers[0])
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        out = dist.run_tool(_QUORUM_TOOL, "--bootstrap-controller", f"127.0.0.1:{leader_port}",
                            "--command-config", str(node.config_path), "add-controller",
                            timeout=60)
        if out.returncode == 0 or node_id in voters(sb, st):
            log.info("node %s is a voter", node_id)
            return True
        lines = (out.stderr or out.stdout).strip().splitlines()
        last = lines[-1][:300] if lines else ""
        log.debug("add-controller %s not yet: %s", node_id, last)
        time.sleep(2)
    raise SandboxError(f"node {node_id} did not become a voter within {timeout:.0f}s: {last}")


def add_brokers(sb: Sandbox, count: int, wait_timeout: float = 120.0) -> SandboxState:
    """Start ``count`` more broker-only nodes in a running sandbox (see :func:`add_node`);
    the new brokers hold nothing until partitions are moved to them."""
    if count < 1:
        raise UsageError("add at least one broker")
    for _ in range(count):
        add_node(sb, "broker", wait_timeout=wait_timeout)
    return sb.require()
