"""Fixtures for the real non-Apache brokers (imported by tests/conftest.py).

Each broker is the real binary installed by scripts/install-compat.sh from the
vendored archives (see docs/compat-notes.md), started by
:mod:`opskit.sandbox.compat` in a private network namespace and reached on
``127.0.0.1``:

* ``hanzo_stream`` (session): the Hanzo Stream gateway over NATS JetStream
  (memory storage). ``.bootstrap``, ``.stop()``.
* ``heraclitus`` (session): Heraclitus on file storage. ``.bootstrap``,
  ``.stop()``, ``.restart()``; ``.extra["http"]`` is its ``/health`` +
  ``/metrics`` address. A restart resets every partition's log end to 0 for
  every test that shares the session's broker: tests that restart use
  ``fresh_heraclitus`` (a broker of their own, ~1 s to start).
* ``streamnest`` (session): 3 StreamNest brokers (HTTP only), ``.bootstrap`` is
  ``http://127.0.0.1:P1,...``; ``.create_topic``, ``.produce``, ``.consume``.

A missing binary skips the test with the install hint, except under CI (``CI``
set), where it fails: a compatibility claim must not pass as a skip there.
``create_topics`` creates topics the way each broker accepts (the gateway never
answers librdkafka's CreateTopics v4, so kafka-python's request is used).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from opskit.sandbox import compat

NEEDS = {
    "tansu": ("tansu",),
    "hanzo-stream": ("hanzo-stream", "nats-server"),
    "heraclitus": ("heraclitus",),
    "streamnest": ("streamnest",),
}


def require_binaries(name: str) -> None:
    """Skip (fail under CI) when ``name``'s binaries are not installed."""
    missing = [b for b in NEEDS[name] if compat.find_binary(b) is None]
    if missing:
        msg = f"{name}: {', '.join(missing)} not installed; run scripts/install-compat.sh"
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


def create_topics(bootstrap: str, topics: dict[str, int], timeout: float = 20.0) -> None:
    """Create ``{topic: partitions}`` (replication 1) with kafka-python, then wait until
    Metadata shows every partition."""
    from kafka.admin import KafkaAdminClient, NewTopic

    ka = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        ka.create_topics([NewTopic(t, n, 1) for t, n in topics.items()], timeout_ms=5000)
    finally:
        ka.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(timeout=5)
        if all(t in md.topics and len(md.topics[t].partitions) == n for t, n in topics.items()):
            return
        time.sleep(0.2)
    raise AssertionError(f"topics {sorted(topics)} not visible on {bootstrap}")


@pytest.fixture(scope="session")
def hanzo_stream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[compat.CompatBroker]:
    require_binaries("hanzo-stream")
    b = compat.start_hanzo_stream(tmp_path_factory.mktemp("hanzo-stream"))
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def heraclitus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[compat.CompatBroker]:
    require_binaries("heraclitus")
    b = compat.start_heraclitus(tmp_path_factory.mktemp("heraclitus"), storage="file")
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def fresh_heraclitus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[compat.CompatBroker]:
    """A Heraclitus of the test's own (file storage), free to be restarted."""
    require_binaries("heraclitus")
    b = compat.start_heraclitus(tmp_path_factory.mktemp("heraclitus-own"), storage="file")
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def streamnest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[compat.StreamNestCluster]:
    require_binaries("streamnest")
    c = compat.start_streamnest(tmp_path_factory.mktemp("streamnest"), brokers=3)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[compat.CompatBroker]:
    require_binaries("tansu")
    b = compat.start_tansu(tmp_path_factory.mktemp("tansu"))
    try:
        yield b
    finally:
        b.stop()
