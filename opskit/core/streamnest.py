"""StreamNest (an HTTP-only streaming broker): what opskit can honestly say about it (pure).

StreamNest has topics split into partitions, each partition owned by one broker
(no replication), an HTTP API (``/metadata``, ``/produce``, ``/consume``) and
two Prometheus counters per broker (``streamnest_messages_produced_total``,
``streamnest_messages_consumed_total``, counted by the partition's owner). It has
no consumer groups, no committed offsets and no Kafka protocol: consumer lag and
offset resets do not apply to it.

This module parses the brokers' answers and decides: health findings (every
broker answers ``/metadata``, the brokers agree on who owns what, every
partition's owner answers), throughput between two readings of the counters,
and the exporter's metric text. No I/O, no clock: the adapter
(:mod:`opskit.adapters.http.streamnest`) reads, this module judges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from opskit.core.models import Severity

PRODUCED = "streamnest_messages_produced_total"
CONSUMED = "streamnest_messages_consumed_total"

#: why the Kafka-only commands cannot apply (one line, shown as the error)
NOT_APPLICABLE = ("StreamNest has no consumer groups, no committed offsets and no Kafka "
                  "protocol; only `opskit health`, `opskit throughput` and `opskit exporter` "
                  "apply to it (docs/compat-notes.md)")

_ORDER = [Severity.OK, Severity.WARNING, Severity.UNKNOWN, Severity.CRITICAL]


def worst(severities: list[Severity]) -> Severity:
    """CRITICAL > UNKNOWN > WARNING > OK (a known outage beats an unknown)."""
    return max(severities, key=_ORDER.index) if severities else Severity.OK


class MalformedAnswer(ValueError):
    """A StreamNest endpoint answered something that is not what its API documents."""


# --------------------------------------------------------------------------- parsing


def parse_metadata(doc: Any) -> dict[str, tuple[str, ...]]:
    """``/metadata`` JSON -> ``{topic: (owner of partition 0, owner of 1, ...)}``.

    Raises MalformedAnswer when the document is not StreamNest's shape or a topic's
    partitions are not exactly 0..n-1 with one owner each."""
    if not isinstance(doc, dict) or not isinstance(doc.get("topic_partitions"), dict):
        raise MalformedAnswer("no topic_partitions mapping")
    out: dict[str, tuple[str, ...]] = {}
    for topic, meta in doc["topic_partitions"].items():
        parts = meta.get("partitions") if isinstance(meta, dict) else None
        if parts is None:
            parts = []
        if not isinstance(parts, list):
            raise MalformedAnswer(f"topic {topic!r}: partitions is not a list")
        owners: dict[int, str] = {}
        for p in parts:
            if (not isinstance(p, dict) or not isinstance(p.get("partition"), int)
                    or isinstance(p.get("partition"), bool) or not isinstance(p.get("broker"), str)
                    or not p["broker"]):
                raise MalformedAnswer(f"topic {topic!r}: a partition entry without partition/broker")
            if p["partition"] in owners:
                raise MalformedAnswer(f"topic {topic!r}: partition {p['partition']} listed twice")
            owners[p["partition"]] = p["broker"]
        if sorted(owners) != list(range(len(owners))):
            raise MalformedAnswer(f"topic {topic!r}: partitions are not numbered 0..{len(owners) - 1}")
        out[str(topic)] = tuple(owners[i] for i in range(len(owners)))
    return out


def parse_counters(text: str) -> dict[str, float]:
    """The two StreamNest counters from Prometheus text; MalformedAnswer if either is
    missing or not a finite, non-negative number."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        if name in (PRODUCED, CONSUMED):
            try:
                v = float(rest.split()[0])
            except (ValueError, IndexError):
                raise MalformedAnswer(f"{name}: not a number") from None
            if not math.isfinite(v) or v < 0:
                raise MalformedAnswer(f"{name}: {rest.strip()!r} is not a counter value")
            found[name] = v
    missing = [n for n in (PRODUCED, CONSUMED) if n not in found]
    if missing:
        raise MalformedAnswer(f"no {missing[0]} in /metrics")
    return found


# --------------------------------------------------------------------------- health


@dataclass(frozen=True)
class BrokerAnswer:
    """One broker's ``/metadata``: the parsed ownership, or why there is none."""

    address: str
    metadata: Mapping[str, tuple[str, ...]] | None
    error: str | None = None


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "severity": self.severity.value, "message": self.message}


