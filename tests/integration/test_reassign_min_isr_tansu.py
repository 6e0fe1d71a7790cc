"""Tansu 0.6 answers DescribeConfigs(topic) without any config entry, min.insync.replicas
included (Apache Kafka 3.7.2 and 4.3.1 answer it, a broker default included). The topology a
reassignment plan is made from then holds the value as unknown (None), never 1, so the
planner refuses to move the topic's partitions (the refusal itself: the unit tests in
tests/unit/test_reassign_min_isr_unknown.py; a single Tansu broker leaves no partition a
place to move to). A plan that moves nothing is unchanged: exit 0.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.reassign.topology import read_topology
from opskit.core.connection import ConnectionConfig
from tests.helpers import create_topic, run_cli


def test_tansu_min_isr_is_unknown_not_one(tansu: Any, tmp_path: Path) -> None:
    topic = f"misr_{uuid.uuid4().hex[:6]}"
    create_topic(tansu.bootstrap, topic, 2)
    with KafkaAdmin(ConnectionConfig(tansu.bootstrap), timeout=20) as admin:
        answer = admin.topic_configs([topic])
        read = read_topology(admin)
    assert topic in answer and "min.insync.replicas" not in answer[topic], answer
    assert read.topology.min_isr(topic) is None
    replicas = {p.partition: list(p.replicas) for p in read.topology.partitions
                if p.topic == topic}
    assert sorted(replicas) == [0, 1]

    # the same replicas as a target: nothing moves, nothing is refused
    same = tmp_path / "same.json"
    same.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": rs} for p, rs in replicas.items()]}))
    for args in (["--from-json", str(same)], ["--rebalance"],
                 ["--replication-factor", "1", "--topic", topic]):
        r = run_cli("reassign", "plan", *args, "-b", tansu.bootstrap, "--timeout", "20")
        assert r.code == 0, (args, r.err)
        assert "nothing to move" in r.out, (args, r.out)
