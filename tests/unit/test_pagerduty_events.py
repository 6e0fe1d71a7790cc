"""Event building and routing-key validation for PagerDuty (no network)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from opskit.adapters.paging.pagerduty import SUMMARY_MAX, build_event, read_routing_key
from opskit.errors import ConfigError, InvalidInputError, NotFoundError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pd_receiver import validate_event

KEY = "0123456789abcdef0123456789abcdef"


def test_trigger_event_is_valid_for_pagerduty() -> None:
    ev = build_event("trigger", "k1", "lag high", "opskit", "warning", {"lag": 5},
                     [{"href": "https://rb/x.md", "text": "runbook"}])
    assert ev == {"event_action": "trigger", "dedup_key": "k1",
                  "payload": {"summary": "lag high", "source": "opskit", "severity": "warning",
                              "custom_details": {"lag": 5}},
                  "links": [{"href": "https://rb/x.md", "text": "runbook"}]}
    assert validate_event({**ev, "routing_key": KEY}) == []


def test_long_summary_is_cut_to_pagerduty_limit() -> None:
    ev = build_event("trigger", None, "x" * 5000, "opskit")
    assert len(ev["payload"]["summary"]) == SUMMARY_MAX
    assert validate_event({**ev, "routing_key": KEY}) == []


@pytest.mark.parametrize("args, needle", [
    (("explode", "k"), "event action"),
    (("resolve", None), "dedup key"),
    (("trigger", None, None, "src"), "summary"),
    (("trigger", None, "s", None), "source"),
    (("trigger", None, "s", "src", "fatal"), "severity"),
    (("trigger", "k" * 256, "s", "src"), "dedup key"),
])
def test_invalid_events_are_refused_before_sending(args: tuple, needle: str) -> None:
    with pytest.raises(InvalidInputError, match=needle):
        build_event(*args)


def test_receiver_applies_pagerduty_rules() -> None:
    assert validate_event({"routing_key": "short", "event_action": "resolve", "dedup_key": "k"})
    assert validate_event({"routing_key": KEY, "event_action": "resolve"})
    assert validate_event({"routing_key": KEY, "event_action": "trigger",
                           "payload": {"summary": "s", "source": "x", "severity": "bad"}})
    assert validate_event({"routing_key": KEY, "event_action": "trigger",
                           "payload": {"summary": "s" * 1025, "source": "x",
                                       "severity": "info"}})
    assert validate_event({"routing_key": KEY, "event_action": "resolve", "dedup_key": "k"}) == []


def test_routing_key_file(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text(KEY + "\n")
    assert read_routing_key(f) == KEY
    f.write_text("too-short")
    with pytest.raises(ConfigError, match="32"):
        read_routing_key(f)
    with pytest.raises(NotFoundError):
        read_routing_key(tmp_path / "missing")
