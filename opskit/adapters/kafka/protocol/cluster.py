"""Cluster metadata and the list of groups at the protocol level.

What librdkafka's ``list_topics`` and ``list_consumer_groups`` give, read with
opskit's own codec over a :class:`~opskit.adapters.kafka.protocol.client.WireClient`: one
Metadata request, then one ListGroups request per broker (each broker lists
only the groups it coordinates), all in flight together. It saves the lag
path librdkafka's start-up requests and decoding of 2,000-partition metadata
in Python objects; the answers are the same.

Anything this cannot do (SASL, an API version the broker lacks, a broker that
answers a ListGroups with an error such as COORDINATOR_LOAD_IN_PROGRESS)
raises :class:`WireUnsupported`, and the caller asks librdkafka instead, which
retries.
"""

from __future__ import annotations

import time
from typing import Any

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.client import BrokerMeta, ClusterMeta, PartitionMeta
from opskit.adapters.kafka.protocol import codec as kp
from opskit.adapters.kafka.protocol.client import API_METADATA, Call, WireClient, WireUnsupported
from opskit.adapters.kafka.protocol.codec import WireErrorCode
from opskit.core.models import GroupState

_UNKNOWN_TOPIC_OR_PARTITION = 3


def read_cluster(client: WireClient) -> ClusterMeta:
    """Brokers, controller, cluster id and every topic's partitions (leader,
    replicas, in-sync replicas); teaches ``client`` the brokers' addresses."""
    deadline = time.monotonic() + client.timeout
    v = client.version(API_METADATA, 1, 8, deadline)
    (md,) = client.exchange([(client.first_node, kp.metadata(v, None, replicas=True))], deadline)
    client.learn(md.brokers)
    topics: dict[str, tuple[PartitionMeta, ...]] = {}
    for t in md.topics:
        if t.error_code == _UNKNOWN_TOPIC_OR_PARTITION:
            continue  # deleted while we asked (librdkafka's view leaves these out too)
        topics[t.name] = tuple(sorted(
            (PartitionMeta(p, leader, reps, isr) for _err, p, leader, reps, isr in t.partitions),
            key=lambda pm: pm.partition))
    brokers = tuple(sorted((BrokerMeta(b.node_id, b.host, b.port) for b in md.brokers),
                           key=lambda b: b.node_id))
    return ClusterMeta(md.cluster_id, md.controller_id, brokers, topics)


def list_groups(client: WireClient, broker_ids: list[int]) -> dict[str, GroupState]:
    """Every group of the cluster and its state (UNKNOWN from brokers older than
    ListGroups v4), asking every broker in one round."""
    if not broker_ids:
        raise WireUnsupported("no broker to list groups on")
    deadline = time.monotonic() + client.timeout
    v = client.version(kp.API_LIST_GROUPS, 0, 4, deadline)
    answers = client.exchange([(b, kp.list_groups(v)) for b in sorted(broker_ids)], deadline)
    out: dict[str, GroupState] = {}
    for broker, (err, groups) in zip(sorted(broker_ids), answers, strict=True):
        if err:
            raise WireErrorCode(f"ListGroups error {err} ({ck.KafkaError(err).name()}) "
                               f"from broker {broker}")
        for g in groups:
            out[g.group_id] = GroupState.parse(g.state)
    return out


Configs = dict[str, dict[str, tuple[str | None, bool]]]


def topic_configs(client: WireClient, topics: list[str], keys: list[str] | None = None) -> Configs:
    """topic -> {config: (value, is_default)}, as ``KafkaAdmin.topic_configs`` (only
    ``keys`` when given); one DescribeConfigs request for all topics."""
    if not topics:
        return {}
    deadline = time.monotonic() + client.timeout
    (results,) = client.exchange([topic_configs_call(client, topics, keys, deadline)], deadline)
    return topic_configs_answer(results)


def topic_configs_call(client: WireClient, topics: list[str], keys: list[str] | None,
                       deadline: float) -> Call:
    """The DescribeConfigs request of :func:`topic_configs`, to send in some round."""
    v = client.version(kp.API_DESCRIBE_CONFIGS, 1, 3, deadline)
    return client.first_node, kp.describe_configs(v, sorted(set(topics)), keys)


def topic_configs_answer(results: list[Any]) -> Configs:
    """The answer to :func:`topic_configs_call`; raises :class:`WireUnsupported` on an
    error for any topic."""
    out: Configs = {}
    for r in results:
        if r.error_code:
            raise WireUnsupported(f"DescribeConfigs error {r.error_code} for topic {r.name}: "
                                  f"{r.error_message}")
        out[r.name] = r.configs
    return out
