"""``opskit health``: brokers, controller and KRaft quorum, partition replication, reassignments."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from opskit.adapters.files.config_file import resolve_connection
from opskit.adapters.health.cluster import gather_health_input
from opskit.adapters.http.streamnest import is_http_bootstrap
from opskit.adapters.kafka.kafka_python import quiet_kafka_python
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
)
from opskit.core.health import (
    DEFAULT_IMBALANCE_WARN_PCT,
    DEFAULT_QUORUM_LAG_WARN,
    HealthPolicy,
    HealthReport,
    evaluate_health,
)
from opskit.core.models import Severity

SEVERITY_STYLE = {Severity.OK: "green", Severity.WARNING: "yellow", Severity.CRITICAL: "red",
                  Severity.UNKNOWN: "magenta"}
MAX_ROWS = 20


def health(
    expected_brokers: Annotated[int | None, typer.Option(
        "--expected-brokers", min=1,
        help="brokers that should be registered (default: distinct replica ids in use)",
        show_default=False)] = None,
    imbalance_warn_pct: Annotated[float, typer.Option(
        "--imbalance-warn-pct", min=0, max=100,
        help="warn when more than this % of partitions are not led by their preferred replica")
    ] = DEFAULT_IMBALANCE_WARN_PCT,
    quorum_lag_warn: Annotated[int, typer.Option(
        "--quorum-lag-warn", min=0,
        help="warn when a quorum voter/observer trails the leader by more records")
    ] = DEFAULT_QUORUM_LAG_WARN,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
) -> int:
    """Cluster health: brokers vs expected, controller and KRaft quorum, URP, min-ISR, offline
    partitions, preferred-leader imbalance and reassignments in progress.

    Exit code (Nagios): 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (unreachable, or a check
    could not run and nothing is worse).
    """
    target = resolve_connection(bootstrap_server, context, allow_http=True)
    if is_http_bootstrap(target.bootstrap):  # StreamNest: its own checks (cli/streamnest.py)
        return streamnest.health(target, expected_brokers, output, timeout)
    quiet_kafka_python(STATE.debug)
    policy = HealthPolicy(imbalance_warn_pct=imbalance_warn_pct, quorum_lag_warn=quorum_lag_warn)
    with connect(bootstrap_server, context, timeout) as admin:
        inp = gather_health_input(admin, expected_brokers)
    report = evaluate_health(inp, policy)
    emit(report.to_dict(), output, lambda c: render(c, report))
    return report.severity.nagios_code


def _sev(s: Severity) -> str:
    style = SEVERITY_STYLE[s]
    return f"[{style}]{s.value}[/{style}]"


def _n(count: int | None) -> str:
    return "?" if count is None else str(count)


def render(console: Console, report: HealthReport) -> None:
    console.print(f"[bold]{report.summary}[/bold]")
    c = report.counts
    q = report.quorum
    quorum = (f"leader {q.leader_id}, voters {list(q.voters)}, observers {list(q.observers)}"
              if q is not None else "unknown")
    console.print(
        f"brokers {c.brokers_registered}/{c.brokers_expected} {list(report.brokers)}  "
        f"quorum: {quorum}  partitions {c.partitions}  urp {c.urp}  under-min-isr {_n(c.under_min_isr)}  "
        f"at-min-isr {_n(c.at_min_isr)}  offline {c.offline}  not-preferred-leader "
        f"{c.preferred_leader_imbalance}  reassignments "
        f"{_n(c.reassignments)}")
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("CHECK")
    t.add_column("STATUS")
    t.add_column("DETAIL", overflow="fold")
    for f in report.findings:
        t.add_row(f.check, _sev(f.severity), f.message)
    console.print(t)
    bad = [f for f in report.findings if f.partitions and f.severity is not Severity.OK]
    for f in bad:
        console.print(f"\n[bold]{f.check}[/bold] ({len(f.partitions)})")
        pt = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "MIN-ISR", "NOTE"):
            pt.add_column(col)
        for p in f.partitions[:MAX_ROWS]:
            notes = []
            if p.leader_down:
                notes.append("leader broker down")
            if p.down_replicas:
                notes.append(f"down: {','.join(map(str, p.down_replicas))}")
            pt.add_row(p.topic, str(p.partition), str(p.leader) if p.leader >= 0 else "none",
                       ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
                       "-" if p.min_isr is None else str(p.min_isr), "; ".join(notes))
        console.print(pt)
        if len(f.partitions) > MAX_ROWS:
            console.print(f"  ... and {len(f.partitions) - MAX_ROWS} more (use -o json for all)")
