"""``opskit snapshot``: everything on-call needs for a hand-off or a post-mortem, in one file.

Cluster (id, controller, brokers), every topic's partitions with leader,
replicas and ISR (under-replicated and offline flagged), and every consumer
group with members, assignments and lag in messages and in time.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from opskit.adapters.files.safe_write import check_writable_target, write_file
from opskit.adapters.kafka.admin.client import ClusterMeta
from opskit.adapters.kafka.reader import ClusterReader, open_reader
from opskit.adapters.lag.sampler import collect_timed_lag, judge_invisible_groups
from opskit.cli.common import BootstrapOpt, ContextOpt, TimeoutOpt, connect, load_config, stderr
from opskit.cli.lag import fmt_seconds
from opskit.core.models import GroupDescription, LagThresholds
from opskit.errors import IncompleteError, UnsupportedError


class SnapshotFormat(str, Enum):
    json = "json"
    markdown = "markdown"


def _cluster(md: ClusterMeta, bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap": bootstrap,
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port} for b in md.brokers],
    }


def _topics(md: ClusterMeta) -> list[dict[str, Any]]:
    out = []
    for name in sorted(md.topics):
        parts = []
        for p in md.topics[name]:
            parts.append({
                "partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
                "replicas": list(p.replicas), "isr": list(p.isr),
                "under_replicated": len(p.isr) < len(p.replicas),
                "offline": p.leader < 0,
                "leader_is_preferred": bool(p.replicas) and p.leader == p.replicas[0],
            })
        out.append({
            "topic": name, "internal": name.startswith("__"), "partitions": parts,
            "replication_factor": max((len(p.replicas) for p in md.topics[name]), default=0),
            "under_replicated_partitions": sum(1 for p in parts if p["under_replicated"]),
            "offline_partitions": sum(1 for p in parts if p["offline"]),
        })
    return out


def _members(d: GroupDescription) -> list[dict[str, Any]]:
    return [
        {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
         "assignment": [str(tp) for tp in m.assignment]}
        for m in d.members
    ]


def _no_lag() -> dict[str, Any]:
    return {"groups": [], "severity": "UNKNOWN", "offset_errors": {}, "notes": []}


@dataclass
class State:
    """What ``snapshot`` read (:func:`read_state`)."""

    md: ClusterMeta
    bootstrap: str
    lag: dict[str, Any] = field(default_factory=_no_lag)
    descs: dict[str, GroupDescription] = field(default_factory=dict)
    #: why the groups are not in the document (None: they are)
    groups_missing: UnsupportedError | None = None


def read_state(r: ClusterReader, with_time: bool,
               thresholds: Callable[[str], LagThresholds]) -> State:
    """The cluster, the topics and the groups with their lag, through the session ``r``."""
    st = State(r.metadata(protocol_first=False), r.bootstrap)  # librdkafka's view, as always
    try:
        r.require("list_groups", "listing consumer groups")
    except UnsupportedError as e:  # e.g. the Hanzo gateway: the rest is still worth having
        st.groups_missing = e
        return st
    try:
        timed = collect_timed_lag(None, with_time, None, None, thresholds, cluster=r)
        judge_invisible_groups(timed, r.principal, lambda: False, False,
                               r.unauthorised_groups())
        st.descs = r.describe_groups(g.group_id for g in timed.groups)
        st.lag = timed.to_dict()
    except UnsupportedError as e:
        # the broker would not list or describe the groups: not "no groups"; the
        # rest of the document still stands, the exit (3) says it is partial
        st.groups_missing = e
        st.lag, st.descs = _no_lag(), {}
    return st


def snapshot(
    output: Annotated[SnapshotFormat, typer.Option("--output", "-o", help="json or markdown")] = SnapshotFormat.markdown,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="write to this file instead of stdout", show_default=False)] = None,
    no_time: Annotated[bool, typer.Option("--no-time", help="skip reading record timestamps (no lag in time)")] = False,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """One document of the cluster's state: brokers, controller, partitions, groups, lag."""
    if file is not None:  # a bad target is refused before any work
        check_writable_target(file, "snapshot")
    cfg = load_config()
    taken = time.time()
    with connect(bootstrap_server, context, timeout) as admin, \
            closing(open_reader(admin)) as r:
        admin.skip_unauthorised_groups = True  # listed, not describable: left out with a note
        st = read_state(r, not no_time, cfg.lag_thresholds)
    md, bootstrap, lag, descs, groups_missing = (st.md, st.bootstrap, st.lag, st.descs,
                                                 st.groups_missing)
    for gd in lag["groups"]:
        d = descs.get(gd["group"])
        gd["members_detail"] = _members(d) if d is not None else []
        gd["coordinator"] = d.coordinator if d is not None else None
    data = {
        "taken_at": datetime.fromtimestamp(taken, UTC).isoformat(timespec="seconds"),
        "cluster": _cluster(md, bootstrap),
        "topics": _topics(md),
        "groups": lag["groups"],
        "lag_severity": lag["severity"],
        "offset_errors": lag["offset_errors"],
        "notes": lag["notes"],
        "groups_note": None if groups_missing is None else f"groups not included: {groups_missing}",
    }
    text = (json.dumps(data, indent=2, default=str) + "\n" if output is SnapshotFormat.json
            else markdown(data))
    for note in lag["notes"]:
        stderr().print(f"note: {note}", highlight=False)
    if file is not None:
        write_file(file, text, what="snapshot")
        stderr().print(f"snapshot written to {file}")
    else:
        sys.stdout.write(text)
    if groups_missing is not None:  # the document is written; exit 3 says it is partial
        raise UnsupportedError(f"snapshot without consumer groups: {groups_missing}")
    if lag["severity"] == "UNKNOWN":  # written, but some lag could not be read or verified
        unknown = [g["group"] for g in lag["groups"] if g.get("severity") == "UNKNOWN"]
        why = next(iter(lag["offset_errors"].items()), None)
        raise IncompleteError(
            f"snapshot written, lag severity UNKNOWN: {len(unknown)} group(s) with lag unknown "
            f"({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''})"
            + (f"; e.g. {why[0]}: {why[1]}" if why else ""))
    return 0


