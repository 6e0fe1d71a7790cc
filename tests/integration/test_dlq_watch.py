"""``opskit dlq watch`` on a real broker, paging a local Events API v2 receiver."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from opskit.core.models import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import create_topic, run_cli
from pd_receiver import PagerDutyReceiver, routing_key


@pytest.fixture(scope="module")
def receiver() -> Iterator[PagerDutyReceiver]:
    with PagerDutyReceiver() as r:
        yield r


def dead_letter(source_topic: str, n: int) -> dict[str, Any]:
    """A HIP-30 envelope as consumers write it to dead_letter."""
    return {"schema": "hanzo.stream.v1", "id": f"evt_dl_{source_topic}_{n}",
            "type": "stream.dead_letter", "source": "analytics-ingest",
            "timestamp": "2026-11-21T20:00:00.000Z",
            "data": {"source_topic": source_topic, "reason": f"schema validation failed #{n}",
                     "original": "{\"id\": \"evt_broken\"}"}}


def produce_letters(bootstrap: str, topic: str, letters: list[tuple[str, int]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for src, n in letters:
        p.produce(topic, key=src.encode(), value=json.dumps(dead_letter(src, n)).encode())
    assert p.flush(30) == 0


def committed(kafka: Any, group: str, topic: str) -> int | None:
    with kafka.admin() as a:
        return a.committed_offsets([group])[group].get(TopicPartition(topic, 0))


def test_dlq_watch_pages_per_source_topic_and_keeps_its_place(
        kafka: Any, receiver: PagerDutyReceiver, uniq: str, tmp_path: Path) -> None:
    topic, group = f"dead_letter_{uniq}", f"dead-letter-monitor-{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    produce_letters(kafka.bootstrap, topic, [("llm_usage", 1), ("audit_log", 1), ("llm_usage", 2),
                                             ("llm_usage", 3), ("audit_log", 2)])
    key = routing_key()
    keyf = tmp_path / "pd-key"
    keyf.write_text(key)
    base = ["dlq", "watch", "-b", kafka.bootstrap, "--topic", topic, "--routing-key-file",
            str(keyf), "--events-url", receiver.url, "--ca-file", str(receiver.ca_file),
            "--cluster", "sandbox", "--update-interval", "1s", "--max-retries", "1"]

    def mine() -> list[dict[str, Any]]:
        return [e for e in receiver.events if e["routing_key"] == key]

    # dry run (the default) pages nothing and commits nothing
    r = run_cli(*base, "--group", group + "-dry", "--state-file", str(tmp_path / "dry.json"),
                "--once")
    assert r.code == 0, r.err
    planned = [json.loads(line) for line in r.out.splitlines()]
    assert sorted((p["action"], p["source_topic"], p["sent"]) for p in planned) == [
        ("trigger", "audit_log", False), ("trigger", "llm_usage", False)]
    assert mine() == [] and committed(kafka, group + "-dry", topic) is None

    state = ["--group", group, "--state-file", str(tmp_path / "state.json")]
    r = run_cli(*base, *state, "--once", "--quiet-period", "1h", "--execute")
    assert r.code == 0, r.err
    events = {e["dedup_key"]: e for e in mine()}
    assert set(events) == {"opskit-dlq/sandbox/llm_usage", "opskit-dlq/sandbox/audit_log"}
    llm = events["opskit-dlq/sandbox/llm_usage"]
    assert llm["event_action"] == "trigger"
    assert llm["payload"]["custom_details"]["dead_letters"] == 3
    assert llm["payload"]["custom_details"]["sample"]["reason"] == "schema validation failed #3"
    assert llm["links"][0]["href"].endswith("KafkaDeadLetterGrowing.md")
    assert events["opskit-dlq/sandbox/audit_log"]["payload"]["custom_details"]["dead_letters"] == 2
    assert committed(kafka, group, topic) == 5

    # quiet now: the next run resolves both incidents and re-reads nothing
    r = run_cli(*base, *state, "--once", "--quiet-period", "0s", "--execute")
    assert r.code == 0, r.err
    assert sorted((e["event_action"], e["dedup_key"]) for e in mine()[2:]) == [
        ("resolve", "opskit-dlq/sandbox/audit_log"), ("resolve", "opskit-dlq/sandbox/llm_usage")]

    # PagerDuty unreachable: exit 3, the new dead letter is not committed ...
    produce_letters(kafka.bootstrap, topic, [("llm_usage", 4)])
    down = [a if a != receiver.url else "https://127.0.0.1:9" for a in base]
    r = run_cli(*down, *state, "--once", "--quiet-period", "1h", "--execute")
    assert r.code == 3 and "offsets not committed" in r.err
    assert committed(kafka, group, topic) == 5
    # ... so the next run pages it: a new incident with one dead letter
    r = run_cli(*base, *state, "--once", "--quiet-period", "1h", "--execute")
    assert r.code == 0, r.err
    last = mine()[-1]
    assert (last["event_action"], last["dedup_key"]) == ("trigger", "opskit-dlq/sandbox/llm_usage")
    assert last["payload"]["custom_details"]["dead_letters"] == 1
    assert committed(kafka, group, topic) == 6


def test_dlq_watch_bad_input(kafka: Any, tmp_path: Path, uniq: str) -> None:
    keyf = tmp_path / "pd-key"
    keyf.write_text(routing_key())
    r = run_cli("dlq", "watch", "-b", kafka.bootstrap, "--topic", f"no_such_{uniq}",
                "--routing-key-file", str(keyf), "--once")
    assert r.code == 4 and "does not exist" in r.err
    r = run_cli("dlq", "watch", "-b", kafka.bootstrap, "--routing-key-file", str(keyf),
                "--quiet-period", "soon")
    assert r.code == 2 and "--quiet-period" in r.err
    r = run_cli("dlq", "watch", "-b", "127.0.0.1:1", "--timeout", "2", "--topic", "dead_letter",
                "--routing-key-file", str(keyf), "--once")
    assert r.code == 3 and r.err.startswith("opskit: error:")


def test_dlq_watch_duration_stops_on_a_quiet_topic(kafka: Any, tmp_path: Path, uniq: str) -> None:
    topic = f"dead_letter_quiet_{uniq}"
    create_topic(kafka.bootstrap, topic, 1)
    keyf = tmp_path / "pd-key"
    keyf.write_text(routing_key())
    r = run_cli("dlq", "watch", "-b", kafka.bootstrap, "--topic", topic, "--group",
                f"dlq-quiet-{uniq}", "--routing-key-file", str(keyf), "--duration", "3s",
                "--state-file", str(tmp_path / "s.json"))
    assert r.code == 0, r.err
    assert r.out == "" and "open dead-letter incidents: none" in r.err
