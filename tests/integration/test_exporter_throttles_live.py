"""Replication throttles against real Kafka: a broker throttle rate and a topic's
throttled-replica lists appear as series after a collection, and vanish once
the configs are removed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.connection import ConnectionConfig
from opskit.exporter.collector import KafkaSource
from opskit.exporter.engine import Exporter
from opskit.exporter.options import ExporterOptions, NameFilter
from tests.helpers import create_topic

BROKER_FAM = "opskit_broker_replication_throttle_bytes_per_second"
TOPIC_FAM = "opskit_topic_throttled_replicas"
Values = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _values(ex: Exporter) -> Values:
    out: Values = {}
    for fam in text_string_to_metric_families(ex.scrape().decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _alter(admin: AdminClient, rtype: ResourceType, name: str, op: AlterConfigOpType,
           cfg: dict[str, str]) -> None:
    res = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v in cfg.items()])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    # The controller has committed the change; the broker that answers DescribeConfigs
    # applies it from the metadata log a little later (seconds on a loaded machine): wait
    # until it shows, so the exporter's read sees what the test just set.
    deadline = time.monotonic() + 60
    while True:
        [got] = admin.describe_configs([ConfigResource(rtype, name)]).values()
        now = {k: e.value for k, e in got.result(30).items()}
        want_set = op == AlterConfigOpType.SET
        if all((now.get(k) == v) if want_set else (now.get(k) in (None, "")) for k, v in cfg.items()):
            return
        assert time.monotonic() < deadline, f"{name}: {cfg} not applied after 60 s: {now}"
        time.sleep(0.2)


BROKER_CFG = {"leader.replication.throttled.rate": "10485760",
              "follower.replication.throttled.rate": "5242880"}


@pytest.fixture
def throttled(kafka, uniq) -> Iterator[tuple[str, str, AdminClient]]:  # type: ignore[no-untyped-def]
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    topic = f"thr_{uniq}"
    create_topic(kafka.bootstrap, topic, 3)
    topic_cfg = {"leader.replication.throttled.replicas": "0:0,1:0",
                 "follower.replication.throttled.replicas": "*"}
    _alter(admin, ResourceType.BROKER, "0", AlterConfigOpType.SET, BROKER_CFG)
    try:
        _alter(admin, ResourceType.TOPIC, topic, AlterConfigOpType.SET, topic_cfg)
        yield kafka.bootstrap, topic, admin
    finally:  # never leave a throttle on the shared broker, even when the test fails
        _alter(admin, ResourceType.BROKER, "0", AlterConfigOpType.DELETE, BROKER_CFG)


def test_throttle_series_appear_then_vanish(throttled, uniq) -> None:  # type: ignore[no-untyped-def]
    bs, topic, admin = throttled
    # config_refresh_cycles=1: configs are re-read every cycle, so removal shows at once
    opts = ExporterOptions(interval_s=3600, collection_timeout_s=60, kafka_timeout_s=10,
                           groups=NameFilter.of([f".*{uniq}.*"], None, "group"),
                           topics=NameFilter.of([f".*{uniq}.*"], None, "topic"),
                           config_refresh_cycles=1, lag_time=False, log_dirs=False)
    source = KafkaSource(ConnectionConfig(bs), opts)
    ex = Exporter(source, opts)
    try:
        ex.run_cycle()
        v = _values(ex)
        assert v["opskit_kafka_up"][()] == 1
        assert v[BROKER_FAM] == {(("broker", "0"), ("direction", "leader")): 10485760,
                                 (("broker", "0"), ("direction", "follower")): 5242880}
        # "0:0,1:0" lists two replicas; "*" covers all 3 partitions x 1 replica
        assert v[TOPIC_FAM] == {(("direction", "leader"), ("topic", topic)): 2,
                                (("direction", "follower"), ("topic", topic)): 3}

        _alter(admin, ResourceType.BROKER, "0", AlterConfigOpType.DELETE, BROKER_CFG)
        _alter(admin, ResourceType.TOPIC, topic, AlterConfigOpType.DELETE,
               {"leader.replication.throttled.replicas": "",
                "follower.replication.throttled.replicas": ""})
        ex.run_cycle()
        v2 = _values(ex)
        assert v2["opskit_kafka_up"][()] == 1
        assert v2["opskit_exporter_collections_total"][()] == 2
        assert BROKER_FAM not in v2
        assert TOPIC_FAM not in v2
        assert v2["kafka_topic_partitions"][(("topic", topic),)] == 3  # the topic is still there
    finally:
        source.close()
