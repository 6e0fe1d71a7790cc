"""Cordoning the brokers a drain empties (KIP-1066, Kafka 4.3+): the pure rules.

A broker whose every log directory is cordoned receives no replica that the controller
places itself (CreateTopics and CreatePartitions without an explicit assignment; a topic
RF above the uncordoned brokers then fails with INVALID_REPLICATION_FACTOR). Explicit
assignments and reassignments are still accepted onto it: the cordon protects a drain
from the cluster's own placement, not from an operator's plan. The broker setting is
``cordoned.log.dirs`` (a list of log directories, or ``*`` for all of them), a dynamic
per-broker config set with IncrementalAlterConfigs; the broker reports it per log
directory in DescribeLogDirs v5 (``IsCordoned``). It takes effect only from
metadata.version 4.3-IV0 (feature level 30); below, a 4.3 broker refuses the dynamic
value, and Kafka before 4.3 does not know the key.

What ``reassign execute`` does with a drain plan (goal ``remove-brokers``): before the
first move it reads each drained broker's dynamic value (journaled), sets ``*`` and waits
until the broker reports every log directory cordoned. A drain that finishes leaves the
brokers cordoned (they are to be removed; uncordoned, new topics would land there
again); a drain cancelled with ``reassign cancel --execute`` gets the values it found back
(``prior``). On a cluster that cannot cordon, the run goes on as before and says in one
line what is not protected.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from opskit.core.reassign.model import Topology

__all__ = [
    "CORDON_ALL", "CORDON_KEY", "MIN_METADATA_LEVEL", "Cordon", "CordonStatus", "CordonSupport",
    "cordon_support", "leave_out_cordoned", "plan_cordon", "unprotected_line",
]

CORDON_KEY = "cordoned.log.dirs"
CORDON_ALL = "*"
#: metadata.version feature level of 4.3-IV0, the first that honours ``cordoned.log.dirs``
MIN_METADATA_LEVEL = 30


class CordonStatus(str, Enum):
    PLANNED = "planned"          # nothing read or set yet
    READ = "read"                # prior values journaled; the SET may or may not have arrived
    APPLIED = "applied"          # every drained broker reports all its log directories cordoned
    KEPT = "kept"                # the drain finished: left cordoned on purpose
    RELEASED = "released"        # prior values put back (the drain was cancelled)
    UNSUPPORTED = "unsupported"  # the cluster cannot cordon: nothing was set


@dataclass(frozen=True)
class CordonSupport:
    supported: bool
    #: why not (empty when supported)
    reason: str = ""


def cordon_support(metadata_level: int | None, knows_key: Mapping[int, bool]) -> CordonSupport:
    """Can this cluster cordon? ``metadata_level``: the finalized metadata.version feature
    level (None: the cluster did not say); ``knows_key``: per drained broker, whether its
    DescribeConfigs lists ``cordoned.log.dirs``."""
    unaware = sorted(b for b, known in knows_key.items() if not known)
    if unaware:
        return CordonSupport(False, f"no {CORDON_KEY} on broker(s) {_ids(unaware)}: "
                                    "KIP-1066 needs Kafka 4.3+")
    if metadata_level is None:
        return CordonSupport(False, "the cluster does not report its metadata.version "
                                    "(KIP-1066 needs 4.3-IV0)")
    if metadata_level < MIN_METADATA_LEVEL:
        return CordonSupport(False, f"metadata.version feature level {metadata_level} is below "
                                    f"4.3-IV0 ({MIN_METADATA_LEVEL}): finalize it to cordon")
    return CordonSupport(True)


def unprotected_line(brokers: Iterable[int], reason: str) -> str:
    """The one line a drain prints when it cannot cordon: what is not protected."""
    return (f"broker(s) {_ids(brokers)} not cordoned ({reason}): until the drain ends, a topic "
            "or partition created meanwhile can still get replicas there")


def _ids(brokers: Iterable[int]) -> str:
    return ",".join(str(b) for b in sorted(brokers))


@dataclass(frozen=True)
class Cordon:
    """The cordon of one execution (journaled in its state)."""

    brokers: tuple[int, ...]
    status: CordonStatus = CordonStatus.PLANNED
    #: (broker, its dynamic per-broker value before; None: none was set), once read
    prior: tuple[tuple[int, str | None], ...] | None = None
    #: why nothing is set (UNSUPPORTED), or brokers left out (not registered)
    note: str | None = None

    @property
    def holds(self) -> bool:
        """May the cluster hold our cordon now (set, or possibly set)?"""
        return self.status in (CordonStatus.READ, CordonStatus.APPLIED, CordonStatus.KEPT)

    def with_prior(self, prior: Iterable[tuple[int, str | None]]) -> Cordon:
        return replace(self, prior=tuple(sorted(prior)), status=CordonStatus.READ)

    def to_dict(self) -> dict[str, Any]:
        return {"brokers": list(self.brokers), "status": self.status.value,
                "prior": None if self.prior is None else [[b, v] for b, v in self.prior],
                "note": self.note}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cordon:
        prior = d.get("prior")
        return cls(tuple(int(b) for b in d["brokers"]), CordonStatus(d["status"]),
                   None if prior is None else tuple((int(b), None if v is None else str(v))
                                                    for b, v in prior),
                   d.get("note"))


def plan_cordon(drained: Iterable[int], registered: Iterable[int],
                support: CordonSupport) -> Cordon | None:
    """The cordon a drain execution starts with: the drained brokers that are registered
    (the controller places nothing on a broker that is not), or UNSUPPORTED with the
    reason. None when the plan drains no broker."""
    drained = tuple(sorted(set(drained)))
    if not drained:
        return None
    live = set(registered)
    present = tuple(b for b in drained if b in live)
    absent = [b for b in drained if b not in live]
    if not support.supported:
        return Cordon(drained, CordonStatus.UNSUPPORTED, note=support.reason)
    note = (f"broker(s) {_ids(absent)} not registered: not cordoned (the controller places "
            "nothing on them while they are away)") if absent else None
    if not present:
        return Cordon(drained, CordonStatus.UNSUPPORTED, note=note)
    return Cordon(present, note=note)


def leave_out_cordoned(topology: Topology, cordoned: Iterable[int], keep: Iterable[int] = ()
                       ) -> tuple[Topology, tuple[int, ...], tuple[int, ...]]:
    """The topology a new plan is made from, without the fully cordoned brokers that hold
    no replica (a finished drain's: a rebalance would fill them again, Kafka accepting a
    reassignment onto a cordoned broker). Returns (topology, left out, cordoned brokers
    still holding replicas: kept, the plan may move replicas onto them). ``keep``: brokers
    the goal names (``--add-brokers``, ``--remove-brokers``), never left out."""
    held = {b for p in topology.partitions for b in p.replicas}
    ids = set(cordoned) - set(keep)
    out = tuple(sorted(b.id for b in topology.brokers if b.id in ids and b.id not in held))
    holding = tuple(sorted(b.id for b in topology.brokers if b.id in ids and b.id in held))
    if not out:
        return topology, (), holding
    return (replace(topology, brokers=tuple(b for b in topology.brokers if b.id not in out)),
            out, holding)
