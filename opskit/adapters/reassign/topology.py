"""Read the cluster topology a reassignment plan is made from.

- brokers and partitions (replicas in order, ISR, leader): Metadata through
  confluent-kafka (:meth:`KafkaAdmin.metadata`);
- racks: DescribeCluster (:meth:`KafkaAdmin.broker_racks`); a broker that cannot answer
  it leaves every rack unknown (the plan then ignores racks, and says so);
- partition sizes: DescribeLogDirs (:func:`opskit.adapters.kafka.log_dirs.read_partition_sizes`,
  the leader's replica); when unavailable every size is 0 and the reason is returned;
- disk space per broker (total and usable bytes of its log directories' volumes): the
  same DescribeLogDirs answers, v4+ (Kafka 3.3+); brokers that do not report it are
  absent from ``disks``;
- ``min.insync.replicas`` of every topic: DescribeConfigs (the effective value, a broker
  default included); None, unknown, for a topic whose answer lacks it or holds no number
  (Tansu 0.6 answers without any entry): the planner then refuses to move its partitions.
  A DescribeConfigs that fails is raised.

Metadata is read first; the reads that need only its answer (DescribeCluster, every
broker's DescribeLogDirs, DescribeConfigs, and the caller's ``also``) then run at once,
each in a thread of its own and each bounded by the admin's timeout as before, and their
outcomes are taken in the order they used to run one after another (so the same failure
is reported first). The size read gets the brokers and partitions Metadata named instead
of asking for them again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from opskit.adapters.health.cluster import min_isr_value
from opskit.adapters.kafka.admin.client import ClusterMeta, KafkaAdmin
from opskit.adapters.kafka.log_dirs import KnownCluster, read_partition_sizes
from opskit.core.models import TopicPartition
from opskit.core.reassign.model import Broker, PartitionState, Topology
from opskit.errors import OpskitError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopologyRead:
    topology: Topology
    #: why partition sizes are missing (None when they were read)
    sizes_unavailable: str | None = None
    #: why racks are unknown (None when they were read)
    racks_unavailable: str | None = None
    #: broker -> (total, usable) bytes of its log directories' volumes, where reported
    disks: dict[int, tuple[int, int]] = field(default_factory=dict)


def read_topology(admin: KafkaAdmin, also: Callable[[ClusterMeta], None] | None = None
                  ) -> TopologyRead:
    """The cluster as a :class:`Topology` (see the module docstring). ``also``: another
    read of the caller's that needs only the Metadata, run alongside the others; it
    reports its own outcome (what it raises is raised here, after the topology's own
    failures)."""
    meta = admin.metadata()
    topics = sorted(meta.topics)
    leaders = {TopicPartition(t, p.partition): p.leader
               for t in topics for p in meta.topics[t] if p.leader >= 0}
    known = KnownCluster(tuple((b.node_id, b.host, b.port) for b in meta.brokers),
                         {TopicPartition(t, p.partition): p.leader
                          for t in topics for p in meta.topics[t]})
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="opskit-topology") as pool:
        racks_read = pool.submit(admin.broker_racks)
        sizes_read = pool.submit(read_partition_sizes, admin.conn, topics, leaders,
                                 admin.timeout, known)
        configs_read = pool.submit(admin.topic_configs, topics)
        also_read = pool.submit(also, meta) if also is not None else None
        racks_note: str | None = None
        try:
            racks = racks_read.result()
        except OpskitError as e:
            log.debug("DescribeCluster failed: %s", e)
            racks, racks_note = {}, f"racks unknown ({e})"
        sizes = sizes_read.result()
        configs = configs_read.result()
        if also_read is not None:
            also_read.result()
    brokers = tuple(Broker(b.node_id, racks.get(b.node_id)) for b in meta.brokers)
    min_isr = {t: min_isr_value(t, configs.get(t, {})) for t in topics}
    parts = tuple(
        PartitionState(
            topic=t, partition=p.partition, replicas=tuple(p.replicas), isr=tuple(p.isr),
            leader=p.leader if p.leader >= 0 else None,
            size_bytes=sizes.sizes.get(TopicPartition(t, p.partition), 0),
            offline=p.leader < 0,
        )
        for t in topics for p in meta.topics[t]
    )
    return TopologyRead(Topology(brokers, parts, min_isr), sizes.unavailable, racks_note,
                        dict(sizes.disks))
