"""``opskit lag``: consumer lag per partition, topic and group, in messages and in time.

``--watch`` refreshes the table every ``--interval``; ``--window`` samples for
that long and then judges each group (Burrow-style status with rates and
catch-up ETA). Lag in time reads the record at each committed offset
(``--no-time`` skips those reads).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from contextlib import ExitStack, closing
from typing import TYPE_CHECKING, Annotated, Any

import typer

from opskit.adapters.kafka.reader import KeptClients, open_reader
from opskit.adapters.lag.sampler import (
    GroupJudgement,
    RetentionConfig,
    Sampling,
    TimedLagReport,
    collect_timed_lag,
    judge_groups,
    judge_invisible_groups,
    policy_for_window,
    sample_lag,
)
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
    stderr,
    stdout,
)
from opskit.cli.validate import DAY, HOUR, parse_duration_option
from opskit.core.models import ANOMALY_MEANING, LagThresholds, Severity
from opskit.core.status.rank import Status, worst_severity
from opskit.core.timing.lag_time import Confidence, LagTimeBasis
from opskit.errors import InvisibleError, NotAuthorisedError, UsageError

if TYPE_CHECKING:  # rendering imports rich only for tables (JSON output never needs it)
    from rich.console import Console, RenderableType

    from opskit.adapters.kafka.admin.client import KafkaAdmin

SEVERITY_STYLE = {Severity.OK: "green", Severity.WARNING: "yellow", Severity.CRITICAL: "red",
                  Severity.UNKNOWN: "magenta"}
STATUS_STYLE = {Status.OK: "green", Status.WARN: "yellow", Status.REWIND: "yellow",
                Status.STOP: "yellow", Status.STALL: "red", Status.ERR: "red",
                Status.UNKNOWN: "magenta"}

#: bounds of the duration options (named in their help)
MAX_INTERVAL_S = HOUR
MAX_WINDOW_S = DAY


BYTES_HEADROOM_MEANING = (
    "bytes of newer data that can still arrive before retention.bytes lets Kafka delete the "
    "segment holding the oldest unconsumed record (estimated from the partition size; Kafka "
    "deletes whole segments, so it is approximate: the true headroom is up to one segment larger)"
)


def fmt_bytes(n: int | None) -> str:
    """1,536 -> '1.5KiB'; negative values (already over the limit) keep their sign; None '-'."""
    if n is None:
        return "-"
    sign, v = ("-" if n < 0 else ""), float(abs(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{sign}{v:.0f}{unit}" if unit == "B" else f"{sign}{v:.1f}{unit}"
        v /= 1024
    return f"{sign}{v:.1f}TiB"  # pragma: no cover - loop always returns


def fmt_seconds(s: float | None) -> str:
    """Human duration: 0.4s, 45s, 3m12s, 1h05m, 2d03h; '-' for None."""
    if s is None or not math.isfinite(s):
        return "-"
    if s < 10:
        return f"{s:.1f}s"
    n = int(s)
    if n < 60:
        return f"{n}s"
    m, sec = divmod(n, 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def lag(
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="consumer group (repeatable)")] = None,
    all_groups: Annotated[bool, typer.Option("--all-groups", help="every consumer group")] = False,
    topic: Annotated[list[str] | None, typer.Option("--topic", "-t", help="only these topics (repeatable)")] = None,
    warn: Annotated[int | None, typer.Option("--warn", min=0, help="group lag warning threshold (default 100000 or config)")] = None,
    crit: Annotated[int | None, typer.Option("--crit", min=0, help="group lag critical threshold (default 1000000 or config)")] = None,
    no_time: Annotated[bool, typer.Option("--no-time", help="skip reading record timestamps (no lag in time, no retention headroom)")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="refresh the table every --interval until Ctrl-C")] = False,
    interval: Annotated[str, typer.Option("--interval", help="time between samples with --watch/--window, e.g. 5s (0.1s to 1h)")] = "5s",
    window: Annotated[str | None, typer.Option("--window", help="sample for this long (e.g. 10m, at most 1d), then judge each group's status", show_default=False)] = None,
    iterations: Annotated[int | None, typer.Option("--iterations", min=1, help="stop --watch after N refreshes", show_default=False)] = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Consumer lag: committed offset, log start/end, lag in messages and in time per partition.

    LAG-TIME is the age of the oldest unconsumed record (read from Kafka; '>=' marks a
    lower bound when records were deleted unread). RETENTION-LEFT is the time before
    retention.ms may delete it. BYTES-HEADROOM (topics with retention.bytes) is how many
    bytes of newer data can still arrive before retention.bytes may delete it
    (approximate: Kafka deletes whole segments).

    Exit code: 0 OK, 1 a group is above --warn, 2 above --crit (HIP-30: 100K / 1M).
    With --window: the worst group status severity (STALL/ERR 2, WARN/STOP/REWIND 1).
    """
    if all_groups and group:
        raise UsageError("use either --group or --all-groups, not both")
    if not all_groups and not group:
        raise UsageError("no group given: use --group NAME (repeatable) or --all-groups")
    if watch and window:
        raise UsageError("use either --watch or --window, not both")
    interval_s = parse_duration_option(interval, "--interval", MAX_INTERVAL_S, minimum=0.1)
    window_s = parse_duration_option(window, "--window", MAX_WINDOW_S) if window else None
    if window_s is not None and window_s < interval_s:
        raise UsageError(f"--window {window} is shorter than --interval {interval}")
    if iterations is not None and not watch:
        raise UsageError("--iterations only applies to --watch")
    cfg = load_config()

    def thresholds(gid: str) -> LagThresholds:
        base = cfg.lag_thresholds(gid)
        w = warn if warn is not None else base.warn
        c = crit if crit is not None else base.crit
        if w > c:
            raise UsageError(f"--warn {w} is above --crit {c}")
        return LagThresholds(w, c)

    groups = None if all_groups else group
    with ExitStack() as stack:
        admin = stack.enter_context(connect(bootstrap_server, context, timeout))
        admin.skip_unauthorised_groups = all_groups  # listed, but not describable: a note
        # the record-time cache and log-end suspects outlive each round's read session
        kept = KeptClients(admin.conn, admin.timeout)
        stack.callback(kept.close)
        retention: dict[str, RetentionConfig] = {}

        def collect() -> TimedLagReport:
            with closing(open_reader(admin, kept)) as r:  # one read session per round
                try:
                    timed = collect_timed_lag(admin, not no_time, groups, topic, thresholds,
                                              retention_cache=retention, cluster=r)
                except NotAuthorisedError as e:
                    raise InvisibleError(f"{e} ({admin.conn.principal} needs the Describe ACL "
                                         "on the group and on the topics it reads)") from e
                judge_invisible_groups(timed, admin.conn.principal, lambda: _limited(admin),
                                       all_groups, r.unauthorised_groups())
            return timed

        if window_s is not None:
            return _run_window(collect, window_s, interval_s, output)
        if watch:
            return _run_watch(collect, interval_s, iterations, output)
        timed = collect()
    emit(timed.to_dict(), output, lambda c: render(c, timed))
    for note in timed.notes:
        stderr().print(f"note: {note}", highlight=False)
    return timed.severity.nagios_code


