"""The reads the reader port makes through the clients kept between sessions: the KRaft
quorum and the reassignments (kafka-python's client). No sockets: the client is a fake."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from opskit.adapters.kafka.kafka_python import close_kafka_python
from opskit.adapters.kafka.kafka_python_reads import bounded
from opskit.adapters.kafka.reader.kept import KafkaPythonReads, KeptClients
from opskit.core.connection import ConnectionConfig
from opskit.errors import KafkaOperationError, UnsupportedError

QUORUM_ANSWER = {"error_code": 0, "topics": [{"partitions": [{
    "partition_index": 0, "leader_id": 1, "leader_epoch": 3, "high_watermark": 99,
    "current_voters": [{"replica_id": 1, "log_end_offset": 99}], "observers": []}]}]}


class FakeKafkaPython:
    def __init__(self, quorum: Any = QUORUM_ANSWER, reassign: Any = None) -> None:
        self._quorum, self._reassign = quorum, reassign if reassign is not None else {}
        self.closed = False

    def describe_metadata_quorum(self) -> Any:
        if isinstance(self._quorum, Exception):
            raise self._quorum
        return self._quorum

    def list_partition_reassignments(self, timeout_ms: int) -> Any:
        if isinstance(self._reassign, Exception):
            raise self._reassign
        return self._reassign

    def close(self) -> None:
        self.closed = True


class Kept(KeptClients):
    """Hands out the clients given, in turn; counts the connects."""

    def __init__(self, *clients: Any) -> None:
        super().__init__(ConnectionConfig(bootstrap="127.0.0.1:1"), 2.0)
        self.clients = list(clients)
        self.connects = 0

    def kafka_python(self) -> Any:
        if self._kp is None:
            self.connects += 1
            nxt = self.clients.pop(0)
            if isinstance(nxt, Exception):
                raise KafkaOperationError(f"kafka-python could not connect: {nxt}")
            self._kp = nxt
        return self._kp


def test_reads_come_from_the_kept_client_and_it_is_kept() -> None:
    client = FakeKafkaPython()
    kept = Kept(client)
    reads = KafkaPythonReads(kept, 2.0)
    q = reads.quorum()
    assert q.leader_id == 1 and q.high_watermark == 99 and len(q.voters) == 1
    assert reads.reassignments() == ()
    reads.done()
    assert not client.closed and kept.connects == 1
    KafkaPythonReads(kept, 2.0).quorum()  # the next session: the same client
    assert kept.connects == 1


def test_a_failed_read_raises_with_its_reason() -> None:
    from kafka import errors as kerr  # type: ignore[import-untyped]

    reads = KafkaPythonReads(Kept(FakeKafkaPython(
        quorum=kerr.UnsupportedVersionError("v0"), reassign=RuntimeError("broker gone"))), 2.0)
    with pytest.raises(UnsupportedError, match="does not support DescribeQuorum"):
        reads.quorum()
    with pytest.raises(KafkaOperationError, match="broker gone"):
        reads.reassignments()


def test_every_read_failed_drops_the_client_one_failed_keeps_it() -> None:
    bad = FakeKafkaPython(quorum=RuntimeError("x"), reassign=RuntimeError("y"))
    good = FakeKafkaPython()
    kept = Kept(bad, good)
    reads = KafkaPythonReads(kept, 2.0)
    for read in (reads.quorum, reads.reassignments):
        with pytest.raises(KafkaOperationError):
            read()
    reads.done()
    assert bad.closed  # reconnect next round
    half = KafkaPythonReads(kept, 2.0)
    half.quorum()
    assert kept.connects == 2
    good._reassign = RuntimeError("y")
    with pytest.raises(KafkaOperationError):
        half.reassignments()
    half.done()
    assert not good.closed


def test_a_failed_connect_is_tried_once_per_session() -> None:
    kept = Kept(OSError("refused"), FakeKafkaPython())
    reads = KafkaPythonReads(kept, 2.0)
    for read in (reads.quorum, reads.reassignments):
        with pytest.raises(KafkaOperationError, match="could not connect: refused"):
            read()
    reads.done()
    assert kept.connects == 1
    assert KafkaPythonReads(kept, 2.0).quorum().leader_id == 1  # the next round connects
    assert kept.connects == 2


def test_a_connect_given_up_on_is_closed_when_it_ends_late() -> None:
    """bounded() gives up after its timeout; the client the abandoned connect still
    makes is handed to ``late`` (kept clients close it), never leaked."""
    release, handed = threading.Event(), threading.Event()
    client = FakeKafkaPython()

    def slow_connect() -> FakeKafkaPython:
        release.wait(60)
        return client

    def late(c: FakeKafkaPython) -> None:
        close_kafka_python(c)
        handed.set()

    with pytest.raises(Exception, match="no answer within"):
        bounded(slow_connect, 0.01, late=late)
    release.set()
    assert handed.wait(60)
    assert client.closed


def test_an_answer_in_time_is_returned_and_not_handed_to_late() -> None:
    got: list[object] = []
    assert bounded(lambda: 7, 60, late=got.append) == 7
    with pytest.raises(ValueError, match="boom"):
        bounded(lambda: (_ for _ in ()).throw(ValueError("boom")), 60, late=got.append)
    assert got == []


def test_closing_is_best_effort() -> None:
    class Broken:
        def close(self) -> None:
            raise OSError("already gone")

    close_kafka_python(Broken())  # logged, not raised
    close_kafka_python(None)
    c = FakeKafkaPython()
    close_kafka_python(c)
    assert c.closed


def test_the_connect_bound_is_connect_s_else_wait_s() -> None:
    conn = ConnectionConfig(bootstrap="127.0.0.1:1")
    assert KeptClients(conn, 3.0).connect_s is None  # kafka-python's own timeouts only
    assert KeptClients(conn, 3.0, wait_s=5.0).connect_s == 5.0  # opskit health
    exporter = KeptClients(conn, 3.0, connect_s=5.0)  # the exporter: DescribeQuorum as before
    assert (exporter.connect_s, exporter.wait_s) == (5.0, None)
