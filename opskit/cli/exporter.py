"""``opskit exporter``: a Prometheus exporter for lag, topics and cluster health.

Collection runs in the background every ``--interval`` (or aligned to the scrapes); ``/metrics`` serves the
latest snapshot and never waits on Kafka. See docs/exporter.md.

Imports: the served exporter's HTTP process (``--collector process``, the default)
only serves bytes, so it never imports the collection code (the Kafka clients, the
snapshot build, the status rules): its collector child imports it after the fork
(:mod:`opskit.exporter.process`). ``--once`` and ``--collector thread`` import it
where they use it. ``tests/integration/test_exporter_imports_live.py`` checks both
processes against a real broker.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Annotated

import typer

from opskit.adapters.files.config_file import resolve_connection
from opskit.adapters.files.safe_read import read_secret, read_text
from opskit.adapters.http.streamnest import is_http_bootstrap
from opskit.cli.common import STATE, BootstrapOpt, ContextOpt, load_config, setup_logging
from opskit.cli.validate import DAY, HOUR, parse_duration_option
from opskit.errors import (
    AuthenticationError,
    IncompleteError,
    InvalidInputError,
    KafkaUnavailableError,
    UsageError,
)
from opskit.exporter.options import ExporterOptions, Granularity, NameFilter
from opskit.exporter.server import WebConfig, serve_until_signal

if TYPE_CHECKING:
    from opskit.exporter.engine import Exporter
    from opskit.exporter.process import ProcessExporter

log = logging.getLogger(__name__)


def _read_secret(path: str | None, flag: str) -> str | None:
    if path is None:
        return None
    return read_secret(path, flag)


def exporter(
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="HTTP port (0: any free port)")] = 9308,
    listen: Annotated[str, typer.Option("--listen", help="address to bind")] = "0.0.0.0",
    interval: Annotated[str, typer.Option("--interval", help="time between collections, e.g. 15s (1s to 1h)")] = "15s",
    collection_timeout: Annotated[str | None, typer.Option("--collection-timeout", help="a cycle longer than this counts as a timeout and marks Kafka down (default: 4 x interval, at least 30s; at most 1h)", show_default=False)] = None,
    stale_after: Annotated[str | None, typer.Option("--stale-after", help="keep serving the last good data this long after collection fails (default: 4 x interval, at least 60s; at most 7d)", show_default=False)] = None,
    group_allow: Annotated[list[str] | None, typer.Option("--group-allow", help="regex; only groups fully matching one (repeatable)")] = None,
    group_deny: Annotated[list[str] | None, typer.Option("--group-deny", help="regex; drop groups fully matching one (repeatable)")] = None,
    topic_allow: Annotated[list[str] | None, typer.Option("--topic-allow", help="regex; only topics fully matching one (repeatable)")] = None,
    topic_deny: Annotated[list[str] | None, typer.Option("--topic-deny", help="regex; drop topics fully matching one (repeatable)")] = None,
    granularity: Annotated[Granularity, typer.Option("--granularity", help="partition or topic (topic drops per-partition series)")] = Granularity.PARTITION,
    lag_time_budget: Annotated[int, typer.Option("--lag-time-budget", min=0, help="new record reads for lag in seconds per cycle (largest lag first); the rest are estimated")] = 2000,
    no_lag_time: Annotated[bool, typer.Option("--no-lag-time", help="do not read record timestamps (lag seconds only from the offset timeline)")] = False,
    no_log_dirs: Annotated[bool, typer.Option("--no-log-dirs", help="do not read partition sizes (no bytes/s, no topic size)")] = False,
    status_window: Annotated[str, typer.Option("--status-window", help="window of the Burrow-style group status and rates (at most 7d)")] = "10m",
    status_samples: Annotated[int, typer.Option("--status-samples", min=3, max=60, help="samples kept per group-partition in the status window (memory: ~160 bytes each)")] = 10,
    expected_brokers: Annotated[int | None, typer.Option("--expected-brokers", min=1, help="brokers the cluster should have", show_default=False)] = None,
    web_tls_cert: Annotated[str | None, typer.Option("--web-tls-cert", help="serve HTTPS with this certificate (PEM)", show_default=False)] = None,
    web_tls_key: Annotated[str | None, typer.Option("--web-tls-key", help="private key of --web-tls-cert (PEM)", show_default=False)] = None,
    web_user: Annotated[str | None, typer.Option("--web-user", help="require HTTP basic auth with this user on /metrics", show_default=False)] = None,
    web_password_file: Annotated[str | None, typer.Option("--web-password-file", help="file holding the basic auth password", show_default=False)] = None,
    align_to_scrapes: Annotated[bool, typer.Option("--align-to-scrapes/--no-align-to-scrapes", help="when one scraper scrapes at a regular period, start each cycle so that it ends just before the next scrape (at most one cycle per period or interval); off: every --interval")] = True,
    collector: Annotated[str, typer.Option("--collector", help="process (default: collection in a child process, scrapes never wait for the interpreter lock) or thread")] = "process",
    once: Annotated[bool, typer.Option("--once", help="collect once, print /metrics to stdout and exit (exit 3 if Kafka is down or a family could not be read)")] = False,
    bootstrap_server: BootstrapOpt = None,
    bootstrap: Annotated[str | None, typer.Option("--bootstrap", help="alias of --bootstrap-server", show_default=False, hidden=True)] = None,
    context: ContextOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.5, max=600, help="seconds to wait for each Kafka request")] = 10.0,
) -> int:
    """Serve Prometheus metrics on /metrics (kafka_exporter-compatible names plus opskit_*),
    with /healthz and /ready. Runs until interrupted."""
    if collector not in ("process", "thread"):
        raise UsageError(f"--collector must be process or thread, not {collector!r}")
    interval_s = parse_duration_option(interval, "--interval", HOUR, minimum=1.0)
    ct = (parse_duration_option(collection_timeout, "--collection-timeout", HOUR)
          if collection_timeout else max(30.0, 4 * interval_s))
    sa = (parse_duration_option(stale_after, "--stale-after", 7 * DAY)
          if stale_after else max(60.0, 4 * interval_s))
    window_s = parse_duration_option(status_window, "--status-window", 7 * DAY)
    options = ExporterOptions(
        interval_s=interval_s, collection_timeout_s=ct, kafka_timeout_s=timeout,
        groups=NameFilter.of(group_allow, group_deny, "group"),
        topics=NameFilter.of(topic_allow, topic_deny, "topic"),
        granularity=granularity, lag_time_budget=lag_time_budget, lag_time=not no_lag_time,
        stale_after_s=sa, status_window_s=window_s, status_samples=status_samples,
        expected_brokers=expected_brokers,
        log_dirs=not no_log_dirs, align_to_scrapes=align_to_scrapes,
    )
    password = _read_secret(web_password_file, "--web-password-file")
    for flag, path in (("--web-tls-cert", web_tls_cert), ("--web-tls-key", web_tls_key)):
        if path is not None:  # missing: 4; a device, a directory, binary: 2
            read_text(path, flag)
    if web_tls_cert and web_tls_key:  # a usable pair, before anything starts
        import ssl

        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(web_tls_cert, web_tls_key)
        except (ssl.SSLError, OSError) as e:
            raise InvalidInputError(f"--web-tls-cert/--web-tls-key: not a PEM certificate and "
                                    f"its key ({getattr(e, 'reason', None) or e})") from None
    web = WebConfig(listen, port, web_tls_cert, web_tls_key, web_user, password)
    if bootstrap_server and bootstrap and bootstrap_server != bootstrap:
        raise UsageError("give --bootstrap-server once")
    conn = resolve_connection(bootstrap_server or bootstrap, context, allow_http=True)
    if is_http_bootstrap(conn.bootstrap):  # StreamNest: up + counters (cli/streamnest.py)
        from opskit.cli import streamnest  # only for StreamNest: Kafka's exporter never needs it

        return streamnest.exporter(conn, web, interval_s, timeout, once)
    cfg = load_config()
    if once:
        from opskit.adapters.kafka.kafka_python import quiet_kafka_python
        from opskit.exporter.collector import KafkaSource
        from opskit.exporter.engine import Exporter

        quiet_kafka_python(STATE.debug)
        if not STATE.debug:  # the failure is the one error line below, not a log line too
            for name in ("opskit.exporter.engine", "opskit.exporter.collector"):
                logging.getLogger(name).setLevel(logging.ERROR)
        source = KafkaSource(conn, options, thresholds=cfg.lag_thresholds)
        once_engine = Exporter(source, options)
        once_engine.run_cycle()
        st = once_engine.status()
        if not st.up and st.errors.get("auth"):
            # a wrong password or CA is not an outage: its own exit code and one line
            raise AuthenticationError(once_engine.last_error or "authentication failed")
        source.close()
        typer.echo(once_engine.scrape().decode(), nl=False)
        st = once_engine.status()
        meta = st.families.get("metadata")
        if meta is None or not meta.ok:
            raise KafkaUnavailableError(f"collection failed ({once_engine.ready()[1]})")
        failed = [(n, r) for n, r in st.families.items() if not r.ok]
        if failed:
            # every family it could not read is named; the metrics above say the same
            # (opskit_exporter_family_up 0): an incomplete collection is never exit 0
            raise IncompleteError(
                "collection incomplete: " + "; ".join(
                    f"{n.replace('_', ' ')} could not be read ({r.kind}: {r.message})"
                    for n, r in failed))
        if not st.up:
            raise KafkaUnavailableError(f"collection failed ({once_engine.ready()[1]})")
        return 0
    engine: Exporter | ProcessExporter
    if collector == "thread":
        from opskit.adapters.kafka.kafka_python import quiet_kafka_python
        from opskit.exporter.collector import KafkaSource
        from opskit.exporter.engine import Exporter

        quiet_kafka_python(STATE.debug)
        engine = Exporter(KafkaSource(conn, options, thresholds=cfg.lag_thresholds), options)
    else:
        # this process only serves: the collector child imports the collection code
        # (and quiets kafka-python) itself, after the fork
        from opskit.exporter.process import ProcessExporter

        # fork is safe here: no thread and no Kafka client exists yet in this process
        engine = ProcessExporter(conn, options, thresholds=cfg.lag_thresholds,
                                 log_setup=functools.partial(setup_logging, STATE.debug,
                                                             STATE.log_format),
                                 start_method="fork")
    scheme = "https" if web_tls_cert else "http"
    # a plain line (no rich console: the serving process would import it for this alone)
    serve_until_signal(engine, web, lambda bound: typer.echo(
        f"opskit exporter: serving {scheme}://{listen}:{bound}/metrics for {conn.bootstrap} "
        f"every {interval_s:g}s", err=True))
    return 0
