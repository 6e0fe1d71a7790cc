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

Test hooks (environment, read here only; never set them in production):
``OPSKIT_TEST_PAUSE_BEFORE_COMMIT=SECONDS`` sleeps after the backup is written
and before the compare-and-set check; ``OPSKIT_TEST_PAUSE_AFTER_COMMIT=SECONDS``
sleeps after the offsets are committed and before the backup is marked applied.
They let tests kill the process or move offsets at those points.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opskit.adapters.files.safe_read import read_text
from opskit.adapters.offsets_admin import (
    BackupFile,
    BackupStatus,
    GroupOffsetsState,
    OffsetsAdmin,
    ensure_group_exists,
    load_backup,
    mark_backup,
    save_backup,
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
    fmt_int,
    stderr,
)
from opskit.core.models import TopicPartition
from opskit.core.offset_reset.backup import OffsetsBackup, plan_restore
from opskit.core.offset_reset.offsets_csv import export_csv, offsets_for_group, parse_offsets_csv
from opskit.core.offset_reset.plan import ResetPlan, ResetRow
from opskit.core.offset_reset.planner import check_unchanged
from opskit.core.offset_reset.request import ResetRequest, ResetScope, ResetStrategy
from opskit.core.offset_reset.time_text import format_ms, parse_datetime
from opskit.errors import NotAuthorisedError, NotFoundError, RefusedError, UsageError

PAUSE_BEFORE_COMMIT_ENV = "OPSKIT_TEST_PAUSE_BEFORE_COMMIT"
PAUSE_AFTER_COMMIT_ENV = "OPSKIT_TEST_PAUSE_AFTER_COMMIT"
#: record timestamps are read for at most this many changed partitions
MAX_TIME_PREVIEW = 1000

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


@dataclass
class GroupResult:
    """One group's plan and what happened to it, for rendering."""

    plan: ResetPlan
    cluster_id: str | None
    #: partition -> (timestamp of the first, of the last record skipped or replayed)
    times: dict[TopicPartition, tuple[int | None, int | None]] = field(default_factory=dict)
    backup: BackupFile | None = None
    applied: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = self.plan.to_dict()
        for row in d["rows"]:
            first, last = self.times.get(TopicPartition(row["topic"], row["partition"]),
                                         (None, None))
            row["first_record_ts_ms"] = first
            row["last_record_ts_ms"] = last
        d["applied"] = self.applied
        d["backup"] = None if self.backup is None else str(self.backup.path)
        return d


# --------------------------------------------------------------------------- helpers


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _admin(bootstrap: str | None, context: str | None, timeout: float) -> OffsetsAdmin:
    return connect_as(OffsetsAdmin, bootstrap, context, timeout)


def _test_pause(env: str, what: str) -> None:
    raw = os.environ.get(env)
    if not raw:
        return
    try:
        seconds = float(raw)
    except ValueError:
        raise UsageError(f"${env} must be a number of seconds, not {raw!r}") from None
    stderr().print(f"test hook {env}: pausing {seconds:g}s {what}")
    time.sleep(seconds)


def _read_text(path: Path, what: str) -> str:
    return read_text(path, what)


def _range(row: ResetRow) -> tuple[int, int] | None:
    """First and last offset of the records skipped or replayed by ``row``."""
    if row.current is None or row.current == row.target:
        return None
    lo = max(min(row.current, row.target), row.log_start)
    hi = min(max(row.current, row.target), row.log_end) - 1
    return (lo, hi) if hi >= lo else None


def _read_times(admin: OffsetsAdmin, results: list[GroupResult]) -> None:
    wanted: dict[TopicPartition, tuple[int, int]] = {}
    for r in results:
        for row in r.plan.changed_rows:
            span = _range(row)
            if span is not None:
                wanted[row.tp] = span
    if not wanted:
        return
    if len(wanted) > MAX_TIME_PREVIEW:
        stderr().print(f"note: {len(wanted)} partitions change; record times are not read "
                       f"for more than {MAX_TIME_PREVIEW}")
        return
    firsts = admin.record_timestamps({tp: lo for tp, (lo, _hi) in wanted.items()})
    lasts = admin.record_timestamps({tp: hi for tp, (_lo, hi) in wanted.items()})
    for r in results:
        for row in r.plan.rows:
            if row.tp in wanted:
                r.times[row.tp] = (firsts.get(row.tp), lasts.get(row.tp))


