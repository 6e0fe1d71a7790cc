"""``opskit throughput``: messages/s and bytes/s in per topic, messages/s consumed per group.

Two readings ``--interval`` apart: log end offsets (messages in), committed
offsets (messages consumed), and partition sizes from DescribeLogDirs (bytes
in; reported as unavailable when the broker or client cannot answer). Rates
are deltas over the measured time between the two readings.
"""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.files.config_file import resolve_connection
from opskit.adapters.http.streamnest import is_http_bootstrap
from opskit.adapters.kafka.admin.client import ClusterMeta
from opskit.adapters.kafka.kafka_python import quiet_kafka_python
from opskit.adapters.kafka.log_dirs import PartitionSizes
from opskit.adapters.kafka.reader import ClusterReader, CommitsRead, open_reader
from opskit.cli import streamnest
from opskit.cli.common import (
    STATE,
    BootstrapOpt,
    ContextOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    connect,
    emit,
    fmt_int,
    stderr,
)
from opskit.cli.validate import HOUR, parse_duration_option
from opskit.core.models import TopicPartition
from opskit.errors import (
    IncompleteError,
    InconsistentStateError,
    NotFoundError,
    UnsupportedError,
)

#: replaced in tests to act between the two readings
_sleep = time.sleep


@dataclass
class Reading:
    at: float  # epoch seconds, when the log end offsets were read
    log_end: dict[TopicPartition, int]
    committed: dict[str, dict[TopicPartition, int]]
    sizes: PartitionSizes
    #: partitions whose log end could not be read, and why (their rates are unknown)
    unread: dict[TopicPartition, str] = field(default_factory=dict)
    #: groups left out: the principal may not read their commits (no Describe ACL)
    unauthorised: frozenset[str] = frozenset()


def _read(r: ClusterReader, tps: list[TopicPartition], groups: list[str],
          topics: list[str], md: ClusterMeta, leaders: dict[TopicPartition, int]) -> Reading:
    got = r.committed_offsets(groups, tps) if groups else CommitsRead()
    at = time.time()
    offs = r.log_offsets(tps, md)
    # every partition's log end cross-checked (the rates act on it), not only suspects
    checks = r.settle_log_ends(offs.offsets, list(offs.offsets), md)
    bad = sorted(tp for tp, v in checks.items() if v.log_end is None)
    if bad:
        raise InconsistentStateError(
            f"the broker's answers about the log end of {bad[0]} contradict each other "
            f"({checks[bad[0]].detail}): message rates cannot be measured")
    sizes = r.partition_sizes(topics, leaders)
    return Reading(at, {tp: o.log_end for tp, o in offs.offsets.items()}, got.committed, sizes,
                   dict(offs.errors), got.unauthorised)


@dataclass
class Measured:
    """What ``throughput`` read and computed (:func:`read_throughput`)."""

    data: dict[str, Any]
    #: groups left out of the rates: the principal may not read their commits
    hidden: list[str]
    #: why the consumed rates are unknown (the group list could not be read)
    groups_note: str | None


def read_throughput(r: ClusterReader, topic: list[str] | None, group: list[str] | None,
                    interval_s: float) -> Measured:
    """Two readings ``interval_s`` apart through the session ``r``, and their rates."""
    md: ClusterMeta = r.metadata(protocol_first=False)  # librdkafka's view, as always
    if topic:
        for t in topic:
            if t not in md.topics:
                raise NotFoundError(f"unknown topic {t!r}")
        topics = sorted(set(topic))
    else:
        topics = sorted(t for t in md.topics if not t.startswith("__"))
    groups_note: str | None = None
    if group:
        groups = sorted(set(group))
    else:
        try:
            groups = r.group_ids(md)
        except UnsupportedError as e:  # e.g. a gateway without ListGroups: topics still count
            groups, groups_note = [], f"consumed rates unknown: {e}"
    tps = [TopicPartition(t, p.partition) for t in topics for p in md.topics[t]]
    leaders = {TopicPartition(t, p.partition): p.leader for t in topics for p in md.topics[t]}
    first = _read(r, tps, groups, topics, md, leaders)
    _sleep(max(0.0, interval_s - (time.time() - first.at)))
    second = _read(r, tps, groups, topics, md, leaders)
    data = measure(first, second, topics)
    data["groups_note"] = groups_note
    return Measured(data, sorted(first.unauthorised | second.unauthorised), groups_note)