@dataclass(frozen=True)
class StreamNestHealth:
    brokers: tuple[BrokerAnswer, ...]
    findings: tuple[Finding, ...]
    topics: int
    partitions: int
    unreachable_partitions: int
    expected_brokers: int | None = None

    @property
    def severity(self) -> Severity:
        return worst([f.severity for f in self.findings])

    @property
    def summary(self) -> str:
        up = sum(1 for b in self.brokers if b.metadata is not None)
        return (f"StreamNest {self.severity.value}: {up}/{len(self.brokers)} brokers answer, "
                f"{self.topics} topics, {self.partitions} partitions, "
                f"{self.unreachable_partitions} with an unreachable owner")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "streamnest",
            "severity": self.severity.value,
            "summary": self.summary,
            "brokers": [{"broker": b.address, "answers": b.metadata is not None,
                         "error": b.error} for b in self.brokers],
            "counts": {"brokers": len(self.brokers),
                       "brokers_answering": sum(1 for b in self.brokers if b.metadata is not None),
                       "brokers_expected": self.expected_brokers,
                       "topics": self.topics, "partitions": self.partitions,
                       "partitions_owner_unreachable": self.unreachable_partitions},
            "findings": [f.to_dict() for f in self.findings],
        }


def evaluate_health(answers: list[BrokerAnswer], same: Mapping[str, str],
                    expected_brokers: int | None = None) -> StreamNestHealth:
    """Judge a cluster from every known broker's ``/metadata``.

    ``answers`` holds one entry per distinct broker (the bootstrap endpoints and every
    partition owner named anywhere); ``same`` maps each address as written (``localhost:P``
    in ownership, ``127.0.0.1:P`` on the command line) to the key of its entry in ``answers``.
    """
    findings: list[Finding] = []
    by_key = {b.address: b for b in answers}
    down = [b for b in answers if b.metadata is None]
    if down:
        findings.append(Finding("brokers", Severity.CRITICAL,
                                f"{len(down)} of {len(answers)} brokers do not answer /metadata: "
                                + "; ".join(f"{b.address}: {b.error}" for b in down[:3])))
    else:
        findings.append(Finding("brokers", Severity.OK,
                                f"all {len(answers)} brokers answer /metadata"))
    if expected_brokers is not None:
        up = len(answers) - len(down)
        sev = Severity.OK if up >= expected_brokers else Severity.CRITICAL
        findings.append(Finding("expected_brokers", sev,
                                f"{up} brokers answering, {expected_brokers} expected"))
    views = [b for b in answers if b.metadata is not None]
    merged: dict[str, tuple[str, ...]] = {}
    disagree: list[str] = []
    for b in views:
        assert b.metadata is not None
        for topic, owners in b.metadata.items():
            canon = tuple(same.get(o, o) for o in owners)
            if topic not in merged:
                merged[topic] = canon
            elif merged[topic] != canon:
                disagree.append(topic)
    for b in views:  # a topic one broker lacks is a disagreement too (lost propagation)
        assert b.metadata is not None
        disagree += [t for t in merged if t not in b.metadata]
    disagree = sorted(set(disagree))
    if not views:
        findings.append(Finding("ownership", Severity.UNKNOWN,
                                "no broker answered: partition ownership unknown"))
    elif disagree:
        findings.append(Finding("ownership", Severity.WARNING,
                                f"brokers disagree on the owners of {len(disagree)} topic(s), "
                                f"e.g. {disagree[0]!r}: produce and consume through different "
                                "brokers may reach different partitions"))
    else:
        findings.append(Finding("ownership", Severity.OK,
                                f"{len(views)} brokers agree on the owners of {len(merged)} topics"))
    unreachable: dict[str, int] = {}
    n_parts = 0
    for owners in merged.values():
        for o in owners:
            n_parts += 1
            entry = by_key.get(o)
            if entry is None or entry.metadata is None:
                unreachable[o] = unreachable.get(o, 0) + 1
    n_unreach = sum(unreachable.values())
    if views:
        if n_unreach:
            worst_owner = max(unreachable, key=lambda k: unreachable[k])
            findings.append(Finding(
                "partition_owners", Severity.CRITICAL,
                f"{n_unreach} of {n_parts} partitions have an owner that does not answer "
                f"(no replication: they cannot be produced to or consumed), e.g. "
                f"{unreachable[worst_owner]} owned by {worst_owner}"))
        else:
            findings.append(Finding("partition_owners", Severity.OK,
                                    f"the owner of each of the {n_parts} partitions answers"))
    return StreamNestHealth(tuple(answers), tuple(findings), len(merged), n_parts, n_unreach,
                            expected_brokers)


