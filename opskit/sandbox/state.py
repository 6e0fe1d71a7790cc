"""A sandbox's names and persisted state: ``<state_dir>/sandbox/<name>/state.json``
holds the cluster id, ports, security, racks and one :class:`Node` per node."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opskit.errors import UsageError
from opskit.paths import state_dir
from opskit.sandbox.security import MECHANISMS

NAME_OK = set("abcdefghijklmnopqrstuvwxyz0123456789-")
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
    #: log directories per node (JBOD): ``data``, ``data-1``, ... under the node's directory
    log_dirs: int = 1

    def data_dirs(self, node: Node) -> list[Path]:
        """The node's ``log.dirs``, in order."""
        return [node.dir / ("data" if i == 0 else f"data-{i}") for i in range(self.log_dirs)]

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
            racks=list(d.get("racks", [])), log_dirs=int(d.get("log_dirs", 1)),
        )
