"""The real ``pagerduty`` client against a local Events API v2 receiver, and ``opskit page``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from opskit.adapters.paging.pagerduty import (
    PagerDutyEvents,
    PagerDutyRejectedError,
    PagerDutySettings,
    PagerDutyUnavailableError,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import run_cli
from pd_receiver import PagerDutyReceiver, routing_key


@pytest.fixture(scope="module")
def receiver() -> Iterator[PagerDutyReceiver]:
    with PagerDutyReceiver() as r:
        yield r


def _client(r: PagerDutyReceiver, retries: int = 2, key: str | None = None) -> PagerDutyEvents:
    return PagerDutyEvents(PagerDutySettings(key or routing_key(), r.url, str(r.ca_file),
                                             timeout=5, max_retries=retries, backoff=0.01))


def test_trigger_then_resolve_share_the_dedup_key(receiver: PagerDutyReceiver) -> None:
    key = routing_key()
    with _client(receiver, key=key) as pd:
        dedup = pd.trigger("lag high", "prod/billing-agg", "critical", dedup_key="inc-1",
                           custom_details={"lag": 123},
                           links=[{"href": "https://rb/KafkaConsumerGroupLag.md", "text": "runbook"}])
        assert dedup == "inc-1"
        assert pd.resolve("inc-1") == "inc-1"
    mine = [e for e in receiver.events if e["routing_key"] == key]
    assert [e["event_action"] for e in mine] == ["trigger", "resolve"]
    assert mine[0]["payload"]["custom_details"] == {"lag": 123}
    assert mine[0]["links"][0]["href"].endswith("KafkaConsumerGroupLag.md")


def test_trigger_without_dedup_key_gets_one_from_pagerduty(receiver: PagerDutyReceiver) -> None:
    with _client(receiver) as pd:
        dedup = pd.trigger("something", "opskit")
    assert len(dedup) == 32


def test_429_and_5xx_are_retried_a_bounded_number_of_times(receiver: PagerDutyReceiver) -> None:
    with _client(receiver, retries=2) as pd:
        receiver.fail_next(429, 502)
        before = receiver.requests
        assert pd.resolve("retry-ok") == "retry-ok"
        assert receiver.requests - before == 3
        receiver.fail_next(*([429] * 10))
        before = receiver.requests
        with pytest.raises(PagerDutyUnavailableError, match="429"):
            pd.resolve("retry-exhausted")
        # 1 try + 2 retries, then it gives up (the package default would retry 429 forever)
        assert receiver.requests - before == 3
    receiver.clear_script()  # leftover scripted failures must not leak into other tests


def test_invalid_event_is_not_retried(receiver: PagerDutyReceiver) -> None:
    with _client(receiver, key="not-a-valid-key-of-32-characters!") as pd:
        before = receiver.requests
        with pytest.raises(PagerDutyRejectedError, match="routing_key"):
            pd.resolve("x")
        assert receiver.requests - before == 1


def test_unreachable_pagerduty_is_a_clean_error() -> None:
    pd = PagerDutyEvents(PagerDutySettings(routing_key(), "https://127.0.0.1:9", None,
                                           timeout=2, max_retries=1, backoff=0.01))
    with pytest.raises(PagerDutyUnavailableError, match="cannot reach"):
        pd.resolve("x")


def test_page_cli_dry_run_sends_nothing(receiver: PagerDutyReceiver, tmp_path: Path) -> None:
    keyf = tmp_path / "key"
    keyf.write_text(routing_key())
    before = receiver.requests
    r = run_cli("page", "trigger", "--summary", "manual page", "--routing-key-file", str(keyf),
                "--events-url", receiver.url, "--ca-file", str(receiver.ca_file),
                "--detail", "group=billing-agg", "--link", "https://rb/x.md")
    assert r.code == 0, r.err
    shown = json.loads(r.out)
    assert shown["payload"]["custom_details"] == {"group": "billing-agg"}
    assert "dry run" in r.err
    assert receiver.requests == before


def test_page_cli_execute_trigger_and_resolve(receiver: PagerDutyReceiver, tmp_path: Path) -> None:
    key = routing_key()
    keyf = tmp_path / "key"
    keyf.write_text(key)
    common = ["--routing-key-file", str(keyf), "--events-url", receiver.url,
              "--ca-file", str(receiver.ca_file)]
    r = run_cli("page", "trigger", "--summary", "manual page", "--severity", "warning",
                "--dedup-key", "manual-1", *common, "--execute")
    assert r.code == 0, r.err
    assert "dedup_key=manual-1" in r.out
    r = run_cli("page", "resolve", "--dedup-key", "manual-1", *common, "--execute")
    assert r.code == 0, r.err
    mine = [e for e in receiver.events if e["routing_key"] == key]
    assert [(e["event_action"], e["dedup_key"]) for e in mine] == [
        ("trigger", "manual-1"), ("resolve", "manual-1")]
    assert mine[0]["payload"]["severity"] == "warning"


def test_page_cli_bad_input_is_one_line_with_exit_code(tmp_path: Path) -> None:
    keyf = tmp_path / "key"
    keyf.write_text("short")
    r = run_cli("page", "resolve", "--dedup-key", "x", "--routing-key-file", str(keyf))
    assert r.code == 2 and r.err.startswith("opskit: error:") and "32" in r.err
    assert len(r.err.strip().splitlines()) == 1
    r = run_cli("page", "resolve", "--dedup-key", "x", "--routing-key-file", str(tmp_path / "nope"))
    assert r.code == 4
    keyf.write_text(routing_key())
    r = run_cli("page", "trigger", "--summary", "s", "--severity", "fatal",
                "--routing-key-file", str(keyf))
    assert r.code == 2 and "severity" in r.err
    r = run_cli("page", "resolve", "--dedup-key", "x", "--routing-key-file", str(keyf),
                "--events-url", "https://127.0.0.1:9", "--max-retries", "0", "--execute")
    assert r.code == 3 and "cannot reach" in r.err
