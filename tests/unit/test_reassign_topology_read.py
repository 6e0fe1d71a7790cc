"""``read_topology``: Metadata once, then the reads that need only it at once (racks,
sizes, configs and the caller's ``also``). The size read gets the brokers and every
partition (leaderless ones too) from that Metadata; the outcomes are taken in the order
the reads used to run, so the same failure is reported; a failed racks read stays a note."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from opskit.adapters.kafka.admin.meta import BrokerMeta, ClusterMeta, PartitionMeta
from opskit.adapters.kafka.log_dirs import KnownCluster, PartitionSizes
from opskit.adapters.reassign import topology as topo_mod
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from opskit.errors import KafkaOperationError, KafkaUnavailableError

META = ClusterMeta("c", 0, (BrokerMeta(0, "h0", 9092), BrokerMeta(1, "h1", 9093)), {
    "a": (PartitionMeta(0, 1, (1, 0), (1, 0)), PartitionMeta(1, -1, (0,), ())),
    "b": (PartitionMeta(0, 0, (0, 1), (0,)),),
})


class _Admin:
    def __init__(self, racks: Any = None, configs: Any = None) -> None:
        self.conn = ConnectionConfig("h0:9092")
        self.timeout = 7.0
        self._racks = racks if racks is not None else {0: "r0", 1: "r1"}
        self._configs = configs if configs is not None else {
            "a": {"min.insync.replicas": ("2", False)}, "b": {}}
        self.metadata_reads = 0
        self.threads: set[str] = set()

    def metadata(self) -> ClusterMeta:
        self.metadata_reads += 1
        return META

    def broker_racks(self) -> dict[int, str | None]:
        self.threads.add(threading.current_thread().name)
        if isinstance(self._racks, Exception):
            raise self._racks
        return dict(self._racks)

    def topic_configs(self, topics: list[str]) -> dict[str, Any]:
        self.threads.add(threading.current_thread().name)
        if isinstance(self._configs, Exception):
            raise self._configs
        assert topics == ["a", "b"]
        return dict(self._configs)


@pytest.fixture
def sizes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []

    def fake(conn: ConnectionConfig, topics: list[str], leaders: Any, timeout: float,
             known: KnownCluster | None = None) -> PartitionSizes:
        calls.append((conn, list(topics), dict(leaders), timeout, known))
        return PartitionSizes({TopicPartition("a", 0): 10, TopicPartition("b", 0): 5},
                              disks={0: (100, 50)})

    monkeypatch.setattr(topo_mod, "read_partition_sizes", fake)
    return calls


def test_one_metadata_read_shared_with_the_size_read(sizes: list[tuple[Any, ...]]) -> None:
    admin = _Admin()
    seen: list[ClusterMeta] = []
    read = topo_mod.read_topology(admin, seen.append)  # type: ignore[arg-type]
    assert admin.metadata_reads == 1 and seen == [META]
    ((conn, topics, leaders, timeout, known),) = sizes
    assert (conn, topics, timeout) == (admin.conn, ["a", "b"], 7.0)
    assert leaders == {TopicPartition("a", 0): 1, TopicPartition("b", 0): 0}
    assert known == KnownCluster(((0, "h0", 9092), (1, "h1", 9093)), {
        TopicPartition("a", 0): 1, TopicPartition("a", 1): -1, TopicPartition("b", 0): 0})
    t = read.topology
    assert [(b.id, b.rack) for b in t.brokers] == [(0, "r0"), (1, "r1")]
    assert [(p.tp, p.size_bytes, p.leader, p.offline) for p in t.partitions] == [
        (TopicPartition("a", 0), 10, 1, False), (TopicPartition("a", 1), 0, None, True),
        (TopicPartition("b", 0), 5, 0, False)]
    assert t.min_isr("a") == 2 and t.min_isr("b") is None  # b: no value, unknown (never 1)
    assert read.disks == {0: (100, 50)} and read.racks_unavailable is None
    assert all(n.startswith("opskit-topology") for n in admin.threads)  # off the main thread


def test_failed_racks_read_is_a_note(sizes: list[tuple[Any, ...]]) -> None:
    read = topo_mod.read_topology(_Admin(racks=KafkaUnavailableError("gone")))  # type: ignore[arg-type]
    assert read.racks_unavailable == "racks unknown (gone)"
    assert all(b.rack is None for b in read.topology.brokers)


def test_failures_reported_in_the_old_order(sizes: list[tuple[Any, ...]]) -> None:
    """The configs read failing is raised (as before), not the later ``also``'s failure."""
    def also(meta: ClusterMeta) -> None:
        raise RuntimeError("the later read")

    admin = _Admin(configs=KafkaOperationError("describing configs of topic a failed"))
    with pytest.raises(KafkaOperationError, match="describing configs of topic a"):
        topo_mod.read_topology(admin, also)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="the later read"):
        topo_mod.read_topology(_Admin(), also)  # type: ignore[arg-type]
