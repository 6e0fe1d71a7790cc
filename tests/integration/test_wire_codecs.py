"""opskit's own wire codec against real brokers: compressed and LogAppendTime topics,
the librdkafka fallback for codecs it lacks, a lag path free of kafka-python, and
(against a fake broker on loopback) a peer that answers garbage named as not Kafka."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP

from opskit.adapters.kafka.protocol import offsets as offsets_wire
from opskit.adapters.kafka.protocol.groups import GroupWire, Node
from opskit.adapters.kafka.record_times import RecordTimeReader
from opskit.core.connection import ConnectionConfig
from opskit.core.models import TopicPartition
from opskit.errors import KafkaUnavailableError
from tests.helpers import commit, create_topic, produce

ROOT = Path(__file__).resolve().parents[2]


def _produce(bs: str, topic: str, n: int, base: int, compression: str) -> None:
    p = Producer({"bootstrap.servers": bs, "compression.type": compression, "linger.ms": 50})
    for i in range(n):
        p.produce(topic, value=b"payload-%d" % i * 10, partition=0, timestamp=base + i * 1000)
    assert p.flush(30) == 0


def _wire_times(bs: str, positions: list[tuple[TopicPartition, int]]
                ) -> tuple[dict[tuple[TopicPartition, int], tuple[int, int, str]],
                           list[tuple[TopicPartition, int]]]:
    with offsets_wire.bootstrap_client(ConnectionConfig(bs), 10) as client:
        lead = offsets_wire.leaders(client, {tp.topic for tp, _ in positions})
        return offsets_wire.record_times(client, positions, lead)


def test_gzip_topic_times_come_through_the_wire_path(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t = f"codec_gz_{uniq}"
    create_topic(bs, t, 1)
    base = int(time.time() * 1000) - 600_000
    _produce(bs, t, 40, base, "gzip")
    tp = TopicPartition(t, 0)
    found, rest = _wire_times(bs, [(tp, o) for o in (0, 1, 17, 39, 40)])
    assert rest == []  # nothing left for librdkafka: gzip is decoded here
    assert {o: found[(tp, o)] for o in (0, 1, 17, 39)} == {
        o: (o, base + o * 1000, "create") for o in (0, 1, 17, 39)}
    assert (tp, 40) not in found  # the log end: no record yet


def test_log_append_time_topic_gives_the_brokers_time(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t = f"codec_lat_{uniq}"
    create_topic(bs, t, 1, config={"message.timestamp.type": "LogAppendTime"})
    _produce(bs, t, 5, 1_000, "none")  # producer timestamps the broker overwrites
    c = Consumer({"bootstrap.servers": bs, "group.id": f"codec-{uniq}", "enable.auto.commit": False})
    try:
        c.assign([CkTP(t, 0, 0)])
        want: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(want) < 5 and time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and m.error() is None:
                want[m.offset()] = m.timestamp()[1]
    finally:
        c.close()
    tp = TopicPartition(t, 0)
    found, rest = _wire_times(bs, [(tp, o) for o in range(5)])
    assert rest == [] and len(want) == 5
    assert {o: found[(tp, o)] for o in range(5)} == {o: (o, want[o], "log_append") for o in range(5)}
    assert all(ts > 1_000_000 for ts in want.values())  # the broker's clock, not the producer's


def test_lz4_topic_falls_back_to_librdkafka_with_correct_times(any_kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = any_kafka.bootstrap
    t = f"codec_lz4_{uniq}"
    create_topic(bs, t, 1)
    base = int(time.time() * 1000) - 300_000
    _produce(bs, t, 12, base, "lz4")
    tp = TopicPartition(t, 0)
    found, rest = _wire_times(bs, [(tp, 0), (tp, 9)])
    assert found == {} and rest == [(tp, 0), (tp, 9)]  # the codec lacks lz4: handed over
    reader = RecordTimeReader(ConnectionConfig(bs), timeout=10)
    try:
        got = reader.read([(tp, 0), (tp, 9)])
    finally:
        reader.close()
    assert [(got[(tp, o)].offset, got[(tp, o)].timestamp_ms) for o in (0, 9)] == \
        [(0, base), (9, base + 9000)]  # type: ignore[union-attr]


def test_lag_path_imports_nothing_from_kafka_python(kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    """Not even for the byte headroom of a topic with retention.bytes (DescribeLogDirs
    at the protocol level)."""
    bs = kafka.bootstrap
    t = f"codec_lag_{uniq}"
    create_topic(bs, t, 3, config={"retention.bytes": "10000000"})
    produce(bs, t, {0: 4, 1: 2, 2: 0})
    commit(bs, f"codec-lag-{uniq}", {(t, 0): 1, (t, 1): 2})
    script = (
        "import sys\n"
        "from opskit.cli.main import main\n"
        f"code = main(['lag', '--group', 'codec-lag-{uniq}', '-o', 'json', '-b', {bs!r}, "
        "'--timeout', '30'])\n"
        "sys.stdout.flush()\n"
        "print(code, sorted(m for m in sys.modules if m.split('.')[0] == 'kafka'), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False,
                       timeout=120)
    assert r.stderr.strip().splitlines()[-1] == "0 []", r.stderr
    report = json.loads(r.stdout)
    (group,) = report["groups"]
    p0 = next(p for p in group["partitions"] if p["partition"] == 0)
    assert p0["partition_size_bytes"] > 0 and p0["retention_bytes_headroom"] is not None
    assert report["sizes_unavailable"] is None


def _junk_broker(srv: socket.socket) -> None:
    """Answers every request with its correlation id and four bytes that decode as nothing,
    on every connection at once (the batched reads use several connections per broker)."""

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while True:
                    size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                    req = conn.recv(size, socket.MSG_WAITALL)
                    conn.sendall(struct.pack(">i", 8) + req[4:8] + b"\x00\x01\x02\x03")
            except (OSError, struct.error):
                return

    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            return
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def test_a_peer_answering_garbage_is_reported_as_not_kafka() -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    threading.Thread(target=_junk_broker, args=(srv,), daemon=True).start()
    try:
        wire = GroupWire(ConnectionConfig(f"127.0.0.1:{port}"), [Node(0, "127.0.0.1", port)],
                         timeout=5)
        # Since the connection probe (ApiVersions + Metadata pipelined, then a TLS check
        # when the answers make no sense), a peer that answers garbage from the first
        # request on is "not reachable as Kafka": one opskit error (exit 3) within the
        # timeout, saying what the peer did, and no fallback to librdkafka (which could not
        # read it either). An undecodable answer to a later batched request still falls back.
        t0 = time.monotonic()
        with pytest.raises(KafkaUnavailableError) as e:
            wire.read_groups(["g"])
        assert time.monotonic() - t0 < 5 + 10  # bounded by the timeout, never a hang
        assert str(e.value) == (
            f"cannot reach Kafka at 127.0.0.1:{port}: the server answered something that is "
            "not the Kafka protocol (an undecodable answer to ApiVersions; --debug shows it)")
    finally:
        srv.close()
