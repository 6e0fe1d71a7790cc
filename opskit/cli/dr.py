"""``opskit dr snapshot|restore``: record a cluster's topics, ACLs and group
positions, and recreate them on another cluster (positions translated by
record timestamp; see ``opskit.core.dr``).

Exit codes: 0 done or dry run shown, 2 malformed snapshot, 3 unreachable,
4 snapshot file missing, 5 a group is active on the target (its offsets are not
set; everything else is), 6 Kafka error.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from opskit.adapters.acls.admin import DrAdmin, NoAuthorizerError, save_acl_backup
from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.files.safe_write import check_writable_target, write_file
from opskit.adapters.offsets.admin import save_backup
from opskit.cli import exits
from opskit.cli.common import (
    ApplyPlanOpt,
    BackupDirOpt,
    BootstrapOpt,
    ContextOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    YesOpt,
    connect_as,
    emit,
    stderr,
)
from opskit.core.dr import (
    DrPlan,
    GroupPosition,
    Snapshot,
    TargetTopic,
    TopicSnapshot,
    group_partitions,
    is_internal_topic,
    plan_dr_restore,
    timestamp_lookups,
)
from opskit.core.models import TopicPartition
from opskit.core.offset_reset.backup import OffsetsBackup
from opskit.errors import InvalidInputError, NotAuthorisedError, NotFoundError, UsageError

app = typer.Typer(help="Disaster recovery: snapshot topics, ACLs and group positions; restore "
                       "them on another cluster.", no_args_is_help=True)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _admin(bootstrap: str | None, context: str | None, timeout: float) -> DrAdmin:
    # kafka-python may confirm an empty DescribeAcls answer
    return connect_as(DrAdmin, bootstrap, context, timeout, kafka_python=True)


def take_snapshot(admin: DrAdmin, now_ms: int, only_topics: list[str] | None = None,
                  only_groups: list[str] | None = None) -> Snapshot:
    md = admin.metadata()
    names = sorted(t for t in md.topics if not is_internal_topic(t)
                   and (not only_topics or t in only_topics))
    missing = sorted(set(only_topics or ()) - set(md.topics))
    if missing:
        raise NotFoundError(f"topic {missing[0]!r} does not exist")
    overrides = admin.topic_overrides(names)
    topics = tuple(
        TopicSnapshot(t, len(md.topics[t]),
                      len(md.topics[t][0].replicas) if md.topics[t] else 0, overrides.get(t, {}))
        for t in names
    )
    acls, note = admin.acls_or_note()
    group_ids = sorted(only_groups or admin.list_groups())
    committed = admin.committed_offsets(group_ids) if group_ids else {}
    kept = set(names)
    committed = {g: {tp: o for tp, o in offs.items() if tp.topic in kept}
                 for g, offs in committed.items()}
    tps = {tp for offs in committed.values() for tp in offs}
    logs = admin.log_offsets(tps).offsets
    groups: dict[str, tuple[GroupPosition, ...]] = {}
    for gid in group_ids:
        offs = {tp: o for tp, o in committed[gid].items() if tp in logs}
        peek = {tp: max(o, logs[tp].log_start) for tp, o in offs.items() if o < logs[tp].log_end}
        stamps = admin.record_timestamps(peek) if peek else {}
        denied = sorted({tp.topic for tp in peek if stamps.get(tp) is None} & admin.read_denied)
        if denied:
            # None would mean "at the log end": the restore would skip the unread records
            raise NotAuthorisedError(
                f"dr snapshot: {admin.conn.principal} has no Read ACL on topic {denied[0]!r}, so "
                f"the timestamp of group {gid}'s next record cannot be read and its position "
                "could not be restored; nothing written")
        groups[gid] = tuple(GroupPosition(tp, o, stamps.get(tp)) for tp, o in sorted(offs.items()))
    return Snapshot(now_ms, md.cluster_id, topics, groups,
                    None if acls is None else tuple(a.to_dict() for a in acls), note)


def read_target(admin: DrAdmin, snap: Snapshot) -> DrPlan:
    md = admin.metadata()
    wanted = [t.name for t in snap.topics if t.name in md.topics]
    overrides = admin.topic_overrides(wanted)
    target_topics = {t: TargetTopic(len(md.topics[t]), overrides.get(t, {})) for t in wanted}
    groups = admin.describe_groups_settled(snap.groups) if snap.groups else {}

    def exists(tp: TopicPartition) -> bool:
        return tp.topic in md.topics and tp.partition < len(md.topics[tp.topic])

    logs = admin.log_offsets([tp for tp in group_partitions(snap) if exists(tp)]).offsets
    by_time: dict[tuple[TopicPartition, int], int | None] = {}
    for ts, tps in timestamp_lookups(snap).items():
        present = [tp for tp in tps if tp in logs]
        if present:
            for tp, off in admin.offsets_for_times(present, ts).items():
                by_time[(tp, ts)] = off
    target_acls = None
    if snap.acls:
        try:
            target_acls = admin.acls()
        except NoAuthorizerError:
            target_acls = None
    return plan_dr_restore(snap, target_topics, len(md.brokers),
                           {g: d.state for g, d in groups.items()}, by_time,
                           {tp: lo.log_end for tp, lo in logs.items()}, target_acls)


def snapshot(
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="only these topics (repeatable; default: all but internal)")] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", "-g", help="only these groups (repeatable; default: all)")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="write the snapshot here "
                                              "(default: stdout)", show_default=False)] = None,
    output: OutputOpt = Output.json,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Snapshot topics (partitions, topic config overrides), ACLs and every group's
    committed offsets with the timestamp of the record at each."""
    if file is not None:  # a bad target is refused before any work
        check_writable_target(file, "snapshot")
    elif output is Output.table:
        raise UsageError("a snapshot is data: use -o json or -o yaml (or --file)")
    with _admin(bootstrap_server, context, timeout) as admin:
        snap = take_snapshot(admin, _now_ms(), topic, group)
    data = snap.to_dict()
    if file is not None:
        write_file(file, json.dumps(data, indent=2) + "\n", what="snapshot")
    if snap.acls_note:  # after the write: a failure to write is one error line
        stderr().print(snap.acls_note)
    if file is not None:
        stderr().print(f"snapshot of {len(snap.topics)} topics and {len(snap.groups)} groups "
                       f"written to {file}")
        return exits.OK
    emit(data, output, lambda c: None)
    return exits.OK


