"""The scale-out's last check of the new defaults (``verify_defaults``): a probe topic
created without an RF gets the target RF, a new group's first offset commit works, and
the internal topics have the target RF."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.core.connection import ConnectionConfig
from opskit.core.scaleout.plan import INTERNAL_TOPICS, ScaleOutPlan
from opskit.errors import InconsistentStateError, RefusedError

log = logging.getLogger(__name__)

#: the probe topic verify_defaults creates without an RF (and deletes again)
PROBE_PREFIX = "opskit_scaleout_probe_"


class Steps(Protocol):
    """What the check needs of :class:`~opskit.adapters.scaleout.kafka_steps.KafkaSteps`."""

    conn: ConnectionConfig
    wait_s: float

    def admin(self) -> KafkaAdmin: ...

    def wait(self, what: str, check: Callable[[], str | None]) -> None: ...


def first_commit(steps: Steps, consumer: Any, tp: Any) -> str:
    """'ok' once the group's first commit is accepted, else 'failed: ...'. Right after a
    rolling restart the group coordinators move between brokers: NOT_COORDINATOR and
    the coordinator loading or unavailable are retried (up to the step's wait), as
    every Kafka client does; so is UNKNOWN_TOPIC_OR_PART: the probe topic was just
    created and the coordinator's broker may not know it yet (seen on a 3-node cluster
    under load: the dynamic-quorum scale-out halted at verify_defaults). Any other error
    fails at once."""
    from confluent_kafka import KafkaError, KafkaException

    moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
              KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT,
              KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION}
    deadline = time.monotonic() + steps.wait_s
    while True:
        try:
            consumer.commit(offsets=[tp], asynchronous=False)
            return "ok"
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            if err is not None and err.code() in moving and time.monotonic() < deadline:
                log.info("probe commit: %s; retrying", err.str())
                time.sleep(1.0)
                continue
            return f"failed: {e}"
        except Exception as e:  # noqa: BLE001 - reported as the step's failure
            return f"failed: {e}"

def probe_rf(steps: Steps, probe: str) -> int:
    """The probe topic's RF, from the first metadata answer that lists it. Read once:
    right after the creation another broker's metadata may not list it yet (a second
    read failed that way with KeyError, exit 70, on a just-restarted 3-node cluster)."""
    seen: list[int] = []

    def listed() -> str | None:
        with steps.admin() as a:
            parts = a.metadata().topics.get(probe)
        if not parts:
            return f"topic {probe} not listed yet"
        seen[:] = [len(parts[0].replicas)]
        return None

    steps.wait("waiting for the probe topic", listed)
    return seen[0]

def verify_defaults(steps: Steps, plan: ScaleOutPlan) -> str:
    """A topic created without an RF gets the target RF (deleted again), a new
    group's first offset commit works, and the internal topics have the target RF."""
    import secrets

    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTp
    from confluent_kafka.admin import AdminClient

    want = plan.target_rf
    with steps.admin() as admin:
        meta = admin.metadata()
        admin.delete_topics(t for t in meta.topics if t.startswith(PROBE_PREFIX))
        probe = PROBE_PREFIX + secrets.token_hex(4)
        admin.create_topics([(probe, 1, -1, {})])     # -1: the brokers' default RF

    rf = probe_rf(steps, probe)
    group = f"opskit-scaleout-probe-{secrets.token_hex(4)}"
    conf = steps.conn.to_librdkafka()
    committed = "not tried"
    try:
        if rf == want:
            c = Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                          "log_level": 0})
            try:
                committed = first_commit(steps, c, CkTp(probe, 0, 0))
            finally:
                c.close()
    finally:
        with steps.admin() as admin:
            admin.delete_topics([probe])
        try:
            ac = AdminClient({**conf, "log_level": 0})
            for fut in ac.delete_consumer_groups([group], request_timeout=10).values():
                fut.result()
        except Exception as e:  # noqa: BLE001 - an empty group left behind is harmless
            log.info("probe group %s not deleted: %s", group, e)
    if rf != want:
        raise RefusedError(
            f"a topic created without a replication factor got RF {rf}, not {want}: a "
            "broker still runs an old default.replication.factor (restart it with its "
            "rewritten server.properties); the scale-out is not finished")
    if committed != "ok":
        raise InconsistentStateError(f"a new group's first offset commit {committed}")

    def gone() -> str | None:
        with steps.admin() as a:
            return f"probe topic {probe} still listed" if probe in a.metadata().topics \
                else None

    steps.wait("waiting for the probe topic's deletion", gone)
    with steps.admin() as admin:
        meta = admin.metadata()
    short = {t: min(len(p.replicas) for p in parts) for t, parts in meta.topics.items()
             if t in INTERNAL_TOPICS and parts}
    low = {t: r for t, r in short.items() if r < want}
    if low:
        raise RefusedError(f"internal topic(s) below RF {want}: {low}: reassign them "
                           "(opskit reassign plan --replication-factor "
                           f"{want} --include-internal); the scale-out is not finished")
    return (f"a topic created without an RF got RF {rf} (deleted again); a new group's "
            f"first offset commit worked; " + ", ".join(
                f"{t} RF {r}" for t, r in sorted(short.items())))
