"""The per-cluster record of what brokers were seen to do wrong."""

from __future__ import annotations

from opskit.adapters.kafka.broker_quirks import BrokerQuirks


def test_a_dead_api_is_remembered_then_tried_again_after_recheck() -> None:
    now = [100.0]
    q = BrokerQuirks(recheck_s=60.0, clock=lambda: now[0])
    assert q.dead_api("DescribeConfigs") is None
    q.note_dead_api("DescribeConfigs", "h:1", "no answer within 5s")
    now[0] += 59.0
    hit = q.dead_api("DescribeConfigs")
    assert hit is not None and hit.broker == "h:1" and "no answer" in hit.detail
    assert q.dead_api("DescribeGroups") is None  # only the API seen
    now[0] += 1.0
    assert q.dead_api("DescribeConfigs") is None  # due for another try


def test_offset_fetch_and_time_lookups_are_kept_for_the_run() -> None:
    q = BrokerQuirks()
    assert q.offset_fetch_per_topic is None and q.untrusted_time_lookups is None
    q.note_offset_fetch_per_topic("h:1", "an OffsetFetch naming 6 topics got an unparseable answer")
    q.note_offset_fetch_per_topic("h:1", "second")  # the first one is kept
    q.note_untrusted_time_lookups("h:1", "answered 0 for p0 at T")
    assert q.offset_fetch_per_topic is not None and "6 topics" in q.offset_fetch_per_topic.detail
    d = q.to_dict()
    assert d["untrusted_time_lookups"] == "answered 0 for p0 at T"
    assert d["apis_not_served"] == {}
