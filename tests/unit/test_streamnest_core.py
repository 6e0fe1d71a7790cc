"""The pure StreamNest judgements (opskit.core.streamnest) and endpoint parsing."""

from __future__ import annotations

import pytest

from opskit.adapters.http.streamnest import is_http_bootstrap, parse_endpoints
from opskit.core.models import Severity
from opskit.core.streamnest import (
    CONSUMED,
    PRODUCED,
    BrokerAnswer,
    CounterReading,
    MalformedAnswer,
    evaluate_health,
    measure,
    parse_counters,
    parse_metadata,
)
from opskit.errors import UsageError


def test_parse_metadata_shape() -> None:
    doc = {"topic_partitions": {"t": {"partitions": [{"partition": 1, "broker": "b:2"},
                                                     {"partition": 0, "broker": "a:1"}]},
                                "empty": {"partitions": None}}}
    assert parse_metadata(doc) == {"t": ("a:1", "b:2"), "empty": ()}
    for bad in ({}, {"topic_partitions": []},
                {"topic_partitions": {"t": {"partitions": [{"partition": 1, "broker": "a"}]}}},
                {"topic_partitions": {"t": {"partitions": [{"partition": 0}]}}},
                {"topic_partitions": {"t": {"partitions": [{"partition": 0, "broker": "a"},
                                                           {"partition": 0, "broker": "b"}]}}}):
        with pytest.raises(MalformedAnswer):
            parse_metadata(bad)


def test_parse_counters() -> None:
    text = f"# HELP x\n{PRODUCED} 12\n{CONSUMED} 3\nother 1\n"
    assert parse_counters(text) == {PRODUCED: 12.0, CONSUMED: 3.0}
    for bad in (f"{PRODUCED} 1\n", f"{PRODUCED} NaN\n{CONSUMED} 1\n", f"{PRODUCED} -1\n{CONSUMED} 1\n"):
        with pytest.raises(MalformedAnswer):
            parse_counters(bad)


def test_health_owner_down_and_disagreement() -> None:
    same = {"localhost:1": "127.0.0.1:1", "localhost:2": "127.0.0.1:2"}
    up = BrokerAnswer("127.0.0.1:1", {"t": ("localhost:1", "localhost:2", "localhost:1")})
    down = BrokerAnswer("127.0.0.1:2", None, "connection refused")
    h = evaluate_health([up, down], same)
    assert h.severity is Severity.CRITICAL and h.unreachable_partitions == 1 and h.partitions == 3
    other = BrokerAnswer("127.0.0.1:2", {"t": ("localhost:2", "localhost:1", "localhost:2")})
    h = evaluate_health([up, other], same)
    assert h.severity is Severity.WARNING
    assert [f.check for f in h.findings if f.severity is Severity.WARNING] == ["ownership"]
    lacking = BrokerAnswer("127.0.0.1:2", {})
    assert evaluate_health([up, lacking], same).severity is Severity.WARNING
    h = evaluate_health([BrokerAnswer("127.0.0.1:1", None, "refused")], same)
    assert h.severity is Severity.CRITICAL and h.to_dict()["counts"]["brokers_answering"] == 0


def test_measure_never_a_smaller_total() -> None:
    a = CounterReading(10.0, {"b1": {PRODUCED: 5, CONSUMED: 1}, "b2": {PRODUCED: 7, CONSUMED: 0}})
    b = CounterReading(12.0, {"b1": {PRODUCED: 9, CONSUMED: 2}, "b2": {PRODUCED: 8, CONSUMED: 0}})
    m = measure(a, b)
    assert (m["produced"], m["consumed"], m["produced_per_second"]) == (5, 1, 2.5)
    restarted = CounterReading(12.0, {"b1": {PRODUCED: 9, CONSUMED: 2},
                                      "b2": {PRODUCED: 1, CONSUMED: 0}})
    m = measure(a, restarted)
    assert m["produced"] is None and "restarted" in m["unknown"][0]
    missing = CounterReading(12.0, {"b1": {PRODUCED: 9, CONSUMED: 2}}, {"b2": "refused"})
    assert measure(a, missing)["produced"] is None


def test_endpoints() -> None:
    assert is_http_bootstrap("http://a:1,http://b:2") and not is_http_bootstrap("a:1")
    assert parse_endpoints("http://a:1, http://b:2/,http://a:1") == ["a:1", "b:2"]
    for bad in ("http://a:1,b:2", "https://a:1", "http://a", "http://a:1/x", "http://u:p@a:1"):
        with pytest.raises(UsageError):
            parse_endpoints(bad)
