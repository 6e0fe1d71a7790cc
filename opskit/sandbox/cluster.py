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

import base64
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opskit.core.connection import ConnectionConfig
from opskit.errors import InvalidInputError, NotFoundError, SandboxError, UsageError
from opskit.paths import state_dir
from opskit.sandbox.dist import KafkaDist, ensure_kafka_dist, jvm_options, resolve_version
from opskit.sandbox.security import CLIENT_LISTENER, MECHANISMS, SandboxSecurity, validate_mode

log = logging.getLogger(__name__)

NAME_OK = set("abcdefghijklmnopqrstuvwxyz0123456789-")
CONTROLLER_PORT_OFFSET = 1000
RACK_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def sandboxes_root() -> Path:
    return state_dir() / "sandbox"


def validate_name(name: str) -> str:
    if not name or not set(name) <= NAME_OK or name[0] == "-" or len(name) > 40:
        raise UsageError(f"invalid sandbox name {name!r}: use lowercase letters, digits and '-'")
    return name


def parse_racks(text: str, flag: str = "--racks") -> list[str]:
    """``a,b,c`` -> ``["a", "b", "c"]``: the racks node 0, 1, 2 ... are put in, cycling
    when there are more nodes than racks (``a,b`` on 3 nodes: a, b, a); a list as long as
    the nodes is one rack per node (``a,a,b``). Letters, digits, ``.``, ``_``, ``-``."""
    racks = [r.strip() for r in text.split(",")]
    for r in racks:
        if not r or not set(r) <= RACK_OK or len(r) > 64:
            raise UsageError(f"{flag}: {r!r} is not a rack name (letters, digits, '.', '_', "
                             f"'-'; at most 64), in {text!r}")
    return racks


def parse_rack(text: str) -> str:
    """One rack name (see :func:`parse_racks`)."""
    racks = parse_racks(text, "--rack")
    if len(racks) != 1:
        raise UsageError(f"--rack: give one rack, not {text!r}")
    return racks[0]


def rack_of_index(racks: Sequence[str], index: int) -> str | None:
    """The rack of the sandbox's ``index``-th node (in the order nodes were created)."""
    return racks[index % len(racks)] if racks else None


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _ephemeral_low(default: int = 32768) -> int:
    """The first port of the kernel's range for outgoing connections' local ports."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def free_port_block(count: int, start: int = 10000, end: int | None = None) -> int:
    """A base port such that base..base+count-1 and base+1000.. are all free, below the
    kernel's ephemeral range: a port checked free there can be taken by any client's
    outgoing connection in the seconds a JVM takes to bind it ("Address already in use"
    on a busy machine)."""
    import random

    top = min(end, _ephemeral_low()) if end is not None else _ephemeral_low()
    if top - CONTROLLER_PORT_OFFSET - count <= start:  # an odd ephemeral range: old behaviour
        top = end or 60000
    rnd = random.Random()
    for _ in range(500):
        base = rnd.randrange(start, top - CONTROLLER_PORT_OFFSET - count)
        ports = [base + i for i in range(count)] + [base + CONTROLLER_PORT_OFFSET]
        if all(port_free(p) for p in ports):
            return base
    raise SandboxError("could not find free loopback ports for the sandbox")


def new_cluster_id() -> str:
    """A Kafka-style cluster id (url-safe base64 UUID); like Kafka, never starting with '-'."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


@dataclass
class Node:
    node_id: int
    roles: str  # "broker,controller" or "broker"
    port: int
    directory: str
    pid: int | None = None
    #: this node's CONTROLLER listener port (None: the sandbox's controller_port, node 0)
    controller_port: int | None = None
    #: ``broker.rack`` (None: no rack)
    rack: str | None = None

    @property
    def dir(self) -> Path:
        return Path(self.directory)

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"


