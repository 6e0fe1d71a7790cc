"""KafkaAdmin.committed_offsets returns what one read found: the offsets, and per group the
partitions left out of them (a negative commit, an error instead of a commit), with no
state kept on the admin between reads. librdkafka is faked at its admin client (no sockets);
the real brokers: tests/integration/test_commit_unreadable.py, test_lag_vs_kafka_tool.py,
test_gateway_readpath.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.capabilities import Capabilities
from opskit.adapters.kafka.reader.librdkafka_reader import committed_on, read_groups_per_group
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition

A0, A1, A2, B0 = (TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("a", 2),
                  TopicPartition("b", 0))
DENIED = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)


def _row(tp: TopicPartition, offset: int, error: KafkaError | None = None) -> SimpleNamespace:
    return SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=offset, error=error)


class FakeAdminClient:
    """librdkafka's admin client answering OffsetFetch from ``answers`` (group -> rows);
    ``unparseable``: what it fails to parse (an OffsetFetch naming several topics)."""

    answers: ClassVar[dict[str, list[SimpleNamespace]]] = {}
    unparseable = False
    requests: ClassVar[list[tuple[str, list[str] | None]]] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        pass

    def list_consumer_group_offsets(self, reqs: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        (req,) = reqs
        named = req.topic_partitions
        topics = None if named is None else sorted({tp.topic for tp in named})
        type(self).requests.append((req.group_id, topics))
        fut: Future[Any] = Future()
        if self.unparseable and topics is not None and len(topics) > 1:
            fut.set_exception(KafkaException(KafkaError(KafkaError._BAD_MSG, "parse failure")))
        else:
            rows = self.answers[req.group_id]
            if topics is not None:
                rows = [r for r in rows if r.topic in topics]
            fut.set_result(SimpleNamespace(topic_partitions=rows))
        return {req: fut}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> KafkaAdmin:
    monkeypatch.setattr("opskit.adapters.kafka.confluent.AdminClient", FakeAdminClient)
    monkeypatch.setattr("opskit.adapters.kafka.capabilities.probe",
                        lambda conn, timeout: Capabilities(conn.bootstrap, "127.0.0.1:1"))
    FakeAdminClient.answers = {
        "g1": [_row(A0, 5), _row(A1, -5), _row(A2, -1), _row(B0, 3)],
        "g2": [_row(A0, -1001), _row(B0, -1, DENIED)],
    }
    FakeAdminClient.unparseable = False
    FakeAdminClient.requests = []
    return KafkaAdmin(ConnectionConfig("127.0.0.1:1"), timeout=1.0)


def test_the_outcomes_come_back_with_the_offsets(admin: KafkaAdmin) -> None:
    got = admin.committed_offsets(["g2", "g1"])
    assert got == {"g1": {A0: 5, B0: 3}, "g2": {}}
    assert got.invalid == {"g1": {A1: -5}, "g2": {}}
    assert got.unreadable == {"g1": {}, "g2": {B0: "TOPIC_AUTHORIZATION_FAILED"}}
    # nothing of it is kept on the admin: a later read of other groups starts clean
    later = admin.committed_offsets(["g1"])
    assert later.unreadable == {"g1": {}} and got.unreadable["g2"] == {B0: "TOPIC_AUTHORIZATION_FAILED"}
    assert not any("commit" in name for name in vars(admin))


def test_the_gateways_one_topic_per_request_keeps_the_outcomes(admin: KafkaAdmin) -> None:
    """A broker that cannot parse an OffsetFetch naming several topics (the Hanzo gateway):
    asked again one topic per request; the outcomes of that second read are the result's."""
    FakeAdminClient.unparseable = True
    got = admin.committed_offsets(["g1", "g2"], [A0, A1, A2, B0])
    assert got == {"g1": {A0: 5, B0: 3}, "g2": {}}
    assert got.invalid == {"g1": {A1: -5}, "g2": {}}
    assert got.unreadable == {"g1": {}, "g2": {B0: "TOPIC_AUTHORIZATION_FAILED"}}
    assert admin.quirks.offset_fetch_per_topic is not None
    assert ("g1", ["a", "b"]) in FakeAdminClient.requests and ("g1", ["b"]) in FakeAdminClient.requests


def test_the_librdkafka_reader_reads_the_outcomes_from_the_result(admin: KafkaAdmin,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    monkeypatch.setattr(KafkaAdmin, "describe_groups", lambda self, ids: {})
    read = read_groups_per_group(admin, ["g1", "g2"])
    # a negative commit stays in ``committed`` for the lag to flag (committed_invalid)
    assert read.committed == {"g1": {A0: 5, A1: -5, B0: 3}, "g2": {}}
    assert read.unreadable == {"g1": {}, "g2": {B0: "TOPIC_AUTHORIZATION_FAILED"}}
    named = committed_on(admin, ["g2"], [B0])
    assert named.committed == {"g2": {}} and named.unreadable == {"g2": {B0: "TOPIC_AUTHORIZATION_FAILED"}}
    # nothing to name: no request, and no outcome carried over from the reads before
    assert committed_on(admin, ["g2"], []).unreadable == {"g2": {}}