def _limited(admin: KafkaAdmin) -> bool:
    from opskit.adapters.acls.admin import limited_principal  # confluent-kafka: only when asked

    return limited_principal(admin)


# --------------------------------------------------------------------------- watch / window


def _run_watch(collect: Callable[[], TimedLagReport], interval_s: float,
               iterations: int | None, output: Output) -> int:
    policy = policy_for_window(10 * 60 * 1000)
    if output is not Output.table:
        # one document per refresh (JSON lines / YAML documents), for piping
        def on_data(st: Sampling) -> None:
            assert st.last is not None
            data = st.last.to_dict()
            data["status"] = [j.to_dict() for j in judge_groups(st)]
            if output is Output.json:
                sys.stdout.write(json.dumps(data, default=str) + "\n")
            else:
                import yaml

                sys.stdout.write("---\n" + yaml.safe_dump(data, sort_keys=False))
            sys.stdout.flush()

        st = _sample_until_interrupt(collect, policy, interval_s, iterations, on_data)
        return _final_code(st)

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    console = stdout()
    with Live(Text("collecting..."), console=console, auto_refresh=False,
              transient=False) as live:
        def on_round(st: Sampling) -> None:
            assert st.last is not None
            live.update(Group(*_renderables(st.last, judge_groups(st), st)), refresh=True)

        st = _sample_until_interrupt(collect, policy, interval_s, iterations, on_round)
    return _final_code(st)


def _sample_until_interrupt(collect: Callable[[], TimedLagReport], policy: Any, interval_s: float,
                            iterations: int | None, on_round: Callable[[Sampling], None]) -> Sampling:
    holder: list[Sampling] = []

    def remember(st: Sampling) -> None:
        if not holder:
            holder.append(st)
        on_round(st)

    try:
        return sample_lag(collect, policy, interval_s=interval_s, max_rounds=iterations,
                          on_round=remember)
    except KeyboardInterrupt:
        if not holder:
            raise
        return holder[0]  # Ctrl-C ends watch mode normally


