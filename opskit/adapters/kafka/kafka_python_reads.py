"""The reads opskit makes with kafka-python's admin client: the KRaft quorum and the
partition reassignments in progress (confluent-kafka has neither API), made by the
reader port's sessions (:mod:`opskit.adapters.kafka.reader.kept`).

Every wait is bounded by the caller's timeout (:func:`bounded`). When the broker (or
the installed client) cannot answer, the read gives None and a one-line reason.

kafka-python and Kafka 3.7: kafka-python 3.0.x's ``describe_metadata_quorum``
fails with ``KeyError('error_message')`` on DescribeQuorum v0/v1 responses
(the field exists only from v2, Kafka 3.8). We then send the same request
ourselves and read the response tolerantly.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from opskit.core.health import QuorumInfo, QuorumReplica, Reassignment

log = logging.getLogger(__name__)

T = TypeVar("T")

NO_QUORUM_API = "broker does not support DescribeQuorum (needs Kafka 3.3+ KRaft)"
NO_REASSIGN_API = "broker does not support ListPartitionReassignments (needs Kafka 2.4+)"
METADATA_TOPIC = "__cluster_metadata"


class _Deadline(Exception):
    pass


def bounded(fn: Callable[[], T], timeout: float,
            late: Callable[[T], object] | None = None) -> T:
    """Run ``fn`` in a daemon thread; give up after ``timeout`` seconds (the thread is
    abandoned: it ends when ``fn`` does; what ``fn`` returns after that is handed to
    ``late``, e.g. to close a client no one will use)."""
    out: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)
    lock = threading.Lock()
    gave_up = threading.Event()

    def target() -> None:
        try:
            got: tuple[bool, Any] = (True, fn())
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            got = (False, e)
        with lock:
            abandoned = gave_up.is_set()
            if not abandoned:
                out.put(got)
        if abandoned and got[0] and late is not None:
            late(got[1])

    threading.Thread(target=target, name="opskit-kafka-python", daemon=True).start()
    try:
        ok, val = out.get(timeout=timeout)
    except queue.Empty:
        with lock:
            gave_up.set()
            if out.empty():
                raise _Deadline(f"no answer within {timeout:g}s") from None
        ok, val = out.get_nowait()  # it came as the wait ended
    if ok:
        return val  # type: ignore[no-any-return]
    raise val


def _unsupported(exc: BaseException) -> bool:
    from kafka import errors as kerr  # type: ignore[import-untyped]

    return isinstance(exc, (kerr.UnsupportedVersionError, kerr.IncompatibleBrokerVersion))


def reason(exc: BaseException) -> str:
    if "AuthorizationFailed" in type(exc).__name__:
        # kafka-python's text carries the whole request and session: one line instead
        return "not authorised: the principal needs the Describe ACL on the cluster"
    return str(exc).strip() or type(exc).__name__


# --------------------------------------------------------------------------- parsing


def _ts(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and v >= 0 else None


def _replica(d: Mapping[str, Any]) -> QuorumReplica:
    return QuorumReplica(
        replica_id=int(d["replica_id"]),
        log_end_offset=int(d.get("log_end_offset", -1)),
        last_fetch_timestamp=_ts(d.get("last_fetch_timestamp")),
        last_caught_up_timestamp=_ts(d.get("last_caught_up_timestamp")),
    )


def parse_quorum(resp: Mapping[str, Any]) -> QuorumInfo:
    """A DescribeQuorum response (as a dict) -> QuorumInfo; ValueError when it carries an error."""
    if resp.get("error_code"):
        raise ValueError(f"DescribeQuorum error code {resp['error_code']}: {resp.get('error_message') or ''}")
    for t in resp.get("topics", []):
        for p in t.get("partitions", []):
            if p.get("partition_index", 0) != 0:
                continue
            err = p.get("error") or (f"error code {p['error_code']}" if p.get("error_code") else None)
            if err:
                raise ValueError(f"DescribeQuorum: {err}")
            return QuorumInfo(
                leader_id=int(p.get("leader_id", -1)),
                leader_epoch=int(p.get("leader_epoch", -1)),
                high_watermark=int(p.get("high_watermark", -1)),
                voters=tuple(_replica(v) for v in p.get("current_voters", [])),
                observers=tuple(_replica(o) for o in p.get("observers", [])),
            )
    raise ValueError("DescribeQuorum answer has no __cluster_metadata partition")


def _describe_quorum_raw(client: Any) -> dict[str, Any]:
    """Send DescribeQuorum ourselves (kafka-python 3.0.x cannot decode v0/v1 answers)."""
    from kafka.protocol.admin import DescribeQuorumRequest  # type: ignore[import-untyped]

    topic = DescribeQuorumRequest.TopicData
    req = DescribeQuorumRequest(topics=[topic(
        topic_name=METADATA_TOPIC, partitions=[topic.PartitionData(partition_index=0)])])

    async def send() -> dict[str, Any]:
        resp = await client._manager.send(req)
        return resp.to_dict()  # type: ignore[no-any-return]

    return client._manager.run(send)  # type: ignore[no-any-return]


def describe_quorum(client: Any, timeout: float) -> tuple[QuorumInfo | None, str | None]:
    if not hasattr(client, "describe_metadata_quorum"):
        return None, "installed kafka-python has no describe_metadata_quorum (needs kafka-python 2.1+)"
    try:
        try:
            resp = bounded(client.describe_metadata_quorum, timeout)
        except KeyError:  # kafka-python 3.0.x on a v0/v1 response (Kafka < 3.8)
            log.debug("describe_metadata_quorum could not decode the answer; sending it raw")
            try:
                resp = bounded(lambda: _describe_quorum_raw(client), timeout)
            except (AttributeError, ImportError, TypeError) as e:  # client internals changed
                return None, ("installed kafka-python cannot decode this broker's DescribeQuorum "
                              f"answer (Kafka < 3.8): {reason(e)}")
        return parse_quorum(resp), None
    except _Deadline as e:
        return None, f"DescribeQuorum: {e}"
    except Exception as e:  # noqa: BLE001 - becomes an UNKNOWN finding
        if _unsupported(e):
            return None, NO_QUORUM_API
        return None, f"could not describe the KRaft quorum: {reason(e)}"


def list_reassignments(client: Any, timeout: float
                       ) -> tuple[tuple[Reassignment, ...] | None, str | None]:
    if not hasattr(client, "list_partition_reassignments"):
        return None, "installed kafka-python has no list_partition_reassignments"
    try:
        res = bounded(lambda: client.list_partition_reassignments(
            timeout_ms=int(timeout * 1000)), timeout + 2)
    except _Deadline as e:
        return None, f"ListPartitionReassignments: {e}"
    except Exception as e:  # noqa: BLE001 - becomes an UNKNOWN finding
        if _unsupported(e):
            return None, NO_REASSIGN_API
        return None, f"could not list partition reassignments: {reason(e)}"
    found = [
        Reassignment(
            topic=tp.topic, partition=tp.partition,
            replicas=tuple(d.get("replicas", ())),
            adding=tuple(d.get("adding_replicas", ())),
            removing=tuple(d.get("removing_replicas", ())),
        )
        for tp, d in sorted(res.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
    ]
    # A reassignment in progress always adds or removes a replica (KIP-455). Some
    # Kafka-compatible brokers (Tansu 0.6) list every partition with neither: that is
    # not a reassignment, and must not raise a WARNING.
    out = tuple(r for r in found if r.adding or r.removing)
    if len(out) < len(found):
        log.debug("ignored %d listed reassignments that add and remove no replica",
                  len(found) - len(out))
    return out, None
