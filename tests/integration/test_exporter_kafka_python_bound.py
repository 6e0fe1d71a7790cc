"""The exporter's kafka-python connect is bounded by its --kafka-timeout.

kafka-python's admin client (the only client for DescribeQuorum and
ListPartitionReassignments) connects with a bootstrap and a metadata round of its own.
When the endpoint it connects to accepts TCP and never answers, or answers ApiVersions
and then nothing, that connect must give up within the exporter's bound (the
timeout + 2 s) and the quorum and reassignment families must be served as not read
(``opskit_exporter_family_up`` 0), never as fine.

The cluster's other reads go to the real Kafka 3.7 broker; only kafka-python's client
(made from the exporter's own connection) meets the misbehaving endpoint: a plain
socket that accepts and never answers, or the broker double stalling after ApiVersions.
No speed is asserted: a cycle still running after a wide bound is a hang.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
from broker_double import ALL_APIS, Behaviour, BrokerDouble
from prometheus_client.parser import text_string_to_metric_families

from opskit.adapters.kafka.admin.client import KafkaAdmin
from opskit.adapters.kafka.reader import ClusterReader, KeptClients, open_reader
from opskit.core.connection import ConnectionConfig
from opskit.exporter.collector import KafkaSource
from opskit.exporter.engine import Exporter
from opskit.exporter.options import ExporterOptions, NameFilter
from tests.helpers import SilentServer, create_topic

TIMEOUT = 2.0
#: the bound is TIMEOUT + 2 s per connect; a loaded 2-core CI machine is many times
#: slower, and a hang never ends: the wait is wide
HANG_S = 120.0


@contextlib.contextmanager
def _endpoint(fault: str, upstream: str) -> Iterator[str]:
    if fault == "silent":  # accepts connections and never answers
        with SilentServer() as srv:
            yield srv.address
    else:  # answers ApiVersions, then nothing
        with BrokerDouble(upstream, Behaviour(stall_on=ALL_APIS)) as d:
            yield d.bootstrap


@pytest.mark.parametrize("served", [False, True], ids=["once", "served"])
@pytest.mark.parametrize("fault", ["silent", "stall-after-versions"])
def test_a_hung_kafka_python_connect_leaves_its_families_unread(  # type: ignore[no-untyped-def]
        kafka, uniq, fault: str, served: bool) -> None:
    topic = f"kpb_{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    real = KafkaAdmin(ConnectionConfig(kafka.bootstrap).with_client_id("opskit-exporter"),
                      timeout=TIMEOUT)

    def on_the_real_broker(_admin: KafkaAdmin, kept: KeptClients) -> ClusterReader:
        return open_reader(real, kept)  # kafka-python's client: ``kept``, the exporter's own

    opts = ExporterOptions(interval_s=3600, collection_timeout_s=600, kafka_timeout_s=TIMEOUT,
                           topics=NameFilter.of([topic], None, "topic"), lag_time=False,
                           log_dirs=False)
    with _endpoint(fault, kafka.bootstrap) as bs:
        src = KafkaSource(ConnectionConfig(bs), opts, open_reader=on_the_real_broker)
        ex = Exporter(src, opts)
        ended = threading.Event()

        def cycle() -> None:
            ex.run_cycle()
            if served:  # the slow families' round, on its own thread
                src.start_background()
                ex.run_cycle()
                while src.families().get("reassignments") is None:
                    threading.Event().wait(0.2)
                ex.run_cycle()
            ended.set()

        threading.Thread(target=cycle, name="test-cycle", daemon=True).start()
        try:
            assert ended.wait(HANG_S), "the cycle did not end: kafka-python's connect hung"
            fams = src.families()
            text = ex.scrape().decode()
        finally:
            src.close()
            real.close()
    up = {s.labels["family"]: s.value for f in text_string_to_metric_families(text)
          for s in f.samples if s.name == "opskit_exporter_family_up"}
    assert fams["metadata"].ok and up["metadata"] == 1  # the rest of the cycle was read
    for name in ("quorum", "reassignments"):
        assert not fams[name].ok, fams[name]
        assert fams[name].message, fams[name]
        assert up[name] == 0, up
