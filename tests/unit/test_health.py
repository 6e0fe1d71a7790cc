"""Cluster health rules (opskit.core.health), rule by rule, on plain data."""

from __future__ import annotations

import dataclasses

import pytest

from opskit.core.health import (
    ClusterHealthInput,
    HealthPolicy,
    PartitionState,
    QuorumInfo,
    QuorumReplica,
    Reassignment,
    evaluate_health,
    expected_broker_count,
)
from opskit.core.models import Severity

B3 = (0, 1, 2)
QUORUM = QuorumInfo(leader_id=0, leader_epoch=3, high_watermark=500,
                    voters=(QuorumReplica(0, 500),),
                    observers=(QuorumReplica(1, 499), QuorumReplica(2, 500)))


def p(topic: str, part: int, leader: int, replicas: tuple[int, ...],
      isr: tuple[int, ...] | None = None) -> PartitionState:
    return PartitionState(topic, part, leader, replicas, replicas if isr is None else isr)


def healthy_parts() -> tuple[PartitionState, ...]:
    return (
        p("orders", 0, 0, (0, 1, 2)),
        p("orders", 1, 1, (1, 2, 0)),
        p("orders", 2, 2, (2, 0, 1)),
        p("audit", 0, 1, (1, 2, 0)),
    )


def inp(**kw: object) -> ClusterHealthInput:
    base = ClusterHealthInput(
        brokers=B3, controller_id=0, partitions=healthy_parts(),
        min_isr={"orders": 2, "audit": 3}, quorum=QUORUM, reassignments=(),
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def sev(report: object, check: str) -> Severity:
    return report.finding(check).severity  # type: ignore[attr-defined, no-any-return]


def test_healthy_cluster_is_ok_everywhere() -> None:
    r = evaluate_health(inp())
    assert r.severity is Severity.OK
    assert r.severity.nagios_code == 0
    assert all(f.severity is Severity.OK for f in r.findings)
    c = r.counts
    assert (c.urp, c.under_min_isr, c.at_min_isr, c.offline, c.preferred_leader_imbalance,
            c.reassignments) == (0, 0, 0, 0, 0, 0)
    assert r.summary.startswith("OK: 3/3 brokers, 4 partitions")
    assert r.to_dict()["quorum"]["voters"] == [0]


# ---------------------------------------------------------------- offline


def test_offline_partition_is_critical_and_linked_to_down_broker() -> None:
    parts = (*healthy_parts(), p("solo", 0, -1, (2,), (2,)))
    r = evaluate_health(inp(partitions=parts, brokers=(0, 1)))
    f = r.finding("offline_partitions")
    assert f.severity is Severity.CRITICAL
    assert r.counts.offline == 1
    (a,) = f.partitions
    assert (a.topic, a.partition, a.leader) == ("solo", 0, -1)
    assert a.leader_down is True and a.down_replicas == (2,)
    assert f.brokers == (2,)
    assert "solo:0" in f.message and "down broker(s) 2" in f.message
    assert r.severity.nagios_code == 2


def test_offline_partition_not_counted_as_leader_imbalance() -> None:
    parts = (*healthy_parts(), p("solo", 0, -1, (2,), (2,)))
    r = evaluate_health(inp(partitions=parts))
    assert r.counts.preferred_leader_imbalance == 0


# ---------------------------------------------------------------- min ISR


def test_under_min_isr_is_critical() -> None:
    parts = (p("audit", 0, 1, (1, 2, 0), (1, 0)),)
    r = evaluate_health(inp(partitions=parts, min_isr={"audit": 3}))
    f = r.finding("under_min_isr")
    assert f.severity is Severity.CRITICAL
    assert r.counts.under_min_isr == 1
    assert f.partitions[0].min_isr == 3
    assert f.partitions[0].leader_down is False  # leader 1 is up


def test_rf_below_min_isr_is_judged_as_the_leader_judges_it() -> None:
    """RF 1 with min.insync.replicas=2: Kafka caps the requirement at RF, acks=all writes
    are accepted (tests/integration/test_min_isr_judgement.py shows it on 3.7 and 4.x):
    not CRITICAL "writes fail", but a WARNING naming the real risk. While a reassignment
    adds replicas the cap rises with them: ISR 1 of 3 replicas is under min ISR 2."""
    solo = (p("billing", 0, 0, (0,), (0,)),)
    r = evaluate_health(inp(partitions=solo, min_isr={"billing": 2}, expected_brokers=1))
    assert sev(r, "under_min_isr") is Severity.OK
    f = r.finding("min_isr_above_rf")
    assert f.severity is Severity.WARNING and r.severity is Severity.WARNING
    assert "billing:0" in f.message and "only RF copies" in f.message
    adding = (p("billing", 0, 0, (0, 1, 2), (0,)),)
    r = evaluate_health(inp(partitions=adding, min_isr={"billing": 2}))
    assert sev(r, "under_min_isr") is Severity.CRITICAL
    assert sev(r, "min_isr_above_rf") is Severity.OK


def test_missing_min_isr_uses_policy_default() -> None:
    parts = (p("x", 0, 0, (0, 1, 2), (0,)),)
    r = evaluate_health(inp(partitions=parts, min_isr={}), HealthPolicy(default_min_isr=2))
    assert sev(r, "under_min_isr") is Severity.CRITICAL
    r1 = evaluate_health(inp(partitions=parts, min_isr={}))
    assert sev(r1, "under_min_isr") is Severity.OK


def test_at_min_isr_warns_only_when_rf_above_min_isr() -> None:
    # RF 3, min 2, ISR 2: at min ISR -> WARNING (and also URP)
    r = evaluate_health(inp(partitions=(p("orders", 0, 0, (0, 1, 2), (0, 1)),)))
    assert sev(r, "at_min_isr") is Severity.WARNING
    assert r.counts.at_min_isr == 1
    # RF 3, min 3, full ISR: "at min" but RF == min.isr -> no warning
    r2 = evaluate_health(inp(partitions=(p("audit", 0, 0, (0, 1, 2)),)))
    assert sev(r2, "at_min_isr") is Severity.OK
    assert r2.counts.at_min_isr == 0
    # RF 1, min 1: likewise
    r3 = evaluate_health(inp(partitions=(p("solo", 0, 2, (2,)),), min_isr={"solo": 1}))
    assert r3.counts.at_min_isr == 0
    assert r3.severity is Severity.OK


# ---------------------------------------------------------------- URP


def test_under_replicated_is_warning_and_names_down_replica() -> None:
    parts = (p("orders", 0, 0, (0, 1, 2), (0, 1)), p("orders", 1, 1, (1, 2, 0), (1, 0)))
    r = evaluate_health(inp(partitions=parts, min_isr={"orders": 1}, brokers=(0, 1),
                            expected_brokers=2))
    f = r.finding("under_replicated")
    assert f.severity is Severity.WARNING
    assert r.counts.urp == 2
    assert all(a.down_replicas == (2,) for a in f.partitions)
    assert f.brokers == (2,)
    assert r.severity is Severity.WARNING  # nothing worse
    assert r.severity.nagios_code == 1


# ---------------------------------------------------------------- brokers / controller


def test_fewer_brokers_than_expected_is_critical() -> None:
    r = evaluate_health(inp(brokers=(0, 1), expected_brokers=3))
    f = r.finding("brokers")
    assert f.severity is Severity.CRITICAL
    assert "brokers registered 2 < expected 3" in f.message
    assert f.brokers == (2,)  # replicas are still assigned to broker 2
    assert r.counts.brokers_registered == 2 and r.counts.brokers_expected == 3


def test_expected_brokers_defaults_to_replica_ids_then_registered() -> None:
    assert expected_broker_count(5, healthy_parts(), B3) == 5
    assert expected_broker_count(None, healthy_parts(), (0,)) == 3
    assert expected_broker_count(None, (), (0, 1)) == 2
    # a stopped broker still hosting replicas makes the default catch it
    r = evaluate_health(inp(brokers=(0, 1)))
    assert sev(r, "brokers") is Severity.CRITICAL


def test_more_brokers_than_expected_is_ok() -> None:
    r = evaluate_health(inp(brokers=(0, 1, 2, 3)))
    assert sev(r, "brokers") is Severity.OK


def test_no_controller_is_critical() -> None:
    r = evaluate_health(inp(controller_id=-1, quorum=None, quorum_error="x"))
    assert sev(r, "controller") is Severity.CRITICAL
    leaderless = dataclasses.replace(QUORUM, leader_id=-1)
    r2 = evaluate_health(inp(quorum=leaderless))
    assert sev(r2, "controller") is Severity.CRITICAL
    assert sev(r2, "quorum") is Severity.CRITICAL
    assert r2.severity.nagios_code == 2


# ---------------------------------------------------------------- quorum


def test_quorum_summary_and_single_voter_note() -> None:
    r = evaluate_health(inp())
    q = r.quorum
    assert q is not None
    assert (q.leader_id, q.voters, q.observers) == (0, (0,), (1, 2))
    assert dict(q.lag) == {1: 1, 2: 0}
    assert "single point of failure" in r.finding("quorum").message


def test_quorum_follower_lag_above_threshold_warns() -> None:
    q = dataclasses.replace(QUORUM, observers=(QuorumReplica(1, 100), QuorumReplica(2, 500)))
    r = evaluate_health(inp(quorum=q), HealthPolicy(quorum_lag_warn=100))
    f = r.finding("quorum")
    assert f.severity is Severity.WARNING
    assert f.brokers == (1,)
    assert "1 by 400" in f.message
    # at the threshold it is fine
    r2 = evaluate_health(inp(quorum=q), HealthPolicy(quorum_lag_warn=400))
    assert sev(r2, "quorum") is Severity.OK


def test_quorum_unknown_keeps_the_reason() -> None:
    msg = "broker does not support DescribeQuorum (needs Kafka 3.3+ KRaft)"
    r = evaluate_health(inp(quorum=None, quorum_error=msg))
    f = r.finding("quorum")
    assert f.severity is Severity.UNKNOWN and f.message == msg
    assert sev(r, "controller") is Severity.OK  # metadata still names a controller
    assert r.severity is Severity.UNKNOWN and r.severity.nagios_code == 3
    assert r.to_dict()["quorum"] is None


def test_unknown_ranks_below_warning_and_critical() -> None:
    r = evaluate_health(inp(quorum=None, quorum_error="x", brokers=(0, 1)))
    assert r.severity is Severity.CRITICAL


# ---------------------------------------------------------------- preferred leader


def test_preferred_leader_imbalance_threshold() -> None:
    parts = tuple(p("t", i, (i + 1) % 3 if i < 2 else i % 3, ((i % 3), (i + 1) % 3, (i + 2) % 3))
                  for i in range(10))
    # partitions 0 and 1 are led by their second replica: 2 of 10 = 20%
    r = evaluate_health(inp(partitions=parts, min_isr={}))
    f = r.finding("preferred_leader_imbalance")
    assert r.counts.preferred_leader_imbalance == 2
    assert f.severity is Severity.WARNING
    assert "20.0%" in f.message
    assert {a.partition for a in f.partitions} == {0, 1}
    r2 = evaluate_health(inp(partitions=parts, min_isr={}), HealthPolicy(imbalance_warn_pct=20))
    assert sev(r2, "preferred_leader_imbalance") is Severity.OK


def test_policy_rejects_bad_values() -> None:
    with pytest.raises(ValueError):
        HealthPolicy(imbalance_warn_pct=120)
    with pytest.raises(ValueError):
        HealthPolicy(quorum_lag_warn=-1)


# ---------------------------------------------------------------- reassignments


def test_reassignment_in_progress_warns_and_says_which() -> None:
    ra = (Reassignment("orders", 1, (1, 2, 0, 3), adding=(3,), removing=(2,)),)
    r = evaluate_health(inp(reassignments=ra))
    f = r.finding("reassignments")
    assert f.severity is Severity.WARNING
    assert "orders:1" in f.message and "adding [3]" in f.message and "removing [2]" in f.message
    assert f.brokers == (2, 3)
    assert r.counts.reassignments == 1


def test_reassignments_unknown() -> None:
    r = evaluate_health(inp(reassignments=None, reassignments_error="no API"))
    assert sev(r, "reassignments") is Severity.UNKNOWN
    assert r.counts.reassignments is None
    assert r.to_dict()["counts"]["reassignments"] is None


# ---------------------------------------------------------------- report


def test_report_is_serialisable_and_input_untouched() -> None:
    i = inp(brokers=(0, 1), partitions=(*healthy_parts(), p("solo", 0, -1, (2,))))
    before = dataclasses.asdict(i)
    r = evaluate_health(i)
    d = r.to_dict()
    assert dataclasses.asdict(i) == before
    assert d["severity"] == "CRITICAL"
    assert d["summary"].startswith("CRITICAL: ")
    assert [f["check"] for f in d["findings"]] == [
        "brokers", "controller", "quorum", "offline_partitions", "under_min_isr",
        "min_isr_above_rf", "under_replicated", "at_min_isr", "preferred_leader_imbalance",
        "reassignments"]
    off = next(f for f in d["findings"] if f["check"] == "offline_partitions")
    assert off["partitions"][0]["leader_down"] is True


def test_core_imports_stdlib_and_core_only() -> None:
    import ast
    import sys

    import opskit.core.health as h

    with open(h.__file__, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    for m in mods:
        top = m.split(".")[0]
        assert top in sys.stdlib_module_names or m.startswith("opskit.core"), m


def test_unknown_min_isr_is_said_not_hidden() -> None:
    """No DescribeConfigs ACL, every ISR full: under/at min ISR are verifiably OK (a full
    ISR meets the capped requirement, and "at min" needs RF above it), but whether a
    topic has fewer replicas than min.insync.replicas cannot be known: UNKNOWN, never OK."""
    why = "min.insync.replicas not readable: User:monitor has no DescribeConfigs ACL"
    r = evaluate_health(inp(min_isr={}, min_isr_unknown=why))
    for check in ("under_min_isr", "at_min_isr"):
        assert sev(r, check) is Severity.OK and why in r.finding(check).message
    above = r.finding("min_isr_above_rf")
    assert above.severity is Severity.UNKNOWN and why in above.message
    assert len(above.partitions) == 4
    assert r.severity is Severity.UNKNOWN and r.severity.nagios_code == 3
    assert (r.counts.under_min_isr, r.counts.at_min_isr) == (0, 0)
    assert why not in evaluate_health(inp()).finding("under_min_isr").message


def test_unknown_min_isr_with_a_shrunk_isr() -> None:
    """A shrunk ISR under an unreadable min ISR may be under or at it: UNKNOWN (never the
    WARNING or OK a guessed default of 1 gave), the counts None; an empty ISR is under
    any min ISR: CRITICAL. A topic whose min ISR was read is judged as usual."""
    why = "min.insync.replicas not readable: broker closed the connection"
    parts = (p("orders", 0, 0, (0, 1, 2), (0,)), p("orders", 1, 1, (1, 2, 0)),
             p("audit", 0, 1, (1, 2, 0)))
    r = evaluate_health(inp(partitions=parts, min_isr={}, min_isr_unknown=why))
    for check in ("under_min_isr", "at_min_isr"):
        f = r.finding(check)
        assert f.severity is Severity.UNKNOWN and [f"{a.topic}:{a.partition}" for a in f.partitions] == ["orders:0"]
    assert (r.counts.under_min_isr, r.counts.at_min_isr) == (None, None)
    assert sev(r, "under_replicated") is Severity.WARNING  # known without min ISR
    empty = (p("orders", 0, -1, (0, 1, 2), ()),)
    r = evaluate_health(inp(partitions=empty, min_isr={}, min_isr_unknown=why))
    assert sev(r, "under_min_isr") is Severity.CRITICAL and r.counts.under_min_isr == 1
    # audit's min ISR (3) was read: its shrunk ISR is CRITICAL whatever orders' is
    parts = (p("orders", 0, 0, (0, 1, 2), (0,)), p("audit", 0, 1, (1, 2, 0), (1, 2)))
    r = evaluate_health(inp(partitions=parts, min_isr={"audit": 3}, min_isr_unknown=why))
    f = r.finding("under_min_isr")
    assert f.severity is Severity.CRITICAL and [f"{a.topic}:{a.partition}" for a in f.partitions] == ["audit:0"]


def test_no_visible_topic_is_unknown() -> None:
    why = "no topic is visible to User:monitor"
    r = evaluate_health(inp(partitions=(), min_isr={}, topics_invisible=why))
    assert sev(r, "topics") is Severity.UNKNOWN and r.severity is Severity.UNKNOWN
    assert why in r.summary
