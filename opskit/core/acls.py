"""HIP-30 access control as data: ACL entries, the registry's security section,
drift between a cluster's ACLs and the registry, and a lint for blanket grants (pure).

HIP-30 ("Security"): one SASL credential per service, minimal ACLs per principal,
no blanket access to all topics, and ``dead_letter`` writable by every
authenticated producer. The registry lists each principal's topics and groups
with the operations it may perform; :func:`desired_acls` expands that into the
ACL entries the cluster should hold (adding the dead-letter grant and the
monitor's read-only set). opskit manages the ACLs of the principals the
registry names and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from opskit.core.connection import MECHANISMS
from opskit.errors import InvalidInputError

CLUSTER_NAME = "kafka-cluster"
RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
PERMISSIONS = ("ALLOW", "DENY")
#: operations Kafka accepts per resource type (ALL is valid for Kafka but never in a registry)
OPERATIONS: Mapping[str, tuple[str, ...]] = {
    "TOPIC": ("READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS"),
    "GROUP": ("READ", "DESCRIBE", "DELETE"),
    "CLUSTER": ("CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
                "ALTER_CONFIGS", "IDEMPOTENT_WRITE"),
    "TRANSACTIONAL_ID": ("DESCRIBE", "WRITE"),
}
_PRINCIPAL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
#: the longest user name of a principal (``User:`` not counted); a 10,000-character one
#: is a pasted file, not a service
MAX_PRINCIPAL = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _short(value: Any) -> str:
    """A value for a one-line message: repr, at most 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True, order=True)
class AclEntry:
    """One ACL binding, in Kafka's terms (``kafka-acls.sh`` spelling in upper case)."""

    principal: str  # "User:llm-gateway"
    resource_type: str  # TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID
    resource_name: str
    operation: str
    permission: str = "ALLOW"
    pattern_type: str = "LITERAL"
    host: str = "*"

    def to_dict(self) -> dict[str, str]:
        return {"principal": self.principal, "resource_type": self.resource_type,
                "resource_name": self.resource_name, "pattern_type": self.pattern_type,
                "operation": self.operation, "permission": self.permission, "host": self.host}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AclEntry:
        """From :meth:`to_dict`, or from an older DR snapshot (``name``, ``permission_type``,
        resource type ``BROKER`` for the cluster)."""
        if not isinstance(d, Mapping):
            raise InvalidInputError(f"ACL entry {_short(d)} is not a mapping")

        def text(key: str, *older: str, default: str | None = None) -> str:
            for k in (key, *older):
                if k in d:
                    value = d[k]
                    break
            else:
                if default is None:
                    raise InvalidInputError(f"ACL entry {_short(dict(d))} has no {key!r}")
                value = default
            if not isinstance(value, str):
                raise InvalidInputError(f"ACL entry {_short(dict(d))}: {key!r} must be text, "
                                        f"not {type(value).__name__}")
            return value

        rtype = text("resource_type").upper()
        return cls(
            principal=text("principal"),
            resource_type="CLUSTER" if rtype == "BROKER" else rtype,
            resource_name=text("resource_name", "name"),
            operation=text("operation").upper(),
            permission=text("permission", "permission_type", default="ALLOW").upper(),
            pattern_type=text("pattern_type", default="LITERAL").upper(),
            host=text("host", default="*"),
        )

    def problems(self) -> list[str]:
        """Why Kafka could not hold this entry (empty when it can)."""
        out = []
        if self.resource_type not in RESOURCE_TYPES:
            out.append(f"resource type {self.resource_type!r} is not one of {', '.join(RESOURCE_TYPES)}")
        elif self.operation != "ALL" and self.operation not in OPERATIONS[self.resource_type]:
            out.append(f"operation {self.operation!r} does not apply to a {self.resource_type.lower()}")
        if self.pattern_type not in PATTERN_TYPES:
            out.append(f"pattern type {self.pattern_type!r} is not LITERAL or PREFIXED")
        if self.permission not in PERMISSIONS:
            out.append(f"permission {self.permission!r} is not ALLOW or DENY")
        if not self.principal.startswith("User:"):
            out.append(f"principal {_short(self.principal)} is not User:NAME")
        elif len(self.principal) > MAX_PRINCIPAL + len("User:"):
            out.append(f"principal {_short(self.principal)} is longer than {MAX_PRINCIPAL} "
                       "characters")
        for what, value in (("principal", self.principal), ("resource name", self.resource_name),
                            ("host", self.host)):
            if not value or _CONTROL.search(value):
                out.append(f"{what} {_short(value)} is empty or holds control characters")
        return out

    def describe(self) -> str:
        pattern = "" if self.pattern_type == "LITERAL" else f" ({self.pattern_type.lower()})"
        where = ("the cluster" if self.resource_type == "CLUSTER"
                 else f"{self.resource_type.lower()} {self.resource_name}{pattern}")
        host = "" if self.host == "*" else f" from {self.host}"
        return f"{self.permission} {self.principal} {self.operation} on {where}{host}"

    def kafka_acls_args(self) -> list[str]:
        """The ``kafka-acls.sh --add`` arguments (after the connection options) for this entry."""
        verb = "--allow-principal" if self.permission == "ALLOW" else "--deny-principal"
        args = [verb, self.principal, "--operation", _camel(self.operation)]
        if self.host != "*":
            args += ["--allow-host" if self.permission == "ALLOW" else "--deny-host", self.host]
        if self.resource_type == "CLUSTER":
            args.append("--cluster")
        else:
            flag = {"TOPIC": "--topic", "GROUP": "--group",
                    "TRANSACTIONAL_ID": "--transactional-id"}[self.resource_type]
            args += [flag, self.resource_name]
        if self.pattern_type != "LITERAL":
            args += ["--resource-pattern-type", self.pattern_type.lower()]
        return args


