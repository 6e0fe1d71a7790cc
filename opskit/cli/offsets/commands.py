"""``opskit offsets reset|restore|export|import``: move consumer group offsets safely.

Semantics of ``reset`` follow ``kafka-consumer-groups.sh --reset-offsets`` (see
``opskit.core.offset_reset``), with what the tool lacks: a non-zero exit when it
refuses (5), a preview of the records skipped or replayed and the time they
span, an automatic backup before every change, a compare-and-set check right
before committing, and ``restore`` as the undo.

Exit codes: 0 done (or dry run shown), 1 nothing would change (unless
``--allow-noop``), 2 usage error or malformed input (CSV, backup file),
3 Kafka unreachable, 4 unknown group or missing file, 5 refused (active group,
offsets moved since planning, backup of another cluster), 6 Kafka error.

Showing, confirming and applying a plan (backup, compare-and-set, commit) and the
test hooks on the way are in :mod:`opskit.cli.offsets.apply`.
"""

from __future__ import annotations

import sys
from datetime import UTC
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from opskit.adapters.files.safe_read import read_text
from opskit.adapters.kafka.reader import ClusterReader
from opskit.adapters.offsets.admin import OffsetsAdmin, load_backup
from opskit.adapters.offsets.reads import (
    GroupOffsetsState,
    ensure_group_exists,
    plan_reset,
    read_group_state,
    read_log_offsets_of_topics,
    reader_session,
)
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
from opskit.cli.offsets.apply import GroupResult, epoch_ms, finish_plans
from opskit.core.models import TopicPartition
from opskit.core.offset_reset.backup import plan_restore
from opskit.core.offset_reset.offsets_csv import export_csv, offsets_for_group, parse_offsets_csv
from opskit.core.offset_reset.plan import ResetPlan, ResetRow
from opskit.core.offset_reset.request import ResetRequest, ResetScope, ResetStrategy
from opskit.core.offset_reset.time_text import format_ms, parse_datetime
from opskit.errors import NotAuthorisedError, NotFoundError, RefusedError, UsageError

app = typer.Typer(
    help="Reset consumer group offsets (with backup and undo), restore, export, import.",
    no_args_is_help=True,
)

AllowNoopOpt = Annotated[
    bool, typer.Option("--allow-noop", help="exit 0 (not 1) when nothing would change")
]
TimesOpt = Annotated[
    bool,
    typer.Option("--times/--no-times",
                 help="read the timestamps of the first and last record skipped or replayed"),
]


# --------------------------------------------------------------------------- helpers


def _admin(bootstrap: str | None, context: str | None, timeout: float) -> OffsetsAdmin:
    return connect_as(OffsetsAdmin, bootstrap, context, timeout)


def _read_text(path: Path, what: str) -> str:
    return read_text(path, what)


# --------------------------------------------------------------------------- reset


def _strategy(
    *,
    to_earliest: bool,
    to_latest: bool,
    to_current: bool,
    to_offset: int | None,
    shift_by: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    from_file: Path | None,
) -> tuple[ResetStrategy | None, dict[str | None, dict[TopicPartition, int]] | None]:
    given = [name for name, on in (
        ("--to-earliest", to_earliest), ("--to-latest", to_latest), ("--to-current", to_current),
        ("--to-offset", to_offset is not None), ("--shift-by", shift_by is not None),
        ("--to-datetime", to_datetime is not None), ("--by-duration", by_duration is not None),
        ("--from-file", from_file is not None),
    ) if on]
    if len(given) != 1:
        raise UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
            "--shift-by, --to-datetime, --by-duration, --from-file"
            + (f" (got {', '.join(given)})" if given else "")
        )
    if to_earliest:
        return ResetStrategy.to_earliest(), None
    if to_latest:
        return ResetStrategy.to_latest(), None
    if to_current:
        return ResetStrategy.to_current(), None
    if to_offset is not None:
        return ResetStrategy.to_offset(to_offset), None
    if shift_by is not None:
        return ResetStrategy.shift_by(shift_by), None
    if to_datetime is not None:
        # like the tool: a value without a zone is UTC
        return ResetStrategy.to_datetime(parse_datetime(to_datetime, UTC)), None
    if by_duration is not None:
        return ResetStrategy.by_duration(by_duration), None
    assert from_file is not None
    return None, parse_offsets_csv(_read_text(from_file, "offsets file"))


