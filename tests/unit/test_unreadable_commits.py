"""A committed offset the broker answered with an error is not "no commit" (pure rules and
the two read paths' parsing; the real broker: tests/integration/test_commit_unreadable.py)."""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import KafkaError

from opskit.adapters.kafka.admin.groups import _merge_committed
from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.groups import _offsets
from opskit.core.lag import compute_group_lag
from opskit.core.models import (
    Anomaly,
    GroupDescription,
    GroupState,
    LagThresholds,
    Member,
    PartitionOffsets,
    Severity,
    TopicPartition,
)

A0, B0, B1 = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("b", 1)


def _group(*assigned: TopicPartition) -> GroupDescription:
    members = (Member("m", "c", "h", tuple(assigned)),) if assigned else ()
    return GroupDescription("g", GroupState.STABLE if assigned else GroupState.EMPTY, members)


def test_unreadable_partitions_are_listed_and_the_group_is_unknown() -> None:
    # b is hidden: not in the metadata (no count, no log offsets), its commits unread
    offs = {A0: PartitionOffsets(A0, 0, 10)}
    g = compute_group_lag(_group(A0, B0, B1), {A0: 3}, offs, {"a": 1}, unreadable={B0, B1})
    rows = {p.tp: p for p in g.partitions}
    assert set(rows) == {A0, B0, B1}
    assert rows[A0].lag == 7 and not rows[A0].anomalies
    for tp in (B0, B1):  # not partition_missing: the partition was not seen, not gone
        assert rows[tp].anomalies == (Anomaly.COMMITTED_UNREADABLE,)
        assert rows[tp].lag is None and rows[tp].committed is None
    assert g.severity is Severity.UNKNOWN  # was OK (lag 7 of a part)
    # the same without the errors: what the old code made of it
    old = compute_group_lag(_group(A0, B0, B1), {A0: 3}, offs, {"a": 1})
    assert old.severity is Severity.OK


def test_unreadable_without_a_member_is_still_listed_with_its_log_offsets() -> None:
    offs = {A0: PartitionOffsets(A0, 0, 10), B0: PartitionOffsets(B0, 2, 9)}
    g = compute_group_lag(_group(), {A0: 3}, offs, {"a": 1, "b": 1}, unreadable={B0})
    b0 = next(p for p in g.partitions if p.tp == B0)
    assert (b0.log_start, b0.log_end, b0.lag) == (2, 9, None)
    assert b0.anomalies == (Anomaly.COMMITTED_UNREADABLE,)


def test_a_known_critical_lag_stays_critical() -> None:
    offs = {A0: PartitionOffsets(A0, 0, 100)}
    g = compute_group_lag(_group(A0, B0), {A0: 0}, offs, {"a": 1}, LagThresholds(10, 20),
                          unreadable={B0})
    assert g.severity is Severity.CRITICAL


def test_protocol_client_keeps_partition_errors() -> None:
    ans = kp.GroupOffsets("g", 0, [("a", [(0, 3, 0), (1, -1, 0)]), ("b", [(0, -1, 29), (1, -1, 3)])])
    offsets, errors = _offsets(ans)
    assert offsets == {A0: 3}
    assert errors == {B0: "TOPIC_AUTHORIZATION_FAILED", B1: "UNKNOWN_TOPIC_OR_PARTITION"}


def test_librdkafka_path_keeps_partition_errors() -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    res = SimpleNamespace(topic_partitions=[
        SimpleNamespace(topic="a", partition=0, offset=3, error=None),
        SimpleNamespace(topic="b", partition=0, offset=-1001, error=denied),
    ])
    into: dict[TopicPartition, int] = {}
    invalid: dict[TopicPartition, int] = {}
    unreadable: dict[TopicPartition, str] = {}
    _merge_committed(into, "g", res, invalid, unreadable)
    assert into == {A0: 3} and invalid == {}
    assert unreadable == {B0: "TOPIC_AUTHORIZATION_FAILED"}
