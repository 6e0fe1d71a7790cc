"""`opskit dr snapshot` on Kafka 3.7, `opskit dr restore` into Kafka 4.x: the
topic is recreated with its config override, and the group resumes at the
record it would have read next, although offsets differ between the clusters
(the source deleted its first 10 records of partition 0, the mirror never had them).
"""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient

from tests.helpers import commit_retrying, create_topic, run_cli

BASE = 1_714_557_600_000  # 2024-05-01T10:00:00Z; record i has timestamp BASE + i s


def produce_numbered(bs: str, topic: str, partition: int, numbers: range) -> None:
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in numbers:
        p.produce(topic, key=str(i).encode(), value=b"v", partition=partition,
                  timestamp=BASE + i * 1000)
    assert p.flush(60) == 0


def test_snapshot_37_restore_into_4x(kafka, kafka4, uniq, tmp_path):
    topic, group = f"dr_{uniq}", f"dr-{uniq}"
    src, dst = kafka.bootstrap, kafka4.bootstrap
    create_topic(src, topic, 2, config={"retention.ms": "-1", "max.message.bytes": "2000000"})
    for part in (0, 1):
        produce_numbered(src, topic, part, range(30))
    admin = AdminClient({"bootstrap.servers": src})
    for f in admin.delete_records([CkTP(topic, 0, 10)], request_timeout=30).values():
        f.result(30)
    commit_retrying(src, group, {(topic, 0): 15, (topic, 1): 30})

    snap_file = tmp_path / "snap.json"
    res = run_cli("dr", "snapshot", "--topic", topic, "--group", group, "--file", str(snap_file),
                  "-b", src)
    assert res.code == 0, res.err
    snap = json.loads(snap_file.read_text())
    [t] = snap["topics"]
    assert t["name"] == topic and t["partitions"] == 2
    assert t["configs"] == {"retention.ms": "-1", "max.message.bytes": "2000000"}
    assert snap["acls"] is None and "no authorizer" in snap["acls_note"]
    positions = {p["partition"]: p for p in snap["groups"][group]}
    assert positions[0]["record_timestamp_ms"] == BASE + 15_000
    assert positions[1]["record_timestamp_ms"] is None  # at the log end

    dry = run_cli("dr", "restore", str(snap_file), "-o", "json", "-b", dst)
    assert dry.code == 0, dry.err
    assert [c["name"] for c in dry.json()["create_topics"]] == [topic]
    with kafka4.admin() as a4:
        assert topic not in a4.metadata().topics

    bdir = str(tmp_path / "backups")
    first = run_cli("dr", "restore", str(snap_file), "--execute", "--yes", "-b", dst,
                    "--backup-dir", bdir)
    assert first.code == 0, first.err
    # the mirror copies what the source still has: partition 0 from record 10 on
    produce_numbered(dst, topic, 0, range(10, 30))
    produce_numbered(dst, topic, 1, range(30))
    second = run_cli("dr", "restore", str(snap_file), "--execute", "--yes", "-o", "json",
                     "-b", dst, "--backup-dir", bdir)
    assert second.code == 0, second.err
    assert second.json()["create_topics"] == []

    with kafka4.admin() as a4:
        offs = a4.committed_offsets([group])[group]
        cfg = a4.topic_configs([topic])[topic]
    assert {tp.partition: o for tp, o in offs.items()} == {0: 5, 1: 30}
    assert cfg["retention.ms"][0] == "-1" and cfg["max.message.bytes"][0] == "2000000"
    # offset 5 on the target holds record 15: the one the group would have read next
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": dst, "group.id": f"peek-{uniq}",
                  "enable.auto.commit": False})
    try:
        c.assign([CkTP(topic, 0, 5)])
        msg = None
        deadline = time.time() + 20
        while msg is None and time.time() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None
        assert msg.key() == b"15" and msg.timestamp()[1] == BASE + 15_000
    finally:
        c.close()
