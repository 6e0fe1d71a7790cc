"""Kafka I/O for ``opskit offsets`` (and ``opskit dr``): commit offsets for a group,
keep the backup files, peek at record timestamps (``dr``). The reads a reset plans
from go through the reader port: :mod:`opskit.adapters.offsets.reads`.

``OffsetsAdmin`` extends ``KafkaAdmin`` with the calls it lacks; every vendor
error still goes through ``KafkaAdmin.translate``. The decisions are made in
``opskit.core.offset_reset``; this module only gathers its inputs and acts.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Self

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.files.safe_write import safe_file_name, write_file
from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.admin.errors import error_text
from opskit.adapters.kafka.broker_quirks import BrokerQuirks
from opskit.adapters.kafka.record_times import ISOLATION_LEVEL
from opskit.adapters.offsets.reads import (
    _COORDINATOR_LOADING,
    GroupOffsetsState,
    read_group_state,
    read_log_offsets_of_topics,
    reader_session,
)
from opskit.core.connection import ConnectionConfig
from opskit.core.models import GroupDescription, PartitionOffsets, TopicPartition
from opskit.core.offset_reset.backup import OffsetsBackup
from opskit.errors import (
    InvalidInputError,
    KafkaOperationError,
    KafkaUnavailableError,
    NotAuthorisedError,
    OpskitError,
)
from opskit.paths import state_dir

log = logging.getLogger(__name__)

#: the former name of ``safe_write.write_file`` (same signature for ``(path, text)``)
write_atomically = write_file


class OffsetsAdmin(KafkaAdmin):
    """``KafkaAdmin`` plus committing group offsets and reading record timestamps."""

    def __init__(self, conn: ConnectionConfig, timeout: float = 10.0,
                 quirks: BrokerQuirks | None = None) -> None:
        super().__init__(conn, timeout, quirks)
        #: topics a record read was refused on (no Read ACL), by :meth:`record_timestamps`
        self.read_denied: set[str] = set()

    def __enter__(self) -> Self:
        return self

    # ----- reads -----
    def describe_groups_settled(
        self, group_ids: Iterable[str], wait: float = 20.0
    ) -> dict[str, GroupDescription]:
        """``describe_groups``, retried while the group coordinator is still being
        set up (a fresh cluster creates ``__consumer_offsets`` on first use)."""
        deadline = time.monotonic() + wait
        while True:
            try:
                return self.describe_groups(group_ids)
            except KafkaUnavailableError as e:
                transient = any(c in str(e) for c in _COORDINATOR_LOADING)
                if not transient or time.monotonic() > deadline:
                    raise
                log.debug("group coordinator not ready, retrying: %s", e)
                time.sleep(0.5)

    def group_state(self, group_id: str) -> GroupOffsetsState:
        """:func:`read_group_state` in a read session of its own."""
        with reader_session(self) as reader:
            return read_group_state(reader, group_id)

    def log_offsets_of_topics(
        self, topics: Iterable[str]
    ) -> tuple[dict[TopicPartition, PartitionOffsets], str | None]:
        """:func:`read_log_offsets_of_topics` in a read session of its own."""
        with reader_session(self) as reader:
            return read_log_offsets_of_topics(reader, topics)

    # ----- writes -----
    def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """AlterConsumerGroupOffsets (OffsetCommit without a member): all or an error."""
        if not offsets:
            return
        what = f"committing offsets of group {group_id}"
        request = ConsumerGroupTopicPartitions(
            group_id,
            [CkTopicPartition(tp.topic, tp.partition, off) for tp, off in sorted(offsets.items())],
        )
        try:
            futs = self._admin.alter_consumer_group_offsets([request], **self._kw())
        except BaseException as e:  # translated
            raise self.translate(e, what) from e
        for fut in futs.values():
            res = self._result(fut, what)
            failed = [tp for tp in res.topic_partitions or [] if tp.error is not None]
            if failed:
                first = failed[0]
                cause = f"{first.error.name()}: {first.error.str()}"
                if len(failed) < len(offsets):
                    raise KafkaOperationError(
                        f"{what}: {len(failed)} of {len(offsets)} partitions failed (e.g. "
                        f"{first.topic}:{first.partition}: {cause}); the others were committed")
                if first.error.name() in _AUTHZ_NAMES:
                    raise NotAuthorisedError(
                        f"{what}: refused, nothing committed: {self.conn.principal} needs the "
                        f"Read ACL on group {group_id} and on topic {first.topic} ({cause})")
                raise KafkaOperationError(
                    f"{what}: refused, nothing committed ({first.topic}:{first.partition}: {cause})"
                )

    # ----- topic overrides (for dr snapshots) -----
    def topic_overrides(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Per topic, the configs set on the topic itself (DYNAMIC_TOPIC_CONFIG)."""
        res = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
        if not res:
            return {}
        self.require("topic_configs", "reading topic configs")
        futs = self._admin.describe_configs(res, **self._kw())
        out: dict[str, dict[str, str]] = {}
        for r, fut in futs.items():
            entries = self._result(fut, f"describing configs of topic {r.name}", "topic_configs")
            out[r.name] = {
                k: v.value for k, v in entries.items()
                if v.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and v.value is not None
                and not v.is_sensitive
            }
        return out

    # ----- record timestamps -----
    def record_timestamps(
        self, positions: Mapping[TopicPartition, int], timeout: float = 5.0
    ) -> dict[TopicPartition, int | None]:
        """Timestamp (ms) of the first record at or after each offset, reading one
        record per partition with an assigned consumer (no group join, no commit).
        None where nothing was read within ``timeout``, or where the principal may not
        read (the topic is then in :attr:`read_denied`)."""
        out: dict[TopicPartition, int | None] = {tp: None for tp in positions}
        if not positions:
            return out
        conf = self.conn.to_librdkafka()
        conf.update({
            # never joins nor commits: assign() only; the id is required by the client
            "group.id": f"opskit-peek-{os.getpid()}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            # as lag reads them (record_times.ISOLATION_LEVEL): librdkafka's default,
            # read_committed, waits out the timeout behind an open transaction and skips
            # aborted records, so reset and lag showed different times for one offset
            "isolation.level": ISOLATION_LEVEL,
            "fetch.max.bytes": 1 << 20,
            "max.partition.fetch.bytes": 64 << 10,
            "logger": logging.getLogger("opskit.librdkafka"),
        })
        try:
            consumer = Consumer(conf)
        except KafkaException as e:
            raise KafkaOperationError(f"cannot create a consumer: {error_text(e)}") from e
        try:
            consumer.assign([CkTopicPartition(tp.topic, tp.partition, off)
                             for tp, off in positions.items()])
            pending = set(positions)
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=1000, timeout=0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                            # no Read ACL: the answer is final, waiting out the timeout
                            # would change nothing
                            pending -= {tp for tp in pending if tp.topic == msg.topic()}
                            self.read_denied.add(str(msg.topic()))
                        elif err.code() != KafkaError._PARTITION_EOF:
                            log.debug("peek %s:%s: %s", msg.topic(), msg.partition(), err)
                        continue
                    tp = TopicPartition(str(msg.topic()), int(msg.partition() or 0))
                    if tp in pending:
                        kind, ts = msg.timestamp()
                        out[tp] = ts if kind != 0 and ts >= 0 else None
                        pending.discard(tp)
                        consumer.pause([CkTopicPartition(tp.topic, tp.partition)])
        except KafkaException as e:
            raise self.translate(e, "reading record timestamps") from e
        finally:
            consumer.close()
        return out


