"""``opskit page trigger|resolve|acknowledge``: PagerDuty incidents by hand (Events API v2).

Dry run by default: the event is shown and nothing is sent; ``--execute`` sends it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from opskit.adapters.paging.pagerduty import (
    DEFAULT_BASE_URL,
    PagerDutyEvents,
    PagerDutySettings,
    build_event,
    read_routing_key,
)
from opskit.errors import UsageError

app = typer.Typer(help="Trigger, acknowledge or resolve PagerDuty incidents (Events API v2).",
                  no_args_is_help=True)

KeyFileOpt = Annotated[Path, typer.Option(
    "--routing-key-file", envvar="OPSKIT_PAGERDUTY_ROUTING_KEY_FILE",
    help="file holding the Events API v2 integration (routing) key")]
UrlOpt = Annotated[str, typer.Option(
    "--events-url", envvar="OPSKIT_PAGERDUTY_URL", help="Events API base URL")]
CaOpt = Annotated[Path | None, typer.Option(
    "--ca-file", envvar="OPSKIT_PAGERDUTY_CA_FILE", help="CA bundle to trust for --events-url",
    show_default=False)]
RetriesOpt = Annotated[int, typer.Option("--max-retries", min=0, max=10,
                                         help="retries on 429/5xx/network errors")]
ExecuteOpt = Annotated[bool, typer.Option("--execute", help="send the event (default: dry run)")]
HttpTimeoutOpt = Annotated[float, typer.Option(
    "--timeout", min=0.5, max=60,
    help="seconds to wait for each HTTP call; the event gives up after 3 times this")]


def settings(key_file: Path, url: str, ca_file: Path | None, retries: int,
             timeout: float = 10.0) -> PagerDutySettings:
    if not url.startswith("https://"):
        raise UsageError(f"--events-url must be an https:// URL, not {url!r}")
    if ca_file is not None and not ca_file.is_file():
        raise UsageError(f"--ca-file {ca_file} does not exist")
    return PagerDutySettings(routing_key=read_routing_key(key_file), base_url=url,
                             ca_file=str(ca_file) if ca_file else None, max_retries=retries,
                             timeout=timeout, deadline=3 * timeout)


def _details(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k:
            raise UsageError(f"--detail must be KEY=VALUE, not {p!r}")
        out[k] = v
    return out


def _send(event: dict[str, object], s: PagerDutySettings, execute: bool) -> int:
    shown = {"routing_key": s.routing_key[:4] + "..." + s.routing_key[-2:], **event}
    if not execute:
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        sys.stderr.write(f"dry run: nothing sent to {s.base_url}; add --execute to send\n")
        return 0
    with PagerDutyEvents(s) as pd:
        dedup = pd.send(event)
    sys.stdout.write(f"{event['event_action']}: accepted, dedup_key={dedup}\n")
    return 0


@app.command("trigger")
def trigger(
    summary: Annotated[str, typer.Option("--summary", help="what is wrong (<= 1024 chars)")],
    routing_key_file: KeyFileOpt,
    source: Annotated[str, typer.Option("--source", help="affected system")] = "opskit",
    severity: Annotated[str, typer.Option("--severity",
                                          help="critical, error, warning or info")] = "critical",
    dedup_key: Annotated[str | None, typer.Option(
        "--dedup-key", help="incident key; same key = same incident", show_default=False)] = None,
    detail: Annotated[list[str] | None, typer.Option(
        "--detail", help="KEY=VALUE custom detail (repeatable)", show_default=False)] = None,
    link: Annotated[list[str] | None, typer.Option(
        "--link", help="URL to attach, e.g. a runbook (repeatable)", show_default=False)] = None,
    events_url: UrlOpt = DEFAULT_BASE_URL,
    ca_file: CaOpt = None,
    max_retries: RetriesOpt = 3,
    timeout: HttpTimeoutOpt = 10.0,
    execute: ExecuteOpt = False,
) -> int:
    """Open (or add to) an incident."""
    event = build_event("trigger", dedup_key, summary, source, severity,
                        _details(detail or []) or None,
                        [{"href": u, "text": "link"} for u in (link or [])] or None)
    return _send(event, settings(routing_key_file, events_url, ca_file, max_retries, timeout), execute)


@app.command("resolve")
def resolve(
    dedup_key: Annotated[str, typer.Option("--dedup-key", help="incident key")],
    routing_key_file: KeyFileOpt,
    events_url: UrlOpt = DEFAULT_BASE_URL,
    ca_file: CaOpt = None,
    max_retries: RetriesOpt = 3,
    timeout: HttpTimeoutOpt = 10.0,
    execute: ExecuteOpt = False,
) -> int:
    """Resolve the incident with this dedup key."""
    return _send(build_event("resolve", dedup_key),
                 settings(routing_key_file, events_url, ca_file, max_retries, timeout), execute)


@app.command("acknowledge")
def acknowledge(
    dedup_key: Annotated[str, typer.Option("--dedup-key", help="incident key")],
    routing_key_file: KeyFileOpt,
    events_url: UrlOpt = DEFAULT_BASE_URL,
    ca_file: CaOpt = None,
    max_retries: RetriesOpt = 3,
    timeout: HttpTimeoutOpt = 10.0,
    execute: ExecuteOpt = False,
) -> int:
    """Acknowledge the incident with this dedup key."""
    return _send(build_event("acknowledge", dedup_key),
                 settings(routing_key_file, events_url, ca_file, max_retries, timeout), execute)