def _render(console: Console, plan: DrPlan) -> None:
    for t in plan.create:
        console.print(f"create topic {escape(t.name)} partitions={t.partitions} "
                      f"rf={t.replication_factor} configs={dict(t.configs)}")
    for name, n in plan.add_partitions.items():
        console.print(f"add partitions to {escape(name)}: {n}")
    for name, cfg in plan.set_configs.items():
        console.print(f"set configs of {escape(name)}: {dict(cfg)}")
    for a in plan.create_acls:
        console.print(f"create ACL {escape(a.describe())}")
    for g in plan.groups:
        if g.refusal:
            console.print(f"[red]refused[/red] {escape(g.refusal)}")
            continue
        offs = ", ".join(f"{tp}={'after creation' if o is None else o}"
                         for tp, o in sorted(g.offsets.items()))
        console.print(f"group {escape(g.group)}: {offs}")


def restore(
    snapshot_file: Annotated[Path, typer.Argument(help="snapshot JSON from dr snapshot",
                                                  show_default=False)],
    execute: ApplyPlanOpt = False,
    yes: YesOpt = False,
    output: OutputOpt = Output.table,
    backup_dir: BackupDirOpt = None,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Create missing topics, partitions and configs on the target, and set each
    group's offsets to the first record at or after its snapshot timestamp.
    Create the snapshot's ACLs the target lacks (the target's ACLs are backed up first).
    Dry run unless --execute."""
    what = f"snapshot file {snapshot_file}"
    try:
        snap = Snapshot.from_dict(parse_json(read_text(snapshot_file, "snapshot file"), what))
    except InvalidInputError as e:
        if str(e).startswith(what):
            raise

        raise InvalidInputError(f"snapshot file {snapshot_file}: {e}") from None
    err = stderr()
    with _admin(bootstrap_server, context, timeout) as admin:
        plan = read_target(admin, snap)
        if execute:
            if not yes:
                if not sys.stdin.isatty():
                    raise UsageError("--execute asks for confirmation; not on a terminal, "
                                     "so pass --yes")
                if not typer.confirm("apply the DR plan to the target?"):
                    raise typer.Abort()
            creates = [(t.name, t.partitions, t.replication_factor, dict(t.configs))
                       for t in plan.create]
            from opskit.adapters.acls.check import require_dr_restore

            # every ACL the plan needs, before its first change (exit 6, each one named)
            require_dr_restore(admin, creates, plan.add_partitions, plan.set_configs,
                               bool(plan.create_acls),
                               {g.group: {tp.topic for tp, o in g.offsets.items()
                                          if o is not None}
                                for g in plan.groups if not g.refusal
                                and any(o is not None for o in g.offsets.values())})
            admin.create_topics(creates)
            admin.create_partitions(plan.add_partitions)
            admin.alter_topic_configs(plan.set_configs)
            if plan.create_acls:
                saved_acls = save_acl_backup(admin.acls(), admin.conn.bootstrap,
                                             f"dr restore {snapshot_file}", backup_dir)
                err.print(f"backup of the target's ACLs: {saved_acls.path}")
                admin.create_acls(plan.create_acls)
            if plan.create or plan.add_partitions:
                plan = read_target(admin, snap)  # new partitions: their log ends are known now
            current = admin.committed_offsets([g.group for g in plan.groups if not g.refusal])
            for g in plan.groups:
                offsets = {tp: o for tp, o in g.offsets.items() if o is not None}
                if g.refusal or not offsets:
                    continue
                before = current.get(g.group, {})
                backup = OffsetsBackup(
                    g.group, _now_ms(), {tp: o for tp, o in before.items() if tp in offsets},
                    f"dr restore {snapshot_file}", None, admin.conn.bootstrap,
                    tuple(tp for tp in offsets if tp not in before))
                saved = save_backup(backup, offsets, backup_dir)
                err.print(f"backup of group {g.group} offsets on the target: {saved.path}")
                admin.alter_group_offsets(g.group, offsets)
    for w in plan.warnings:
        err.print(f"warning: {escape(w)}")
    emit({"executed": execute, **plan.to_dict()}, output, lambda c: _render(c, plan))
    if not execute:
        err.print("dry run: nothing changed; rerun with --execute to apply")
    if plan.refused:
        err.print("some groups are active on the target; their offsets were not set")
        return exits.REFUSED
    return exits.OK


app.command("snapshot")(snapshot)
app.command("restore")(restore)
