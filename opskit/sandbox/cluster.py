"""A real Apache Kafka cluster in KRaft mode, run as local JVM processes on loopback.

Layout, as in HIP-30: node 0 runs in combined mode (broker + controller, the
single voter of a static quorum); nodes 1 and 2, when asked for, are
broker-only nodes that join the same cluster id and voter set. That is also the
safe 1 -> 3 scale-out path on Kafka 3.7 (see docs).

State lives in ``<state_dir>/sandbox/<name>/state.json``; each node has its own
directory with ``server.properties``, ``data/`` and logs. Processes are started
in their own session so they outlive the CLI, and are stopped by pid only after
checking that the pid still runs this node's config.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opskit.core.connection import ConnectionConfig
from opskit.errors import InvalidInputError, NotFoundError, SandboxError, UsageError
from opskit.paths import state_dir
from opskit.sandbox.dist import KafkaDist, ensure_kafka_dist, jvm_options, resolve_version
from opskit.sandbox.node_files import log4j_properties, server_properties
from opskit.sandbox.ports import CONTROLLER_PORT_OFFSET, free_port_block, port_free, port_open
from opskit.sandbox.processes import java_arg, pid_alive, pid_runs, reap
from opskit.sandbox.security import MECHANISMS, SandboxSecurity, validate_mode
from opskit.sandbox.state import (
    Node,
    SandboxState,
    new_cluster_id,
    parse_rack,
    parse_racks,
    sandboxes_root,
    validate_name,
)

log = logging.getLogger(__name__)

#: imported from here by the CLI; free_port_block (now in opskit.sandbox.ports) also by
#: tests written before the split
__all__ = ["Sandbox", "SandboxState", "free_port_block", "list_sandboxes", "parse_rack",
           "parse_racks"]


class Sandbox:
    """One named local cluster."""

    def __init__(self, name: str = "default") -> None:
        self.name = validate_name(name)
        self.root = sandboxes_root() / self.name
        self.state_path = self.root / "state.json"

    # ----- state -----
    def load(self) -> SandboxState | None:
        if not self.state_path.exists():
            return None
        try:
            return SandboxState.from_dict(json.loads(self.state_path.read_text()))
        except (ValueError, KeyError, TypeError) as e:
            raise SandboxError(f"sandbox state file {self.state_path} is corrupt: {e}") from e

    def save(self, st: SandboxState) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(st.to_dict(), indent=2))
        os.replace(tmp, self.state_path)

    def require(self) -> SandboxState:
        st = self.load()
        if st is None:
            raise NotFoundError(f"no sandbox named {self.name!r} (start one with: opskit sandbox up)")
        return st

    def security(self, st: SandboxState) -> SandboxSecurity:
        return SandboxSecurity(st.security, self.root, tuple(st.sasl_mechanisms))

    def connection(self, user: str = "admin", mechanism: str = "PLAIN",
                   client_id: str = "opskit") -> ConnectionConfig:
        """How a client reaches this sandbox as ``user`` (any user on a plaintext one)."""
        st = self.require()
        return self.security(st).connection(st.bootstrap, user, mechanism, client_id)

    # ----- lifecycle -----
    def up(self, brokers: int | None = None, version: str | None = None, port: int | None = None,
           wait_timeout: float = 120.0, security: str | None = None,
           quorum: str | None = None,
           sasl_mechanisms: tuple[str, ...] = MECHANISMS,
           racks: Sequence[str] | None = None,
           log_dirs: int | None = None) -> tuple[SandboxState, str]:
        """Start (or confirm) the cluster. Returns the state and what was done.

        ``brokers``, ``version`` and ``security`` default to the existing sandbox's,
        or 1, 3.7 and plaintext. ``racks``: node i gets ``broker.rack`` racks[i % len]
        (see :func:`parse_racks`); default the existing sandbox's, or none. ``log_dirs``:
        log directories per node (JBOD, 1-4); default the existing sandbox's, or 1.
        """
        if log_dirs is not None and not 1 <= log_dirs <= 4:
            raise UsageError(f"--log-dirs must be 1 to 4, not {log_dirs}")
        if racks is not None:
            racks = parse_racks(",".join(racks))
        if brokers is not None and brokers not in (1, 3):
            raise UsageError(f"--brokers must be 1 or 3, not {brokers}")
        want_version = resolve_version(version) if version else None
        want_security = validate_mode(security) if security is not None else None
        if quorum not in (None, "static", "dynamic"):
            raise UsageError(f"--quorum must be static or dynamic, not {quorum!r}")
        st = self.load()
        if st is not None:
            if quorum and quorum != st.quorum:
                raise SandboxError(
                    f"sandbox {self.name!r} exists with a {st.quorum} quorum; "
                    f"run 'opskit sandbox down --name {self.name}' to replace it"
                )
            if want_security and want_security != st.security:
                raise SandboxError(
                    f"sandbox {self.name!r} exists with security {st.security}; "
                    f"run 'opskit sandbox down --name {self.name}' to replace it with {want_security}"
                )
            if want_version and want_version != st.version:
                raise SandboxError(
                    f"sandbox {self.name!r} exists with Kafka {st.version}; "
                    f"run 'opskit sandbox down --name {self.name}' to replace it with {want_version}"
                )
            if brokers is not None and brokers != st.brokers:
                raise SandboxError(
                    f"sandbox {self.name!r} exists with {st.brokers} broker(s); "
                    f"run 'opskit sandbox down --name {self.name}' first"
                )
            if racks is not None and list(racks) != st.racks:
                raise SandboxError(
                    f"sandbox {self.name!r} exists with racks "
                    f"{','.join(st.racks) if st.racks else '(none)'}; "
                    f"run 'opskit sandbox down --name {self.name}' to replace it"
                )
            if log_dirs is not None and log_dirs != st.log_dirs:
                raise SandboxError(
                    f"sandbox {self.name!r} exists with {st.log_dirs} log dir(s) per node; "
                    f"run 'opskit sandbox down --name {self.name}' to replace it"
                )
            alive = [pid_runs(n.pid, n.config_path) for n in st.nodes]
            if all(alive):
                self._wait_ready(st, wait_timeout)
                return st, "already running"
            dist = ensure_kafka_dist(st.version)
            for node, ok in zip(st.nodes, alive):
                if not ok:
                    if not port_free(node.port) or (
                        "controller" in node.roles and not port_free(st.controller_port)
                    ):
                        raise SandboxError(
                            f"port {node.port} on 127.0.0.1 is taken by another process; "
                            f"cannot restart node {node.node_id}"
                        )
                    self._start_node(dist, node)
            self.save(st)
            self._wait_ready(st, wait_timeout)
            return st, "restarted"

        brokers = brokers or 1
        dist = ensure_kafka_dist(want_version)
        if quorum == "dynamic" and tuple(int(x) for x in dist.version.split(".")[:2]) < (3, 9):
            raise UsageError(f"a dynamic controller quorum needs Kafka 3.9 or newer, not "
                             f"{dist.version} (use --kafka-version 4.x)")
        base = port if port is not None else 9092
        if port is None and not all(port_free(base + i) for i in range(brokers)):
            raise SandboxError(
                "port 9092 on 127.0.0.1 is in use (another Kafka?); choose one with --port"
            )
        wanted_ports = [base + i for i in range(brokers)] + [base + CONTROLLER_PORT_OFFSET]
        taken = [p for p in wanted_ports if not port_free(p)]
        if taken:
            raise SandboxError(
                f"port {taken[0]} on 127.0.0.1 is in use; choose another base with --port"
            )
        st = SandboxState(
            name=self.name, version=dist.version, cluster_id=new_cluster_id(),
            base_port=base, controller_port=base + CONTROLLER_PORT_OFFSET, created_at=time.time(),
            security=want_security or "plaintext", quorum=quorum or "static",
            sasl_mechanisms=list(sasl_mechanisms), racks=list(racks or ()),
            log_dirs=log_dirs or 1,
        )
        for i in range(brokers):
            roles = "broker,controller" if i == 0 else "broker"
            st.nodes.append(Node(i, roles, base + i, str(self.root / f"node-{i}"),
                                 rack=st.next_rack()))
        try:
            self.security(st).create()
            for node in st.nodes:
                self._format(dist, st, node)
            self.save(st)
            for node in st.nodes:
                self._start_node(dist, node)
                self.save(st)
            self._wait_ready(st, wait_timeout)
        except BaseException:
            self._stop_nodes(st)
            raise
        return st, "started"

    def _format(self, dist: KafkaDist, st: SandboxState, node: Node,
                extra: tuple[str, ...] | None = None) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        sec = self.security(st)
        # 0600: with security on, the file holds the listener's JAAS passwords
        fd = os.open(node.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(server_properties(st, node, sec))
        (node.dir / "log4j.properties").write_text(log4j_properties(node))
        args = ["kafka.tools.StorageTool", "format", "-t", st.cluster_id,
                "-c", str(node.config_path), "--ignore-formatted"]
        if extra is None and st.quorum == "dynamic" and "controller" in node.roles:
            extra = ("--standalone",)  # the first controller: a quorum of itself
        args += list(extra or ())
        argfile = node.dir / "format.args"
        if sec.enabled:
            # the SCRAM passwords go in a java argument file, not on the command line
            fd = os.open(argfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("\n".join(java_arg(a) for a in [*args, *sec.scram_format_args()]) + "\n")
            cmd = dist.java_cmd(f"@{argfile}")
        else:
            cmd = dist.java_cmd(*args)
        try:
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
        finally:
            argfile.unlink(missing_ok=True)
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip().splitlines()
            raise SandboxError(f"formatting node {node.node_id} failed: {msg[-1] if msg else '?'}")

    def _start_node(self, dist: KafkaDist, node: Node) -> None:
        heap = os.environ.get("OPSKIT_SANDBOX_HEAP", "1g")
        opts = jvm_options()  # read once: for the command line and the choice of collector
        cmd = dist.java_cmd("kafka.Kafka", str(node.config_path),
                            log4j=node.dir / "log4j.properties", heap=heap, options=opts)
        chosen = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in opts)
        gc = [] if chosen else ["-XX:+UseG1GC"]
        cmd[1:1] = ["-Xms128m", *gc, "-Djava.awt.headless=true"]
        with open(node.dir / "stdout.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=node.dir)
        node.pid = proc.pid
        log.info("started node %s pid %s", node.node_id, proc.pid)

    def _wait_ready(self, st: SandboxState, timeout: float, only: Node | None = None) -> None:
        """Every node's port open and every broker registered; with ``only``, that node's
        port and, if it is a broker, that broker registered (other nodes may be stopped)."""
        deadline = time.monotonic() + timeout
        for node in st.nodes if only is None else [only]:
            while not port_open(node.port):
                if not pid_alive(node.pid):
                    reap(node.pid or 0)
                    raise SandboxError(
                        f"Kafka node {node.node_id} exited during start-up: {self._log_tail(node)}"
                    )
                if time.monotonic() > deadline:
                    raise SandboxError(
                        f"Kafka node {node.node_id} did not open port {node.port} in {timeout:.0f}s: "
                        f"{self._log_tail(node)}"
                    )
                time.sleep(0.3)
        # every broker registered with the controller
        from confluent_kafka.admin import AdminClient

        conf = self.security(st).connection(st.bootstrap).to_librdkafka()
        admin = AdminClient({**conf, "log_level": 0})
        while True:
            try:
                md = admin.list_topics(timeout=5)
            except Exception as e:  # noqa: BLE001 - retried until the deadline
                log.debug("brokers not all registered yet: %s", e)
            else:
                if only is not None and ("broker" not in only.roles
                                         or only.node_id in md.brokers):
                    return
                if only is None and len(md.brokers) >= st.brokers:
                    return
            if time.monotonic() > deadline:
                raise SandboxError(f"brokers did not all register within {timeout:.0f}s"
                                   if only is None else f"node {only.node_id} did not register "
                                   f"within {timeout:.0f}s")
            time.sleep(0.5)

    @staticmethod
    def _log_tail(node: Node) -> str:
        for p in (node.log_path, node.dir / "stdout.log"):
            if p.exists():
                lines = [ln for ln in p.read_text(errors="replace").splitlines() if ln.strip()]
                errs = [ln for ln in lines if "ERROR" in ln or "Exception" in ln]
                if errs or lines:
                    return (errs or lines)[-1][:300]
        return "(no log output)"

    def status(self) -> dict[str, Any]:
        st = self.require()
        nodes = []
        for n in st.nodes:
            nodes.append({
                "node_id": n.node_id, "roles": n.roles, "rack": n.rack, "port": n.port,
                "pid": n.pid,
                "running": pid_runs(n.pid, n.config_path), "port_open": port_open(n.port),
                "directory": n.directory,
            })
        return {
            "name": st.name, "kafka_version": st.version, "cluster_id": st.cluster_id,
            "bootstrap": st.bootstrap, "controller_port": st.controller_port,
            "brokers": st.brokers, "running": all(n["running"] for n in nodes), "nodes": nodes,
            "security": st.security, "quorum": st.quorum, "racks": st.racks,
        }

    def stop_node(self, node_id: int, kill: bool = False) -> None:
        """Stop one node (for failure drills: URP, offline partitions)."""
        st = self.require()
        node = next((n for n in st.nodes if n.node_id == node_id), None)
        if node is None:
            raise NotFoundError(f"sandbox {self.name!r} has no node {node_id}")
        self._stop_node(node, sig=signal.SIGKILL if kill else signal.SIGTERM)

    def start_node(self, node_id: int, wait_timeout: float = 120.0) -> None:
        st = self.require()
        node = next((n for n in st.nodes if n.node_id == node_id), None)
        if node is None:
            raise NotFoundError(f"sandbox {self.name!r} has no node {node_id}")
        if not pid_runs(node.pid, node.config_path):
            self._start_node(ensure_kafka_dist(st.version), node)
            self.save(st)
        self._wait_ready(st, wait_timeout, only=node)

    def set_rack(self, node_id: int, rack: str, wait_timeout: float = 120.0) -> bool:
        """Put node ``node_id`` in ``rack``: rewrite ``broker.rack`` in its server.properties
        and restart it (Kafka reads the rack only at start), then wait until it is
        registered again and reports the rack (DescribeCluster). A stopped node is only
        reconfigured: its next start applies it. Idempotent: False when the node already
        runs with that rack (a run killed between the rewrite and the restart is finished
        by the next call). One node at a time: wait for its partitions to be back in ISR
        (``opskit health``) before the next."""
        from opskit.adapters.files.safe_write import write_file

        rack = parse_rack(rack)
        st = self.require()
        node = next((n for n in st.nodes if n.node_id == node_id), None)
        if node is None:
            raise NotFoundError(f"sandbox {self.name!r} has no node {node_id}")
        text = node.config_path.read_text()
        lines = [ln for ln in text.splitlines() if not ln.startswith("broker.rack=")]
        new = "\n".join([*lines, f"broker.rack={rack}"]) + "\n"
        running = pid_runs(node.pid, node.config_path)
        if new == text and node.rack == rack and (
                not running or self._reported_racks(st).get(node_id) == rack):
            return False
        if new != text:
            write_file(node.config_path, new, what="node config", mode=0o600)
        node.rack = rack
        self.save(st)
        if not running:
            return True
        self._stop_node(node)
        self._start_node(ensure_kafka_dist(st.version), node)
        self.save(st)
        self._wait_ready(st, wait_timeout, only=node)
        deadline = time.monotonic() + wait_timeout
        while (seen := self._reported_racks(st).get(node_id)) != rack:
            if time.monotonic() > deadline:
                raise SandboxError(f"node {node_id} restarted but reports rack {seen!r}, "
                                   f"not {rack!r}")
            time.sleep(0.5)
        return True

    def _reported_racks(self, st: SandboxState) -> dict[int, str | None]:
        """broker id -> rack as the cluster reports them now (DescribeCluster); empty when
        it does not answer."""
        from confluent_kafka.admin import AdminClient

        conf = self.security(st).connection(st.bootstrap).to_librdkafka()
        admin = AdminClient({**conf, "log_level": 0})
        try:
            res = admin.describe_cluster(request_timeout=10).result(15)
        except Exception as e:  # noqa: BLE001 - "not known yet": the caller waits or restarts
            log.debug("describe cluster failed: %s", e)
            return {}
        return {int(n.id): (n.rack or None) for n in res.nodes}

    def _stop_node(self, node: Node, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        if not pid_runs(node.pid, node.config_path):
            return
        assert node.pid is not None
        try:
            os.kill(node.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while pid_runs(node.pid, node.config_path) and time.monotonic() < deadline:
            reap(node.pid)
            time.sleep(0.2)
        if pid_runs(node.pid, node.config_path):
            os.kill(node.pid, signal.SIGKILL)
            time.sleep(0.5)
            reap(node.pid)

    def _stop_nodes(self, st: SandboxState) -> None:
        # brokers first, the controller last, so brokers can shut down cleanly
        for node in sorted(st.nodes, key=lambda n: -n.node_id):
            self._stop_node(node)

    @property
    def playbook_dir(self) -> Path:
        """Where ``opskit playbook`` keeps this sandbox's run (journal, plans, lock)."""
        from opskit.adapters.files.safe_write import safe_file_name

        return state_dir() / "playbooks" / safe_file_name(self.name)

    def down(self, keep: bool = False) -> str:
        st = self.require()
        self._stop_nodes(st)
        if keep:
            self.save(st)
            return "stopped (data kept)"
        shutil.rmtree(self.root, ignore_errors=True)
        # the playbook's journal describes this cluster only: a later sandbox of the same
        # name must not resume (or be refused by) a run of the one removed here
        shutil.rmtree(self.playbook_dir, ignore_errors=True)
        return "stopped and removed"


def list_sandboxes() -> list[str]:
    root = sandboxes_root()
    for d in (root.parent, root):  # "no sandboxes" only when that was looked at
        if d.exists() and not d.is_dir():
            raise InvalidInputError(f"cannot list sandboxes: {d} is not a directory "
                                    "(the state directory: $OPSKIT_STATE)")
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "state.json").exists())