def _final_code(st: Sampling) -> int:
    return st.last.report.severity.nagios_code if st.last is not None else 3


def _run_window(collect: Callable[[], TimedLagReport], window_s: float, interval_s: float,
                output: Output) -> int:
    policy = policy_for_window(int(window_s * 1000))
    err = stderr()
    show_progress = output is Output.table and sys.stderr.isatty()

    def progress(st: Sampling) -> None:
        if show_progress:
            err.print(f"sample {st.rounds} ({fmt_seconds((st.last_ms or 0) / 1000 - (st.started_ms or 0) / 1000)} "
                      f"of {fmt_seconds(window_s)})", end="\r")

    st = sample_lag(collect, policy, interval_s=interval_s, window_s=window_s, on_round=progress)
    verdicts = judge_groups(st)
    data: dict[str, Any] = {
        "window_seconds": window_s,
        "interval_seconds": interval_s,
        "samples": st.rounds,
        "severity": worst_severity(v.status.severity for v in verdicts).value,
        "groups": [v.to_dict() for v in verdicts],
        "lag": st.last.to_dict() if st.last is not None else None,
    }
    emit(data, output, lambda c: render_status(c, verdicts, st))
    return worst_severity(v.status.severity for v in verdicts).nagios_code


# --------------------------------------------------------------------------- rendering


def _lag_time_cell(basis: LagTimeBasis | None, conf: Confidence | None, secs: float | None,
                   denied: bool = False) -> str:
    if basis is None:
        return "-"
    if basis is LagTimeBasis.NO_LAG:
        return "0s"
    if secs is None:
        return "no Read" if denied else "?"
    prefix = ">=" if conf is Confidence.LOWER_BOUND else "~" if conf is Confidence.ESTIMATE else ""
    return prefix + fmt_seconds(secs)


def _renderables(timed: TimedLagReport, verdicts: list[GroupJudgement] | None = None,
                 st: Sampling | None = None) -> list[RenderableType]:
    from rich.table import Table
    from rich.text import Text

    report = timed.report
    out: list[RenderableType] = []
    if not report.groups:
        return [Text("no consumer groups")]
    by_group = {v.status.group_id: v for v in verdicts or []}
    for g in report.groups:
        style = SEVERITY_STYLE.get(g.severity, "")
        max_s = timed.max_lag_seconds(g.group_id)
        state_note = report.group_notes.get(g.group_id)
        head = (
            f"[bold]{g.group_id}[/bold]  state={g.state.value}  "
            f"members={'?' if state_note else g.members}  lag="
            + (">=" if any(t.partitions_lag_unknown for t in g.topics) else "")
            + fmt_int(g.total_lag)
        )
        if timed.time_read:
            head += f"  max-lag-time={fmt_seconds(max_s)}"
        head += (f"  [{style}]{g.severity.value}[/{style}] "
                 f"(warn>{fmt_int(g.thresholds.warn)} crit>{fmt_int(g.thresholds.crit)})")
        v = by_group.get(g.group_id)
        if v is not None and st is not None and st.rounds > 1:
            ss = STATUS_STYLE.get(v.status.status, "")
            head += (f"  status=[{ss}]{v.status.status.value}[/{ss}]"
                     f"  in={_rate(v.produce_rate)} out={_rate(v.consume_rate)}")
        out.append(Text.from_markup(head))
        t = Table(box=None, pad_edge=False, header_style="bold")
        cols = ["TOPIC", "PARTITION", "COMMITTED", "LOG-START", "LOG-END", "LAG"]
        show_bytes = timed.time_read and any(
            pt.retention is not None and pt.retention.bytes_headroom is not None
            for pt in timed.times.get(g.group_id, {}).values())
        if timed.time_read:
            cols += ["LAG-TIME", "RETENTION-LEFT"]
        if show_bytes:
            cols += ["BYTES-HEADROOM"]
        cols += ["CONSUMER-ID", "HOST", "CLIENT-ID", "NOTE"]
        right = {"PARTITION", "COMMITTED", "LOG-START", "LOG-END", "LAG", "LAG-TIME",
                 "RETENTION-LEFT", "BYTES-HEADROOM"}
        for col in cols:
            t.add_column(col, justify="right" if col in right else "left")
        for p in g.partitions:
            notes = "; ".join(a.value for a in p.anomalies)
            if p.records_lost:
                notes += f" ({fmt_int(p.records_lost)} records lost)"
            row = [p.tp.topic, str(p.tp.partition), fmt_int(p.committed), fmt_int(p.log_start),
                   fmt_int(p.log_end), fmt_int(p.lag)]
            if timed.time_read:
                pt = timed.partition_time(g.group_id, p.tp)
                if pt is None:
                    row += ["-", "-"] + (["-"] if show_bytes else [])
                else:
                    lt = pt.lag_time
                    row.append(_lag_time_cell(lt.basis, lt.confidence, lt.seconds,
                                              p.tp.topic in timed.read_denied))
                    rr = pt.retention
                    if rr is None or rr.time_left_seconds is None:
                        row.append("-" if rr is None or rr.basis.value in ("no_lag", "unknown")
                                   else "unlimited" if rr.basis.value == "unlimited" else "-")
                    else:
                        cell = fmt_seconds(rr.time_left_seconds)
                        row.append(f"[red]{cell}[/red]" if rr.eligible_now else cell)
                    if show_bytes:
                        row.append(fmt_bytes(rr.bytes_headroom if rr else None))
            row += [p.member.member_id if p.member else "-", p.member.host if p.member else "-",
                    p.member.client_id if p.member else "-", notes]
            t.add_row(*row)
        out.append(t)
        if state_note:
            out.append(Text(f"  {state_note}"))
        for tl in g.topics:
            extra = f", {tl.partitions_without_commit} without commit" if tl.partitions_without_commit else ""
            if tl.partitions_lag_unknown:  # the known part is a floor, never "lag 0"
                extra += f", {tl.partitions_lag_unknown} unknown"
                lag = f"at least {fmt_int(tl.lag)}"
            else:
                lag = fmt_int(tl.lag)
            out.append(Text(f"  total {tl.topic}: lag {lag} over {tl.partitions} partitions{extra}"))
        if show_bytes:
            out.append(Text(f"  BYTES-HEADROOM: {BYTES_HEADROOM_MEANING}"))
        seen = {a for _tp, a in g.anomalies}
        for a in sorted(seen, key=lambda x: x.value):
            out.append(Text.from_markup(f"  [yellow]{a.value}[/yellow]: {ANOMALY_MEANING[a]}"))
        out.append(Text(""))
    if timed.sizes_unavailable:
        out.append(Text.from_markup(
            f"[yellow]retention.bytes headroom unknown: {timed.sizes_unavailable}[/yellow]"))
    for tp, err in sorted(report.offset_errors.items()):
        out.append(Text.from_markup(f"[yellow]could not read offsets of {tp}: {err}[/yellow]"))
    return out