def _fmt_ts(ms: int | None) -> str:
    return "?" if ms is None else format_ms(ms).replace("T", " ")


def render(console: Console, results: list[GroupResult], executed: bool) -> None:
    for r in results:
        p = r.plan
        status = ("[green]applied[/green]" if r.applied else
                  "[red]refused[/red]" if p.is_refused else
                  "no change" if p.is_noop else "dry run" if not executed else "not applied")
        console.print(
            f"[bold]{escape(p.group_id)}[/bold]  state={p.group_state.value}  "
            f"{escape(p.strategy.describe())}  partitions={len(p.rows)}  "
            f"changed={len(p.changed_rows)}  skipped={fmt_int(p.records_skipped)}  "
            f"replayed={fmt_int(p.records_replayed)}  {status}"
        )
        if p.target_timestamp_ms is not None:
            console.print(f"  looked up records at or after {format_ms(p.target_timestamp_ms)}")
        t = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("TOPIC", "PARTITION", "CURRENT", "NEW", "LOG-START", "LOG-END", "SKIPPED",
                    "REPLAYED", "RECORD TIMES (UTC)", "NOTE"):
            t.add_column(col, justify="left" if col in ("TOPIC", "RECORD TIMES (UTC)", "NOTE")
                         else "right")
        for row in p.rows:
            span = r.times.get(row.tp)
            when = "-" if span is None else f"{_fmt_ts(span[0])} .. {_fmt_ts(span[1])}"
            t.add_row(
                escape(row.tp.topic), str(row.tp.partition), fmt_int(row.current),
                fmt_int(row.target) if row.changed else f"{fmt_int(row.target)} (same)",
                fmt_int(row.log_start), fmt_int(row.log_end), fmt_int(row.records_skipped),
                fmt_int(row.records_replayed), when, escape(row.warning or ""),
            )
        console.print(t)
        if r.backup is not None:
            console.print(f"  backup: {escape(str(r.backup.path))} ({r.backup.status.value})")
        console.print()


