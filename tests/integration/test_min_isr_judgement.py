"""A topic whose RF is below its ``min.insync.replicas``: what a real acks=all producer
gets from Kafka 3.7 and 4.x (ELR on and off), and what opskit's health says about it.

Kafka's leader requires ``min(min.insync.replicas, replica count)`` in-sync replicas of
an acks=all write, so an RF 1 topic with ``min.insync.replicas=2`` accepts acks=all
writes with one copy. opskit must not call that "acks=all writes fail" (CRITICAL), and
must say the real risk instead (WARNING ``min_isr_above_rf``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from opskit.adapters.health.cluster import gather_health_input
from opskit.core.health import evaluate_health
from opskit.core.models import Severity
from opskit.errors import NotFoundError

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


@pytest.fixture
def rf1_min2() -> Iterator[Callable[[Any, str], None]]:
    """Makes an RF 1 topic with min.insync.replicas=2 (:func:`make_topic`) and deletes
    every one it made at teardown: the session clusters are shared, and a topic left
    behind is a WARNING (min_isr_above_rf) in the health of every later test."""
    made: list[tuple[Any, str]] = []

    def make(cluster: Any, topic: str) -> None:
        made.append((cluster, topic))
        make_topic(cluster, topic)

    yield make
    for cluster, topic in made:
        with cluster.admin() as admin:
            try:
                admin.delete_topics([topic])
            except NotFoundError:  # never made, or deleted by the test
                pass
            deadline = time.monotonic() + 60
            while topic in admin.metadata().topics:
                assert time.monotonic() < deadline, f"{topic} not deleted"
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


def test_kafka37_accepts_acks_all_below_min_isr(kafka: Any, uniq: str,
                                                rf1_min2: Callable[[Any, str], None]) -> None:
    topic = f"rf1_min2_{uniq}"
    rf1_min2(kafka, topic)
    assert produce_acks_all(kafka.bootstrap, topic) == []
    assert judge(kafka, topic) == {"under_min_isr": Severity.OK,
                                   "min_isr_above_rf": Severity.WARNING}


@pytest.mark.kafka4
def test_kafka4_accepts_acks_all_below_min_isr_with_and_without_elr(
        kafka4: Any, uniq: str, rf1_min2: Callable[[Any, str], None]) -> None:
    before = elr_level(kafka4)
    try:
        for level in (before, 1 - before):
            if level != elr_level(kafka4):
                features(kafka4, "upgrade" if level else "downgrade", "--feature",
                         f"{ELR}={level}")
                assert elr_level(kafka4) == level
            topic = f"rf1_min2_elr{level}_{uniq}"
            rf1_min2(kafka4, topic)
            assert produce_acks_all(kafka4.bootstrap, topic) == [], f"ELR {level}"
            assert judge(kafka4, topic) == {"under_min_isr": Severity.OK,
                                            "min_isr_above_rf": Severity.WARNING}
    finally:
        if elr_level(kafka4) != before:
            features(kafka4, "upgrade" if before else "downgrade", "--feature",
                     f"{ELR}={before}")


@pytest.mark.three_brokers
def test_adding_replicas_raises_the_requirement(kafka3: Any, uniq: str, tmp_path: Any,
                                                rf1_min2: Callable[[Any, str], None]) -> None:
    """The risk the WARNING names, shown: the RF 1 topic with min.insync.replicas=2
    takes acks=all writes until a reassignment adds two replicas; while they copy
    (throttled), the leader requires 2 of 3 in sync and refuses acks=all writes, and
    opskit's health calls that partition under min ISR (CRITICAL). The scale-out
    playbook holds such topics' min.insync.replicas at their RF during its copy."""
    import json

    topic = f"rf1_min2_moving_{uniq}"
    rf1_min2(kafka3, topic)
    p = Producer({"bootstrap.servers": kafka3.bootstrap, "acks": "1", "linger.ms": 20})
    for i in range(3000):
        p.produce(topic, value=b"x" * 1000)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert produce_acks_all(kafka3.bootstrap, topic) == []
    with kafka3.admin() as admin:
        leader = admin.metadata().topics[topic][0].replicas[0]
    target = [leader, *[b for b in (0, 1, 2) if b != leader]]
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    tool = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"  # 3.7 and 4.x
    # the throttle in force on every broker before the move starts: KRaft brokers apply
    # config changes from the metadata log a moment later, and in a loaded CI run the new
    # replicas copied unthrottled, joined the ISR, and the acks=all write was acked
    rate = {"leader.replication.throttled.rate": "1000",
            "follower.replication.throttled.rate": "1000"}
    with kafka3.admin() as admin:
        admin.alter_topic_configs({topic: {"leader.replication.throttled.replicas": "*",
                                           "follower.replication.throttled.replicas": "*"}})
        admin.alter_broker_configs([0, 1, 2], rate)
        deadline = time.monotonic() + 60
        while True:
            cfgs = admin.broker_configs([0, 1, 2])
            topic_cfg = admin.topic_configs([topic])[topic]
            if all(cfgs[b].get(k, (None, True))[0] == v for b in (0, 1, 2)
                   for k, v in rate.items()) and \
                    topic_cfg["follower.replication.throttled.replicas"][0] == "*":
                break
            assert time.monotonic() < deadline, (cfgs, topic_cfg)
            time.sleep(0.5)
    out = kafka3.dist().run_tool(tool, "--bootstrap-server", kafka3.bootstrap,
                                 "--reassignment-json-file", str(plan), "--execute",
                                 "--throttle", "1000", timeout=120)
    assert out.returncode == 0, out.stderr + out.stdout
    try:
        deadline = time.monotonic() + 60
        while True:
            with kafka3.admin() as admin:
                part = admin.metadata().topics[topic][0]
            if len(part.replicas) == 3:
                break
            assert time.monotonic() < deadline, part
            time.sleep(0.5)
        assert list(part.isr) == [leader]
        strict = Producer({"bootstrap.servers": kafka3.bootstrap, "acks": "all",
                           "enable.idempotence": False, "retries": 0,
                           "message.timeout.ms": 20000})
        errors: list[str] = []
        strict.produce(topic, value=b"y", on_delivery=lambda e, m: errors.append(
            e.name() if e else "acked"))
        assert strict.flush(60) == 0
        assert errors == ["NOT_ENOUGH_REPLICAS"]
        assert judge(kafka3, topic)["under_min_isr"] is Severity.CRITICAL
    finally:
        kafka3.dist().run_tool(tool, "--bootstrap-server", kafka3.bootstrap,
                               "--reassignment-json-file", str(plan), "--cancel",
                               timeout=120)
        with kafka3.admin() as admin:
            admin.delete_topics([topic])      # --cancel cleared the throttles
