"""Cluster I/O of a reassignment: read, submit, elect, throttle, cordon.

The connection (which client does what, errors, the API and ACL checks) is
:class:`opskit.adapters.reassign.connection.ReassignConnection`.

Throttles. Broker rates are set as *dynamic per-broker* values on the brokers involved,
which take precedence over a static value in ``server.properties`` and over the
dynamic cluster default; cleanup sets back the per-broker value that existed before
or deletes ours, so static and default values are never written and reappear exactly.
Every wait is bounded by the timeout: removal never waits for a value to "disappear".

Cordons (KIP-1066, :mod:`opskit.core.reassign.cordon`). ``cordoned.log.dirs`` is set as a
dynamic per-broker value (``*``) with IncrementalAlterConfigs, like the throttle rates;
confirmed from the broker's own report (DescribeLogDirs v5 ``is_cordoned`` on every log
directory); restored to the per-broker value found before (deleted where there was none).
Whether the cluster can cordon: the finalized metadata.version (what kafka-python calls
DescribeFeatures: an ApiVersions v3+ answer, read by opskit's protocol codec) and the key in
each drained broker's DescribeConfigs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from opskit.adapters.health.cluster import min_isr_value
from opskit.adapters.kafka import confluent as ck
from opskit.adapters.reassign.connection import ReassignConnection
from opskit.core.models import TopicPartition
from opskit.core.reassign.checks import ClusterView
from opskit.core.reassign.cordon import (
    CORDON_ALL,
    CORDON_KEY,
    MIN_METADATA_LEVEL,
    CordonSupport,
    cordon_support,
)
from opskit.core.reassign.machine import ConfigBaseline, InFlight, Move, Submitted
from opskit.errors import KafkaOperationError, KafkaUnavailableError, NotAuthorisedError

log = logging.getLogger(__name__)

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICA_KEYS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
_DYNAMIC_BROKER = 2  # ConfigSource.DYNAMIC_BROKER_CONFIG
_DYNAMIC_TOPIC = 1  # ConfigSource.DYNAMIC_TOPIC_CONFIG


class ReassignAdmin(ReassignConnection):
    """The calls of a reassignment on one connection. ``close()`` when done."""

    #: (the finalized metadata.version level,) once read (see :meth:`metadata_level`)
    _level: tuple[int | None] | None = None

    # ------------------------------------------------------------------ reads
    def assignment(self) -> tuple[dict[TopicPartition, tuple[int, ...]],
                                  dict[TopicPartition, tuple[int, ...]], frozenset[int]]:
        """(replicas, ISR) of every partition, and the registered brokers."""
        meta = self.admin.metadata()
        reps = {TopicPartition(t, p.partition): tuple(p.replicas)
                for t, ps in meta.topics.items() for p in ps}
        isr = {TopicPartition(t, p.partition): tuple(p.isr)
               for t, ps in meta.topics.items() for p in ps}
        return reps, isr, frozenset(b.node_id for b in meta.brokers)

    def in_flight(self) -> dict[TopicPartition, InFlight]:
        try:
            res = self.kp.list_partition_reassignments(timeout_ms=self._ms())
        except Exception as e:
            raise self.translate(e, "ListPartitionReassignments") from e
        out: dict[TopicPartition, InFlight] = {}
        for tp, d in res.items():
            fl = InFlight(tuple(d.get("replicas", ())), tuple(d.get("adding_replicas", ())),
                          tuple(d.get("removing_replicas", ())))
            if fl.adding or fl.removing:  # Tansu lists partitions with neither: not a move
                out[TopicPartition(tp.topic, tp.partition)] = fl
        return out

    def min_isr(self, topics: Iterable[str]) -> dict[str, int | None]:
        """Each topic's min.insync.replicas; None (unknown, never 1) when the answer lacks
        it or holds no number. A failed DescribeConfigs is raised."""
        names = sorted(set(topics))
        configs = self.admin.topic_configs(names)
        return {t: min_isr_value(t, configs.get(t, {})) for t in names}

    def view(self, topics: Iterable[str]) -> ClusterView:
        reps, _isr, brokers = self.assignment()
        wanted = set(topics) & {tp.topic for tp in reps}
        return ClusterView(reps, brokers, self.in_flight(), self.min_isr(wanted))

    def replica_sizes(self, topics: Iterable[str]) -> dict[TopicPartition, dict[int, int]]:
        """partition -> broker -> bytes on disk (DescribeLogDirs; a broker moving a
        replica reports the copy it is building). Empty when unavailable."""
        names = sorted(set(topics))
        if not names:
            return {}
        try:
            res = self.kp.describe_log_dirs(names)
        except Exception as e:  # noqa: BLE001 - sizes are progress information only
            log.debug("DescribeLogDirs failed: %s", e)
            return {}
        out: dict[TopicPartition, dict[int, int]] = {}
        for broker in res or []:
            node = int(broker.get("broker", -1))
            for d in broker.get("log_dirs", []):
                if d.get("error_code", 0):
                    continue
                for t in d.get("topics", []):
                    for p in t.get("partitions", []):
                        if p.get("is_future_key"):
                            continue
                        tp = TopicPartition(t["name"], int(p["partition_index"]))
                        out.setdefault(tp, {})[node] = int(p["partition_size"])
        return out

    def write_rates(self, moves: Iterable[Move], interval: float
                    ) -> tuple[dict[TopicPartition, float], dict[TopicPartition, int]]:
        """Bytes/s written to each moving partition (its leader's growth over ``interval``
        seconds), and the sizes at the end."""
        ms = [m for m in moves if m.moves_data]
        topics = {m.tp.topic for m in ms}
        t0, s0 = time.monotonic(), self.replica_sizes(topics)
        if interval > 0:
            time.sleep(interval)
        t1, s1 = time.monotonic(), self.replica_sizes(topics)
        rates: dict[TopicPartition, float] = {}
        sizes: dict[TopicPartition, int] = {}
        for m in ms:
            lead = m.base[0]
            a, b = s0.get(m.tp, {}).get(lead), s1.get(m.tp, {}).get(lead)
            if b is not None:
                sizes[m.tp] = b
            if a is not None and b is not None and t1 > t0:
                rates[m.tp] = max(0.0, (b - a) / (t1 - t0))
        return rates, sizes

    # ------------------------------------------------------------------ moves
    def submit(self, moves: Iterable[Move]) -> Submitted:
        from kafka import TopicPartition as KTP  # type: ignore[import-untyped]

        req = {KTP(m.tp.topic, m.tp.partition): list(m.target) for m in moves}
        return self._alter(req, "AlterPartitionReassignments")

    def cancel(self, tps: Iterable[TopicPartition]) -> Submitted:
        """KIP-455 cancel: reassign to None (the partition keeps its original replicas)."""
        from kafka import TopicPartition as KTP

        return self._alter({KTP(tp.topic, tp.partition): None for tp in tps},
                           "cancelling reassignments")

    def _alter(self, req: Mapping[Any, Any], what: str) -> Submitted:
        if not req:
            return Submitted(())
        try:
            res = self.kp.alter_partition_reassignments(req, timeout_ms=self._ms())
        except Exception as e:
            raise self.translate(e, what) from e
        ok: list[TopicPartition] = []
        bad: dict[TopicPartition, str] = {}
        for ktp, err in res.items():
            tp = TopicPartition(ktp.topic, ktp.partition)
            if err is None:
                ok.append(tp)
            else:
                bad[tp] = getattr(err, "__name__", str(err))
        return Submitted(tuple(ok), bad)

    def elect_preferred(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """Preferred leader election; partitions whose election failed (not "not needed")."""
        wanted: dict[str, list[int]] = {}
        for tp in tps:
            wanted.setdefault(tp.topic, []).append(tp.partition)
        if not wanted:
            return {}
        try:
            resp = self.kp.elect_leaders(0, wanted, timeout_ms=self._ms(), raise_errors=False)
        except Exception as e:
            raise self.translate(e, "ElectLeaders (preferred)") from e
        out: dict[TopicPartition, str] = {}
        for result in getattr(resp, "replica_election_results", []) or []:
            for p in result.partition_result:
                if p.error_code not in (0, 84):  # 84 = ELECTION_NOT_NEEDED
                    out[TopicPartition(result.topic, p.partition_id)] = f"error code {p.error_code}"
        return out

    # ------------------------------------------------------------------ configs
    def _describe(self, resources: list[ck.ConfigResource], what: str, tolerant: bool = False
                  ) -> dict[tuple[str, str], dict[str, tuple[str | None, int]]]:
        """(type, name) -> key -> (value, source). ``tolerant``: a resource that cannot be
        described (a broker down) is left out instead of failing the whole read."""
        if not resources:
            return {}
        out: dict[tuple[str, str], dict[str, tuple[str | None, int]]] = {}
        cluster_denied = False
        for r in resources:  # a broker answers only for itself: one request each
            broker = r.restype == ck.ResourceType.BROKER
            if broker and cluster_denied:
                continue  # every broker would refuse it the same way
            try:
                futs = self.ckadmin.describe_configs([r], request_timeout=self.timeout)
                for res, fut in futs.items():
                    entries = fut.result(timeout=self.timeout + 2)
                    kind = "broker" if res.restype == ck.ResourceType.BROKER else "topic"
                    out[(kind, res.name)] = {k: (v.value, int(v.source))
                                             for k, v in entries.items()}
            except Exception as e:
                err = self.translate(e, f"{what} ({r.name})")
                if not tolerant:
                    raise err from e
                if isinstance(err, NotAuthorisedError):
                    cluster_denied = cluster_denied or broker
                    log.warning("%s: left out, %s lacks DescribeConfigs on %s", what,
                                self.conn.principal, "the cluster" if broker
                                else f"topic {r.name}")
                else:
                    log.warning("%s", err)
        return out

    def throttle_configs(self, brokers: Iterable[int], topics: Iterable[str],
                         tolerant: bool = False
                         ) -> dict[tuple[str, str], dict[str, tuple[str | None, int]]]:
        res = [ck.ConfigResource(ck.ResourceType.BROKER, str(b)) for b in sorted(set(brokers))]
        res += [ck.ConfigResource(ck.ResourceType.TOPIC, t) for t in sorted(set(topics))]
        return self._describe(res, "reading throttle configs", tolerant)

    def read_baseline(self, brokers: Iterable[int], topics: Iterable[str]) -> ConfigBaseline:
        """The dynamic per-resource throttle values set before the run (None: none set)."""
        found = self.throttle_configs(brokers, topics)
        vals: list[tuple[str, str, str | None]] = []
        for (kind, name), entries in sorted(found.items()):
            keys, dyn = (RATE_KEYS, _DYNAMIC_BROKER) if kind == "broker" else (REPLICA_KEYS,
                                                                              _DYNAMIC_TOPIC)
            for k in keys:
                value, source = entries.get(k, (None, 5))
                vals.append((f"{kind}:{name}", k, value if source == dyn and value else None))
        return ConfigBaseline(tuple(vals))

    def _alter_configs(self, changes: Mapping[tuple[str, str], Mapping[str, str | None]],
                       what: str) -> None:
        """(kind, name) -> key -> value to SET, or None to DELETE (incremental)."""
        res = []
        for (kind, name), kv in sorted(changes.items()):
            rtype = ck.ResourceType.BROKER if kind == "broker" else ck.ResourceType.TOPIC
            entries = [ck.ConfigEntry(k, v if v is not None else "",
                                      incremental_operation=(ck.AlterConfigOpType.SET if v is not None
                                                             else ck.AlterConfigOpType.DELETE))
                       for k, v in sorted(kv.items())]
            res.append(ck.ConfigResource(rtype, name, incremental_configs=entries))
        if not res:
            return
        # librdkafka takes one broker resource per call (a broker alters only itself);
        # topics go together. All calls are in flight before any answer is awaited.
        calls = [[r] for r in res if r.restype == ck.ResourceType.BROKER]
        topics = [r for r in res if r.restype != ck.ResourceType.BROKER]
        if topics:
            calls.append(topics)
        try:
            pending = [self.ckadmin.incremental_alter_configs(c, request_timeout=self.timeout)
                       for c in calls]
            for futs in pending:
                for fut in futs.values():
                    fut.result(timeout=self.timeout + 2)
        except Exception as e:
            raise self.translate(e, what) from e

    def set_throttles(self, rate: int, brokers: Iterable[int],
                      topics: Mapping[str, tuple[str, str]]) -> None:
        changes: dict[tuple[str, str], dict[str, str | None]] = {}
        for b in brokers:
            changes[("broker", str(b))] = {k: str(rate) for k in RATE_KEYS}
        for t, (lead, fol) in topics.items():
            changes[("topic", t)] = {REPLICA_KEYS[0]: lead, REPLICA_KEYS[1]: fol}
        self._alter_configs(changes, "setting replication throttles")

    def restore_throttles(self, baseline: ConfigBaseline) -> list[str]:
        """Put back the values of ``baseline`` (delete ours where there were none); then
        read them back once. Returns the mismatches found (empty when exact)."""
        changes: dict[tuple[str, str], dict[str, str | None]] = {}
        for resource, key, value in baseline.values:
            kind, _, name = resource.partition(":")
            changes.setdefault((kind, name), {})[key] = value
        self._alter_configs(changes, "removing replication throttles")
        brokers = [int(n) for (k, n) in changes if k == "broker"]
        topics = [n for (k, n) in changes if k == "topic"]
        now = self.read_baseline(brokers, topics)
        return [f"{r} {k}: {now.get(r, k)!r} (expected {v!r})"
                for r, k, v in baseline.values if now.get(r, k) != v]

    # ------------------------------------------------------------------ cordons
    #: the ACLs a cordon change needs (``reassign execute --execute`` lists them)
    CORDON_ACLS = frozenset({("cluster", "DESCRIBE_CONFIGS"), ("cluster", "ALTER_CONFIGS")})

    def metadata_level(self) -> int | None:
        """The cluster's finalized metadata.version feature level, None when it reports none
        (an old or foreign broker: it cannot cordon). Kafka's "DescribeFeatures" is an
        ApiVersions v3+ answer (KIP-584): one round trip on a connection of its own
        (:func:`opskit.adapters.kafka.protocol.features.read_features`), or kafka-python's
        ``describe_features`` for the SASL mechanisms opskit's protocol client does not
        speak. Raises NotAuthorisedError or KafkaUnavailableError; a level read is kept for
        the next call."""
        if self._level is not None:
            return self._level[0]
        from opskit.adapters.kafka.protocol.client import usable

        if usable(self.conn):
            level = self._wire_level()
        else:
            try:
                fin = (self.kp.describe_features().get("metadata.version") or {}).get("finalized")
                level = int(fin[1]) if fin else None
            except Exception as e:  # an old or foreign broker: it cannot cordon
                err = self.translate(e, "DescribeFeatures")
                if isinstance(err, (NotAuthorisedError, KafkaUnavailableError)):
                    raise err from e
                log.debug("DescribeFeatures failed: %s", err)
                level = None
        self._level = (level,)
        return level

    def _wire_level(self) -> int | None:
        from opskit.adapters.kafka.protocol.codec import WireUnsupported
        from opskit.adapters.kafka.protocol.features import read_features
        from opskit.errors import AuthenticationError

        try:
            fin = read_features(self.conn, self.timeout).finalized.get("metadata.version")
        except (WireUnsupported, AuthenticationError) as e:  # an old or foreign broker
            log.debug("DescribeFeatures (ApiVersions v3) failed: %s", e)
            return None
        except OSError as e:
            raise KafkaUnavailableError(
                f"cannot reach Kafka at {self.conn.bootstrap} (DescribeFeatures, timeout "
                f"{self.timeout:g}s): {e or type(e).__name__}") from e
        return fin[1] if fin else None

    def cordon_support(self, brokers: Iterable[int]) -> CordonSupport:
        """Can the cluster cordon these (registered) brokers? Never raises for a cluster that
        cannot: the answer says why."""
        level = self.metadata_level()
        found = self._describe([ck.ConfigResource(ck.ResourceType.BROKER, str(b))
                                for b in sorted(set(brokers))], "reading cordoned.log.dirs")
        knows = {b: CORDON_KEY in found.get(("broker", str(b)), {}) for b in brokers}
        return cordon_support(level, knows)

    def fully_cordoned(self, brokers: Iterable[int]) -> set[int]:
        """The brokers whose every log directory is cordoned (``cordoned.log.dirs=*``), on a
        cluster whose metadata.version honours it; empty elsewhere (the features read, then
        DescribeConfigs per broker only on such a cluster)."""
        level = self.metadata_level()
        if level is None or level < MIN_METADATA_LEVEL:
            return set()
        return {b for b, (v, _src) in self.cordons(brokers, tolerant=True).items()
                if (v or "").strip() == CORDON_ALL}

    def cordons(self, brokers: Iterable[int], tolerant: bool = False
                ) -> dict[int, tuple[str | None, int]]:
        """broker -> (its ``cordoned.log.dirs`` value, the value's source); brokers whose
        configs do not list the key are left out."""
        found = self._describe([ck.ConfigResource(ck.ResourceType.BROKER, str(b))
                                for b in sorted(set(brokers))], "reading cordoned.log.dirs",
                               tolerant)
        return {int(name): entries[CORDON_KEY] for (_k, name), entries in found.items()
                if CORDON_KEY in entries}

    def read_cordon(self, brokers: Iterable[int]) -> tuple[tuple[int, str | None], ...]:
        """Each broker's dynamic per-broker value (None: none set; a static value in
        server.properties is never written, so it needs no saving)."""
        now = self.cordons(brokers)
        return tuple((b, now[b][0] if b in now and now[b][1] == _DYNAMIC_BROKER and now[b][0]
                      else None) for b in sorted(set(brokers)))

    def set_cordon(self, brokers: Iterable[int], wait: float = 60.0) -> None:
        """Cordon every log directory of these brokers; return once each reports all of
        them cordoned (DescribeLogDirs), else KafkaOperationError after ``wait`` seconds."""
        ids = sorted(set(brokers))
        self._alter_configs({("broker", str(b)): {CORDON_KEY: CORDON_ALL} for b in ids},
                            "cordoning brokers (cordoned.log.dirs)")
        deadline = time.monotonic() + max(wait, self.timeout)
        pending = set(ids)
        while True:
            try:
                res = self.kp.describe_log_dirs([], brokers=sorted(pending))
            except Exception as e:
                raise self.translate(e, "DescribeLogDirs (cordon check)") from e
            for broker in res or []:
                dirs = [d for d in broker.get("log_dirs", []) if not d.get("error_code")]
                if dirs and all(d.get("is_cordoned") for d in dirs):  # (offline ones: left out)
                    pending.discard(int(broker.get("broker", -1)))
            if not pending:
                return
            if time.monotonic() > deadline:
                raise KafkaOperationError(
                    f"broker(s) {','.join(map(str, sorted(pending)))} do not report their log "
                    f"directories cordoned {max(wait, self.timeout):g}s after "
                    f"{CORDON_KEY}={CORDON_ALL} was set; nothing was moved (resume to retry)")
            time.sleep(0.5)

    def restore_cordon(self, prior: Iterable[tuple[int, str | None]]) -> list[str]:
        """Put back each broker's value from before (delete ours where there was none);
        read them back until they show (KRaft applies a dynamic value through the metadata
        log, a moment after the answer), up to 15 s. Returns the mismatches left (empty
        when exact)."""
        pairs = sorted(prior)
        self._alter_configs({("broker", str(b)): {CORDON_KEY: v} for b, v in pairs},
                            "uncordoning brokers (cordoned.log.dirs)")
        deadline = time.monotonic() + max(15.0, self.timeout)
        while True:
            now = dict(self.read_cordon([b for b, _ in pairs]))  # (a list: read twice)
            bad = [f"broker {b} {CORDON_KEY}: {now.get(b)!r} (expected {v!r})"
                   for b, v in pairs if now.get(b) != v]
            if not bad or time.monotonic() > deadline:
                return bad
            time.sleep(0.3)
