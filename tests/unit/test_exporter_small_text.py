"""The small families written as text give the bytes prometheus_client's rendering of the
same families gives (names, label order and escaping, value formatting, family order)."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from opskit.core.models import Severity
from opskit.exporter.families import small_families
from opskit.exporter.options import Granularity
from opskit.exporter.serving import ListCollector
from opskit.exporter.small_text import render_small_families
from opskit.exporter.snapshot import (
    BrokerSnap,
    BrokerThrottleSnap,
    GroupSnap,
    GroupTopicSnap,
    HealthSnap,
    PartitionSnap,
    QuorumNodeSnap,
    Snapshot,
    TopicSnap,
    TopicThrottleSnap,
)

_ODD = (None, 0, 1, 1.0, True, False, -0.0, -1, -2.5, 2**63 - 1, 2**70, 1e300, 1e-300,
        float("inf"), float("-inf"), float("nan"), 0.1 + 0.2, 1.25, 7, 1234567.0, 12345678.9,
        999999.5, 100000000, 5e-7)
_NAMES = ("t", 'q"t', "back\\slash", "new\nline", "ü-topic", "a.b_c-d", "")


def _v(rnd: random.Random) -> float | None:
    r = rnd.random()
    if r < 0.4:
        return rnd.choice(_ODD)  # type: ignore[return-value]
    if r < 0.7:
        return rnd.randint(0, 10**9)
    return rnd.random() * 10 ** rnd.randint(-3, 12)


def _snapshot(rnd: random.Random) -> Snapshot:
    topics = rnd.sample(_NAMES, rnd.randint(0, len(_NAMES)))
    groups = []
    for i in range(rnd.randint(0, 6)):
        gid = rnd.choice(_NAMES) + str(i)
        groups.append(GroupSnap(
            group_id=gid, state=rnd.choice(("Stable", "Empty", "Dead", 'we"ird')),
            members=rnd.choice((None, 0, 3)),
            severity=rnd.choice(list(Severity)),
            status=rnd.choice((None, "OK", "WARN", "ERR", "STALL", "STOP", "REWIND", "UNKNOWN")),
            topics=tuple(GroupTopicSnap(
                topic=t, committed_sum=_v(rnd), lag_sum=_v(rnd), lag_seconds_max=_v(rnd),  # type: ignore[arg-type]
                consume_rate=_v(rnd), catchup_eta_seconds=_v(rnd),
                falling_behind=rnd.choice((None, True, False)),
                retention_headroom_seconds=_v(rnd), records_lost=_v(rnd))  # type: ignore[arg-type]
                for t in rnd.sample(topics, rnd.randint(0, len(topics)))),
            anomalies={k: rnd.randint(0, 3) for k in rnd.sample(("b", "a", "c"), rnd.randint(0, 3))},
        ))
    return Snapshot(
        taken_at_ms=1, cluster_id="c", controller_id=rnd.choice((-1, 0, 3)),
        brokers=tuple(BrokerSnap(i, rnd.choice(("h:9092", 'h"1:1', "x\\y:2"))) for i in range(rnd.randint(0, 3))),
        partitions=tuple(PartitionSnap(t, p, 0, (0,), (0,), 0, 5) for t in topics for p in range(rnd.randint(0, 3))),
        topics=tuple(TopicSnap(t, _v(rnd), _v(rnd), _v(rnd), _v(rnd)) for t in topics),  # type: ignore[arg-type]
        groups=tuple(groups),
        health=HealthSnap(
            brokers_expected=_v(rnd), under_replicated=_v(rnd), under_min_isr=_v(rnd),  # type: ignore[arg-type]
            at_min_isr=_v(rnd), offline=_v(rnd), preferred_leader_imbalance=_v(rnd),  # type: ignore[arg-type]
            reassignments=_v(rnd), quorum_leader=_v(rnd), quorum_voters=_v(rnd),  # type: ignore[arg-type]
            quorum_nodes=tuple(QuorumNodeSnap(n, rnd.choice(("voter", "observer")), rnd.randint(0, 9))
                               for n in range(rnd.randint(0, 3))),
        ),
        broker_throttles=tuple(BrokerThrottleSnap(b, d, rnd.randint(0, 10**8))
                               for b in range(rnd.randint(0, 2)) for d in ("leader", "follower")),
        topic_throttles=tuple(TopicThrottleSnap(t, "leader", rnd.randint(0, 5)) for t in topics[:2]),
    )


def _reference(snap: Snapshot, granularity: Granularity) -> tuple[bytes, int]:
    fams = small_families(snap, granularity)
    reg = CollectorRegistry(auto_describe=False)
    reg.register(ListCollector(lambda: fams))
    return generate_latest(reg), sum(len(m.samples) for m in fams)


@pytest.mark.parametrize("seed", range(40))
def test_small_families_text_is_prometheus_clients(seed: int) -> None:
    rnd = random.Random(seed)
    for _ in range(25):
        snap = _snapshot(rnd)
        for gran in Granularity:
            text, series = render_small_families(snap, gran)
            ref, ref_series = _reference(snap, gran)
            assert text.encode() == ref
            assert series == ref_series


def test_small_families_text_covers_every_family_and_odd_label() -> None:
    """The generated snapshots reach every small family and the escaped characters."""
    rnd = random.Random(7)
    seen: set[str] = set()
    text = ""
    for _ in range(200):
        t, _ = render_small_families(_snapshot(rnd))
        text += t
        seen |= {line.split()[2] for line in t.splitlines() if line.startswith("# TYPE")}
    assert {"kafka_broker_info", "opskit_consumergroup_status", "opskit_consumergroup_anomalies",
            "opskit_kraft_quorum_follower_lag", "opskit_topic_throttled_replicas",
            "opskit_broker_replication_throttle_bytes_per_second",
            "opskit_consumergroup_falling_behind"} <= seen
    assert '\\"' in text and "\\\\" in text and "\\n" in text and "e+" in text


def test_label_count_mismatch_is_an_error() -> None:
    from opskit.exporter.small_text import _TextFamilies

    with pytest.raises(ValueError):
        _TextFamilies(Granularity.PARTITION).add("kafka_brokers", ("x",), 1)
