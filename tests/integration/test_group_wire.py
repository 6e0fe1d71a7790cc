"""The batched protocol-level group read gives exactly what librdkafka's per-group calls give."""

from __future__ import annotations

import socket

import pytest

from opskit.adapters.kafka.protocol.groups import GroupWire, Node, WireUnsupported
from opskit.adapters.kafka.reader.wire_reader import WireReader
from opskit.core.connection import ConnectionConfig
from opskit.core.models import GroupState
from opskit.errors import KafkaUnavailableError
from tests.helpers import ActiveMember, commit_retrying, create_topic, produce


def _nodes(c) -> list[Node]:  # type: ignore[no-untyped-def]
    md = c.admin().metadata()
    return [Node(b.node_id, b.host, b.port) for b in md.brokers]


def test_batched_read_equals_per_group_read(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t1, t2 = f"wire_a_{uniq}", f"wire_b_{uniq}"
    create_topic(bs, t1, 4)
    create_topic(bs, t2, 2)
    produce(bs, t1, {p: 5 for p in range(4)})
    produce(bs, t2, {0: 3, 1: 3})
    idle = [f"wire-idle-{i}-{uniq}" for i in range(25)]
    for i, g in enumerate(idle):
        commit_retrying(bs, g, {(t1, i % 4): i % 5, (t2, 1): 2})
    active = f"wire-active-{uniq}"
    unknown = f"wire-unknown-{uniq}"
    with ActiveMember(bs, active, [t1, t2], {(t1, 0): 1, (t2, 0): 3}):
        ids = sorted(idle + [active, unknown])
        admin = any_kafka.admin()
        want_d = admin.describe_groups(ids)
        want_c = admin.committed_offsets(ids)
        with GroupWire(admin.conn, _nodes(any_kafka), timeout=15) as wire:
            descs, committed, rest = wire.read_groups(ids)
            trips = wire.round_trips
    assert rest == []
    assert committed == {g: want_c[g] for g in ids}
    for g in ids:
        a, b = descs[g], want_d[g]
        assert (a.group_id, a.state, a.coordinator) == (b.group_id, b.state, b.coordinator), g
        assert [(m.member_id, m.client_id, m.host, m.assignment) for m in a.members] == \
            [(m.member_id, m.client_id, m.host, m.assignment) for m in b.members], g
    assert descs[active].state is GroupState.STABLE and len(descs[active].members[0].assignment) == 6
    assert descs[unknown].state is GroupState.DEAD and committed[unknown] == {}
    # one broker: FindCoordinator, DescribeGroups, OffsetFetch for all 27 groups (API versions
    # come from the capability probe's cached ApiVersions, not a request of the client's own)
    assert trips == 3


def test_lag_source_uses_batched_path_and_counts_requests(kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = kafka.bootstrap
    t = f"wire_c_{uniq}"
    create_topic(bs, t, 2)
    groups = [f"wire-count-{i}-{uniq}" for i in range(40)]
    for g in groups:
        commit_retrying(bs, g, {(t, 0): 0})
    admin = kafka.admin()
    md = admin.metadata()
    reader = WireReader(admin)
    try:
        committed = reader.read_groups(groups, md).committed
        # 3 protocol-level round trips; only metadata went through librdkafka
        assert reader.round_trips - admin.round_trips == 3 and admin.round_trips == 1
    finally:
        reader.close()
    assert {g: list(c.values()) for g, c in committed.items()} == {g: [0] for g in groups}


def test_unreachable_broker_is_a_clean_error() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    wire = GroupWire(ConnectionConfig(f"127.0.0.1:{port}"), [Node(0, "127.0.0.1", port)], timeout=2)
    with pytest.raises(KafkaUnavailableError):
        wire.read_groups(["g"])


def test_silent_broker_times_out_within_the_timeout() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)  # accepts connections, never answers
    port = srv.getsockname()[1]
    try:
        wire = GroupWire(ConnectionConfig(f"127.0.0.1:{port}"), [Node(0, "127.0.0.1", port)], timeout=1)
        with pytest.raises(KafkaUnavailableError, match="timeout 1s"):
            wire.read_groups(["g"])
    finally:
        srv.close()


def test_a_sasl_mechanism_opskit_lacks_is_left_to_librdkafka() -> None:
    conn = ConnectionConfig("127.0.0.1:1", security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="OAUTHBEARER", username="u", password="p")
    with pytest.raises(WireUnsupported):
        GroupWire(conn, [Node(0, "127.0.0.1", 1)], timeout=1)