def run_reset(
    *,
    groups: list[str],
    all_groups: bool,
    topics: list[str],
    all_topics: bool,
    strategy: ResetStrategy | None,
    file_offsets: dict[str | None, dict[TopicPartition, int]] | None,
    execute: bool,
    export: bool,
    yes: bool,
    allow_noop: bool,
    allow_new_group: bool,
    times: bool,
    output: Output,
    backup_dir: Path | None,
    bootstrap: str | None,
    context: str | None,
    timeout: float,
) -> int:
    if all_groups and groups:
        raise UsageError("use either --group or --all-groups, not both")
    if not all_groups and not groups:
        raise UsageError("no group given: use --group NAME (repeatable) or --all-groups")
    scope: ResetScope | None = None
    if all_topics or topics:
        scope = ResetScope(all_topics=all_topics, topics=ResetScope.of_topics(topics).topics
                           if topics else ())
    elif file_offsets is None:
        raise UsageError("one of --all-topics or --topic is required")
    single_group = len(set(groups)) == 1 and not all_groups
    now_ms = epoch_ms()
    with _admin(bootstrap, context, timeout) as admin, reader_session(admin) as reader:
        group_ids = (reader.group_ids(reader.metadata()) if all_groups
                     else list(dict.fromkeys(groups)))
        if not group_ids:
            raise NotFoundError("there are no consumer groups")
        results: list[GroupResult] = []
        try:
            _plan_groups(reader, admin, group_ids, strategy, file_offsets, scope, single_group,
                         allow_new_group, now_ms, results)
        except NotAuthorisedError:
            # name the ACLs the principal lacks (a service principal's usual mistake)
            from opskit.adapters.acls.check import require_acls

            require_acls(admin, "offsets reset (dry run)", groups=group_ids,
                         topics=[t.topic for t in scope.topics] if scope else
                         [tp.topic for offs in (file_offsets or {}).values() for tp in offs])
            raise
        return finish_plans(admin, reader, results, execute=execute, yes=yes, export=export,
                            single_group=single_group, allow_noop=allow_noop, output=output,
                            backup_dir=backup_dir, reason=f"offsets reset {results[0].plan.strategy.describe()}"
                            if len(results) == 1 else "offsets reset", noop_code=exits.WARNING,
                            times=times)


def _plan_groups(reader: ClusterReader, admin: OffsetsAdmin, group_ids: list[str],
                 strategy: ResetStrategy | None,
                 file_offsets: dict[str | None, dict[TopicPartition, int]] | None,
                 scope: ResetScope | None, single_group: bool, allow_new_group: bool,
                 now_ms: int, results: list[GroupResult]) -> None:
    """Plan the reset of each group into ``results``."""
    for gid in group_ids:
        strat = strategy
        if file_offsets is not None:
            strat = ResetStrategy.from_file(
                offsets_for_group(file_offsets, gid, single_group=single_group))
        assert strat is not None
        request = ResetRequest(gid, strat, scope)
        state: GroupOffsetsState = read_group_state(reader, gid)
        if state.state_note:
            stderr().print(f"warning: {escape(gid)}: {escape(state.state_note)}")
        if not allow_new_group:
            try:
                ensure_group_exists(gid, state)
            except NotFoundError as e:
                raise NotFoundError(f"{e}; pass --allow-new-group to give it offsets") from None
        plan, cluster_id = plan_reset(reader, admin, request, state, now_ms)
        results.append(GroupResult(plan, cluster_id))


