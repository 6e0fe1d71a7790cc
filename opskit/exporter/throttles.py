"""Replication throttles: broker rates and topic throttled-replica lists (pure).

Kafka throttles reassignment traffic with two dynamic broker configs,
``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``
(bytes/s), applied only to the replicas listed in the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``:
``partition:broker`` pairs separated by commas, or ``*`` for every replica of
the topic. A throttle left behind after a reassignment slows every later
catch-up of those replicas, which is why the exporter publishes both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from opskit.exporter.names import THROTTLE_DIRECTIONS

RATE_KEYS: dict[str, str] = {d: f"{d}.replication.throttled.rate" for d in THROTTLE_DIRECTIONS}
REPLICAS_KEYS: dict[str, str] = {d: f"{d}.replication.throttled.replicas" for d in THROTTLE_DIRECTIONS}
#: Long.MAX_VALUE: what Kafka reports as the rate when no throttle is set
_UNLIMITED = 2**63 - 1

#: one config as the admin client answers it: (value, is_default)
ConfigValue = tuple[str | None, bool]


def throttle_rate(entry: ConfigValue | None) -> int | None:
    """Bytes/s of one ``*.replication.throttled.rate`` entry; None when unset,
    default, unlimited or not a number."""
    if entry is None:
        return None
    value, is_default = entry
    if is_default or value is None:
        return None
    value = value.strip()
    if not value.isdigit():
        return None
    rate = int(value)
    return rate if rate < _UNLIMITED else None


def broker_rates(configs: Mapping[str, ConfigValue]) -> dict[str, int]:
    """direction -> bytes/s set on a broker (only the directions that are set)."""
    out: dict[str, int] = {}
    for direction, key in RATE_KEYS.items():
        rate = throttle_rate(configs.get(key))
        if rate is not None:
            out[direction] = rate
    return out


def topic_replica_lists(configs: Mapping[str, ConfigValue]) -> dict[str, str]:
    """direction -> raw throttled-replicas value of a topic (only non-empty, non-default ones)."""
    out: dict[str, str] = {}
    for direction, key in REPLICAS_KEYS.items():
        entry = configs.get(key)
        if entry is None or entry[1] or entry[0] is None or not entry[0].strip():
            continue
        out[direction] = entry[0].strip()
    return out


def count_throttled_replicas(value: str, replica_counts: Iterable[int]) -> int:
    """Replicas a throttled-replicas value covers.

    ``*`` covers every replica of the topic (``replica_counts``: replicas per
    partition). Otherwise distinct well-formed ``partition:broker`` pairs are
    counted; malformed entries are ignored.
    """
    value = value.strip()
    if value == "*":
        return sum(replica_counts)
    pairs: set[tuple[int, int]] = set()
    for item in value.split(","):
        p, sep, b = item.strip().partition(":")
        if sep and p.strip().isdigit() and b.strip().isdigit():
            pairs.add((int(p), int(b)))
    return len(pairs)
