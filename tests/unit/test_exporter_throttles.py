"""Replication throttles: config parsing, counting, snapshot and families (pure)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from opskit.exporter.assemble import CycleInputs, assemble_snapshot
from opskit.exporter.families import build_families
from opskit.exporter.history import History
from opskit.exporter.options import Granularity
from opskit.exporter.snapshot import (
    BrokerSnap,
    BrokerThrottleSnap,
    PartitionSnap,
    TopicThrottleSnap,
)
from opskit.exporter.throttles import (
    broker_rates,
    count_throttled_replicas,
    throttle_rate,
    topic_replica_lists,
)

BROKER_FAM = "opskit_broker_replication_throttle_bytes_per_second"
TOPIC_FAM = "opskit_topic_throttled_replicas"


def _values(snap) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:  # type: ignore[no-untyped-def]
    fams = build_families(snap, Granularity.TOPIC)

    class C:
        def collect(self):  # type: ignore[no-untyped-def]
            return fams

    reg = CollectorRegistry(auto_describe=False)
    reg.register(C())  # type: ignore[arg-type]
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(generate_latest(reg).decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_throttle_rate_parsing() -> None:
    assert throttle_rate(("1048576", False)) == 1048576
    assert throttle_rate((" 2000 ", False)) == 2000
    assert throttle_rate(None) is None
    assert throttle_rate(("1048576", True)) is None  # a default is no throttle
    assert throttle_rate((None, False)) is None
    assert throttle_rate(("9223372036854775807", False)) is None  # Long.MAX_VALUE: unlimited
    assert throttle_rate(("-1", False)) is None
    assert throttle_rate(("fast", False)) is None
    assert throttle_rate(("0", False)) == 0  # a zero throttle stops replication: keep it


def test_broker_rates_only_the_directions_set() -> None:
    cfg = {"leader.replication.throttled.rate": ("500", False),
           "follower.replication.throttled.rate": ("9223372036854775807", True),
           "log.retention.ms": ("1000", False)}
    assert broker_rates(cfg) == {"leader": 500}
    assert broker_rates({}) == {}


def test_topic_replica_lists_skip_empty_and_defaults() -> None:
    cfg = {"leader.replication.throttled.replicas": ("0:1,1:2", False),
           "follower.replication.throttled.replicas": ("", True)}
    assert topic_replica_lists(cfg) == {"leader": "0:1,1:2"}
    assert topic_replica_lists({"follower.replication.throttled.replicas": ("*", False)}) == \
        {"follower": "*"}
    assert topic_replica_lists({"leader.replication.throttled.replicas": ("  ", False)}) == {}


def test_count_throttled_replicas() -> None:
    assert count_throttled_replicas("0:1,1:2,2:3", [3, 3, 3]) == 3
    assert count_throttled_replicas("*", [3, 3, 2]) == 8
    assert count_throttled_replicas(" * ", []) == 0
    assert count_throttled_replicas("0:1, 0:1 ,1:2", [3, 3]) == 2  # duplicates once
    assert count_throttled_replicas("0:1,bad,3,:4,5:", [3]) == 1  # malformed ignored
    assert count_throttled_replicas("", [3]) == 0


def _inputs(broker_throttles, topic_throttles) -> CycleInputs:  # type: ignore[no-untyped-def]
    return CycleInputs(
        cluster_id="c", controller_id=1,
        brokers=(BrokerSnap(1, "k1:9092"), BrokerSnap(2, "k2:9092")),
        partitions=(PartitionSnap("a", 0, 1, (1, 2), (1, 2)), PartitionSnap("a", 1, 2, (2, 1), (2, 1)),
                    PartitionSnap("b", 0, 1, (1, 2, 3), (1, 2, 3))),
        groups=(), offsets={},
        broker_throttles=broker_throttles, topic_throttles=topic_throttles,
    )


def test_assemble_and_families() -> None:
    inp = _inputs({2: {"follower": 2048, "leader": 1024}, 1: {}},
                  {"a": {"leader": "0:1,1:2"}, "b": {"follower": "*", "leader": "junk"},
                   "gone": {"leader": "*"}})
    snap = assemble_snapshot(inp, History(300_000, 600_000, 10), 1_000_000)
    assert snap.broker_throttles == (BrokerThrottleSnap(2, "leader", 1024),
                                     BrokerThrottleSnap(2, "follower", 2048))
    # "junk" counts 0 replicas: no series; "gone" is not a topic of this cycle
    assert snap.topic_throttles == (TopicThrottleSnap("a", "leader", 2),
                                    TopicThrottleSnap("b", "follower", 3))
    v = _values(snap)
    assert v[BROKER_FAM] == {(("broker", "2"), ("direction", "leader")): 1024,
                             (("broker", "2"), ("direction", "follower")): 2048}
    assert v[TOPIC_FAM] == {(("direction", "leader"), ("topic", "a")): 2,
                            (("direction", "follower"), ("topic", "b")): 3}


def test_no_throttles_no_series() -> None:
    snap = assemble_snapshot(_inputs({}, {}), History(300_000, 600_000, 10), 1_000_000)
    v = _values(snap)
    assert BROKER_FAM not in v and TOPIC_FAM not in v
    assert v["kafka_brokers"][()] == 2  # the rest is still there


def test_min_isr_gauges_left_out_until_min_isr_is_read() -> None:
    """The min-ISR gauges are computed from each topic's min.insync.replicas, never from a
    guessed 1: with topic b's not read and b:0's ISR shrunk, under/at-min-ISR are left out
    (an alert on them must not see 0); once read, they are there."""
    import dataclasses

    shrunk = (PartitionSnap("a", 0, 1, (1, 2), (1, 2)), PartitionSnap("b", 0, 1, (1, 2, 3), (1,)))
    inp = dataclasses.replace(_inputs({}, {}), partitions=shrunk, min_isr={"a": 2})
    v = _values(assemble_snapshot(inp, History(300_000, 600_000, 10), 1_000_000))
    assert "opskit_cluster_under_min_isr_partitions" not in v
    assert "opskit_cluster_at_min_isr_partitions" not in v
    assert v["opskit_cluster_under_replicated_partitions"][()] == 1
    inp = dataclasses.replace(inp, min_isr={"a": 2, "b": 2})
    v = _values(assemble_snapshot(inp, History(300_000, 600_000, 10), 1_000_000))
    assert v["opskit_cluster_under_min_isr_partitions"][()] == 1
    assert v["opskit_cluster_at_min_isr_partitions"][()] == 0