def reset(
    group: Annotated[list[str] | None,
                     typer.Option("--group", "-g", help="consumer group (repeatable)")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="every consumer group")] = False,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="topic or topic:0,1,2 (repeatable)")] = None,
    all_topics: Annotated[bool, typer.Option(
        "--all-topics", help="every partition the group has committed offsets for")] = False,
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="to the log start")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="to the log end")] = False,
    to_current: Annotated[bool, typer.Option(
        "--to-current", help="keep the committed offset (log end where there is none)")] = False,
    to_offset: Annotated[int | None, typer.Option(
        "--to-offset", help="to offset N (clamped to the log)", show_default=False)] = None,
    shift_by: Annotated[int | None, typer.Option(
        "--shift-by", help="move by +N or -N (clamped to the log)", show_default=False)] = None,
    to_datetime: Annotated[str | None, typer.Option(
        "--to-datetime", help="to the first record at or after YYYY-MM-DDTHH:mm:SS.sss[Z|+HH:MM] "
        "(no zone: UTC, like the tool)", show_default=False)] = None,
    by_duration: Annotated[str | None, typer.Option(
        "--by-duration", help="to the first record at or after now - PnDTnHnMnS",
        show_default=False)] = None,
    from_file: Annotated[Path | None, typer.Option(
        "--from-file", help="CSV topic,partition,offset (or group,topic,partition,offset)",
        show_default=False)] = None,
    execute: ApplyPlanOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the plan only (default)")] = False,
    export: Annotated[bool, typer.Option(
        "--export", help="print the plan as the tool's --export CSV")] = False,
    yes: YesOpt = False,
    allow_noop: AllowNoopOpt = False,
    allow_new_group: Annotated[bool, typer.Option(
        "--allow-new-group", help="set offsets for a group that does not exist yet")] = False,
    times: TimesOpt = True,
    output: OutputOpt = Output.table,
    backup_dir: BackupDirOpt = None,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Plan (default) or --execute a reset of committed offsets, like
    kafka-consumer-groups --reset-offsets.

    Only for Empty or Dead groups (exit 5 otherwise). --execute saves a backup
    first (undo: opskit offsets restore BACKUP --execute) and re-checks that
    nothing moved right before committing. Exit 1 when nothing would change.
    """
    if execute and dry_run:
        raise UsageError("use either --execute or --dry-run, not both")
    strategy, file_offsets = _strategy(
        to_earliest=to_earliest, to_latest=to_latest, to_current=to_current,
        to_offset=to_offset, shift_by=shift_by, to_datetime=to_datetime,
        by_duration=by_duration, from_file=from_file)
    return run_reset(
        groups=group or [], all_groups=all_groups, topics=topic or [], all_topics=all_topics,
        strategy=strategy, file_offsets=file_offsets, execute=execute, export=export, yes=yes,
        allow_noop=allow_noop, allow_new_group=allow_new_group, times=times, output=output,
        backup_dir=backup_dir, bootstrap=bootstrap_server, context=context, timeout=timeout)


# --------------------------------------------------------------------------- restore


def restore(
    backup_file: Annotated[Path, typer.Argument(help="backup JSON written by offsets reset",
                                                show_default=False)],
    execute: ApplyPlanOpt = False,
    yes: YesOpt = False,
    allow_other_cluster: Annotated[bool, typer.Option(
        "--allow-other-cluster", help="restore into a cluster other than the backup's")] = False,
    skip_missing: Annotated[bool, typer.Option(
        "--skip-missing", help="restore the rest when partitions of the backup no longer "
        "exist (default: refused, exit 4)")] = False,
    times: TimesOpt = True,
    output: OutputOpt = Output.table,
    backup_dir: BackupDirOpt = None,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Put back the offsets saved in a backup (the undo of offsets reset). Dry run
    unless --execute; the offsets being replaced are backed up too.

    Exit 0 also when the offsets already equal the backup (nothing to undo).
    """
    saved = load_backup(backup_file)
    backup = saved.backup
    with _admin(bootstrap_server, context, timeout) as admin, reader_session(admin) as reader:
        state = read_group_state(reader, backup.group_id)
        topics = {tp.topic for tp in backup.offsets} | {tp.topic for tp in backup.uncommitted}
        log_offsets, cluster_id = read_log_offsets_of_topics(reader, topics)
        if (backup.cluster_id and cluster_id and backup.cluster_id != cluster_id
                and not allow_other_cluster):
            raise RefusedError(
                f"the backup was taken on cluster {backup.cluster_id}, this is {cluster_id}; "
                "pass --allow-other-cluster if that is intended")
        plan = plan_restore(backup, state.group, state.committed, log_offsets, epoch_ms(),
                            skip_missing=skip_missing)
        code = finish_plans(admin, reader, [GroupResult(plan, cluster_id)], execute=execute, yes=yes,
                            export=False, single_group=True, allow_noop=True, output=output,
                            backup_dir=backup_dir, reason=f"offsets restore {backup_file}",
                            noop_code=exits.OK, times=times)
    # after the work: a failure above is one error line
    stderr().print(f"backup of group {backup.group_id} taken {format_ms(backup.taken_at_ms)} "
                   f"({backup.reason}); status: {saved.status.value}"
                   + (f" ({saved.detail})" if saved.detail else ""))
    return code


