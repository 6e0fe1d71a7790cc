"""Show, refuse or apply the plans of ``opskit offsets reset|restore|import``
(:mod:`opskit.cli.offsets.commands`): the times of the records skipped or replayed, the
confirmation, the ACL check, the backup, the compare-and-set check right before
committing, and the exit code.

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
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opskit.adapters.kafka.reader import ClusterReader
from opskit.adapters.offsets.admin import (
    BackupFile,
    BackupStatus,
    OffsetsAdmin,
    mark_backup,
    save_backup,
)
from opskit.adapters.offsets.reads import read_group_state, read_record_timestamps, reader_session
from opskit.cli import exits
from opskit.cli.common import Output, emit, fmt_int, stderr
from opskit.core.models import TopicPartition
from opskit.core.offset_reset.backup import OffsetsBackup
from opskit.core.offset_reset.offsets_csv import export_csv
from opskit.core.offset_reset.plan import ResetPlan, ResetRow
from opskit.core.offset_reset.planner import check_unchanged
from opskit.core.offset_reset.time_text import format_ms
from opskit.errors import RefusedError, UsageError

PAUSE_BEFORE_COMMIT_ENV = "OPSKIT_TEST_PAUSE_BEFORE_COMMIT"
PAUSE_AFTER_COMMIT_ENV = "OPSKIT_TEST_PAUSE_AFTER_COMMIT"
#: record timestamps are read for at most this many changed partitions
MAX_TIME_PREVIEW = 1000


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


def epoch_ms() -> int:
    return time.time_ns() // 1_000_000


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


def _range(row: ResetRow) -> tuple[int, int] | None:
    """First and last offset of the records skipped or replayed by ``row``."""
    if row.current is None or row.current == row.target:
        return None
    lo = max(min(row.current, row.target), row.log_start)
    hi = min(max(row.current, row.target), row.log_end) - 1
    return (lo, hi) if hi >= lo else None


def _read_times(reader: ClusterReader, results: list[GroupResult]) -> None:
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
    seen = read_record_timestamps(reader, [(tp, off) for tp, span in wanted.items()
                                           for off in span])
    for r in results:
        for row in r.plan.rows:
            if row.tp in wanted:
                lo, hi = wanted[row.tp]
                r.times[row.tp] = (seen.get((row.tp, lo)), seen.get((row.tp, hi)))


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
    backup = OffsetsBackup.of_plan(plan, taken_at_ms=epoch_ms(), reason=reason,
                                   cluster_id=r.cluster_id, bootstrap=admin.conn.bootstrap)
    r.backup = save_backup(backup, plan.offsets_to_commit(), backup_dir)
    stderr().print(f"backup of the previous offsets of {plan.group_id}: {r.backup.path}\n"
                   f"  undo: opskit offsets restore {r.backup.path} --execute")
    _test_pause(PAUSE_BEFORE_COMMIT_ENV, "before the compare-and-set check and commit")
    try:
        with reader_session(admin) as reader:  # a session of its own: read right before
            now = read_group_state(reader, plan.group_id)
        check_unchanged(plan, now.group, now.committed)
    except RefusedError as e:
        r.backup = mark_backup(r.backup, BackupStatus.ABORTED, str(e), epoch_ms())
        raise
    try:
        admin.alter_group_offsets(plan.group_id, plan.offsets_to_commit())
    except Exception as e:
        r.backup = mark_backup(r.backup, BackupStatus.FAILED, str(e), epoch_ms())
        raise
    _test_pause(PAUSE_AFTER_COMMIT_ENV, "after the commit, before marking the backup applied")
    r.backup = mark_backup(r.backup, BackupStatus.APPLIED, None, epoch_ms())
    r.applied = True


def finish_plans(
    admin: OffsetsAdmin,
    reader: ClusterReader,
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
        _read_times(reader, results)

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
    from opskit.adapters.acls.check import require_acls

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
