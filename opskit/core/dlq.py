"""Dead-letter paging (HIP-30's ``dead-letter-monitor``), as pure decisions.

One PagerDuty incident per source topic, keyed by a stable dedup key:

* records arriving for a topic open its incident (a ``trigger``) and, while it
  stays open, more records add their count and a fresh sample with another
  ``trigger`` on the same key, at most once per ``update_interval`` (PagerDuty
  allows about 120 events a minute per key; a burst must not exhaust it);
* a topic quiet for ``quiet_period`` resolves its incident.

Time is a parameter; the runner (``opskit dlq watch``) sends the actions, then
persists the state and commits the consumed offsets, so a crash re-sends at
worst the last page (same dedup key) and never loses a dead letter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from opskit.errors import InvalidInputError

UNKNOWN_SOURCE = "unknown"
SUMMARY_MAX = 1024


@dataclass(frozen=True)
class DeadLetter:
    """One record of the dead-letter topic, reduced to what a page needs."""

    source_topic: str
    partition: int
    offset: int
    timestamp_ms: int | None = None
    event_id: str | None = None
    event_type: str | None = None
    reason: str | None = None
    producer: str | None = None

    def sample(self) -> dict[str, Any]:
        return {k: v for k, v in {
            "event_id": self.event_id, "type": self.event_type, "reason": self.reason,
            "failed_in": self.producer, "partition": self.partition, "offset": self.offset,
            "timestamp": _iso(self.timestamp_ms / 1000) if self.timestamp_ms else None,
        }.items() if v is not None}


def parse_dead_letter(key: bytes | None, value: bytes | None, partition: int, offset: int,
                      timestamp_ms: int | None = None) -> DeadLetter:
    """A HIP-30 dead letter: an envelope whose ``data.source_topic`` names the failed topic
    (the record key is the source topic too). Anything unparseable is still counted."""
    key_text = key.decode("utf-8", "replace") if key else None
    env: Any = None
    if value:
        try:
            env = json.loads(value)
        except (ValueError, UnicodeDecodeError):
            env = None
    if not isinstance(env, dict):
        return DeadLetter(key_text or UNKNOWN_SOURCE, partition, offset, timestamp_ms,
                          reason="dead letter is not a JSON envelope")
    raw = env.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
    source = data.get("source_topic") or key_text or UNKNOWN_SOURCE
    return DeadLetter(
        source_topic=str(source), partition=partition, offset=offset, timestamp_ms=timestamp_ms,
        event_id=_opt_str(env.get("id")), event_type=_opt_str(env.get("type")),
        reason=_opt_str(data.get("reason")), producer=_opt_str(env.get("source")))


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)[:300]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class DlqPolicy:
    cluster: str = "kafka"
    quiet_period: float = 900.0
    update_interval: float = 300.0
    severity: str = "error"
    runbook_url: str | None = None

    def dedup_key(self, source_topic: str) -> str:
        return f"opskit-dlq/{self.cluster}/{source_topic}"


@dataclass(frozen=True)
class Incident:
    source_topic: str
    opened_at: float
    last_seen: float
    total: int
    unsent: int
    last_paged: float | None = None
    sample: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"source_topic": self.source_topic, "opened_at": self.opened_at,
                "last_seen": self.last_seen, "total": self.total, "unsent": self.unsent,
                "last_paged": self.last_paged, "sample": dict(self.sample)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Incident:
        try:
            return cls(str(d["source_topic"]), float(d["opened_at"]), float(d["last_seen"]),
                       int(d["total"]), int(d["unsent"]),
                       None if d.get("last_paged") is None else float(d["last_paged"]),
                       dict(d.get("sample") or {}))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"dead-letter state: bad incident entry ({e})") from e


@dataclass(frozen=True)
class DlqState:
    incidents: dict[str, Incident] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1,
                "incidents": [i.to_dict() for _, i in sorted(self.incidents.items())]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DlqState:
        if not isinstance(d, dict) or d.get("version") != 1 or not isinstance(
                d.get("incidents"), list):
            raise InvalidInputError("dead-letter state: not a version 1 state document")
        incs = [Incident.from_dict(x) for x in d["incidents"]]
        return cls({i.source_topic: i for i in incs})


@dataclass(frozen=True)
class PageAction:
    action: str  # "trigger" | "resolve"
    dedup_key: str
    source_topic: str
    summary: str | None = None
    severity: str | None = None
    details: dict[str, Any] | None = None
    links: tuple[dict[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"action": self.action, "dedup_key": self.dedup_key,
                             "source_topic": self.source_topic}
        if self.action == "trigger":
            d.update(summary=self.summary, severity=self.severity, details=self.details,
                     links=list(self.links))
        return d


def observe(state: DlqState, letters: list[DeadLetter], now: float) -> DlqState:
    """Count new dead letters into their topic's incident (opening it if needed)."""
    incs = dict(state.incidents)
    for dl in letters:
        cur = incs.get(dl.source_topic)
        if cur is None:
            incs[dl.source_topic] = Incident(dl.source_topic, opened_at=now, last_seen=now,
                                             total=1, unsent=1, sample=dl.sample())
        else:
            incs[dl.source_topic] = replace(cur, last_seen=now, total=cur.total + 1,
                                            unsent=cur.unsent + 1, sample=dl.sample())
    return DlqState(incs)


def plan_pages(state: DlqState, policy: DlqPolicy,
               now: float) -> tuple[DlqState, list[PageAction]]:
    """Pages due now, and the state once they are sent."""
    incs = dict(state.incidents)
    actions: list[PageAction] = []
    links = ({"href": policy.runbook_url, "text": "runbook"},) if policy.runbook_url else ()
    for topic in sorted(incs):
        inc = incs[topic]
        key = policy.dedup_key(topic)
        due = inc.last_paged is None or now - inc.last_paged >= policy.update_interval
        if inc.unsent > 0 and due:
            summary = (f"{inc.total} dead letter{'s' if inc.total != 1 else ''} from {topic} "
                       f"on {policy.cluster}")
            reason = inc.sample.get("reason")
            if reason:
                summary += f": {reason}"
            actions.append(PageAction(
                "trigger", key, topic, summary[:SUMMARY_MAX], policy.severity,
                {"source_topic": topic, "cluster": policy.cluster, "dead_letters": inc.total,
                 "new_since_last_page": inc.unsent, "first_seen": _iso(inc.opened_at),
                 "last_seen": _iso(inc.last_seen), "sample": dict(inc.sample)}, links))
            incs[topic] = replace(inc, unsent=0, last_paged=now)
        elif inc.unsent == 0 and now - inc.last_seen >= policy.quiet_period:
            actions.append(PageAction("resolve", key, topic))
            del incs[topic]
    return DlqState(incs), actions
