"""A scale-out step never takes a health check it could not read as healthy: the
preflight's problems and the rolling restart's "settled" wait count UNKNOWN findings
(a quorum not described, a min ISR that could not be judged, reassignments that could
not be listed) as not OK, naming them, on the real health rules' findings."""

from __future__ import annotations

import dataclasses

from opskit.adapters.scaleout.kafka_steps import (
    BLOCKING_CHECKS,
    SETTLED_CHECKS,
    not_ok,
    reassignment_problems,
)
from opskit.core.health import (
    ClusterHealthInput,
    PartitionState,
    QuorumInfo,
    QuorumReplica,
    evaluate_health,
)

QUORUM = QuorumInfo(leader_id=0, leader_epoch=3, high_watermark=500,
                    voters=(QuorumReplica(0, 500),),
                    observers=(QuorumReplica(1, 500), QuorumReplica(2, 500)))
PARTS = (PartitionState("orders", 0, 0, (0, 1, 2), (0, 1, 2)),
         PartitionState("orders", 1, 1, (1, 2, 0), (1, 2, 0)))


def inp(**kw: object) -> ClusterHealthInput:
    base = ClusterHealthInput(brokers=(0, 1, 2), controller_id=0, partitions=PARTS,
                              min_isr={"orders": 2}, quorum=QUORUM, reassignments=())
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_a_healthy_cluster_is_settled_and_has_no_problems() -> None:
    f = evaluate_health(inp()).findings
    assert not_ok(f, SETTLED_CHECKS) == []
    assert not_ok(f, BLOCKING_CHECKS) == []
    assert reassignment_problems(f) == (False, [])


def test_a_quorum_not_described_is_not_settled() -> None:
    f = evaluate_health(inp(quorum=None, quorum_error="DescribeQuorum timed out")).findings
    bad = not_ok(f, SETTLED_CHECKS)
    assert bad == ["quorum could not be verified: DescribeQuorum timed out"]
    assert not_ok(f, BLOCKING_CHECKS) == []  # the preflight does not check the quorum here


def test_a_min_isr_that_could_not_be_judged_blocks_the_preflight() -> None:
    # min.insync.replicas unreadable and the ISR shrunk: under/at min ISR cannot be told
    shrunk = (PartitionState("orders", 0, 0, (0, 1, 2), (0, 1)), PARTS[1])
    f = evaluate_health(inp(partitions=shrunk, min_isr={},
                            min_isr_unknown="DescribeConfigs closed the connection")).findings
    bad = not_ok(f, BLOCKING_CHECKS)
    assert any(b.startswith("under min isr could not be verified: ") for b in bad), bad
    assert any("under-replicated" in b for b in bad), bad


def test_reassignments_not_listed_are_not_none_in_progress() -> None:
    f = evaluate_health(inp(reassignments=None,
                            reassignments_error="ListPartitionReassignments failed")).findings
    in_progress, unknown = reassignment_problems(f)
    assert in_progress is False
    want = "reassignments in progress could not be listed: ListPartitionReassignments failed"
    assert unknown == [want]


def test_warning_and_critical_keep_their_messages() -> None:
    f = evaluate_health(inp(brokers=(0, 1))).findings  # broker 2 not registered
    bad = not_ok(f, SETTLED_CHECKS)
    assert bad and not any("could not be verified" in b for b in bad)