def _camel(op: str) -> str:
    return "".join(p.capitalize() for p in op.split("_"))


def user(name: str) -> str:
    return name if name.startswith("User:") else f"User:{name}"


# --------------------------------------------------------------------------- registry section


@dataclass(frozen=True)
class PrincipalSpec:
    """One service's credential and grants (HIP-30 security table)."""

    name: str  # without "User:"
    topics: Mapping[str, tuple[str, ...]]
    groups: Mapping[str, tuple[str, ...]]
    cluster: tuple[str, ...] = ()
    #: a read-only monitor: Describe on the cluster and on every registered topic and group
    monitor: bool = False
    #: for a monitor, DescribeConfigs too (topic retention, min.insync.replicas)
    describe_configs: bool = False

    @property
    def principal(self) -> str:
        return user(self.name)

    @property
    def produces(self) -> bool:
        return any("WRITE" in ops for ops in self.topics.values())


@dataclass(frozen=True)
class SecuritySpec:
    mechanism: str
    principals: tuple[PrincipalSpec, ...]
    #: the topic every authenticated producer may write (HIP-30: dead_letter); None: no such rule
    dead_letter_topic: str | None = None

    @property
    def managed_principals(self) -> frozenset[str]:
        return frozenset(p.principal for p in self.principals)


def _ops_map(v: Any, kind: str, where: str, known: Iterable[str]) -> dict[str, tuple[str, ...]]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise InvalidInputError(f"{where}: {kind}s must be a mapping of {kind} name -> [operations]")
    names = set(known)
    out: dict[str, tuple[str, ...]] = {}
    rtype = kind.upper()
    for name, ops in v.items():
        name = str(name)
        if "*" in name:
            raise InvalidInputError(f"{where}: {kind} {name!r} is a wildcard; HIP-30 allows no "
                                    "blanket access, list each one")
        if name not in names:
            raise InvalidInputError(f"{where}: {kind} {name!r} is not in the registry")
        out[name] = _ops(ops, rtype, f"{where}: {kind} {name!r}")
    return out


def _ops(ops: Any, rtype: str, where: str) -> tuple[str, ...]:
    if not isinstance(ops, list) or not ops or not all(isinstance(o, str) for o in ops):
        raise InvalidInputError(f"{where}: operations must be a non-empty list like [READ]")
    norm = tuple(sorted({o.strip().upper().replace("-", "_") for o in ops}))
    for o in norm:
        if o == "ALL":
            raise InvalidInputError(f"{where}: operation ALL is a blanket grant; list the "
                                    "operations the service needs")
        if o not in OPERATIONS[rtype]:
            raise InvalidInputError(f"{where}: operation {o!r} does not apply to a "
                                    f"{rtype.lower()} (one of {', '.join(OPERATIONS[rtype])})")
    return norm