_AUTHZ_NAMES = {"GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED"}


# --------------------------------------------------------------------------- backup files

BACKUP_FILE_FORMAT = "opskit/offsets-backup-file"
BACKUP_FILE_VERSION = 1


class BackupStatus(str, Enum):
    """Where the reset that took a backup got to; written next to the offsets."""

    #: written, the reset is about to be applied: it may or may not have been
    PENDING = "pending"
    #: AlterConsumerGroupOffsets succeeded
    APPLIED = "applied"
    #: refused by the compare-and-set check: nothing was changed
    ABORTED = "aborted"
    #: the commit failed: some offsets may have been changed
    FAILED = "failed"


@dataclass(frozen=True)
class BackupFile:
    path: Path
    backup: OffsetsBackup
    status: BackupStatus
    detail: str | None = None
    #: the offsets the reset commits (empty for a bare backup document)
    target: Mapping[TopicPartition, int] | None = None


def default_backup_dir() -> Path:
    return state_dir() / "backups"


def _safe_name(group_id: str) -> str:
    return safe_file_name(group_id)


def _stamp(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y%m%dT%H%M%S") + f".{ms % 1000:03d}Z"


def _document(b: BackupFile, now_ms: int) -> str:
    doc = {
        "format": BACKUP_FILE_FORMAT,
        "version": BACKUP_FILE_VERSION,
        "status": b.status.value,
        "status_detail": b.detail,
        "updated_at_ms": now_ms,
        "target_offsets": [
            {"topic": tp.topic, "partition": tp.partition, "offset": off}
            for tp, off in sorted((b.target or {}).items())
        ],
        "backup": b.backup.to_dict(),
    }
    return json.dumps(doc, indent=2) + "\n"


def save_backup(
    backup: OffsetsBackup, target: Mapping[TopicPartition, int], directory: Path | None = None
) -> BackupFile:
    """Save a new backup (status pending) under ``directory/<group>/<time>.json``."""
    base = (directory or default_backup_dir()) / _safe_name(backup.group_id)
    path = base / f"{_stamp(backup.taken_at_ms)}.json"
    n = 1
    while path.exists():
        n += 1
        path = base / f"{_stamp(backup.taken_at_ms)}-{n}.json"
    b = BackupFile(path, backup, BackupStatus.PENDING, None, dict(target))
    write_file(path, _document(b, backup.taken_at_ms), what="backup")
    return b


def mark_backup(b: BackupFile, status: BackupStatus, detail: str | None, now_ms: int) -> BackupFile:
    new = BackupFile(b.path, b.backup, status, detail, b.target)
    try:
        write_file(b.path, _document(new, now_ms), what="backup")
    except OpskitError as e:  # the offsets are what they are; say so, do not hide it
        log.warning("could not mark backup %s as %s: %s", b.path, status.value, e)
    return new


def load_backup(path: Path) -> BackupFile:
    """Read a backup file (or a bare ``OffsetsBackup`` JSON document), strictly."""
    data = parse_json(read_text(path, "backup file"), f"backup file {path}")
    try:
        if isinstance(data, dict) and data.get("format") == BACKUP_FILE_FORMAT:
            if data.get("version") != BACKUP_FILE_VERSION:
                raise InvalidInputError(f"unsupported version {data.get('version')!r}")
            try:
                status = BackupStatus(data.get("status"))
            except ValueError:
                raise InvalidInputError(f"unknown status {data.get('status')!r}") from None
            detail = data.get("status_detail")
            target: dict[TopicPartition, int] = {}
            for item in data.get("target_offsets") or []:
                if not isinstance(item, dict):
                    raise InvalidInputError("target_offsets must be a list of mappings")
                target[TopicPartition(str(item["topic"]), int(item["partition"]))] = int(
                    item["offset"]
                )
            backup = OffsetsBackup.from_dict(data.get("backup"))
            return BackupFile(path, backup, status, detail if isinstance(detail, str) else None,
                              target)
        return BackupFile(path, OffsetsBackup.from_dict(data), BackupStatus.APPLIED)
    except InvalidInputError as e:
        raise InvalidInputError(f"backup file {path}: {e}") from None
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidInputError(f"backup file {path}: malformed ({e!r})") from None