def _cell(v: Any) -> str:
    return "-" if v is None else str(v).replace("|", "\\|")


def markdown(data: dict[str, Any]) -> str:
    c = data["cluster"]
    lines = [
        f"# Kafka snapshot {data['taken_at']}",
        "",
        f"- bootstrap: `{c['bootstrap']}`",
        f"- cluster id: `{c['cluster_id']}`",
        f"- controller: {c['controller_id']}",
        f"- brokers: {len(c['brokers'])}",
        f"- lag severity: **{data['lag_severity']}**",
        *([f"- {data['groups_note']}"] if data.get("groups_note") else []),
        "",
        "## Brokers",
        "",
        "| id | host | port | controller |",
        "|---:|---|---:|---|",
    ]
    for b in c["brokers"]:
        ctl = "yes" if b["id"] == c["controller_id"] else ""
        lines.append(f"| {b['id']} | {b['host']} | {b['port']} | {ctl} |")
    lines += ["", "## Topics", "",
              "| topic | partitions | RF | under-replicated | offline |",
              "|---|---:|---:|---:|---:|"]
    for t in data["topics"]:
        lines.append(f"| {t['topic']} | {len(t['partitions'])} | {t['replication_factor']} | "
                     f"{t['under_replicated_partitions']} | {t['offline_partitions']} |")
    bad = [(t["topic"], p) for t in data["topics"] for p in t["partitions"]
           if p["under_replicated"] or p["offline"] or not p["leader_is_preferred"]]
    lines += ["", "## Partitions needing attention", ""]
    if not bad:
        lines.append("None: every partition has a leader, a full ISR and its preferred leader.")
    else:
        lines += ["| partition | leader | replicas | ISR | problem |", "|---|---:|---|---|---|"]
        for name, p in bad:
            probs = [k for k in ("offline", "under_replicated") if p[k]]
            if not p["leader_is_preferred"] and not p["offline"]:
                probs.append("leader not preferred")
            lines.append(f"| {name}:{p['partition']} | {_cell(p['leader'])} | {p['replicas']} | "
                         f"{p['isr']} | {', '.join(probs)} |")
    lines += ["", "## Consumer groups", ""]
    if data.get("groups_note"):
        note = str(data["groups_note"])
        lines.append(note[:1].upper() + note[1:])
    elif not data["groups"]:
        lines.append("No consumer groups.")
    for g in data["groups"]:
        summary = (
            f"state {g['state']}, {g['members']} member(s), coordinator {_cell(g['coordinator'])}, "
            f"total lag {g['total_lag']:,}, max lag time {fmt_seconds(g.get('max_lag_seconds'))}, "
            f"severity **{g['severity']}**"
        )
        lines += [f"### {g['group']}", "", summary, ""]
        if g["members_detail"]:
            lines += ["| member | client | host | assignment |", "|---|---|---|---|"]
            for m in g["members_detail"]:
                lines.append(f"| {_cell(m['member_id'])} | {_cell(m['client_id'])} | "
                             f"{_cell(m['host'])} | {', '.join(m['assignment']) or '-'} |")
            lines.append("")
        header = "| partition | committed | log start | log end | lag | lag time | retention left |"
        lines += [header + " notes |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        for p in g["partitions"]:
            notes = ", ".join(p["anomalies"])
            if p["records_lost"]:
                notes += f" ({p['records_lost']:,} records lost)"
            lt = fmt_seconds(p.get("lag_seconds"))
            if p.get("lag_time_confidence") == "lower_bound":
                lt = ">=" + lt
            lines.append(
                f"| {p['topic']}:{p['partition']} | {_cell(p['committed_offset'])} | "
                f"{_cell(p['log_start_offset'])} | {_cell(p['log_end_offset'])} | "
                f"{_cell(p['lag'])} | {lt} | {fmt_seconds(p.get('retention_time_left_seconds'))} | "
                f"{notes} |"
            )
        lines.append("")
    if data["offset_errors"]:
        lines += ["## Offset errors", ""]
        lines += [f"- {tp}: {e}" for tp, e in data["offset_errors"].items()]
    return "\n".join(lines) + "\n"
