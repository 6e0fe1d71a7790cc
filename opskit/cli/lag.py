"""``opskit lag``: consumer lag per partition, topic and group."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.lag_source import LagReport, collect_lag
from opskit.cli.common import (
    BootstrapOpt,
    ContextOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    connect,
    emit,
    fmt_int,
    load_config,
)
from opskit.core.models import ANOMALY_MEANING, LagThresholds, Severity
from opskit.errors import UsageError

SEVERITY_STYLE = {Severity.OK: "green", Severity.WARNING: "yellow", Severity.CRITICAL: "red"}


def lag(
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="consumer group (repeatable)")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="every consumer group")] = False,
    topic: Annotated[list[str] | None, typer.Option("--topic", "-t", help="only these topics (repeatable)")] = None,
    warn: Annotated[int | None, typer.Option("--warn", min=0, help="group lag warning threshold (default 100000 or config)")] = None,
    crit: Annotated[int | None, typer.Option("--crit", min=0, help="group lag critical threshold (default 1000000 or config)")] = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Consumer lag: committed offset, log start/end and lag per partition, with totals.

    Exit code: 0 OK, 1 a group is above --warn, 2 above --crit (HIP-30: 100K / 1M).
    """
    if all_groups and group:
        raise UsageError("use either --group or --all-groups, not both")
    if not all_groups and not group:
        raise UsageError("no group given: use --group NAME (repeatable) or --all-groups")
    cfg = load_config()

    def thresholds(gid: str) -> LagThresholds:
        base = cfg.lag_thresholds(gid)
        w = warn if warn is not None else base.warn
        c = crit if crit is not None else base.crit
        if w > c:
            raise UsageError(f"--warn {w} is above --crit {c}")
        return LagThresholds(w, c)

    with connect(bootstrap_server, context, timeout) as admin:
        report = collect_lag(admin, None if all_groups else group, topic, thresholds)
    emit(report.to_dict(), output, lambda c: render(c, report))
    return report.severity.nagios_code


def render(console: Console, report: LagReport) -> None:
    if not report.groups:
        console.print("no consumer groups")
        return
    for g in report.groups:
        style = SEVERITY_STYLE.get(g.severity, "")
        console.print(
            f"[bold]{g.group_id}[/bold]  state={g.state.value}  members={g.members}  "
            f"lag={fmt_int(g.total_lag)}  [{style}]{g.severity.value}[/{style}] "
            f"(warn>{fmt_int(g.thresholds.warn)} crit>{fmt_int(g.thresholds.crit)})"
        )
        t = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("TOPIC", "PARTITION", "COMMITTED", "LOG-START", "LOG-END", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID", "NOTE"):
            t.add_column(col, justify="right" if col in ("PARTITION", "COMMITTED", "LOG-START",
                                                         "LOG-END", "LAG") else "left")
        for p in g.partitions:
            notes = "; ".join(a.value for a in p.anomalies)
            if p.records_lost:
                notes += f" ({fmt_int(p.records_lost)} records lost)"
            t.add_row(
                p.tp.topic, str(p.tp.partition), fmt_int(p.committed), fmt_int(p.log_start),
                fmt_int(p.log_end), fmt_int(p.lag),
                p.member.member_id if p.member else "-", p.member.host if p.member else "-",
                p.member.client_id if p.member else "-", notes,
            )
        console.print(t)
        for tl in g.topics:
            extra = f", {tl.partitions_without_commit} without commit" if tl.partitions_without_commit else ""
            console.print(f"  total {tl.topic}: lag {fmt_int(tl.lag)} over {tl.partitions} partitions{extra}")
        seen = {a for _tp, a in g.anomalies}
        for a in sorted(seen, key=lambda x: x.value):
            console.print(f"  [yellow]{a.value}[/yellow]: {ANOMALY_MEANING[a]}")
        console.print()
    for tp, err in sorted(report.offset_errors.items()):
        console.print(f"[yellow]could not read offsets of {tp}: {err}[/yellow]")