def render(console: Console, timed: TimedLagReport) -> None:
    for r in _renderables(timed):
        console.print(r)


def _rate(r: float | None) -> str:
    return "-" if r is None else f"{r:,.1f}/s"


def render_status(console: Console, verdicts: list[GroupJudgement], st: Sampling) -> None:
    from rich.table import Table

    span = ((st.last_ms or 0) - (st.started_ms or 0)) / 1000
    console.print(f"{st.rounds} samples over {fmt_seconds(span)}")
    if not verdicts:
        console.print("no consumer groups")
    for v in verdicts:
        s = v.status
        style = STATUS_STYLE.get(s.status, "")
        sev = SEVERITY_STYLE.get(s.severity, "")
        eta = v.catch_up
        if eta.eta_seconds is not None and eta.state.value == "catching_up":
            eta_txt = f"catch-up in {fmt_seconds(eta.eta_seconds)}"
        else:
            eta_txt = eta.state.value.replace("_", " ")
        console.print(
            f"[bold]{s.group_id}[/bold]  [{style}]{s.status.value}[/{style}]  "
            f"[{sev}]{s.severity.value}[/{sev}]  lag={fmt_int(s.total_lag)}  "
            f"max-lag-time={fmt_seconds(s.max_lag_seconds)}  in={_rate(v.produce_rate)}  "
            f"out={_rate(v.consume_rate)}  {eta_txt}"
        )
        for reason in s.reasons:
            console.print(f"  - {reason}")
        t = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("TOPIC", "PARTITION", "STATUS", "LAG", "LAG-TIME", "EXPLANATION"):
            t.add_column(col, justify="right" if col in ("PARTITION", "LAG", "LAG-TIME") else "left")
        for p in s.partitions:
            ps = STATUS_STYLE.get(p.status, "")
            t.add_row(p.tp.topic, str(p.tp.partition), f"[{ps}]{p.status.value}[/{ps}]",
                      fmt_int(p.lag), fmt_seconds(p.lag_seconds), p.explanation)
        console.print(t)
        console.print()