def parse_security(data: Any, topics: Iterable[str], groups: Iterable[str],
                   source: str = "registry") -> SecuritySpec | None:
    """The ``security`` section of a registry (None when absent). One-line errors name the place."""
    if data is None:
        return None
    where = f"{source}: security"
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where} must be a mapping")
    unknown = set(data) - {"mechanism", "dead_letter", "principals"}
    if unknown:
        raise InvalidInputError(f"{where}: unknown field {min(unknown)!r}")
    topics, groups = tuple(topics), tuple(groups)
    mechanism = data.get("mechanism", "PLAIN")
    if not isinstance(mechanism, str) or mechanism.upper() not in MECHANISMS:
        raise InvalidInputError(f"{where}: mechanism {_short(mechanism)} is not one of "
                                f"{', '.join(MECHANISMS)}")
    mechanism = mechanism.upper()
    dlq = data.get("dead_letter")
    if dlq is not None and (not isinstance(dlq, str) or dlq not in topics):
        raise InvalidInputError(f"{where}: dead_letter {dlq!r} is not a registered topic")
    raw = data.get("principals")
    if not isinstance(raw, list) or not raw:
        raise InvalidInputError(f"{where}: 'principals' must be a non-empty list")
    out: list[PrincipalSpec] = []
    seen: set[str] = set()
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise InvalidInputError(f"{where}: principals[{i}] must be a mapping with a 'name'")
        name = p["name"].removeprefix("User:")
        pw = f"{where}: principal {_short(name)}"
        if name == "*" or not _PRINCIPAL_RE.fullmatch(name):
            raise InvalidInputError(f"{pw}: not a usable user name (User:* would be every user)")
        if len(name) > MAX_PRINCIPAL:
            raise InvalidInputError(f"{pw}: longer than {MAX_PRINCIPAL} characters")
        if name in seen:
            raise InvalidInputError(f"{pw} is listed twice")
        seen.add(name)
        extra = set(p) - {"name", "topics", "groups", "cluster", "monitor", "describe_configs"}
        if extra:
            raise InvalidInputError(f"{pw}: unknown field {min(extra)!r}")
        cluster_ops = () if p.get("cluster") is None else _ops(p["cluster"], "CLUSTER",
                                                                f"{pw}: cluster")
        monitor = p.get("monitor", False)
        dc = p.get("describe_configs", False)
        if not isinstance(monitor, bool) or not isinstance(dc, bool):
            raise InvalidInputError(f"{pw}: monitor and describe_configs are true or false")
        spec = PrincipalSpec(name, _ops_map(p.get("topics"), "topic", pw, topics),
                             _ops_map(p.get("groups"), "group", pw, groups), cluster_ops,
                             monitor, dc)
        if not (spec.topics or spec.groups or spec.cluster or spec.monitor):
            raise InvalidInputError(f"{pw}: grants nothing (give topics, groups, cluster or "
                                    "monitor: true)")
        out.append(spec)
    return SecuritySpec(mechanism, tuple(out), dlq)


# --------------------------------------------------------------------------- expansion


def monitor_acls(principal: str, topics: Sequence[str], groups: Sequence[str],
                 describe_configs: bool = False) -> tuple[AclEntry, ...]:
    """A read-only monitor: Describe on the cluster (list groups, log dir sizes, quorum)
    and on each named topic and group; optionally DescribeConfigs on the topics and
    the cluster (retention headroom, min.insync.replicas, topics diff). Never Read: it
    cannot consume data (HIP-30), so lag in time is not measured exactly for it."""
    p = user(principal)
    out = [AclEntry(p, "CLUSTER", CLUSTER_NAME, "DESCRIBE")]
    out += [AclEntry(p, "TOPIC", t, "DESCRIBE") for t in topics]
    out += [AclEntry(p, "GROUP", g, "DESCRIBE") for g in groups]
    if describe_configs:
        out.append(AclEntry(p, "CLUSTER", CLUSTER_NAME, "DESCRIBE_CONFIGS"))
        out += [AclEntry(p, "TOPIC", t, "DESCRIBE_CONFIGS") for t in topics]
    return tuple(sorted(set(out)))


