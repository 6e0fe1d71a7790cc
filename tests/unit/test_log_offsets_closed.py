"""A ListOffsets the broker closed the connection on names that as the cause.

KafkaAdmin.log_offsets sends two ListOffsets at once (earliest, latest). When the broker
closes the connection on one, librdkafka answers it with offset -1001 and no error, and
marks the broker down for a while: the other, still looking its leaders up, then fails
with "_NOENT: Failed to query partition leaders: No leaders found". Which of the two
gets which depends on timing (test_cause_named.py's throughput test failed on it now
and then): the cause named is the failed request, whichever way round, and the next
read starts on a fresh client. librdkafka is faked at its admin client (no sockets);
the real broker behind a double: tests/integration/test_cause_named.py."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.capabilities import Capabilities
from opskit.core.connection import ConnectionConfig
from opskit.core.models import PartitionOffsets, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
CLOSED = -1001
NO_LEADERS = KafkaError(KafkaError._NOENT, "Failed to query partition leaders: No leaders found")


class FakeAdminClient:
    """librdkafka's admin client answering ListOffsets: ``answers[spec kind]`` is an
    offset (an answer) or a KafkaError (the request failed)."""

    answers: ClassVar[dict[str, int | KafkaError]] = {}
    made: ClassVar[int] = 0

    def __init__(self, conf: dict[str, Any]) -> None:
        type(self).made += 1

    def list_offsets(self, req: dict[Any, Any], **_kw: Any) -> dict[Any, Future[Any]]:
        out: dict[Any, Future[Any]] = {}
        for tp, spec in req.items():
            kind = {"EarliestSpec": "earliest", "LatestSpec": "latest"}[type(spec).__name__]
            fut: Future[Any] = Future()
            a = self.answers[kind]
            if isinstance(a, KafkaError):
                fut.set_exception(KafkaException(a))
            else:
                fut.set_result(SimpleNamespace(offset=a, timestamp=-1))
            out[tp] = fut
        return out


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> KafkaAdmin:
    monkeypatch.setattr("opskit.adapters.kafka.confluent.AdminClient", FakeAdminClient)
    monkeypatch.setattr("opskit.adapters.kafka.capabilities.probe",
                        lambda conn, timeout: Capabilities(conn.bootstrap, "127.0.0.1:1"))
    FakeAdminClient.made = 0
    return KafkaAdmin(ConnectionConfig("127.0.0.1:1"), timeout=1.0)


@pytest.mark.parametrize("start, end, answered", [
    (CLOSED, CLOSED, "-1001 / -1001"),        # both on the closed connection (as before)
    (CLOSED, NO_LEADERS, "-1001"),            # the other one met the stale broker state
    (NO_LEADERS, CLOSED, "-1001"),
])
def test_the_closed_connection_is_the_cause_whichever_request_met_it(
        admin: KafkaAdmin, start: int | KafkaError, end: int | KafkaError, answered: str) -> None:
    FakeAdminClient.answers = {"earliest": start, "latest": end}
    res = admin.log_offsets([T0, T1])
    assert res.offsets == {}
    for tp in (T0, T1):
        assert res.errors[tp] == ("no log offset from the broker at 127.0.0.1:1 (ListOffsets "
                                  f"answered {answered}: the request failed)")
        assert "No leaders" not in res.errors[tp]
    # the client with the stale broker state is dropped: the next read makes a new one
    FakeAdminClient.answers = {"earliest": 0, "latest": 7}
    again = admin.log_offsets([T0])
    assert again.offsets == {T0: PartitionOffsets(T0, 0, 7)} and FakeAdminClient.made == 2


def test_an_error_without_a_failed_request_is_named_as_it_is(admin: KafkaAdmin) -> None:
    FakeAdminClient.answers = {"earliest": 0, "latest": NO_LEADERS}
    res = admin.log_offsets([T0])
    assert res.offsets == {}
    assert "No leaders found" in res.errors[T0]
    FakeAdminClient.answers = {"earliest": NO_LEADERS, "latest": NO_LEADERS}
    assert "No leaders found" in admin.log_offsets([T0]).errors[T0]
