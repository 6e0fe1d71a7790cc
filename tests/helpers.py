"""Helpers for integration tests: produce, commit, run the CLI, run Kafka's tools."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP
from confluent_kafka.admin import AdminClient, NewTopic


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def run_cli(*args: str) -> CliResult:
    """Run ``opskit ARGS`` in-process and capture exit code, stdout and stderr."""
    from opskit.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return CliResult(code, out.getvalue(), err.getvalue())


#: a bootstrap string, or librdkafka settings (a secured cluster: ``cluster.conn().to_librdkafka()``)
Where = str | Mapping[str, Any]


@contextmanager
def cli_sandbox(name: str, *up_args: str) -> Iterator[Any]:
    """A one-node sandbox started by ``opskit sandbox up --name NAME`` on a free port with
    ``up_args`` (version, quorum, security ...), removed afterwards (its playbook run too)."""
    from opskit.sandbox.cluster import Sandbox
    from opskit.sandbox.ports import free_port_block

    r = run_cli("sandbox", "up", "--name", name, "--port", str(free_port_block(1)), *up_args)
    assert r.code == 0, r.out + r.err
    sb = Sandbox(name)
    try:
        yield sb
    finally:
        sb.down()


def client_conf(bootstrap: Where) -> dict[str, Any]:
    """librdkafka settings for the test clients of ``bootstrap``."""
    if isinstance(bootstrap, str):
        return {"bootstrap.servers": bootstrap}
    return dict(bootstrap)


def create_topic(bootstrap: Where, name: str, partitions: int, rf: int = 1,
                 config: dict[str, str] | None = None) -> None:
    admin = AdminClient(client_conf(bootstrap))
    fs = admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])
    for f in fs.values():
        f.result(30)
    deadline = time.time() + 30
    while time.time() < deadline:
        md = admin.list_topics(name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.2)
    raise AssertionError(f"topic {name} not ready")


def produce(bootstrap: Where, topic: str, per_partition: dict[int, int],
            timestamp_ms: int | None = None, value: bytes = b"x" * 100,
            idempotent: bool = False) -> None:
    """Write the records and check every one was acknowledged. ``idempotent``: no
    duplicate from a retried request (a loaded broker answering late), so offsets are
    exactly the records' order (Apache Kafka; not every compatible broker has
    InitProducerId)."""
    p = Producer({**client_conf(bootstrap), "linger.ms": 5, "acks": "all",
                  **({"enable.idempotence": True} if idempotent else {})})
    errors: list[str] = []

    def done(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for part, n in per_partition.items():
        for i in range(n):
            if timestamp_ms is None:
                p.produce(topic, value=value, key=str(i).encode(), partition=part,
                          on_delivery=done)
            else:
                p.produce(topic, value=value, key=str(i).encode(), partition=part,
                          timestamp=timestamp_ms, on_delivery=done)
            if i % 1000 == 0:
                p.poll(0)
    assert p.flush(60) == 0
    assert not errors, f"{len(errors)} record(s) not acknowledged: {errors[:3]}"


def commit(bootstrap: Where, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group without joining it (a simple, memberless commit).

    Retried while the group's coordinator is loading or moving (a fresh cluster, a
    broker just restarted): NOT_COORDINATOR and friends are transient, not test failures.
    """
    from confluent_kafka import KafkaException

    for attempt in range(60):
        c = Consumer({**client_conf(bootstrap), "group.id": group, "enable.auto.commit": False})
        try:
            c.commit(offsets=[CkTP(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
            return
        except KafkaException as e:
            if attempt == 59 or "COORDINATOR" not in str(e):
                raise
        finally:
            c.close()
        time.sleep(0.5)


#: the same as commit(); kept for the tests that say so explicitly
commit_retrying = commit


class ActiveMember:
    """A consumer that joins a group, commits chosen offsets, and stays until stopped."""

    def __init__(self, bootstrap: Where, group: str, topics: Iterable[str],
                 commit_offsets: dict[tuple[str, int], int] | None = None,
                 client_id: str = "opskit-test-member") -> None:
        self.c = Consumer({**client_conf(bootstrap), "group.id": group, "client.id": client_id,
                           "enable.auto.commit": False, "auto.offset.reset": "earliest",
                           "session.timeout.ms": 10000})
        self.topics = list(topics)
        self.commit_offsets = commit_offsets or {}
        self.ready = threading.Event()
        self.stop_event = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Self:
        self.t.start()
        if not self.ready.wait(60):
            raise AssertionError("member did not get an assignment")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.t.join(30)

    def _run(self) -> None:
        self.c.subscribe(self.topics)
        while not self.stop_event.is_set():
            self.c.poll(0.2)
            if not self.ready.is_set() and self.c.assignment():
                if self.commit_offsets:
                    self.c.commit(offsets=[CkTP(t, p, o) for (t, p), o in self.commit_offsets.items()],
                                  asynchronous=False)
                self.ready.set()
        self.c.close()


def parse_describe(text: str) -> dict[tuple[str, str, int], dict[str, str | None]]:
    """Rows of ``kafka-consumer-groups.sh --describe`` keyed by (group, topic, partition)."""
    rows: dict[tuple[str, str, int], dict[str, str | None]] = {}
    header: list[str] | None = None
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "GROUP" and "PARTITION" in parts:
            header = parts
            continue
        if header is None or len(parts) != len(header):
            continue
        row = {h: (None if v == "-" else v) for h, v in zip(header, parts)}
        key = (str(row["GROUP"]), str(row["TOPIC"]), int(str(row["PARTITION"])))
        rows[key] = row
    return rows


class SilentServer:
    """A TCP listener on 127.0.0.1 (a free port) that accepts every connection and then
    holds it without reading or writing: a black-holed or hung server (a Kafka broker, an
    HTTPS endpoint: a TLS handshake never completes). ``accepted`` counts connections."""

    def __init__(self) -> None:
        self._srv = socket.socket()
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(16)
        self.address = f"127.0.0.1:{self._srv.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        self._srv.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        for c in self.accepted:
            c.close()
        self._srv.close()


#: the generated table of a matrix document (docs/*-matrix.md) stands between these
MATRIX_BEGIN, MATRIX_END = "<!-- matrix:begin -->", "<!-- matrix:end -->"


def check_matrix_doc(doc: Path, table: str, write_env: str, test_file: str,
                     not_run: Callable[[], list[Any]], write: Callable[[], None]) -> None:
    """The matrix document shows exactly ``table`` (the expected cells). With
    ``write_env``=1 it is first rewritten from the observed cells (``write``), which
    needs every cell to have run (``not_run`` lists those that did not)."""
    if os.environ.get(write_env) == "1":
        missing = sorted(not_run())
        assert not missing, f"{len(missing)} cells did not run (e.g. {missing[0]}): not written"
        write()
    assert doc.exists(), f"{doc} is missing: run with {write_env}=1"
    text = doc.read_text()
    shown = text[text.index(MATRIX_BEGIN) + len(MATRIX_BEGIN):text.index(MATRIX_END)].strip()
    assert shown == table.strip(), (
        f"{doc.name} is stale: rerun with {write_env}=1 python -m pytest {Path(test_file).name}")


def stop_process(proc: subprocess.Popen[Any], grace: float = 30.0) -> int:
    """SIGTERM, then SIGKILL when it has not ended ``grace`` seconds later; its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(10)
