"""Every input of ``opskit playbook scale-out`` and ``resume`` checked before the run
starts: before the journal is written, a node started, a Lease taken or Kafka asked
to change anything. A run that would fail on its input only at the step that reads it
(the registry at ``update_registry``, the PagerDuty CA file when the first page is
sent) would have changed the cluster by then; here it fails first, with one line and
exit 2 (a bad value) or 4 (a file that does not exist).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opskit.errors import ConfigError, UsageError


@dataclass(frozen=True)
class RunInputs:
    """The checked inputs of a run (the values the run itself still takes as given)."""

    rate: int
    window: Any            # core.scaleout.window.Window | None


def check_registry(path: Path) -> None:
    """The registry file a run rewrites after the RF raise: a regular file that reads as
    a topic registry (bounded read, well-formed YAML, the registry schema)."""
    from opskit.adapters.files.registry_file import load_registry

    load_registry(path)          # missing: exit 4; unreadable, malformed, wrong schema: 2
    if not path.is_file():
        raise UsageError(f"--registry {path}: not a regular file (the run rewrites it)")


def check_pager(routing_key_file: Path | None, pagerduty_url: str | None,
                ca_file: Path | None) -> None:
    """The paging options as the first page will use them: the routing key, the Events
    API URL and the CA bundle, checked now rather than when a run halts."""
    if routing_key_file is None:
        given = [o for o, v in (("--pagerduty-url", pagerduty_url),
                                ("--pagerduty-ca-file", ca_file)) if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} need(s) --routing-key-file (nothing would "
                             "be paged without it)")
        return
    from opskit.adapters.files.safe_read import read_text
    from opskit.adapters.paging.pagerduty import (
        DEFAULT_BASE_URL,
        PagerDutyEvents,
        PagerDutySettings,
        read_routing_key,
    )

    key = read_routing_key(routing_key_file)
    url = DEFAULT_BASE_URL if pagerduty_url is None else pagerduty_url
    try:
        parts = urlsplit(url)
        ok = parts.scheme == "https" and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:          # a bad port or IPv6 literal
        ok = False
    if not ok:
        shown = url if len(url) <= 200 else url[:200] + "..."
        raise UsageError(f"--pagerduty-url must be an https:// URL with a host, not {shown!r}")
    if ca_file is not None:
        pem = read_text(ca_file, "PagerDuty CA file")     # missing: 4; binary, huge: 2
        try:
            ssl.create_default_context(cadata=pem)
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(f"--pagerduty-ca-file {ca_file}: not a PEM CA certificate "
                              f"bundle ({type(e).__name__})") from None
    # the client refuses a malformed URL only when built: build it (nothing is sent)
    with PagerDutyEvents(PagerDutySettings(key, url, str(ca_file) if ca_file else None)):
        pass


def check_k8s_names(namespace: str | None, statefulset: str | None) -> None:
    """--namespace and --statefulset as Kubernetes accepts them (the journal ConfigMap,
    the Lease and the broker StatefulSet ``NAME-broker`` with its pods and headless
    Service are named after them)."""
    from opskit.core.k8s_names import dns_label_problem

    for opt, value, limit in (("--namespace", namespace, 63), ("--statefulset", statefulset, 47)):
        if value is None:
            continue
        why = dns_label_problem(value, limit)
        if why is not None:
            shown = value if len(value) <= 80 else f"{value[:80]}..."
            raise UsageError(f"{opt} {shown!r} {why}")


def check_run_inputs(*, throttle: str, window: str | None, registry: Path | None,
                     routing_key_file: Path | None, pagerduty_url: str | None,
                     pagerduty_ca_file: Path | None) -> RunInputs:
    """All of a run's inputs, or the first bad one as an OpskitError (one line)."""
    from opskit.core.reassign.plan_input import parse_rate
    from opskit.core.scaleout.window import parse_window

    rate = parse_rate(throttle)
    win = parse_window(window) if window is not None else None
    if registry is not None:
        check_registry(registry)
    check_pager(routing_key_file, pagerduty_url, pagerduty_ca_file)
    return RunInputs(rate, win)
