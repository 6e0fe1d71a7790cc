"""The exporter takes ListGroups for "not served" only on evidence, seen twice.

A broker that advertises ListGroups and closes the connection on it (Heraclitus) is
remembered as not serving it for 10 minutes, and the groups named in --group-allow are
read without it. Before, one failed cycle was enough, and a timeout counted: a slow real
Kafka that let ListGroups time out once (while answering ApiVersions) lost its group
series for 10 minutes; one closed connection did the same. Now a timeout is never
evidence, and the served exporter needs a closed connection (or an unparseable answer)
in two cycles without a success between.

The broker double in front of real Kafka 3.7 injects the faults (fault injection only;
the real Heraclitus: test_exporter_never_ok.py, test_heraclitus_readpath.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_double import Behaviour, BrokerDouble
from prometheus_client.parser import text_string_to_metric_families

from opskit.core.connection import ConnectionConfig
from opskit.exporter.collector import KafkaSource
from opskit.exporter.engine import Exporter
from opskit.exporter.options import ExporterOptions, NameFilter
from tests.helpers import commit, create_topic, produce

LIST_GROUPS = 16
FORWARD = Behaviour()

Values = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _values(ex: Exporter) -> Values:
    out: Values = {}
    for fam in text_string_to_metric_families(ex.scrape().decode()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


@pytest.fixture
def cluster(kafka, uniq) -> Iterator[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    t, g = f"nsv_{uniq}", f"nsv-{uniq}"
    create_topic(kafka.bootstrap, t, 1)
    produce(kafka.bootstrap, t, {0: 10})
    commit(kafka.bootstrap, g, {(t, 0): 3})
    yield kafka.bootstrap, t, g


class _Run:
    """An exporter over the double, served (two observations) or --once-like (one)."""

    def __init__(self, double: BrokerDouble, topic: str, group: str, served: bool) -> None:
        self.d, self.t, self.g = double, topic, group
        opts = ExporterOptions(interval_s=3600, collection_timeout_s=60, kafka_timeout_s=3,
                               topics=NameFilter.of([topic], None, "topic"), log_dirs=False)
        self.src = KafkaSource(ConnectionConfig(double.bootstrap), opts)
        if served:
            self.src.start_background()
        self.ex = Exporter(self.src, opts)

    def cycle(self, behaviour: Behaviour) -> tuple[bool, float | None]:
        """(groups read, the group's lag) of one cycle with the double doing ``behaviour``."""
        self.d.behaviour = behaviour  # new connections only: the clients reconnect below
        self.ex.run_cycle()
        v = _values(self.ex)
        up = v["opskit_exporter_family_up"][(("family", "groups"),)] == 1
        lag = v.get("kafka_consumergroup_lag", {}).get(
            (("consumergroup", self.g), ("partition", "0"), ("topic", self.t)))
        return up, lag

    def not_served(self) -> dict[str, object]:
        return self.src.admin().quirks.to_dict()["apis_not_served"]  # type: ignore[return-value]

    def close(self) -> None:
        self.src.close()


@pytest.mark.parametrize("served", [True, False], ids=["served", "once"])
def test_a_listgroups_timeout_is_never_taken_for_a_missing_api(cluster, served: bool) -> None:
    bs, t, g = cluster
    with BrokerDouble(bs, FORWARD) as d:
        run = _Run(d, t, g, served)
        try:
            # a slow broker: ListGroups unanswered on both clients, ApiVersions answered
            first = run.cycle(Behaviour(stall_on=frozenset({LIST_GROUPS})))
            stalled = sum(1 for api, _v, act in d.requests if api == LIST_GROUPS and act == "stall")
            remembered = run.not_served()
            second = run.cycle(FORWARD)
        finally:
            run.close()
    assert stalled >= 1, d.requests  # the fault was injected
    assert first == (False, None), first  # that cycle could not list the groups: not up
    assert "ListGroups" not in remembered, remembered  # was: not served for 600 s
    assert second == (True, 7), second  # was: (False, None), no group series


def test_a_connection_closed_once_is_asked_again_twice_is_remembered(cluster) -> None:
    bs, t, g = cluster
    closes = Behaviour(close_on=frozenset({LIST_GROUPS}))
    with BrokerDouble(bs, FORWARD) as d:
        run = _Run(d, t, g, served=True)
        try:
            once = run.cycle(closes)
            after_once = run.not_served()
            recovered = run.cycle(FORWARD)
            # closed in two cycles in a row (Heraclitus): remembered, groups read without it
            run.cycle(closes)
            after_one_more = run.not_served()
            run.cycle(closes)
            after_two = run.not_served()
            closed = sum(1 for api, _v, act in d.requests if api == LIST_GROUPS and act == "close")
            asked = len([r for r in d.requests if r[0] == LIST_GROUPS])
            run.cycle(FORWARD)  # remembered: not asked for within the recheck time
            asked_after = len([r for r in d.requests if r[0] == LIST_GROUPS])
        finally:
            run.close()
    assert once == (False, None) and after_once == {}, (once, after_once)  # was: remembered
    assert recovered == (True, 7), recovered  # was: (False, None) for 10 minutes
    assert closed >= 3, d.requests  # the fault was injected in each cycle that asked
    assert after_one_more == {}, after_one_more  # a success came between: counted anew
    assert "ListGroups" in after_two, after_two
    assert asked_after == asked, (asked, asked_after)
