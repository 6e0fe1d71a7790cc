"""Kafka's finalized ``kraft.version`` feature: read it, and raise it to 1 (the explicit
static -> dynamic quorum upgrade), through kafka-python's DescribeFeatures /
UpdateFeatures (confluent-kafka has neither)."""

from __future__ import annotations

import time
from typing import Any

from opskit.adapters.kafka.kafka_python import kafka_python_config
from opskit.core.connection import ConnectionConfig
from opskit.errors import KafkaOperationError, KafkaUnavailableError, OpskitError

FEATURE = "kraft.version"


def _client(conn: ConnectionConfig, timeout: float) -> Any:
    from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
    from kafka.errors import KafkaError  # type: ignore[import-untyped]

    try:
        return KafkaAdminClient(**kafka_python_config(conn, timeout))
    except KafkaError as e:
        raise KafkaUnavailableError(f"cannot reach Kafka at {conn.bootstrap}: "
                                    f"{type(e).__name__}") from None


def read_kraft_version(conn: ConnectionConfig, timeout: float = 10.0) -> int:
    """The finalized kraft.version (0 when not finalized: a static quorum, or Kafka < 3.9)."""
    from kafka.errors import KafkaError

    client = _client(conn, timeout)
    try:
        features = client.describe_features()
    except KafkaError as e:
        raise KafkaOperationError(f"DescribeFeatures failed: {type(e).__name__}") from None
    finally:
        client.close()
    finalized = (features.get(FEATURE) or {}).get("finalized")
    return int(finalized[1]) if finalized else 0


def upgrade_kraft_version(conn: ConnectionConfig, timeout: float = 10.0,
                          settle_s: float = 30.0) -> int:
    """UpdateFeatures kraft.version=1, then wait until it reads back finalized at 1."""
    from kafka.errors import KafkaError

    client = _client(conn, timeout)
    try:
        result = client.update_features({FEATURE: 1})
    except KafkaError as e:
        raise KafkaOperationError(f"UpdateFeatures {FEATURE}=1 failed: "
                                  f"{type(e).__name__}: {str(e)[:200]}") from None
    finally:
        client.close()
    if result.get(FEATURE) != "OK":
        raise KafkaOperationError(f"UpdateFeatures {FEATURE}=1 refused: "
                                  f"{str(result.get(FEATURE))[:200]}")
    deadline = time.monotonic() + settle_s
    got = 0
    while time.monotonic() < deadline:
        try:
            got = read_kraft_version(conn, timeout)
        except OpskitError:
            got = 0
        if got >= 1:
            return got
        time.sleep(1.0)
    raise KafkaOperationError(f"{FEATURE} still reads {got} {settle_s:.0f}s after the upgrade")
