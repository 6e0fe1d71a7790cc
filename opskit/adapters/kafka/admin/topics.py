"""Topics and brokers through the admin: configs read and altered, topics created,
grown and deleted."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from opskit.adapters.kafka import confluent as ck
from opskit.adapters.kafka.admin.session import AdminSession
from opskit.errors import OpskitError

log = logging.getLogger("opskit.adapters.kafka.admin.client")


class TopicAdmin(AdminSession):
    """The config reads and topic changes of :class:`~opskit.adapters.kafka.admin.client.KafkaAdmin`."""

    def topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, tuple[str | None, bool]]]:
        """topic -> {config: (value, is_default)}."""
        res = [ck.ConfigResource(ck.ResourceType.TOPIC, t) for t in sorted(set(topics))]
        if not res:
            return {}
        self.require("topic_configs", "reading topic configs")
        futs = self._admin.describe_configs(res, **self._kw())
        # one deadline for the whole request: librdkafka does not end a DescribeConfigs
        # that a broker never answers (the Hanzo gateway) at its request timeout
        deadline = time.monotonic() + self.timeout
        out: dict[str, dict[str, tuple[str | None, bool]]] = {}
        for r, fut in futs.items():
            entries = self._result(fut, f"describing configs of topic {r.name}", "topic_configs",
                                   deadline)
            out[r.name] = {
                k: (v.value, bool(v.is_default) or v.source == 5)  # 5 = DEFAULT_CONFIG
                for k, v in entries.items()
            }
        return out

    def broker_configs(self, brokers: Iterable[int]) -> dict[int, dict[str, tuple[str | None, bool]]]:
        """broker id -> {config: (value, is_default)}: one DescribeConfigs per broker (a
        broker describes only itself), all sent before any answer is awaited. A broker
        that does not answer is left out and logged; the others still count."""
        ids = sorted(set(brokers))
        if not ids:
            return {}
        self.require("topic_configs", "reading broker configs")  # the same DescribeConfigs API
        futs = [(b, self._admin.describe_configs([ck.ConfigResource(ck.ResourceType.BROKER, str(b))],
                                                 **self._kw())) for b in ids]
        deadline = time.monotonic() + self.timeout  # one wait for all (see topic_configs)
        out: dict[int, dict[str, tuple[str | None, bool]]] = {}
        for b, by_res in futs:
            for fut in by_res.values():
                try:
                    entries = self._result(fut, f"describing configs of broker {b}",
                                           deadline=deadline)
                except OpskitError as e:
                    log.warning("could not read configs of broker %s: %s", b, e)
                    continue
                out[b] = {k: (v.value, bool(v.is_default) or v.source == 5)  # 5 = DEFAULT_CONFIG
                          for k, v in entries.items()}
        return out

    def create_topics(self, topics: list[tuple[str, int, int, dict[str, str]]]) -> None:
        new = [ck.NewTopic(n, num_partitions=p, replication_factor=rf, config=cfg) for n, p, rf, cfg in topics]
        if not new:
            return
        self.require("create_topics", "creating topics")
        futs = self._admin.create_topics(new, operation_timeout=self.timeout, **self._kw())
        for name, fut in futs.items():
            self._result(fut, f"creating topic {name}", "create_topics")

    def alter_topic_configs(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        res = []
        for topic, cfg in changes.items():
            r = ck.ConfigResource(ck.ResourceType.TOPIC, topic, incremental_configs=[
                ck.ConfigEntry(k, v, incremental_operation=ck.AlterConfigOpType.SET) for k, v in cfg.items()
            ])
            res.append(r)
        if not res:
            return
        self.require("alter_topic_configs", "altering topic configs")
        futs = self._admin.incremental_alter_configs(res, **self._kw())
        for r, fut in futs.items():
            self._result(fut, f"altering configs of topic {r.name}", "alter_topic_configs")

    def alter_broker_configs(self, brokers: Iterable[int], changes: Mapping[str, str]) -> None:
        """Set dynamic per-broker configs on each of ``brokers`` (one request per broker:
        a broker resource must go to that broker). confluent-kafka refuses the empty
        resource name of the cluster-wide default, so defaults are set per broker."""
        self.require("alter_broker_configs", "altering broker configs")
        for b in brokers:
            r = ck.ConfigResource(ck.ResourceType.BROKER, str(b), incremental_configs=[
                ck.ConfigEntry(k, v, incremental_operation=ck.AlterConfigOpType.SET)
                for k, v in changes.items()])
            for fut in self._admin.incremental_alter_configs([r], **self._kw()).values():
                self._result(fut, f"altering configs of broker {b}", "alter_broker_configs")

    def create_partitions(self, increases: Mapping[str, int]) -> None:
        new = [ck.NewPartitions(t, n) for t, n in increases.items()]
        if not new:
            return
        self.require("create_partitions", "adding partitions")
        futs = self._admin.create_partitions(new, operation_timeout=self.timeout, **self._kw())
        for t, fut in futs.items():
            self._result(fut, f"adding partitions to topic {t}", "create_partitions")

    def delete_topics(self, topics: Iterable[str]) -> None:
        names = sorted(set(topics))
        if not names:
            return
        self.require("delete_topics", "deleting topics")
        futs = self._admin.delete_topics(names, operation_timeout=self.timeout, **self._kw())
        for t, fut in futs.items():
            self._result(fut, f"deleting topic {t}", "delete_topics")
