"""Shared fixtures. Integration tests run against real Kafka brokers started here.

Every test session gets its own OPSKIT_STATE / OPSKIT_CONFIG / HOME-like dirs so
it never touches a developer's real contexts or sandboxes. Kafka jars are
cached in the normal cache dir (``~/.cache/opskit``) so they are fetched once.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

_SESSION_DIR: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _SESSION_DIR
    import tempfile

    _SESSION_DIR = Path(tempfile.mkdtemp(prefix="opskit-tests-"))
    os.environ["OPSKIT_STATE"] = str(_SESSION_DIR / "state")
    os.environ["OPSKIT_CONFIG"] = str(_SESSION_DIR / "config.yaml")
    os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    os.environ.pop("OPSKIT_CONTEXT", None)


class Cluster:
    """A running sandbox cluster and helpers to drive it."""

    def __init__(self, name: str, brokers: int, version: str) -> None:
        from opskit.sandbox.cluster import Sandbox, free_port_block

        self.sandbox = Sandbox(name)
        st, _ = self.sandbox.up(brokers=brokers, version=version, port=free_port_block(brokers))
        self.state = st
        self.bootstrap = st.bootstrap
        self.version = st.version

    def dist(self):  # type: ignore[no-untyped-def]
        from opskit.sandbox.dist import ensure_kafka_dist

        return ensure_kafka_dist(self.version)

    def admin(self):  # type: ignore[no-untyped-def]
        from opskit.adapters.kafka_admin import KafkaAdmin
        from opskit.core.connection import ConnectionConfig

        return KafkaAdmin(ConnectionConfig(self.bootstrap), timeout=15)

    def down(self) -> None:
        self.sandbox.down()


def _start(name: str, brokers: int, version: str) -> Iterator[Cluster]:
    c = Cluster(f"{name}-{uuid.uuid4().hex[:6]}", brokers, version)
    try:
        yield c
    finally:
        c.down()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Cluster]:
    """One broker, HIP-30's production version (3.7)."""
    yield from _start("t37", 1, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"))


@pytest.fixture(scope="session")
def kafka4() -> Iterator[Cluster]:
    """One broker, the newest Kafka 4.x."""
    yield from _start("t4x", 1, "4.x")


@pytest.fixture(scope="session")
def kafka3() -> Iterator[Cluster]:
    """Three nodes (combined node 0 + two brokers) for replication scenarios."""
    yield from _start("t3b", 3, os.environ.get("OPSKIT_TEST_KAFKA_VERSION", "3.7"))


@pytest.fixture(params=["3.7", "4.x"])
def any_kafka(request: pytest.FixtureRequest) -> Cluster:
    """Both supported major versions, for tests that must hold on each."""
    return request.getfixturevalue("kafka" if request.param == "3.7" else "kafka4")  # type: ignore[no-any-return]


@pytest.fixture
def uniq() -> str:
    """A unique snake_case suffix for topic and group names."""
    return uuid.uuid4().hex[:8]
