"""Clients a connection keeps between read sessions, and the reads they serve.

A read session (:class:`~opskit.adapters.kafka.reader.port.ClusterReader`) is short: one
collection cycle, one command. Two clients are worth keeping longer:

* kafka-python's ``KafkaAdminClient``, the only client opskit has for DescribeQuorum
  and ListPartitionReassignments (confluent-kafka has neither): connecting it costs a
  bootstrap and a metadata round, so the exporter keeps it from one slow-family round
  to the next, and drops it when every one of its reads in a round failed (the next
  round connects afresh);
* the record-time reader (:class:`~opskit.adapters.kafka.record_times.RecordTimeReader`),
  whose cache of record timestamps is what makes lag in seconds cheap from one cycle
  to the next.

Whoever opens sessions over a long life (the exporter) makes one :class:`KeptClients`
and hands it to every session (:func:`opskit.adapters.kafka.reader.open_reader`); a session
opened without one makes its own and closes it with the session. The clients are
shared by sessions of several threads: kafka-python's is used by one session at a
time (the exporter's slow-family round), the record-time reader serialises its calls.
"""

from __future__ import annotations

import threading
from typing import Any

from opskit.adapters.kafka.kafka_python import close_kafka_python, kafka_python_config
from opskit.adapters.kafka.kafka_python_reads import bounded, describe_quorum, list_reassignments
from opskit.adapters.kafka.record_times import DEFAULT_CACHE_SIZE, RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.health import QuorumInfo, Reassignment
from opskit.errors import KafkaOperationError, OpskitError, UnsupportedError


class KafkaPythonConnectError(KafkaOperationError):
    """kafka-python's admin client could not connect to ``bootstrap``; ``cause``: why."""

    def __init__(self, bootstrap: str, cause: BaseException) -> None:
        super().__init__(f"kafka-python could not connect: {type(cause).__name__}: {cause}")
        self.bootstrap = bootstrap
        self.cause = cause


class KeptClients:
    """kafka-python's admin client and the record-time reader of one connection,
    made on first use and kept until :meth:`close` (kafka-python's also until a
    session drops it)."""

    def __init__(self, conn: ConnectionConfig, timeout: float,
                 wait_s: float | None = None, connect_s: float | None = None,
                 record_cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self.conn = conn
        self.timeout = timeout
        #: when given, kafka-python's connect and the DescribeQuorum read wait at most this
        #: long (``opskit health``: timeout + 2 s); else DescribeQuorum waits at most the
        #: session's timeout
        self.wait_s = wait_s
        #: how long kafka-python's connect may take (the exporter: timeout + 2 s); None:
        #: ``wait_s``, else only kafka-python's own timeouts. A connect given up on is
        #: left to end in its thread, and the client it may still make is closed then.
        self.connect_s = connect_s if connect_s is not None else wait_s
        self._lock = threading.Lock()
        #: held while kafka-python connects (up to the timeout): never the record reader's
        self._kp_lock = threading.Lock()
        self._kp: Any = None
        self._records: RecordTimeReader | None = None
        self._record_cache_size = record_cache_size

    def kafka_python(self) -> Any:
        """kafka-python's admin client; KafkaPythonConnectError when it cannot connect."""
        with self._kp_lock:
            if self._kp is None:
                try:
                    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]

                    def make() -> Any:
                        return KafkaAdminClient(**kafka_python_config(self.conn, self.timeout))
                    self._kp = (make() if self.connect_s is None
                                else bounded(make, self.connect_s, late=close_kafka_python))
                except Exception as e:  # quorum and reassignments become unknown
                    raise KafkaPythonConnectError(self.conn.bootstrap, e) from e
            return self._kp

    def drop_kafka_python(self) -> None:
        """Close kafka-python's client: the next read connects afresh."""
        with self._kp_lock:
            c, self._kp = self._kp, None
        close_kafka_python(c)

    def record_times(self) -> RecordTimeReader:
        """The record-time reader (its cache survives the sessions)."""
        with self._lock:
            if self._records is None:
                self._records = RecordTimeReader(self.conn, timeout=min(self.timeout, 5.0),
                                                 cache_size=self._record_cache_size)
            return self._records

    @property
    def record_cache_size(self) -> int:
        """How many record times the record-time reader's cache holds (no reader made)."""
        with self._lock:
            r = self._records
        return r.cache_size if r is not None else self._record_cache_size

    def close(self) -> None:
        with self._lock:
            records, self._records = self._records, None
        if records is not None:
            records.close()
        self.drop_kafka_python()


class KafkaPythonReads:
    """One session's reads through kafka-python's client: the KRaft quorum and the
    reassignments in progress. A failure raises (UnsupportedError when the broker or
    the installed client lacks the API, else KafkaOperationError), with the one-line
    reason the health rules show; a failed connect is tried once per session. When
    every read of the session failed, :meth:`done` drops the client."""

    def __init__(self, kept: KeptClients, timeout: float) -> None:
        self.kept = kept
        self.timeout = timeout
        self._connect_error: OpskitError | None = None
        self._outcomes: list[bool] = []

    def _client(self) -> Any:
        if self._connect_error is not None:
            raise self._connect_error
        try:
            return self.kept.kafka_python()
        except OpskitError as e:
            self._connect_error = e
            raise

    def quorum(self) -> QuorumInfo:
        wait = self.timeout if self.kept.wait_s is None else self.kept.wait_s
        quorum, err = describe_quorum(self._client(), wait)
        self._outcomes.append(quorum is not None)
        if quorum is None:
            raise _error(err or "could not describe the KRaft quorum")
        return quorum

    def reassignments(self) -> tuple[Reassignment, ...]:
        found, err = list_reassignments(self._client(), self.timeout)
        self._outcomes.append(found is not None)
        if found is None:
            raise _error(err or "could not list partition reassignments")
        return found

    def done(self) -> None:
        if self._outcomes and not any(self._outcomes):
            self.kept.drop_kafka_python()  # reconnect next round
        self._outcomes = []


def _error(msg: str) -> OpskitError:
    return UnsupportedError(msg) if "does not support" in msg else KafkaOperationError(msg)