def measure(first: Reading, second: Reading, topics: list[str]) -> dict[str, Any]:
    """Rates between two readings (no I/O)."""
    dt = second.at - first.at
    topic_rows = []
    for t in topics:
        tps = [tp for tp in second.log_end if tp.topic == t and tp in first.log_end]
        unread = sorted(tp for tp in {**first.unread, **second.unread} if tp.topic == t)
        msgs: int | None = sum(max(0, second.log_end[tp] - first.log_end[tp]) for tp in tps)
        if unread:  # a partition whose log end is unknown: the topic's count is unknown, not 0
            msgs = None
        row: dict[str, Any] = {
            "topic": t, "partitions": len(tps), "messages": msgs,
            "messages_per_second": msgs / dt if msgs is not None and dt > 0 else None,
            "bytes": None, "bytes_per_second": None, "bytes_note": None,
            "log_end_unread": len(unread),
            "log_end_note": None if not unread else (
                f"log end not read on {len(unread)} partition(s), e.g. {unread[0]}: "
                f"{second.unread.get(unread[0]) or first.unread[unread[0]]}"),
        }
        s1, s2 = first.sizes, second.sizes
        if s1.unavailable or s2.unavailable:
            row["bytes_note"] = s2.unavailable or s1.unavailable
        elif not all(tp in s1.sizes and tp in s2.sizes for tp in tps):
            row["bytes_note"] = "no size for some partitions"
        else:
            deltas = [s2.sizes[tp] - s1.sizes[tp] for tp in tps]
            if any(d < 0 for d in deltas):
                row["bytes_note"] = "a partition shrank (retention deleted segments): no byte rate"
            else:
                row["bytes"] = sum(deltas)
                row["bytes_per_second"] = sum(deltas) / dt if dt > 0 else None
        topic_rows.append(row)
    group_rows = []
    for g in sorted(second.committed):
        per_topic: dict[str, int] = {}
        rewound = False
        c1, c2 = first.committed.get(g, {}), second.committed[g]
        for tp, off in c2.items():
            if tp.topic not in topics or tp not in c1:
                continue
            d = off - c1[tp]
            if d < 0:
                rewound = True
            per_topic[tp.topic] = per_topic.get(tp.topic, 0) + max(0, d)
        if not per_topic:
            continue
        for t, n in sorted(per_topic.items()):
            group_rows.append({
                "group": g, "topic": t, "messages": n,
                "messages_per_second": n / dt if dt > 0 else None,
                "rewound": rewound,
            })
    return {"interval_seconds": dt, "topics": topic_rows, "groups": group_rows}


def throughput(
    interval: Annotated[str, typer.Option("--interval", help="time between the two readings, e.g. 10s (0.1s to 1h)")] = "10s",
    topic: Annotated[list[str] | None, typer.Option("--topic", "-t", help="only these topics (repeatable; default all but internal)")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="only these groups (repeatable; default all)")] = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Messages/s and bytes/s written per topic, messages/s consumed per group and topic."""
    interval_s = parse_duration_option(interval, "--interval", HOUR, minimum=0.1)
    target = resolve_connection(bootstrap_server, context, allow_http=True)
    if is_http_bootstrap(target.bootstrap):  # StreamNest: counters per broker (cli/streamnest.py)
        return streamnest.throughput(target, interval_s, topic, group, output, timeout, _sleep)
    quiet_kafka_python(STATE.debug)  # DescribeLogDirs may fall back to kafka-python
    with connect(bootstrap_server, context, timeout) as admin, \
            closing(open_reader(admin)) as r:
        admin.skip_unauthorised_groups = True  # not describable: left out, with a note below
        got = read_throughput(r, topic, group, interval_s)
    data, hidden, groups_note = got.data, got.hidden, got.groups_note
    emit(data, output, lambda c: render(c, data))
    if hidden:
        stderr().print(f"note: left out {len(hidden)} group(s) {r.principal} may not "
                       f"describe (no Describe ACL): {', '.join(hidden[:5])}", highlight=False)
    unread = [r for r in data["topics"] if r["log_end_unread"]]
    if unread:  # the rows are printed; exit 3 says some are unknown, never 0 messages
        raise IncompleteError(
            f"throughput of {len(unread)} topic(s) unknown: {unread[0]['log_end_note']}")
    if groups_note is not None:  # the topics' rates are printed; exit 3 says the rest is not
        raise UnsupportedError(groups_note)
    return 0


def _rate(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v:,.1f} {unit}"


def render(console: Console, data: dict[str, Any]) -> None:
    console.print(f"over {data['interval_seconds']:.1f}s")
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("TOPIC", "PARTITIONS", "MESSAGES", "MSG/S IN", "BYTES/S IN", "NOTE"):
        t.add_column(col, justify="left" if col in ("TOPIC", "NOTE") else "right")
    for r in data["topics"]:
        t.add_row(r["topic"], str(r["partitions"]),
                  "unknown" if r["messages"] is None else fmt_int(r["messages"]),
                  _rate(r["messages_per_second"], "msg/s"), _rate(r["bytes_per_second"], "B/s"),
                  "; ".join(n for n in (r.get("log_end_note"), r["bytes_note"]) if n))
    console.print(t if data["topics"] else "no topics")
    if data["groups"]:
        console.print()
        g = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("GROUP", "TOPIC", "CONSUMED", "MSG/S OUT", "NOTE"):
            g.add_column(col, justify="right" if col in ("CONSUMED", "MSG/S OUT") else "left")
        for r in data["groups"]:
            g.add_row(r["group"], r["topic"], fmt_int(r["messages"]),
                      _rate(r["messages_per_second"], "msg/s"),
                      "offset went back" if r["rewound"] else "")
        console.print(g)
    if data.get("groups_note"):
        console.print(f"note: {data['groups_note']}")
