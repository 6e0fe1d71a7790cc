"""Reading the dead-letter topic with its own consumer group, and the watcher's state file.

Offsets are committed only when the runner says so (after its pages went out),
never automatically, so a crash or a PagerDuty outage never loses a dead letter.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Self

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTP

from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.files.safe_write import write_file
from opskit.adapters.kafka.admin.errors import error_text
from opskit.core.connection import ConnectionConfig
from opskit.core.dlq import DeadLetter, DlqState, parse_dead_letter
from opskit.errors import (
    InvalidInputError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotFoundError,
)

log = logging.getLogger(__name__)
rdlog = logging.getLogger("opskit.librdkafka")


class DeadLetterConsumer:
    """Subscribes ``group`` to ``topic``; ``poll`` returns parsed dead letters."""

    def __init__(self, conn: ConnectionConfig, topic: str, group: str, timeout: float = 10.0) -> None:
        self.conn, self.topic, self.group, self.timeout = conn, topic, group, timeout
        conf = conn.to_librdkafka()
        conf.update({
            "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": True, "session.timeout.ms": 10000, "logger": rdlog,
            "socket.timeout.ms": int(max(timeout, 1) * 1000),
        })
        try:
            self._c = Consumer(conf)
        except KafkaException as e:
            raise KafkaOperationError(f"invalid consumer configuration: {e}") from e
        self._check_topic()
        self._c.subscribe([topic])
        #: partition -> next offset to commit
        self._pending: dict[int, int] = {}
        #: partitions known to be at their end (since the last record seen)
        self._eof: set[int] = set()
        self._assigned: int | None = None

    def _check_topic(self) -> None:
        try:
            md = self._c.list_topics(self.topic, timeout=self.timeout)
        except KafkaException as e:
            raise KafkaUnavailableError(
                f"cannot reach Kafka at {self.conn.bootstrap} (reading metadata of {self.topic}, "
                f"timeout {self.timeout:g}s): {error_text(e)}") from e
        t = md.topics.get(self.topic)
        if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise NotFoundError(f"topic {self.topic} does not exist")
        self._partitions = len(t.partitions)

    def poll(self, max_records: int = 500, timeout: float = 1.0) -> list[DeadLetter]:
        out: list[DeadLetter] = []
        try:
            msgs = self._c.consume(num_messages=max_records, timeout=timeout)
        except KafkaException as e:
            raise KafkaUnavailableError(f"consuming {self.topic}: {error_text(e)}") from e
        for m in msgs:
            err = m.error()
            part, off = m.partition(), m.offset()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and part is not None:
                    self._eof.add(part)
                    continue
                if err.fatal() or err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,):
                    raise KafkaOperationError(f"consuming {self.topic}: {err.str()}")
                log.warning("consuming %s: %s", self.topic, err.str())
                continue
            if part is None or off is None:
                continue
            self._eof.discard(part)
            ts_type, ts = m.timestamp()
            out.append(parse_dead_letter(m.key(), m.value(), part, off,
                                         ts if ts_type and ts > 0 else None))
            self._pending[part] = off + 1
        return out

    def assigned(self) -> int:
        """Partitions currently assigned to this member."""
        try:
            return len(self._c.assignment())
        except KafkaException:
            return 0

    def at_end(self) -> bool:
        """True once every partition assigned to this member reported end-of-partition."""
        try:
            mine = {tp.partition for tp in self._c.assignment()}
        except KafkaException:
            return False
        return bool(mine) and mine <= self._eof

    def commit(self) -> None:
        """Commit what was polled so far (call after the pages went out)."""
        if not self._pending:
            return
        tps = [CkTP(self.topic, p, o) for p, o in sorted(self._pending.items())]
        try:
            self._c.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            raise KafkaOperationError(
                f"committing offsets of group {self.group}: {error_text(e)}") from e
        self._pending.clear()

    def close(self) -> None:
        self._c.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_state(path: Path) -> DlqState:
    if not path.exists():
        return DlqState()
    what = f"dead-letter state file {path}"
    data = parse_json(read_text(path, "dead-letter state file"), what)
    try:
        return DlqState.from_dict(data)
    except InvalidInputError as e:
        raise InvalidInputError(f"{what}: {e}") from e


def save_state(path: Path, state: DlqState) -> None:
    """Atomic write: a crash leaves the old or the new state, never half of one."""
    write_file(path, json.dumps(state.to_dict(), indent=2) + "\n", what="dead-letter state file")
