"""Cluster I/O of a log-directory drain: DescribeLogDirs, AlterReplicaLogDirs, the
intra-broker throttle and the per-directory cordon.

confluent-kafka has neither DescribeLogDirs nor AlterReplicaLogDirs: both go through
kafka-python's ``KafkaAdminClient`` (``describe_log_dirs``, ``alter_replica_log_dirs``,
which sends ``kafka.protocol.admin.AlterReplicaLogDirsRequest`` to each broker), on the
connection of :class:`opskit.adapters.reassign.admin.ReassignAdmin`. Broker configs
(``replica.alter.log.dirs.io.max.bytes.per.second``, ``cordoned.log.dirs``) are dynamic
per-broker values set and restored with IncrementalAlterConfigs, as the inter-broker
throttles are: the value found before is put back, or ours deleted where there was none.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from opskit.adapters.reassign.admin import ReassignAdmin
from opskit.core.models import TopicPartition
from opskit.core.reassign.cordon import CORDON_KEY
from opskit.core.reassign.log_dir_exec import THROTTLE_KEY
from opskit.core.reassign.log_dirs import LogDir, Replica, norm_dir
from opskit.errors import KafkaOperationError, OpskitError

__all__ = ["DiskAdmin"]

_DYNAMIC_BROKER = 2  # ConfigSource.DYNAMIC_BROKER_CONFIG


class DiskAdmin:
    """The calls of a log-directory drain, on a :class:`ReassignAdmin`'s connection."""

    def __init__(self, ra: ReassignAdmin) -> None:
        self.ra = ra

    # ------------------------------------------------------------------ reads
    def describe(self, brokers: Iterable[int]) -> tuple[list[LogDir], list[Replica]]:
        """Every log directory of these brokers and every replica in them (futures too)."""
        ids = sorted(set(brokers))
        try:
            res = self.ra.kp.describe_log_dirs(None, brokers=ids)
        except Exception as e:
            raise self.ra.translate(e, "DescribeLogDirs") from e
        dirs: list[LogDir] = []
        reps: list[Replica] = []
        for broker in res or []:
            node = int(broker.get("broker", -1))
            for d in broker.get("log_dirs", []):
                path = str(d.get("log_dir", ""))
                cordoned = d.get("is_cordoned")
                dirs.append(LogDir(node, path, int(d.get("total_bytes", -1)),
                                   int(d.get("usable_bytes", -1)),
                                   None if cordoned is None else bool(cordoned),
                                   int(d.get("error_code", 0))))
                if d.get("error_code", 0):
                    continue
                for t in d.get("topics", []):
                    for p in t.get("partitions", []):
                        reps.append(Replica(TopicPartition(t["name"], int(p["partition_index"])),
                                            node, path, int(p["partition_size"]),
                                            bool(p.get("is_future_key")),
                                            int(p.get("offset_lag", -1))))
        return dirs, reps

    def describe_each(self, brokers: Iterable[int]
                      ) -> tuple[list[LogDir], list[Replica], dict[int, str]]:
        """:meth:`describe`, one broker at a time: a broker that does not answer, or answers
        with no log directory (DescribeLogDirs answers an unauthorised request with none),
        is returned with why (broker -> reason) instead of failing the rest."""
        dirs: list[LogDir] = []
        reps: list[Replica] = []
        failed: dict[int, str] = {}
        for b in sorted(set(brokers)):
            try:
                d, r = self.describe([b])
            except OpskitError as e:
                failed[b] = f"broker {b} did not answer DescribeLogDirs: {e}"
                continue
            if not [x for x in d if x.broker == b]:
                failed[b] = (f"broker {b} reported no log directory (DescribeLogDirs; not "
                             "authorised to describe the cluster?)")
                continue
            dirs += d
            reps += r
        return dirs, reps, failed

    def placement(self, brokers: Iterable[int]
                  ) -> dict[tuple[TopicPartition, int], tuple[str | None, str | None]]:
        """(partition, broker) -> (the directory of its replica, of its future replica)."""
        _dirs, reps = self.describe(brokers)
        out: dict[tuple[TopicPartition, int], tuple[str | None, str | None]] = {}
        for r in reps:
            live, future = out.get((r.tp, r.broker), (None, None))
            out[(r.tp, r.broker)] = (live, r.path) if r.future else (r.path, future)
        return out

    # ------------------------------------------------------------------ moves
    def alter(self, targets: Mapping[tuple[TopicPartition, int], str]
              ) -> dict[tuple[TopicPartition, int], str]:
        """AlterReplicaLogDirs: (partition, broker) -> directory. Returns the refused ones
        with Kafka's error name."""
        if not targets:
            return {}
        from kafka.structs import TopicPartitionReplica  # type: ignore[import-untyped]

        req = {TopicPartitionReplica(tp.topic, tp.partition, b): d
               for (tp, b), d in sorted(targets.items())}
        try:
            res = self.ra.kp.alter_replica_log_dirs(req)
        except Exception as e:
            raise self.ra.translate(e, "AlterReplicaLogDirs") from e
        bad: dict[tuple[TopicPartition, int], str] = {}
        for tpr, err in res.items():
            name = getattr(err, "__name__", str(err))
            if name != "NoError":
                bad[(TopicPartition(tpr.topic, tpr.partition), tpr.broker_id)] = name
        return bad

    # ------------------------------------------------------------------ broker configs
    def dynamic_values(self, key: str, brokers: Iterable[int]
                       ) -> tuple[tuple[int, str | None], ...]:
        """Each broker's dynamic per-broker value of ``key`` (None: none set)."""
        import opskit.adapters.kafka.confluent as ck

        ids = sorted(set(brokers))
        found = self.ra._describe([ck.ConfigResource(ck.ResourceType.BROKER, str(b))
                                   for b in ids], f"reading {key}")
        out = []
        for b in ids:
            value, source = found.get(("broker", str(b)), {}).get(key, (None, 5))
            out.append((b, value if source == _DYNAMIC_BROKER and value else None))
        return tuple(out)

    def set_values(self, key: str, values: Mapping[int, str | None], what: str,
                   wait: float = 15.0) -> list[str]:
        """SET (or DELETE, for None) ``key`` on each broker; read back until each broker
        reports it (KRaft applies a dynamic value through the metadata log: a moment later),
        up to ``wait`` seconds. Returns the mismatches left (empty when exact)."""
        self.ra._alter_configs({("broker", str(b)): {key: v} for b, v in values.items()}, what)
        deadline = time.monotonic() + max(wait, self.ra.timeout)
        while True:
            now = dict(self.dynamic_values(key, values))
            bad = [f"broker {b} {key}: {now.get(b)!r} (expected {v!r})"
                   for b, v in sorted(values.items()) if (now.get(b) or None) != (v or None)]
            if not bad or time.monotonic() > deadline:
                return bad
            time.sleep(0.3)

    def set_throttle(self, rate: int, brokers: Iterable[int]) -> list[str]:
        return self.set_values(THROTTLE_KEY, {b: str(rate) for b in brokers},
                               "setting the intra-broker throttle")

    def restore(self, key: str, prior: Iterable[tuple[int, str | None]], what: str) -> list[str]:
        return self.set_values(key, dict(prior), what)

    def cordon_dirs(self, wanted: Mapping[int, str], drained: Iterable[tuple[int, str]],
                    wait: float = 60.0) -> None:
        """Set ``cordoned.log.dirs`` and return once every drained directory is reported
        cordoned (DescribeLogDirs v5), else KafkaOperationError after ``wait`` seconds."""
        self.ra._alter_configs({("broker", str(b)): {CORDON_KEY: v} for b, v in wanted.items()},
                               "cordoning log directories (cordoned.log.dirs)")
        pending = {(b, norm_dir(d)) for b, d in drained}
        deadline = time.monotonic() + max(wait, self.ra.timeout)
        while True:
            dirs, _ = self.describe({b for b, _ in pending})
            pending -= {(d.broker, norm_dir(d.path)) for d in dirs if d.cordoned}
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KafkaOperationError(
                    "log director" + ("ies " if len(pending) > 1 else "y ")
                    + ", ".join(f"{b}:{d}" for b, d in sorted(pending))
                    + f" not reported cordoned {max(wait, self.ra.timeout):g}s after "
                    f"{CORDON_KEY} was set; nothing was moved (resume to retry)")
            time.sleep(0.5)
