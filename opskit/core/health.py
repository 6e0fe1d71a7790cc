"""Cluster health: evaluate a plain snapshot of a cluster into Nagios-style findings (pure).

Input is plain data gathered by ``opskit.adapters.health.cluster``: registered
brokers, the expected broker count, every partition's leader / replicas / ISR,
each topic's ``min.insync.replicas``, the KRaft quorum (or why it is unknown)
and the reassignments in progress (or why they are unknown). Output is a
:class:`HealthReport`: one :class:`Finding` per check, counts, and the overall
severity (Nagios order CRITICAL > WARNING > UNKNOWN > OK).

Rules, one check each:

- ``brokers``: fewer registered brokers than expected is CRITICAL.
- ``controller``: no active controller (metadata controller id < 0, or a quorum
  without a leader) is CRITICAL.
- ``quorum``: a voter or observer whose log end offset trails the leader's by
  more than ``HealthPolicy.quorum_lag_warn`` records is WARNING; a single voter
  is OK but said (the controller is a single point of failure). UNKNOWN when
  the quorum could not be described.
- ``offline_partitions``: a partition without a leader (leader -1) is CRITICAL.
- ``under_min_isr``: ISR smaller than the topic's ``min.insync.replicas``, capped at
  the partition's replica count as the leader caps it, is CRITICAL (acks=all
  producers are rejected and the high watermark stops: consumers see no new records).
- ``min_isr_above_rf``: fewer replicas than ``min.insync.replicas`` is WARNING, not
  CRITICAL: Kafka (3.7.2 and 4.3.1 checked, ELR on or off) caps the requirement at the
  replica count, so acks=all writes are accepted with only RF copies; a reassignment
  that adds replicas raises the cap, and acks=all writes then fail (and the high
  watermark stops) until the new replicas are in sync.
- ``under_replicated``: ISR smaller than the replica set is WARNING.
- ``at_min_isr``: ISR exactly at ``min.insync.replicas`` is WARNING, but only
  when RF > min.insync.replicas (when RF == min ISR a full ISR is "at min").
- ``preferred_leader_imbalance``: the share of online partitions whose leader
  is not the preferred replica (``replicas[0]``) above
  ``HealthPolicy.imbalance_warn_pct`` is WARNING.
- ``reassignments``: any reassignment in progress is WARNING (which ones are
  listed). UNKNOWN when they could not be listed.

A topic whose ``min.insync.replicas`` could not be read (``min_isr_unknown``: no
DescribeConfigs ACL, a broker without it) is judged only where every possible value
gives the same answer: a full ISR is neither under the capped requirement nor "at
min" with RF above it, an empty ISR is under any. A shrunk ISR makes
``under_min_isr`` and ``at_min_isr`` UNKNOWN, and ``min_isr_above_rf`` is UNKNOWN
for every such partition: "could not read" is never OK.

Every affected partition is linked to its leader broker and whether that broker
is registered (down brokers explain URP and offline partitions).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from opskit.core.health_model import (
    CHECKS,
    DEFAULT_IMBALANCE_WARN_PCT,
    DEFAULT_QUORUM_LAG_WARN,
    MIN_ISR_CHECKS,
    AffectedPartition,
    ClusterHealthInput,
    Finding,
    HealthCounts,
    HealthPolicy,
    HealthReport,
    PartitionState,
    QuorumInfo,
    QuorumReplica,
    QuorumSummary,
    Reassignment,
)
from opskit.core.models import Severity

__all__ = [
    "CHECKS", "DEFAULT_IMBALANCE_WARN_PCT", "DEFAULT_QUORUM_LAG_WARN", "MIN_ISR_CHECKS",
    "AffectedPartition", "ClusterHealthInput", "Finding", "HealthCounts", "HealthPolicy",
    "HealthReport", "PartitionState", "QuorumInfo", "QuorumReplica", "QuorumSummary",
    "Reassignment", "effective_min_isr", "evaluate_health", "expected_broker_count",
    "summarize_quorum",
]


# --------------------------------------------------------------------------- evaluation


def expected_broker_count(flag: int | None, partitions: Iterable[PartitionState],
                          brokers: Iterable[int]) -> int:
    """--expected-brokers, else distinct replica ids seen in partitions, else registered brokers."""
    if flag is not None:
        return flag
    seen = {r for p in partitions for r in p.replicas}
    return len(seen) if seen else len(set(brokers))


def _affected(p: PartitionState, alive: frozenset[int], min_isr: int | None = None) -> AffectedPartition:
    leader_ref = p.leader if p.leader >= 0 else (p.replicas[0] if p.replicas else -1)
    return AffectedPartition(
        topic=p.topic, partition=p.partition, leader=p.leader, replicas=p.replicas, isr=p.isr,
        leader_down=leader_ref >= 0 and leader_ref not in alive,
        down_replicas=tuple(r for r in p.replicas if r not in alive),
        min_isr=min_isr,
    )


def _names(items: Iterable[str], limit: int = 5) -> str:
    lst = list(items)
    shown = ", ".join(lst[:limit])
    return shown + (f" and {len(lst) - limit} more" if len(lst) > limit else "")


def _on_down(aff: Iterable[AffectedPartition]) -> str:
    down = sorted({r for a in aff for r in a.down_replicas})
    return f" (replicas on down broker(s) {', '.join(map(str, down))})" if down else ""


def check_brokers(inp: ClusterHealthInput, expected: int) -> Finding:
    registered = sorted(set(inp.brokers))
    missing: tuple[int, ...] = ()
    seen = sorted({r for p in inp.partitions for r in p.replicas})
    if seen:
        missing = tuple(r for r in seen if r not in registered)
    if len(registered) < expected:
        extra = f"; hosting replicas but not registered: {', '.join(map(str, missing))}" if missing else ""
        return Finding("brokers", Severity.CRITICAL,
                       f"brokers registered {len(registered)} < expected {expected}{extra}",
                       brokers=missing)
    msg = f"brokers registered {len(registered)} (expected {expected})"
    if missing:  # enough brokers, but some replica host is gone (e.g. replaced broker ids)
        return Finding("brokers", Severity.WARNING,
                       f"{msg}, but replicas are assigned to unregistered broker(s) "
                       f"{', '.join(map(str, missing))}", brokers=missing)
    return Finding("brokers", Severity.OK, msg, brokers=tuple(registered))


def check_controller(inp: ClusterHealthInput) -> Finding:
    q = inp.quorum
    if q is not None and q.leader_id < 0:
        return Finding("controller", Severity.CRITICAL, "no active controller: the KRaft quorum has no leader")
    if inp.controller_id < 0 and q is None:
        return Finding("controller", Severity.CRITICAL, "no active controller")
    if q is not None:
        return Finding("controller", Severity.OK, f"active controller {q.leader_id} (quorum leader)",
                       brokers=(q.leader_id,))
    return Finding("controller", Severity.OK, f"active controller {inp.controller_id}",
                   brokers=(inp.controller_id,))


def summarize_quorum(q: QuorumInfo) -> QuorumSummary:
    leader = next((v for v in q.voters if v.replica_id == q.leader_id), None)
    head = leader.log_end_offset if leader is not None else q.high_watermark
    lag = {r.replica_id: max(0, head - r.log_end_offset) for r in (*q.voters, *q.observers)
           if r.replica_id != q.leader_id}
    return QuorumSummary(
        leader_id=q.leader_id, leader_epoch=q.leader_epoch, high_watermark=q.high_watermark,
        voters=tuple(sorted(v.replica_id for v in q.voters)),
        observers=tuple(sorted(o.replica_id for o in q.observers)),
        lag=lag,
    )


def check_quorum(inp: ClusterHealthInput, policy: HealthPolicy) -> Finding:
    if inp.quorum is None:
        return Finding("quorum", Severity.UNKNOWN,
                       inp.quorum_error or "KRaft quorum not described")
    s = summarize_quorum(inp.quorum)
    if s.leader_id < 0:
        return Finding("quorum", Severity.CRITICAL,
                       f"KRaft quorum has no leader (voters {list(s.voters)})", brokers=s.voters)
    lagging = sorted(r for r, lag in s.lag.items() if lag > policy.quorum_lag_warn)
    base = (f"quorum leader {s.leader_id} (epoch {s.leader_epoch}), voters {list(s.voters)}, "
            f"observers {list(s.observers)}")
    if lagging:
        detail = ", ".join(f"{r} by {s.lag[r]}" for r in lagging)
        return Finding("quorum", Severity.WARNING,
                       f"quorum replicas behind the leader by more than {policy.quorum_lag_warn} "
                       f"records: {detail}", brokers=tuple(lagging))
    if len(s.voters) == 1:
        base += "; single voter: the controller is a single point of failure"
    return Finding("quorum", Severity.OK, base, brokers=s.voters)


def effective_min_isr(min_isr: int, replicas: int) -> int:
    """What a partition leader requires of an acks=all write: ``min.insync.replicas``
    capped at the partition's replica count (Kafka's Partition.effectiveMinIsr; seen on
    3.7.2 and 4.3.1). During a reassignment the count includes the replicas being added."""
    return min(min_isr, replicas) if replicas > 0 else min_isr


@dataclass
class _Buckets:
    """The partitions each per-partition check found (``*_unknown``: could not judge, the
    topic's min.insync.replicas being unreadable)."""

    offline: list[AffectedPartition] = field(default_factory=list)
    under_min: list[AffectedPartition] = field(default_factory=list)
    under_min_unknown: list[AffectedPartition] = field(default_factory=list)
    urp: list[AffectedPartition] = field(default_factory=list)
    at_min: list[AffectedPartition] = field(default_factory=list)
    at_min_unknown: list[AffectedPartition] = field(default_factory=list)
    not_preferred: list[AffectedPartition] = field(default_factory=list)
    above_rf: list[AffectedPartition] = field(default_factory=list)
    above_rf_unknown: list[AffectedPartition] = field(default_factory=list)


def _per_partition(inp: ClusterHealthInput, policy: HealthPolicy, alive: frozenset[int]) -> _Buckets:
    """Sort every partition into the checks it fails. A topic whose min.insync.replicas
    could not be read is judged only where any value gives the same answer: a full ISR
    is never under the (capped) requirement nor "at min" with RF above it; an empty ISR
    is under any; whether RF is below min.insync.replicas is never known."""
    b = _Buckets()
    for p in sorted(inp.partitions, key=lambda x: (x.topic, x.partition)):
        rf, isr = len(p.replicas), len(p.isr)
        unknown = inp.min_isr_unknown is not None and p.topic not in inp.min_isr
        mi = inp.min_isr.get(p.topic, policy.default_min_isr)
        aff = _affected(p, alive, None if unknown else mi)
        if p.leader < 0:
            b.offline.append(aff)
        if isr < rf:
            b.urp.append(aff)
        if p.leader >= 0 and p.replicas and p.leader != p.replicas[0]:
            b.not_preferred.append(aff)
        if unknown:
            if isr == 0 and rf > 0:
                b.under_min.append(aff)
            elif isr < rf:
                b.under_min_unknown.append(aff)
                b.at_min_unknown.append(aff)
            if rf > 0:
                b.above_rf_unknown.append(aff)
            continue
        if isr < effective_min_isr(mi, rf):
            b.under_min.append(aff)
        if 0 < rf < mi:
            b.above_rf.append(aff)
        if isr == mi and rf > mi:
            b.at_min.append(aff)
    return b


def evaluate_health(inp: ClusterHealthInput, policy: HealthPolicy | None = None) -> HealthReport:
    """Run every check over ``inp``; never raises for odd data, never mutates it."""
    policy = policy or HealthPolicy()
    alive = frozenset(inp.brokers)
    expected = expected_broker_count(inp.expected_brokers, inp.partitions, inp.brokers)
    b = _per_partition(inp, policy, alive)
    offline, under_min, urp, at_min, not_preferred = (b.offline, b.under_min, b.urp, b.at_min,
                                                      b.not_preferred)
    online = len(inp.partitions) - len(offline)
    findings = [check_brokers(inp, expected), check_controller(inp), check_quorum(inp, policy)]

    if inp.topics_invisible:
        findings.append(Finding("topics", Severity.UNKNOWN, inp.topics_invisible))

    def part_finding(check: str, bad: list[AffectedPartition], sev: Severity, what: str,
                     ok: str, unknown: list[AffectedPartition] | None = None,
                     unknown_what: str = "") -> Finding:
        """The check's finding: ``sev`` for the ``bad`` partitions; else UNKNOWN for those it
        could not judge (``unknown``, with why); else OK. A min-ISR check says when the
        requirement was unreadable, whatever its outcome."""
        note = (f" ({inp.min_isr_unknown})" if inp.min_isr_unknown and check in MIN_ISR_CHECKS
                else "")
        if bad:
            names = _names(f"{a.topic}:{a.partition}" for a in bad)
            return Finding(check, sev, f"{len(bad)} {what}: {names}{_on_down(bad)}{note}",
                           partitions=tuple(bad),
                           brokers=tuple(sorted({r for a in bad for r in a.down_replicas})))
        if unknown:
            names = _names(f"{a.topic}:{a.partition}" for a in unknown)
            return Finding(check, Severity.UNKNOWN, f"{len(unknown)} {unknown_what}: {names}{note}",
                           partitions=tuple(unknown))
        return Finding(check, Severity.OK, ok + note)

    findings.append(part_finding("offline_partitions", offline, Severity.CRITICAL,
                                 "offline partition(s) (no leader)", "no offline partitions"))
    findings.append(part_finding(
        "under_min_isr", under_min, Severity.CRITICAL,
        "partition(s) under min.insync.replicas (acks=all writes fail)",
        "no partitions under min.insync.replicas", b.under_min_unknown,
        "partition(s) with a shrunk ISR may be under min.insync.replicas"))
    findings.append(part_finding(
        "min_isr_above_rf", b.above_rf, Severity.WARNING,
        "partition(s) with fewer replicas than min.insync.replicas (Kafka caps it at the "
        "replica count: acks=all writes are acknowledged with only RF copies; adding "
        "replicas makes acks=all writes fail until the new replicas are in sync)",
        "no partitions with fewer replicas than min.insync.replicas", b.above_rf_unknown,
        "partition(s) whose replica count cannot be compared with min.insync.replicas"))
    findings.append(part_finding("under_replicated", urp, Severity.WARNING,
                                 "under-replicated partition(s)", "no under-replicated partitions"))
    findings.append(part_finding(
        "at_min_isr", at_min, Severity.WARNING,
        "partition(s) at min.insync.replicas (one more replica lost blocks acks=all writes)",
        "no partitions at min.insync.replicas", b.at_min_unknown,
        "partition(s) with a shrunk ISR may be at min.insync.replicas"))

    pct = 100.0 * len(not_preferred) / online if online else 0.0
    if pct > policy.imbalance_warn_pct:
        findings.append(Finding(
            "preferred_leader_imbalance", Severity.WARNING,
            f"{len(not_preferred)} of {online} partitions ({pct:.1f}%) not led by their preferred "
            f"replica (warn above {policy.imbalance_warn_pct:g}%): run a preferred leader election",
            partitions=tuple(not_preferred)))
    else:
        findings.append(Finding(
            "preferred_leader_imbalance", Severity.OK,
            f"{len(not_preferred)} of {online} partitions ({pct:.1f}%) not led by their preferred "
            f"replica", partitions=tuple(not_preferred)))

    if inp.reassignments is None:
        findings.append(Finding("reassignments", Severity.UNKNOWN,
                                inp.reassignments_error or "reassignments not listed"))
    elif inp.reassignments:
        rs = sorted(inp.reassignments, key=lambda r: (r.topic, r.partition))
        detail = _names(
            f"{r.name} (adding {list(r.adding)}, removing {list(r.removing)})" for r in rs)
        findings.append(Finding(
            "reassignments", Severity.WARNING, f"{len(rs)} reassignment(s) in progress: {detail}",
            brokers=tuple(sorted({b for r in rs for b in (*r.adding, *r.removing)}))))
    else:
        findings.append(Finding("reassignments", Severity.OK, "no reassignments in progress"))

    counts = HealthCounts(
        brokers_registered=len(alive), brokers_expected=expected, partitions=len(inp.partitions),
        urp=len(urp), under_min_isr=None if b.under_min_unknown else len(under_min),
        at_min_isr=None if b.at_min_unknown else len(at_min), offline=len(offline),
        preferred_leader_imbalance=len(not_preferred),
        reassignments=None if inp.reassignments is None else len(inp.reassignments),
    )
    return HealthReport(
        findings=tuple(findings), counts=counts,
        quorum=summarize_quorum(inp.quorum) if inp.quorum is not None else None,
        brokers=tuple(sorted(alive)), controller_id=inp.controller_id,
    )