@dataclass
class SandboxState:
    name: str
    version: str
    cluster_id: str
    base_port: int
    controller_port: int
    nodes: list[Node] = field(default_factory=list)
    created_at: float = 0.0
    #: plaintext, sasl_plaintext or sasl_ssl (see opskit.sandbox.security)
    security: str = "plaintext"
    #: "static" (controller.quorum.voters, kraft.version 0) or "dynamic"
    #: (controller.quorum.bootstrap.servers, formatted --standalone; Kafka 3.9+)
    quorum: str = "static"
    #: the SASL mechanisms the client listener enables
    sasl_mechanisms: list[str] = field(default_factory=lambda: list(MECHANISMS))
    #: the racks given to ``up`` (empty: none); nodes take them in turn, added nodes too
    racks: list[str] = field(default_factory=list)

    def next_rack(self) -> str | None:
        """The rack a node added now goes in (continuing the cycle), None without racks."""
        return rack_of_index(self.racks, len(self.nodes))

    def controller_port_of(self, node: Node) -> int:
        return node.controller_port if node.controller_port is not None else self.controller_port

    @property
    def controllers(self) -> list[Node]:
        return [n for n in self.nodes if "controller" in n.roles]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    @property
    def brokers(self) -> int:
        return len(self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SandboxState:
        nodes = [Node(**n) for n in d.get("nodes", [])]
        return cls(
            name=d["name"], version=d["version"], cluster_id=d["cluster_id"],
            base_port=d["base_port"], controller_port=d["controller_port"], nodes=nodes,
            created_at=d.get("created_at", 0.0), security=d.get("security", "plaintext"),
            quorum=d.get("quorum", "static"),
            sasl_mechanisms=list(d.get("sasl_mechanisms", MECHANISMS)),
            racks=list(d.get("racks", [])),
        )


def _pid_alive(pid: int | None) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    if not pid:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _pid_runs(pid: int | None, config_path: Path) -> bool:
    """True if ``pid`` is alive and is the JVM started with this node's config.

    Only used once a node is past start-up: while the java launcher execs, its
    command line can briefly read empty.
    """
    if not _pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return str(config_path) in cmdline


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

    # ----- config -----
    @staticmethod
    def _properties(st: SandboxState, node: Node, sec: SandboxSecurity) -> str:
        n = st.brokers
        rf = min(3, n)
        lines = [
            f"process.roles={node.roles}",
            f"node.id={node.node_id}",
            (f"controller.quorum.voters=0@127.0.0.1:{st.controller_port}"
             if st.quorum == "static" else
             "controller.quorum.bootstrap.servers=" + ",".join(
                 f"127.0.0.1:{st.controller_port_of(c)}" for c in st.controllers)),
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{node.port}",
            f"log.dirs={node.dir / 'data'}",
            "auto.create.topics.enable=false",
            "num.partitions=1",
            "default.replication.factor=1",
            f"offsets.topic.replication.factor={rf}",
            "offsets.topic.num.partitions=12",
            f"transaction.state.log.replication.factor={rf}",
            "transaction.state.log.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "log.retention.hours=168",
            # small segments so retention tests can delete data within seconds
            "log.retention.check.interval.ms=5000",
            "log.segment.delete.delay.ms=1000",
            "num.io.threads=4",
            "num.network.threads=2",
            "delete.topic.enable=true",
        ]
        if node.rack is not None:
            lines.append(f"broker.rack={node.rack}")
        client = "PLAINTEXT"
        if sec.enabled:
            client = CLIENT_LISTENER
            drop = ("inter.broker.listener.name=", "listener.security.protocol.map=")
            lines = [ln for ln in lines if not ln.startswith(drop)] + sec.broker_properties()
            lines = [ln.replace("PLAINTEXT://", f"{client}://") for ln in lines]
        listeners = f"{client}://127.0.0.1:{node.port}"
        if "controller" in node.roles:
            listeners += f",CONTROLLER://127.0.0.1:{st.controller_port_of(node)}"
        lines.insert(3, f"listeners={listeners}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _log4j(node: Node) -> str:
        request_log = ""
        if os.environ.get("OPSKIT_SANDBOX_REQUEST_LOG"):
            # every request the broker completes, for counting round trips in benchmarks
            request_log = (
                "log4j.logger.kafka.request.logger=DEBUG, R\n"
                "log4j.additivity.kafka.request.logger=false\n"
                "log4j.appender.R=org.apache.log4j.FileAppender\n"
                f"log4j.appender.R.File={node.dir / 'requests.log'}\n"
                "log4j.appender.R.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.R.layout.ConversionPattern=%m%n\n"
                # SASL logins are not requests the request logger sees: one line per login
                "log4j.logger.org.apache.kafka.common.security.authenticator."
                "SaslServerAuthenticator=DEBUG, R\n"
                "log4j.additivity.org.apache.kafka.common.security.authenticator."
                "SaslServerAuthenticator=false\n"
            )
        return request_log + (
            "log4j.rootLogger=INFO, F\n"
            "log4j.appender.F=org.apache.log4j.RollingFileAppender\n"
            f"log4j.appender.F.File={node.log_path}\n"
            "log4j.appender.F.MaxFileSize=20MB\n"
            "log4j.appender.F.MaxBackupIndex=2\n"
            "log4j.appender.F.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.F.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            + ("" if request_log else "log4j.logger.kafka.request.logger=WARN\n")
            + "log4j.logger.state.change.logger=WARN\n"
            "log4j.logger.org.apache.kafka.clients=WARN\n"
        )

    # ----- lifecycle -----
    def up(self, brokers: int | None = None, version: str | None = None, port: int | None = None,
           wait_timeout: float = 120.0, security: str | None = None,
           quorum: str | None = None,
           sasl_mechanisms: tuple[str, ...] = MECHANISMS,
           racks: Sequence[str] | None = None) -> tuple[SandboxState, str]:
        """Start (or confirm) the cluster. Returns the state and what was done.

        ``brokers``, ``version`` and ``security`` default to the existing sandbox's,
        or 1, 3.7 and plaintext. ``racks``: node i gets ``broker.rack`` racks[i % len]
        (see :func:`parse_racks`); default the existing sandbox's, or none.
        """
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
            alive = [_pid_runs(n.pid, n.config_path) for n in st.nodes]
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
            f.write(self._properties(st, node, sec))
        (node.dir / "log4j.properties").write_text(self._log4j(node))
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
                f.write("\n".join(_java_arg(a) for a in [*args, *sec.scram_format_args()]) + "\n")
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
        cmd = dist.java_cmd("kafka.Kafka", str(node.config_path),
                            log4j=node.dir / "log4j.properties", heap=heap)
        chosen = any(o.startswith("-XX:+Use") and o.endswith("GC") for o in jvm_options())
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
                if not _pid_alive(node.pid):
                    _reap(node.pid or 0)
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
                "running": _pid_runs(n.pid, n.config_path), "port_open": port_open(n.port),
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
        if not _pid_runs(node.pid, node.config_path):
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
        running = _pid_runs(node.pid, node.config_path)
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
        if not _pid_runs(node.pid, node.config_path):
            return
        assert node.pid is not None
        try:
            os.kill(node.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while _pid_runs(node.pid, node.config_path) and time.monotonic() < deadline:
            _reap(node.pid)
            time.sleep(0.2)
        if _pid_runs(node.pid, node.config_path):
            os.kill(node.pid, signal.SIGKILL)
            time.sleep(0.5)
            _reap(node.pid)

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


def _java_arg(arg: str) -> str:
    """One argument quoted for a java ``@argfile``."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _reap(pid: int) -> None:
    """Collect the exit status if the node is our own child (tests start nodes in-process)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def list_sandboxes() -> list[str]:
    root = sandboxes_root()
    for d in (root.parent, root):  # "no sandboxes" only when that was looked at
        if d.exists() and not d.is_dir():
            raise InvalidInputError(f"cannot list sandboxes: {d} is not a directory "
                                    "(the state directory: $OPSKIT_STATE)")
    if not root.exists():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "state.json").exists())