def desired_acls(spec: SecuritySpec, topics: Sequence[str], groups: Sequence[str]
                 ) -> tuple[AclEntry, ...]:
    """Every ACL entry the registry asks for (ALLOW, literal, any host)."""
    out: set[AclEntry] = set()
    for p in spec.principals:
        for t, ops in p.topics.items():
            out.update(AclEntry(p.principal, "TOPIC", t, o) for o in ops)
        for g, ops in p.groups.items():
            out.update(AclEntry(p.principal, "GROUP", g, o) for o in ops)
        out.update(AclEntry(p.principal, "CLUSTER", CLUSTER_NAME, o) for o in p.cluster)
        if p.monitor:
            out.update(monitor_acls(p.name, topics, groups, p.describe_configs))
        if spec.dead_letter_topic and p.produces:
            out.add(AclEntry(p.principal, "TOPIC", spec.dead_letter_topic, "WRITE"))
    return tuple(sorted(out))


# --------------------------------------------------------------------------- lint


@dataclass(frozen=True)
class BlanketGrant:
    entry: AclEntry
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.entry.to_dict(), "why": self.why}


def blanket_grants(entries: Iterable[AclEntry]) -> tuple[BlanketGrant, ...]:
    """ALLOW entries that grant more than one named thing: a wildcard or empty-prefix
    resource, operation ALL, or the principal User:* (every authenticated user)."""
    out = []
    for e in sorted(set(entries)):
        if e.permission != "ALLOW":
            continue
        whys = []
        if e.resource_type != "CLUSTER" and (
                e.resource_name == "*" or (e.pattern_type == "PREFIXED" and not e.resource_name)):
            whys.append(f"every {e.resource_type.lower()}")
        if e.operation == "ALL":
            whys.append("every operation")
        if e.principal in ("User:*", "*"):
            whys.append("every user")
        if whys:
            out.append(BlanketGrant(e, "blanket grant: " + ", ".join(whys)))
    return tuple(out)


# --------------------------------------------------------------------------- drift


class AclChangeKind(str, Enum):
    MISSING = "missing"  # in the registry, not on the cluster: apply creates it
    EXTRA = "extra"  # a managed principal holds it, the registry does not: apply --prune deletes
    UNMANAGED = "unmanaged"  # a principal the registry does not name: reported only
    BLANKET = "blanket"  # a blanket grant on the cluster (any principal): reported only


@dataclass(frozen=True)
class AclChange:
    kind: AclChangeKind
    entry: AclEntry
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, **self.entry.to_dict(), "detail": self.detail}


@dataclass(frozen=True)
class AclPlan:
    missing: tuple[AclEntry, ...]
    extra: tuple[AclEntry, ...]
    unmanaged: tuple[AclEntry, ...]
    blanket: tuple[BlanketGrant, ...]
    #: what the desired set is (for the notes): "registry" or "backup"
    source: str = "registry"

    @property
    def in_sync(self) -> bool:
        """Nothing missing, nothing extra for a managed principal, no blanket grant."""
        return not (self.missing or self.extra or self.blanket)

    def prunable(self) -> tuple[AclEntry, ...]:
        """Extra entries ``--prune`` may delete: ALLOW only (deleting a DENY widens access)."""
        return tuple(e for e in self.extra if e.permission == "ALLOW")

    def changes(self) -> tuple[AclChange, ...]:
        out = [AclChange(AclChangeKind.MISSING, e, f"in the {self.source}, not on the cluster")
               for e in self.missing]
        for e in self.extra:
            if self.source != "registry":
                note = f"not in the {self.source}"
            elif e.permission == "DENY":
                note = "a DENY entry: never pruned (removing it would widen access)"
            else:
                note = "not in the registry; deleted only with --prune"
            out.append(AclChange(AclChangeKind.EXTRA, e, note))
        out += [AclChange(AclChangeKind.BLANKET, b.entry, b.why) for b in self.blanket]
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"in_sync": self.in_sync, "changes": [c.to_dict() for c in self.changes()],
                "unmanaged": [e.to_dict() for e in self.unmanaged]}


def plan_acl_changes(desired: Iterable[AclEntry], actual: Iterable[AclEntry],
                     managed_principals: Iterable[str]) -> AclPlan:
    """Compare the cluster's ACLs with the registry's. Only the ACLs of principals the
    registry names are managed; others are listed as unmanaged and never changed."""
    want = set(desired)
    have = set(actual)
    managed = set(managed_principals)
    return AclPlan(
        missing=tuple(sorted(want - have)),
        extra=tuple(sorted(e for e in have - want if e.principal in managed)),
        unmanaged=tuple(sorted(e for e in have if e.principal not in managed)),
        blanket=blanket_grants(have),
    )
