"""A topic whose RF is below its ``min.insync.replicas``: what a real acks=all producer
gets from Kafka 3.7 and 4.x (ELR on and off), and what opskit's health says about it.

Kafka's leader requires ``min(min.insync.replicas, replica count)`` in-sync replicas of
an acks=all write, so an RF 1 topic with ``min.insync.replicas=2`` accepts acks=all
writes with one copy. opskit must not call that "acks=all writes fail" (CRITICAL), and
must say the real risk instead (WARNING ``min_isr_above_rf``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Producer

from opskit.adapters.cluster_health import gather_health_input
from opskit.core.health import evaluate_health
from opskit.core.models import Severity

ELR = "eligible.leader.replicas.version"


def produce_acks_all(bootstrap: str, topic: str) -> list[str]:
    """One record with acks=all (idempotent, as billing producers run); the delivery
    errors (empty: acknowledged)."""
    errors: list[str] = []
    acked: list[int] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": 20000, "retries": 2})

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err.name())
        else:
            acked.append(msg.offset())

    p.produce(topic, key=b"k", value=b"v", on_delivery=done)
    assert p.flush(60) == 0
    assert errors or acked
    return errors


def judge(cluster: Any, topic: str) -> dict[str, Severity]:
    """The severity of each min-ISR check for ``topic`` (OK when it is not listed)."""
    with cluster.admin() as admin:
        report = evaluate_health(gather_health_input(admin))
    out = {}
    for check in ("under_min_isr", "min_isr_above_rf"):
        f = report.finding(check)
        out[check] = f.severity if any(a.topic == topic for a in f.partitions) else Severity.OK
    return out


def make_topic(cluster: Any, topic: str) -> None:
    with cluster.admin() as admin:
        admin.create_topics([(topic, 1, 1, {"min.insync.replicas": "2"})])
        deadline = time.monotonic() + 60
        while not admin.metadata().topics.get(topic):
            assert time.monotonic() < deadline
            time.sleep(0.3)


def features(cluster: Any, *args: str) -> str:
    out = cluster.dist().run_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server",
                                  cluster.bootstrap, *args, timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    return str(out.stdout)


def elr_level(cluster: Any) -> int:
    for line in features(cluster, "describe").splitlines():
        if f"Feature: {ELR}" in line:
            return int(line.split("FinalizedVersionLevel:")[1].split()[0])
    return 0


def test_kafka37_accepts_acks_all_below_min_isr(kafka: Any, uniq: str) -> None:
    topic = f"rf1_min2_{uniq}"
    make_topic(kafka, topic)
    assert produce_acks_all(kafka.bootstrap, topic) == []
    assert judge(kafka, topic) == {"under_min_isr": Severity.OK,
                                   "min_isr_above_rf": Severity.WARNING}


@pytest.mark.kafka4
def test_kafka4_accepts_acks_all_below_min_isr_with_and_without_elr(kafka4: Any,
                                                                     uniq: str) -> None:
    before = elr_level(kafka4)
    try:
        for level in (before, 1 - before):
            if level != elr_level(kafka4):
                features(kafka4, "upgrade" if level else "downgrade", "--feature",
                         f"{ELR}={level}")
                assert elr_level(kafka4) == level
            topic = f"rf1_min2_elr{level}_{uniq}"
            make_topic(kafka4, topic)
            assert produce_acks_all(kafka4.bootstrap, topic) == [], f"ELR {level}"
            assert judge(kafka4, topic) == {"under_min_isr": Severity.OK,
                                            "min_isr_above_rf": Severity.WARNING}
    finally:
        if elr_level(kafka4) != before:
            features(kafka4, "upgrade" if before else "downgrade", "--feature",
                     f"{ELR}={before}")

