"""kafka-python, where confluent-kafka lacks an API: its client settings and its logging.

Kept apart so the adapters that open a kafka-python client (health, ACLs, reassignment,
KRaft features, the exporter's collector) share one place without importing each other.
"""

from __future__ import annotations

import logging
from typing import Any

from opskit.core.connection import ConnectionConfig

__all__ = ["KAFKA_PYTHON_GRACE_S", "close_kafka_python", "kafka_python_config",
           "quiet_kafka_python"]

log = logging.getLogger(__name__)

#: how much longer than the command's (the exporter's) timeout kafka-python's connect and
#: reads may take: its own timeouts are the timeout, and its error is the clearer one
KAFKA_PYTHON_GRACE_S = 2.0


def quiet_kafka_python(debug: bool) -> None:
    """kafka-python logs every connection attempt at WARNING/ERROR: only show it with --debug."""
    logging.getLogger("kafka").setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)


def kafka_python_config(conn: ConnectionConfig, timeout: float) -> dict[str, Any]:
    ms = int(max(timeout, 0.5) * 1000)
    cfg = conn.to_kafka_python(ms)
    cfg.update({"bootstrap_timeout_ms": ms, "reconnect_backoff_max_ms": 1000})
    return cfg


def close_kafka_python(client: Any) -> None:
    """Close a kafka-python client, best effort (a failure is logged at debug level)."""
    if client is None:
        return
    try:
        client.close()
    except Exception:  # closing is best effort
        log.debug("closing kafka-python client failed", exc_info=True)