# --------------------------------------------------------------------------- export / import


class ExportFormat(str, Enum):
    csv = "csv"
    json = "json"
    yaml = "yaml"


def export(
    group: Annotated[str, typer.Option("--group", "-g", help="consumer group",
                                       show_default=False)],
    output: Annotated[ExportFormat, typer.Option(
        "--output", "-o", help="csv (importable: topic,partition,offset), json or yaml")
    ] = ExportFormat.csv,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Print a group's committed offsets (CSV that offsets import / --from-file read)."""
    with _admin(bootstrap_server, context, timeout) as admin, reader_session(admin) as reader:
        state = read_group_state(reader, group)
    ensure_group_exists(group, state)
    if output is ExportFormat.csv:
        # same quoting as the tool's --export, so the tool can read it too
        rows = [ResetRow(tp, off, off, 0, off) for tp, off in sorted(state.committed.items())]
        plan = ResetPlan(group, state.group.state, ResetStrategy.to_current(),
                         ResetScope.of_all_topics(), tuple(rows))
        sys.stdout.write(export_csv([plan], with_group=False))
        return exits.OK
    data = {
        "group": group,
        "state": state.group.state.value,
        "offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": off}
                    for tp, off in sorted(state.committed.items())],
    }
    emit(data, Output(output.value), lambda c: None)
    return exits.OK


def import_(
    file: Annotated[Path, typer.Argument(help="CSV topic,partition,offset (e.g. from offsets "
                                         "export)", show_default=False)],
    group: Annotated[str, typer.Option("--group", "-g", help="consumer group",
                                       show_default=False)],
    execute: ApplyPlanOpt = False,
    yes: YesOpt = False,
    allow_noop: AllowNoopOpt = False,
    times: TimesOpt = True,
    output: OutputOpt = Output.table,
    backup_dir: BackupDirOpt = None,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Set a group's offsets from a CSV file (reset --from-file, with backup). Dry run
    unless --execute."""
    _, file_offsets = _strategy(
        to_earliest=False, to_latest=False, to_current=False, to_offset=None, shift_by=None,
        to_datetime=None, by_duration=None, from_file=file)
    return run_reset(
        groups=[group], all_groups=False, topics=[], all_topics=False, strategy=None,
        file_offsets=file_offsets, execute=execute, export=False, yes=yes,
        allow_noop=allow_noop, allow_new_group=False, times=times, output=output,
        backup_dir=backup_dir, bootstrap=bootstrap_server, context=context, timeout=timeout)


app.command("reset")(reset)
app.command("restore")(restore)
app.command("export")(export)
app.command("import")(import_)
