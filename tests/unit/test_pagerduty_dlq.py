"""Dead-letter paging decisions (opskit.core.dlq): pure, time passed in."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opskit.core.dlq import (
    DeadLetter,
    DlqPolicy,
    DlqState,
    observe,
    parse_dead_letter,
    plan_pages,
)
from opskit.errors import InvalidInputError

POLICY = DlqPolicy(cluster="prod", quiet_period=600, update_interval=60,
                   runbook_url="https://rb/KafkaDeadLetterGrowing.md")


def _dl(topic: str, offset: int = 0, reason: str = "schema validation failed") -> DeadLetter:
    return DeadLetter(topic, 0, offset, 1_700_000_000_000, f"evt_{offset}", "x.y", reason, "svc")


def test_parse_hip30_dead_letter_envelope() -> None:
    env = {"schema": "hanzo.stream.v1", "id": "evt_1", "type": "stream.dead_letter",
           "source": "analytics-ingest", "timestamp": "2025-01-15T10:30:00.000Z",
           "data": {"source_topic": "llm_usage", "reason": "missing field 'type'",
                    "original": "{}"}}
    dl = parse_dead_letter(b"llm_usage", json.dumps(env).encode(), 0, 42, 1_700_000_000_000)
    assert (dl.source_topic, dl.event_id, dl.reason, dl.producer, dl.offset) == (
        "llm_usage", "evt_1", "missing field 'type'", "analytics-ingest", 42)
    assert dl.sample()["timestamp"] == "2023-11-14T22:13:20Z"


def test_unparseable_dead_letters_are_still_counted_by_key() -> None:
    assert parse_dead_letter(b"audit_log", b"\x00garbage", 0, 1).source_topic == "audit_log"
    assert parse_dead_letter(None, b"[1,2]", 0, 1).source_topic == "unknown"
    assert parse_dead_letter(None, None, 0, 1).reason == "dead letter is not a JSON envelope"


def test_one_incident_per_source_topic_with_counts_and_sample() -> None:
    s = observe(DlqState(), [_dl("llm_usage", 1), _dl("llm_usage", 2), _dl("audit_log", 3)], 100)
    s, actions = plan_pages(s, POLICY, 100)
    assert [(a.action, a.dedup_key) for a in actions] == [
        ("trigger", "opskit-dlq/prod/audit_log"), ("trigger", "opskit-dlq/prod/llm_usage")]
    llm = actions[1]
    assert llm.details is not None
    assert llm.details["dead_letters"] == 2 and llm.details["sample"]["event_id"] == "evt_2"
    assert llm.summary == "2 dead letters from llm_usage on prod: schema validation failed"
    assert llm.links == ({"href": "https://rb/KafkaDeadLetterGrowing.md", "text": "runbook"},)
    # nothing new: no page
    s, actions = plan_pages(s, POLICY, 130)
    assert actions == []


def test_updates_are_rate_limited_per_incident() -> None:
    s, _ = plan_pages(observe(DlqState(), [_dl("t", 1)], 0), POLICY, 0)
    s = observe(s, [_dl("t", 2)], 10)
    s, actions = plan_pages(s, POLICY, 30)
    assert actions == []  # within update_interval of the last page
    s = observe(s, [_dl("t", 3)], 50)
    s, actions = plan_pages(s, POLICY, 61)
    assert [a.action for a in actions] == ["trigger"]
    assert actions[0].details is not None
    assert actions[0].details["dead_letters"] == 3
    assert actions[0].details["new_since_last_page"] == 2


def test_quiet_topic_resolves_and_a_new_letter_opens_a_new_incident() -> None:
    s, _ = plan_pages(observe(DlqState(), [_dl("t")], 0), POLICY, 0)
    s, actions = plan_pages(s, POLICY, 599)
    assert actions == []
    s, actions = plan_pages(s, POLICY, 600)
    assert [(a.action, a.dedup_key) for a in actions] == [("resolve", "opskit-dlq/prod/t")]
    assert s.incidents == {}
    s, actions = plan_pages(observe(s, [_dl("t", 9)], 700), POLICY, 700)
    assert actions[0].action == "trigger" and actions[0].details is not None
    assert actions[0].details["dead_letters"] == 1


def test_unsent_letters_are_paged_before_resolving() -> None:
    s, _ = plan_pages(observe(DlqState(), [_dl("t", 1)], 0), POLICY, 0)
    s = observe(s, [_dl("t", 2)], 30)
    # quiet period passed since the last letter, but it was never paged: page first
    s, actions = plan_pages(s, POLICY, 1000)
    assert [a.action for a in actions] == ["trigger"]
    s, actions = plan_pages(s, POLICY, 1001)
    assert [a.action for a in actions] == ["resolve"]


def test_planning_does_not_mutate_its_input() -> None:
    s = observe(DlqState(), [_dl("t")], 0)
    before = s.to_dict()
    plan_pages(s, POLICY, 0)
    assert s.to_dict() == before


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)), max_size=30))
def test_state_round_trips_and_counts_every_letter(batches: list[tuple[str, int]]) -> None:
    s = DlqState()
    total = 0
    t = 0.0
    for topic, n in batches:
        s = observe(s, [_dl(topic, i) for i in range(n)], t)
        total += n
        s, _ = plan_pages(s, DlqPolicy(quiet_period=10**9, update_interval=5), t)
        t += 3
        assert DlqState.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert sum(i.total for i in s.incidents.values()) == total


def test_bad_state_document_is_refused() -> None:
    with pytest.raises(InvalidInputError):
        DlqState.from_dict({"version": 2, "incidents": []})
    with pytest.raises(InvalidInputError):
        DlqState.from_dict({"version": 1, "incidents": [{"source_topic": "t"}]})
