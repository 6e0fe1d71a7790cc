"""An exporter cycle that could not read a family says so (issue: "could not verify" is never OK).

Heraclitus advertises ListGroups, DescribeGroups and DescribeConfigs and closes the
connection on each. The fault-injecting proxy (tests/broker_double.py) in front of the
real Kafka 3.7 broker does the same here (fault injection only: the real Heraclitus
is run by the compatibility tests). Before this rule, ``exporter --once`` exited 0
with ``opskit_kafka_up 1``, zero errors and no group series, so a lag alert could
never fire and nothing said so. The control -- the same commands straight against
the broker -- proves the assertions can fail.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from broker_double import Behaviour, BrokerDouble
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.connection import ConnectionConfig
from opskit.exporter.collector import KafkaSource
from opskit.exporter.engine import Exporter
from opskit.exporter.options import ExporterOptions, NameFilter
from tests.helpers import commit, create_topic, produce, run_cli

#: ListGroups, DescribeGroups and DescribeConfigs: the connection is closed on them
HERACLITUS_CLOSES = frozenset({16, 15, 32})

Values = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse(text: str) -> Values:
    out: Values = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def fam(family: str, **kw: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"family": family, **kw}.items()))


@pytest.fixture
def cluster(kafka, uniq) -> Iterator[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    t, g = f"nok_{uniq}", f"nok-{uniq}"
    create_topic(kafka.bootstrap, t, 2)
    produce(kafka.bootstrap, t, {0: 10, 1: 5})
    commit(kafka.bootstrap, g, {(t, 0): 3, (t, 1): 5})
    yield kafka.bootstrap, t, g


def _once(bootstrap: str, topic: str) -> tuple[int, Values, str]:
    r = run_cli("exporter", "--once", "-b", bootstrap, "--timeout", "3", "--topic-allow", topic)
    return r.code, parse(r.out), r.err


def test_once_names_what_it_could_not_read(cluster):
    bs, t, g = cluster
    # control: straight against the broker every family is read, exit 0
    code, v, err = _once(bs, t)
    assert code == 0, err
    assert v["opskit_kafka_up"][()] == 1
    assert all(x == 1 for x in v["opskit_exporter_family_up"].values()), v["opskit_exporter_family_up"]
    assert v["kafka_consumergroup_lag"][(("consumergroup", g), ("partition", "0"), ("topic", t))] == 7

    with BrokerDouble(bs, Behaviour(close_on=HERACLITUS_CLOSES)) as d:
        code, v, err = _once(d.bootstrap, t)
    assert code == 3, err
    lines = [ln for ln in err.splitlines() if ln.startswith("opskit: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "collection incomplete" in lines[0]
    assert "groups could not be read" in lines[0] and "ListGroups" in lines[0], lines[0]
    assert "topic configs could not be read" in lines[0], lines[0]
    # the metrics printed say the same: the data is not current, groups were not read
    assert v["opskit_kafka_up"][()] == 0
    up = v["opskit_exporter_family_up"]
    assert up[fam("groups")] == 0 and up[fam("topic_configs")] == 0
    assert up[fam("metadata")] == 1 and up[fam("offsets")] == 1
    assert v["opskit_exporter_family_errors_total"][fam("groups", kind="unsupported")] == 1
    assert v["opskit_exporter_collection_errors_total"][(("kind", "unsupported"),)] == 1
    assert "kafka_consumergroup_lag" not in v  # absent, not 0
    # what could be read is served, with the true numbers
    p = {i: (("partition", str(i)), ("topic", t)) for i in range(2)}
    assert [v["kafka_topic_partition_current_offset"][p[i]] for i in range(2)] == [10, 5]
    assert fam("groups") not in v.get("opskit_exporter_data_age_seconds", {})  # nothing served


def test_served_exporter_is_not_up_without_groups_and_recovers(cluster):
    bs, t, g = cluster
    opts = ExporterOptions(interval_s=3600, collection_timeout_s=60, kafka_timeout_s=3,
                           topics=NameFilter.of([t], None, "topic"), log_dirs=False)
    with BrokerDouble(bs, Behaviour(close_on=HERACLITUS_CLOSES)) as d:
        src = KafkaSource(ConnectionConfig(d.bootstrap), opts)
        ex = Exporter(src, opts)
        try:
            ex.run_cycle()
            v = parse(ex.scrape().decode())
        finally:
            src.close()
    assert v["opskit_kafka_up"][()] == 0
    assert v["opskit_exporter_family_up"][fam("groups")] == 0
    assert v["opskit_exporter_collection_errors_total"][(("kind", "unsupported"),)] == 1
    assert ex.ready() == (True, ex.ready()[1]) and "groups could not be read" in ex.ready()[1]

    # the same exporter code straight against the broker: up, every family current
    src = KafkaSource(ConnectionConfig(bs), opts)
    ex = Exporter(src, opts)
    try:
        ex.run_cycle()
        v = parse(ex.scrape().decode())
    finally:
        src.close()
    assert v["opskit_kafka_up"][()] == 1
    assert all(x == 1 for x in v["opskit_exporter_family_up"].values())
    assert all(x == 0 for x in v["opskit_exporter_family_errors_total"].values())
    assert v["kafka_consumergroup_lag"][(("consumergroup", g), ("partition", "0"), ("topic", t))] == 7


def test_an_error_code_from_listgroups_is_not_a_missing_api(cluster):
    """A group coordinator that is still starting answers ListGroups with
    COORDINATOR_NOT_AVAILABLE (seen in CI: the exporter started beside a fresh 3-node
    cluster). That is an answer: the cycle fails (groups not read, not up), and the next
    cycle asks again. Before, both clients failing was taken for "ListGroups not
    served": the exporter stopped listing groups for 10 minutes and said the broker
    could not list them."""
    bs, t, g = cluster
    opts = ExporterOptions(interval_s=3600, collection_timeout_s=60, kafka_timeout_s=3,
                           topics=NameFilter.of([t], None, "topic"), log_dirs=False)
    # opskit's own client and librdkafka each get the error once (a broker, one request each)
    with BrokerDouble(bs, Behaviour(list_groups_error=(15, 2))) as d:
        src = KafkaSource(ConnectionConfig(d.bootstrap), opts)
        ex = Exporter(src, opts)
        try:
            ex.run_cycle()
            first = parse(ex.scrape().decode())
            errored = sum(1 for api, _v, _a in d.requests if api == 16)
            cycles = 1
            v = first
            while v["opskit_exporter_family_up"][fam("groups")] == 0 and cycles < 4:
                ex.run_cycle()
                cycles += 1
                v = parse(ex.scrape().decode())
        finally:
            src.close()
    assert errored >= 2, d.requests  # the fault was injected into the first cycle
    assert first["opskit_kafka_up"][()] == 0
    assert first["opskit_exporter_family_up"][fam("groups")] == 0
    # never "unsupported": opskit counts a coordinator that is not available yet with
    # the retriable "cannot reach" errors (kafka_admin._UNREACHABLE)
    errs = {k: x for k, x in first["opskit_exporter_family_errors_total"].items() if x}
    assert errs == {fam("groups", kind="unreachable"): 1}, errs
    assert first["opskit_exporter_family_errors_total"][fam("groups", kind="unsupported")] == 0
    # the next cycle listed the groups again: up, and the group's lag is served
    assert cycles == 2, cycles
    assert v["opskit_kafka_up"][()] == 1
    assert v["kafka_consumergroup_lag"][(("consumergroup", g), ("partition", "0"), ("topic", t))] == 7


def test_real_heraclitus_once_names_what_it_could_not_read(heraclitus, uniq):
    """The real broker (scripts/install-compat.sh): it closes the connection on ListGroups,
    DescribeGroups and DescribeConfigs. Before: exit 0, up 1, no group series."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = heraclitus.bootstrap
    t, g = f"nok_hx_{uniq}", f"nok-hx-{uniq}"
    admin = AdminClient({"bootstrap.servers": bs})  # kept until its futures resolve
    admin.create_topics([NewTopic(t, 2, 1)])[t].result(30)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(t, timeout=10).topics[t].partitions) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.5)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": False})
    for i in range(20):
        p.produce(t, value=b"v", partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": g})
    try:
        c.commit(offsets=[CkTP(t, 0, 3), CkTP(t, 1, 10)], asynchronous=False)
    finally:
        c.close()
    code, v, err = _once(bs, t)
    assert code == 3, err
    lines = [ln for ln in err.splitlines() if ln.startswith("opskit: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "groups could not be read" in lines[0] and "ListGroups" in lines[0], lines[0]
    assert v["opskit_kafka_up"][()] == 0
    assert v["opskit_exporter_family_up"][fam("groups")] == 0
    assert v["opskit_exporter_family_errors_total"][fam("groups", kind="unsupported")] == 1
    assert "kafka_consumergroup_lag" not in v
    # what Heraclitus does answer is served, with the true numbers
    p_ = {i: (("partition", str(i)), ("topic", t)) for i in range(2)}
    assert [v["kafka_topic_partition_current_offset"][p_[i]] for i in range(2)] == [10, 10]
    assert v["opskit_exporter_family_up"][fam("offsets")] == 1