# --------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class CounterReading:
    """Every broker's two counters at one time; ``errors`` for brokers that did not answer."""

    at: float
    counters: Mapping[str, Mapping[str, float]]
    errors: Mapping[str, str] = field(default_factory=dict)


def measure(first: CounterReading, second: CounterReading) -> dict[str, Any]:
    """Messages produced and consumed between two readings, per broker and in total.

    A broker that did not answer either reading, or whose counter went down (it
    restarted: StreamNest's counters live in memory), has unknown counts, and so has
    the total: never a smaller number passed off as the whole."""
    dt = second.at - first.at
    rows: list[dict[str, Any]] = []
    unknown: list[str] = []
    brokers = sorted(set(first.counters) | set(second.counters) | set(first.errors)
                     | set(second.errors))
    for b in brokers:
        c1, c2 = first.counters.get(b), second.counters.get(b)
        row: dict[str, Any] = {"broker": b, "produced": None, "consumed": None, "note": None}
        if c1 is None or c2 is None:
            row["note"] = f"not read: {second.errors.get(b) or first.errors.get(b) or 'no answer'}"
        elif c2[PRODUCED] < c1[PRODUCED] or c2[CONSUMED] < c1[CONSUMED]:
            row["note"] = "a counter went down (the broker restarted): no count for this interval"
        else:
            row["produced"] = int(c2[PRODUCED] - c1[PRODUCED])
            row["consumed"] = int(c2[CONSUMED] - c1[CONSUMED])
        if row["note"]:
            unknown.append(f"{b}: {row['note']}")
        rows.append(row)
    produced = None if unknown else sum(r["produced"] for r in rows)
    consumed = None if unknown else sum(r["consumed"] for r in rows)
    return {
        "kind": "streamnest",
        "interval_seconds": dt,
        "brokers": rows,
        "produced": produced,
        "consumed": consumed,
        "produced_per_second": produced / dt if produced is not None and dt > 0 else None,
        "consumed_per_second": consumed / dt if consumed is not None and dt > 0 else None,
        "note": ("StreamNest counts messages per broker (at each partition's owner), not per "
                 "topic or consumer: these are cluster totals"),
        "unknown": unknown,
    }


# --------------------------------------------------------------------------- exporter


def _esc(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_metrics(health: StreamNestHealth | None,
                   counters: Mapping[str, Mapping[str, float]],
                   counter_errors: Mapping[str, str], error: str | None,
                   collected_at: float | None, duration: float | None) -> str:
    """The exporter's Prometheus text for one collection.

    ``opskit_streamnest_up`` is 1 only when every broker answered both ``/metadata``
    and ``/metrics`` in this collection (the data is current and complete)."""
    out: list[str] = []

    def family(name: str, kind: str, help_: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for labels, v in samples:
            out.append(f"{name}{labels} {v:g}" if v == int(v) else f"{name}{labels} {v!r}")

    complete = (health is not None and error is None and not counter_errors
                and all(b.metadata is not None for b in health.brokers))
    family("opskit_streamnest_up", "gauge",
           "1 if every StreamNest broker answered /metadata and /metrics in the last collection",
           [("", 1.0 if complete else 0.0)])
    if health is not None:
        family("opskit_streamnest_broker_up", "gauge",
               "1 if the broker answered /metadata in the last collection",
               [(f'{{broker="{_esc(b.address)}"}}', 1.0 if b.metadata is not None else 0.0)
                for b in health.brokers])
        family("opskit_streamnest_topics", "gauge", "topics the brokers know",
               [("", float(health.topics))])
        family("opskit_streamnest_partitions", "gauge", "partitions of all topics",
               [("", float(health.partitions))])
        family("opskit_streamnest_partitions_owner_unreachable", "gauge",
               "partitions whose owning broker did not answer (no replication: unavailable)",
               [("", float(health.unreachable_partitions))])
    for metric, help_ in ((PRODUCED, "messages produced, counted by each partition's owner"),
                          (CONSUMED, "messages consumed, counted by each partition's owner")):
        name = "opskit_" + metric
        family(name, "counter", f"StreamNest's {metric} per broker ({help_})",
               [(f'{{broker="{_esc(b)}"}}', c[metric]) for b, c in sorted(counters.items())])
    if collected_at is not None:
        family("opskit_streamnest_last_collection_timestamp_seconds", "gauge",
               "when the last collection finished", [("", collected_at)])
    if duration is not None:
        family("opskit_streamnest_collection_duration_seconds", "gauge",
               "how long the last collection took", [("", duration)])
    return "\n".join(out) + "\n"
