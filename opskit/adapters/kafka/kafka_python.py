"""kafka-python, where confluent-kafka lacks an API: its client settings and its logging.

Kept apart so the adapters that open a kafka-python client (health, ACLs, reassignment,
KRaft features, the exporter's collector) share one place without importing each other.
"""

from __future__ import annotations

import logging
from typing import Any

from opskit.core.connection import ConnectionConfig

__all__ = ["kafka_python_config", "quiet_kafka_python"]


def quiet_kafka_python(debug: bool) -> None:
    """kafka-python logs every connection attempt at WARNING/ERROR: only show it with --debug."""
    logging.getLogger("kafka").setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)


def kafka_python_config(conn: ConnectionConfig, timeout: float) -> dict[str, Any]:
    ms = int(max(timeout, 0.5) * 1000)
    cfg = conn.to_kafka_python(ms)
    cfg.update({"bootstrap_timeout_ms": ms, "reconnect_backoff_max_ms": 1000})
    return cfg
