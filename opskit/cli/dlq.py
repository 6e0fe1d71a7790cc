"""``opskit dlq watch``: HIP-30's dead-letter-monitor, paging PagerDuty per source topic.

Dry run by default: dead letters are read without committing and the pages are
printed, not sent. ``--execute`` sends them, then saves the state and commits.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from opskit.adapters.dlq.consumer import DeadLetterConsumer, load_state, save_state
from opskit.adapters.files.config_file import resolve_connection
from opskit.adapters.files.safe_write import safe_file_name
from opskit.adapters.paging.pagerduty import (
    DEFAULT_BASE_URL,
    PagerDutyEvents,
    build_event,
)
from opskit.cli.common import BootstrapOpt, ContextOpt, TimeoutOpt
from opskit.cli.page import CaOpt, RetriesOpt, UrlOpt, settings
from opskit.cli.validate import DAY, parse_duration_option
from opskit.core.dlq import DlqPolicy, DlqState, PageAction, observe, plan_pages
from opskit.errors import OpskitError, UsageError
from opskit.paths import state_dir

log = logging.getLogger(__name__)

app = typer.Typer(help="Dead-letter topic monitoring and paging (HIP-30 dead-letter-monitor).",
                  no_args_is_help=True)

RUNBOOK = "https://github.com/hanzoai/opskit/blob/main/runbooks/KafkaDeadLetterGrowing.md"


#: bound of the duration options (named in their help)
MAX_DURATION_S = 30 * DAY


def _seconds(opt: str, text: str) -> float:
    return parse_duration_option(text, opt, MAX_DURATION_S, minimum=0.0)  # 0: at once


def _emit(action: PageAction, sent: bool) -> None:
    sys.stdout.write(json.dumps({**action.to_dict(), "sent": sent}, default=str) + "\n")
    sys.stdout.flush()


@app.command("watch")
def watch(
    routing_key_file: Annotated[Path, typer.Option(
        "--routing-key-file", envvar="OPSKIT_PAGERDUTY_ROUTING_KEY_FILE",
        help="file holding the Events API v2 routing key")],
    bootstrap: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 10.0,
    topic: Annotated[str, typer.Option("--topic", help="dead-letter topic")] = "dead_letter",
    group: Annotated[str, typer.Option("--group", help="the watcher's own consumer group")] =
        "dead-letter-monitor",
    cluster: Annotated[str | None, typer.Option(
        "--cluster", help="cluster name in pages and dedup keys (default: context or bootstrap)",
        show_default=False)] = None,
    quiet_period: Annotated[str, typer.Option(
        "--quiet-period", help="resolve a topic's incident after this long without dead letters (at most 30d)")]
        = "15m",
    update_interval: Annotated[str, typer.Option(
        "--update-interval", help="at most one update per incident this often (at most 30d)")] = "5m",
    severity: Annotated[str, typer.Option("--severity", help="PagerDuty severity")] = "error",
    runbook_url: Annotated[str, typer.Option("--runbook-url", help="link attached to pages")] =
        RUNBOOK,
    state_file: Annotated[Path | None, typer.Option(
        "--state-file", help="open incidents (default: $OPSKIT_STATE/dlq/GROUP.json)",
        show_default=False)] = None,
    once: Annotated[bool, typer.Option(
        "--once", help="read up to the end, page, resolve what is quiet, then exit")] = False,
    duration: Annotated[str | None, typer.Option(
        "--duration", help="stop after this long (e.g. 10m, at most 30d); default: run until interrupted",
        show_default=False)] = None,
    events_url: UrlOpt = DEFAULT_BASE_URL,
    ca_file: CaOpt = None,
    max_retries: RetriesOpt = 3,
    execute: Annotated[bool, typer.Option(
        "--execute", help="send pages and commit offsets (default: dry run)")] = False,
) -> int:
    """Consume the dead-letter topic; one PagerDuty incident per source topic."""
    if severity not in ("critical", "error", "warning", "info"):
        raise UsageError(f"--severity must be critical, error, warning or info, not {severity!r}")
    quiet = _seconds("--quiet-period", quiet_period)
    update = _seconds("--update-interval", update_interval)
    # '' is a mistake (an unset variable), not "run until interrupted"; 0 would end at once
    stop_after = (None if duration is None
                  else parse_duration_option(duration, "--duration", MAX_DURATION_S))
    pd_settings = settings(routing_key_file, events_url, ca_file, max_retries)
    conn = resolve_connection(bootstrap, context)
    policy = DlqPolicy(cluster=cluster or context or conn.bootstrap, quiet_period=quiet,
                       update_interval=update, severity=severity, runbook_url=runbook_url)
    sfile = state_file or state_dir() / "dlq" / f"{safe_file_name(group)}.json"
    state = load_state(sfile)
    started = time.monotonic()
    with DeadLetterConsumer(conn, topic, group, timeout) as consumer, \
            PagerDutyEvents(pd_settings) as pd:
        caught_up_passes = 0
        while True:
            letters = consumer.poll(500, 1.0)
            now = time.time()
            new_state, actions = plan_pages(observe(state, letters, now), policy, now)
            if execute:
                _send_all(pd, actions)
                save_state(sfile, new_state)
                consumer.commit()
            else:
                for a in actions:
                    _emit(a, sent=False)
            state = new_state
            if once and not letters and consumer.at_end():
                # one more planning pass after catching up, so quiet topics resolve
                caught_up_passes += 1
                if caught_up_passes >= 2:
                    break
            if once and consumer.assigned() == 0 and \
                    time.monotonic() - started > max(timeout, 10.0) * 3:
                sys.stderr.write(f"no partition of {topic} was assigned to this member: another "
                                 f"member of group {group} owns them; stopping\n")
                break
            if stop_after is not None and time.monotonic() - started >= stop_after:
                break
    if not execute:  # said at the end: a failure before it is one error line
        sys.stderr.write("dry run: pages were printed, not sent; offsets were not committed; "
                         "add --execute to page\n")
    _summary(state)
    return 0


def _send_all(pd: PagerDutyEvents, actions: list[PageAction]) -> None:
    for a in actions:
        if a.action == "trigger":
            event = build_event("trigger", a.dedup_key, a.summary, f"{a.source_topic}",
                                a.severity or "error", a.details, list(a.links) or None)
        else:
            event = build_event("resolve", a.dedup_key)
        try:
            pd.send(event)
        except OpskitError as e:
            raise type(e)(f"{e} (state not saved, offsets not committed: "
                          "the next run pages again)") from e
        _emit(a, sent=True)


def _summary(state: DlqState) -> None:
    open_ = ", ".join(f"{t} ({i.total})" for t, i in sorted(state.incidents.items())) or "none"
    sys.stderr.write(f"open dead-letter incidents: {open_}\n")
