"""Kafka admin access through confluent-kafka (librdkafka).

This is the one module that talks the admin protocol for reads and topic
changes. Every vendor exception is translated into opskit's error tree here,
and every wait is bounded by the configured timeout: nothing hangs.

Before an operation that needs an API beyond Metadata, the broker's
ApiVersions (probed once per bootstrap, see :mod:`opskit.adapters.kafka.capabilities`)
are checked: an API the broker does not advertise gives ``UnsupportedError``
naming the API and the broker at once, instead of a request that some
Kafka-compatible brokers answer by dropping the connection. When a request to
an advertised API times out but the broker still answers ApiVersions, the API
is reported as unsupported by that broker rather than the cluster as
unreachable (the Hanzo Stream gateway, for one, never answers librdkafka's
CreateTopics and DescribeConfigs requests).

An API is *remembered* as not served (later calls refused at once, another path taken:
see :meth:`KafkaAdmin.observe_not_served`) only on evidence that is not a timeout: the
broker closed the connection on it while still answering ApiVersions. A long-lived
admin (the served exporter) needs that seen in two rounds (cycles) without a success
between. A timeout alone is never remembered, except DescribeConfigs within one
command's run (no other path; a command does not wait for it twice).

Requests are batched and issued concurrently: one ListOffsets request per spec
(earliest, latest) for all partitions (librdkafka groups them by leader), one
DescribeGroups for all groups, and one OffsetFetch per group, all in flight at
once (confluent-kafka accepts one group per OffsetFetch call).
"""

from __future__ import annotations

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.errors import error_name, error_text
from opskit.adapters.kafka.admin.groups import GroupReads
from opskit.adapters.kafka.admin.meta import BrokerMeta, ClusterMeta, OffsetsResult, PartitionMeta
from opskit.adapters.kafka.admin.offsets import OffsetReads
from opskit.adapters.kafka.admin.topics import TopicAdmin

#: the types its reads return, and (for code written before the split) the error helpers
__all__ = ["BrokerMeta", "ClusterMeta", "KafkaAdmin", "OffsetsResult", "PartitionMeta", "error_name",
           "error_text"]


class KafkaAdmin(GroupReads, OffsetReads, TopicAdmin):
    """A connected admin client. Create one per command; call ``close()`` when done.

    Its parts (:mod:`opskit.adapters.kafka.admin`): the session and error translation, the
    group reads, the log-offset reads, the config reads and topic changes."""

    def metadata(self, topic: str | None = None) -> ClusterMeta:
        self.round_trips += 1
        try:
            md = self._admin.list_topics(topic=topic, timeout=self.timeout)
        except BaseException as e:
            raise self.translate(e, "reading cluster metadata") from e
        topics: dict[str, tuple[PartitionMeta, ...]] = {}
        denied: list[str] = []
        for name, t in md.topics.items():
            if t.error is not None and t.error.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            if t.error is not None and t.error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
                denied.append(name)  # asked for by name, no Describe ACL: not "missing"
                continue
            parts = tuple(
                PartitionMeta(p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
                for p in sorted(t.partitions.values(), key=lambda p: p.id)
            )
            topics[name] = parts
        brokers = tuple(sorted(
            (BrokerMeta(b.id, b.host, b.port) for b in md.brokers.values()), key=lambda b: b.node_id
        ))
        return ClusterMeta(md.cluster_id, md.controller_id, brokers, topics, tuple(sorted(denied)))

    def broker_racks(self) -> dict[int, str | None]:
        """broker id -> rack (None for a broker without one), from DescribeCluster."""
        res = self._result(self._admin.describe_cluster(**self._kw()), "describing the cluster")
        return {int(n.id): (n.rack or None) for n in res.nodes}