def _confirm(results: list[GroupResult], yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError("--execute asks for confirmation; not on a terminal, so pass --yes")
    changed = sum(len(r.plan.changed_rows) for r in results)
    groups = ", ".join(r.plan.group_id for r in results)
    if not typer.confirm(f"commit new offsets for {changed} partitions of {groups}?"):
        raise typer.Abort()


def _apply(
    admin: OffsetsAdmin, r: GroupResult, backup_dir: Path | None, reason: str
) -> None:
    """Backup, compare-and-set, commit; the backup's status says how far it got."""
    plan = r.plan
    plan.raise_if_refused()
    backup = OffsetsBackup.of_plan(plan, taken_at_ms=_now_ms(), reason=reason,
                                   cluster_id=r.cluster_id, bootstrap=admin.conn.bootstrap)
    r.backup = save_backup(backup, plan.offsets_to_commit(), backup_dir)
    stderr().print(f"backup of the previous offsets of {plan.group_id}: {r.backup.path}\n"
                   f"  undo: opskit offsets restore {r.backup.path} --execute")
    _test_pause(PAUSE_BEFORE_COMMIT_ENV, "before the compare-and-set check and commit")
    try:
        now = admin.group_state(plan.group_id)
        check_unchanged(plan, now.group, now.committed)
    except RefusedError as e:
        r.backup = mark_backup(r.backup, BackupStatus.ABORTED, str(e), _now_ms())
        raise
    try:
        admin.alter_group_offsets(plan.group_id, plan.offsets_to_commit())
    except Exception as e:
        r.backup = mark_backup(r.backup, BackupStatus.FAILED, str(e), _now_ms())
        raise
    _test_pause(PAUSE_AFTER_COMMIT_ENV, "after the commit, before marking the backup applied")
    r.backup = mark_backup(r.backup, BackupStatus.APPLIED, None, _now_ms())
    r.applied = True


def _finish(
    admin: OffsetsAdmin,
    results: list[GroupResult],
    *,
    execute: bool,
    yes: bool,
    export: bool,
    single_group: bool,
    allow_noop: bool,
    output: Output,
    backup_dir: Path | None,
    reason: str,
    noop_code: int,
    times: bool,
) -> int:
    """Show the plans, refuse or apply them, and choose the exit code."""
    err = stderr()
    for r in results:
        for w in r.plan.warnings:
            err.print(f"warning: {escape(r.plan.group_id)}: {escape(w)}")
    refused = [r for r in results if r.plan.is_refused]
    to_apply = [r for r in results if not r.plan.is_refused and not r.plan.is_noop]
    if times and not export:
        _read_times(admin, results)

    def show() -> None:
        if export:
            # the tool println()s the CSV: one more newline after the last record's
            csv = export_csv([r.plan for r in results if not r.plan.is_refused],
                             with_group=not single_group)
            sys.stdout.write(csv + "\n")
        else:
            emit({"executed": execute and not refused,
                  "groups": [r.to_dict() for r in results]},
                 output, lambda c: render(c, results, execute))

    if refused:
        show()
        for r in refused:
            err.print(f"refused: {escape(r.plan.refusal or '')}")
        err.print("nothing was changed")
        return exits.REFUSED
    if not to_apply:
        show()
        err.print("nothing to change: every offset in scope is already at its target")
        return exits.OK if allow_noop else noop_code
    if not execute:
        show()
        err.print("dry run: nothing changed; rerun with --execute to apply")
        return exits.OK
    _confirm(to_apply, yes)
    from opskit.adapters.acl_check import require_acls

    # the ACLs a commit needs, before any backup is written (exit 6 naming each one)
    require_acls(admin, "offsets reset --execute",
                 topics={tp.topic for r in to_apply for tp in r.plan.offsets_to_commit()},
                 groups={r.plan.group_id for r in to_apply},
                 label=" ".join(reason.split()[:2]))      # offsets reset / restore
    try:
        for r in to_apply:
            _apply(admin, r, backup_dir, reason)
    finally:
        show()
    return exits.OK


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
    now_ms = _now_ms()
    with _admin(bootstrap, context, timeout) as admin:
        group_ids = sorted(admin.list_groups()) if all_groups else list(dict.fromkeys(groups))
        if not group_ids:
            raise NotFoundError("there are no consumer groups")
        results: list[GroupResult] = []
        try:
            _plan_groups(admin, group_ids, strategy, file_offsets, scope, single_group,
                         allow_new_group, now_ms, results)
        except NotAuthorisedError:
            # name the ACLs the principal lacks (a service principal's usual mistake)
            from opskit.adapters.acl_check import require_acls

            require_acls(admin, "offsets reset (dry run)", groups=group_ids,
                         topics=[t.topic for t in scope.topics] if scope else
                         [tp.topic for offs in (file_offsets or {}).values() for tp in offs])
            raise
        return _finish(admin, results, execute=execute, yes=yes, export=export,
                       single_group=single_group, allow_noop=allow_noop, output=output,
                       backup_dir=backup_dir, reason=f"offsets reset {results[0].plan.strategy.describe()}"
                       if len(results) == 1 else "offsets reset", noop_code=exits.WARNING,
                       times=times)


def _plan_groups(admin: OffsetsAdmin, group_ids: list[str], strategy: ResetStrategy | None,
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
        state: GroupOffsetsState = admin.group_state(gid)
        if state.state_note:
            stderr().print(f"warning: {escape(gid)}: {escape(state.state_note)}")
        if not allow_new_group:
            try:
                ensure_group_exists(gid, state)
            except NotFoundError as e:
                raise NotFoundError(f"{e}; pass --allow-new-group to give it offsets") from None
        plan, cluster_id = admin.plan_reset(request, state, now_ms)
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
    with _admin(bootstrap_server, context, timeout) as admin:
        state = admin.group_state(backup.group_id)
        topics = {tp.topic for tp in backup.offsets} | {tp.topic for tp in backup.uncommitted}
        log_offsets, cluster_id = admin.log_offsets_of_topics(topics)
        if (backup.cluster_id and cluster_id and backup.cluster_id != cluster_id
                and not allow_other_cluster):
            raise RefusedError(
                f"the backup was taken on cluster {backup.cluster_id}, this is {cluster_id}; "
                "pass --allow-other-cluster if that is intended")
        plan = plan_restore(backup, state.group, state.committed, log_offsets, _now_ms(),
                            skip_missing=skip_missing)
        code = _finish(admin, [GroupResult(plan, cluster_id)], execute=execute, yes=yes,
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
    with _admin(bootstrap_server, context, timeout) as admin:
        state = admin.group_state(group)
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
