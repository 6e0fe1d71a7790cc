"""The reader port (:class:`ClusterReader`) and the one place that picks its implementation."""

from __future__ import annotations

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.protocol.client import usable
from opskit.adapters.kafka.reader.kept import KeptClients
from opskit.adapters.kafka.reader.librdkafka_reader import LibrdkafkaReader
from opskit.adapters.kafka.reader.port import (
    PREFETCH_LANE,
    ClusterReader,
    CommitsRead,
    GroupsRead,
    Prefetch,
    TopicConfigs,
)
from opskit.adapters.kafka.reader.wire_reader import WireReader

__all__ = ["PREFETCH_LANE", "ClusterReader", "CommitsRead", "GroupsRead", "KeptClients",
           "Prefetch", "TopicConfigs", "open_reader"]


def open_reader(admin: KafkaAdmin, kept: KeptClients | None = None) -> ClusterReader:
    """A read session on ``admin``'s connection: at the protocol level when opskit's own
    client can speak the connection's security settings (falling back to librdkafka
    read by read, by :class:`WireReader`'s rules), else through librdkafka. The choice
    depends on the connection only, so every session of a connection makes the same.
    ``kept``: the clients the session's reads of the quorum, the reassignments and
    record timestamps use and leave open (else the session makes and closes its own)."""
    if usable(admin.conn):
        return WireReader(admin, kept)
    return LibrdkafkaReader(admin, kept)
