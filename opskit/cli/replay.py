"""``opskit replay``: replay a group's backlog with Spark, then move the group past it.

Plan (numbers fixed now) -> manifest -> show -> (``--execute``) spark-submit
``spark_jobs/lag_replay.py`` -> verify the job's result -> guarded commit
(group still empty, offsets unchanged since planning, backup first).

Exit codes: 0 done, dry run shown, or nothing to do (already committed, empty
range); 2 bad flags or malformed manifest; 3 Kafka unreachable, or the job's
result does not match the plan (nothing committed); 4 unknown group, topic or
manifest; 5 refused (group active before the job, or became active / moved its
offsets during it: written but not committed); 6 Kafka error, or the Spark job
failed.

Test hook (environment, never set in production):
``OPSKIT_TEST_PAUSE_BEFORE_COMMIT=SECONDS`` sleeps after the job's result is
verified and before the guarded commit (shared with ``opskit offsets``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from opskit.adapters.files.config_file import resolve_connection
from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.offsets.admin import OffsetsAdmin
from opskit.adapters.spark.replay_io import (
    default_replay_dir,
    guarded_commit,
    load_manifest,
    manifest_path,
    plan_from_cluster,
    read_result_dir,
    save_manifest,
)
from opskit.adapters.spark.secret_pipe import served_secret
from opskit.adapters.spark.submit import (
    SubmitOptions,
    build_command,
    check_submittable,
    ensure_spark_jars,
    parse_conf,
    require_replay_extra,
    run_spark_submit,
)
from opskit.cli import exits
from opskit.cli.common import (
    BootstrapOpt,
    ContextOpt,
    Output,
    OutputOpt,
    TimeoutOpt,
    emit,
    fmt_int,
    stderr,
)
from opskit.core.connection import ConnectionConfig
from opskit.core.offset_reset.offsets_csv import parse_offsets_csv
from opskit.core.offset_reset.time_text import format_ms, parse_datetime
from opskit.core.replay_k8s import K8sReplayTarget
from opskit.core.replay_plan import (
    DEFAULT_PIPELINES,
    EndKind,
    JobResult,
    NoCommitPolicy,
    Pipeline,
    ReplayManifest,
    ReplayRequest,
    ReplayStatus,
    StartKind,
    job_spec,
    verify_result,
)
from opskit.core.replay_security import (
    check_kafka_options,
    spark_kafka_login,
    spark_kafka_options,
)
from opskit.errors import (
    InconsistentStateError,
    InvalidInputError,
    KafkaOperationError,
    RefusedError,
    UsageError,
)

PAUSE_BEFORE_COMMIT_ENV = "OPSKIT_TEST_PAUSE_BEFORE_COMMIT"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def render(console: Console, m: ReplayManifest) -> None:
    console.print(
        f"[bold]replay {m.replay_id}[/bold]  group={escape(m.group_id)} "
        f"state={m.group_state.value}  pipeline={m.pipeline.value}  status={m.status.value}\n"
        f"  start={m.start.value}"
        + (f" {format_ms(m.start_timestamp_ms)}" if m.start_timestamp_ms is not None else "")
        + f" (no commit: {m.no_commit.value})  end={m.end.value}"
        + (f" {format_ms(m.end_timestamp_ms)}" if m.end_timestamp_ms is not None else "")
        + f"  planned {format_ms(m.planned_at_ms)}\n"
        f"  partitions={len(m.ranges)}  expected records<={fmt_int(m.expected_records)}  "
        f"lost to retention={fmt_int(m.lost_records)}")
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("TOPIC", "PARTITION", "COMMITTED", "START", "END", "RECORDS<=", "LOG-START",
                "LOG-END", "READ", "WRITTEN", "DEAD", "NOTE"):
        t.add_column(col, justify="left" if col in ("TOPIC", "NOTE") else "right")
    got = {p.tp: p for p in (m.result.partitions if m.result else ())}
    for r in m.ranges:
        p = got.get(r.tp)
        t.add_row(escape(r.tp.topic), str(r.tp.partition), fmt_int(r.committed),
                  fmt_int(r.start), fmt_int(r.end), fmt_int(r.expected_records),
                  fmt_int(r.log_start), fmt_int(r.log_end),
                  fmt_int(p.records if p else None), fmt_int(p.written if p else None),
                  fmt_int(p.dead_letters if p else None), escape(r.note or ""))
    console.print(t)
    for e in m.events:
        console.print(f"  {escape(json.dumps(dict(e), default=str))}")


def _show(m: ReplayManifest, output: Output) -> None:
    emit(m.to_dict(), output, lambda c: render(c, m))


def _request(group: str, topics: list[str], pipeline: Pipeline | None, from_time: str | None,
             from_offsets: Path | None, to_time: str | None,
             no_commit: NoCommitPolicy) -> ReplayRequest:
    if from_time and from_offsets:
        raise UsageError("use either --from-time or --from-offsets, not both")
    from datetime import UTC

    start_ts = parse_datetime(from_time, UTC) if from_time else None
    end_ts = parse_datetime(to_time, UTC) if to_time else None
    offsets = {}
    if from_offsets is not None:
        text = read_text(from_offsets, "offsets file")
        parsed = parse_offsets_csv(text)
        if set(parsed) - {None, group}:
            raise InvalidInputError(f"{from_offsets} has offsets of another group")
        offsets = {**parsed.get(None, {}), **parsed.get(group, {})}
        if not topics:
            topics = sorted({tp.topic for tp in offsets})
    chosen = pipeline or DEFAULT_PIPELINES.get(group)
    if chosen is None:
        chosen = Pipeline.BILLING if topics == ["llm_usage"] else Pipeline.EVENTS
    start = (StartKind.TIMESTAMP if start_ts is not None else
             StartKind.OFFSETS if from_offsets is not None else StartKind.COMMITTED)
    return ReplayRequest(group, tuple(dict.fromkeys(topics)), chosen, start, start_ts, offsets,
                         EndKind.TIMESTAMP if end_ts is not None else EndKind.LATEST, end_ts,
                         no_commit)


def _test_pause() -> None:
    raw = os.environ.get(PAUSE_BEFORE_COMMIT_ENV)
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            raise UsageError(f"${PAUSE_BEFORE_COMMIT_ENV} must be seconds, not {raw!r}") from None
        stderr().print(f"test hook {PAUSE_BEFORE_COMMIT_ENV}: pausing {seconds:g}s before the "
                       "commit")
        time.sleep(seconds)


def _run_job(m: ReplayManifest, output_dir: Path, opts: SubmitOptions,
             dead_letter_topic: str | None, billing_topic: str | None,
             kafka_options: list[str], conn: ConnectionConfig,
             k8s: K8sSubmit | None = None) -> JobResult:
    """Run the job; off Kubernetes with the connection's security settings, the SASL
    password handed over a pipe (never on a command line, in an environment or a file)."""
    login = spark_kafka_login(conn) if k8s is None else None
    if k8s is None:
        kafka_options = spark_kafka_options(conn, kafka_options)
    if login is None:
        return _submit_job(m, output_dir, opts, dead_letter_topic, billing_topic,
                           kafka_options, [], k8s)
    assert conn.password is not None
    with served_secret(conn.password, "kafka-password") as pipe:
        return _submit_job(m, output_dir, opts, dead_letter_topic, billing_topic, kafka_options,
                           ["--kafka-username", login, "--kafka-password-file", str(pipe)], k8s)


def _submit_job(m: ReplayManifest, output_dir: Path, opts: SubmitOptions,
                dead_letter_topic: str | None, billing_topic: str | None,
                kafka_options: list[str], login_args: list[str],
                k8s: K8sSubmit | None) -> JobResult:
    err = stderr()
    jars = ensure_spark_jars()
    if not jars.exact:
        err.print(f"note: Maven Central has no spark-sql-kafka {jars.pyspark}; using connector "
                  f"{jars.connector} (token provider {jars.token_provider}), see docs/replay.md")
    args = ["--spec", json.dumps(job_spec(m), separators=(",", ":")),
            "--bootstrap", m.bootstrap or "", "--output", str(output_dir)]
    if dead_letter_topic:
        args += ["--dead-letter-topic", dead_letter_topic]
    if billing_topic:
        args += ["--billing-topic", billing_topic]
    for item in kafka_options:
        args += ["--kafka-option", item]
    args += login_args
    if k8s is not None:
        from opskit.adapters.spark.k8s import k8s_submit_conf
        from opskit.core.replay_k8s import PASSWORD_ENV

        ours = k8s_submit_conf(k8s.target, output_dir / m.replay_id / "k8s")
        opts = replace(opts, conf=tuple(ours.items()) + opts.conf)  # --conf wins over ours
        if k8s.target.kafka_secret is not None:
            args += ["--kafka-username", k8s.kafka_username or "",
                     "--kafka-password-env", PASSWORD_ENV]
        cmd = build_command(jars, opts, args, job=k8s.target.job_uri, ship_jars=False)
    else:
        cmd = build_command(jars, opts, args)
    err.print(f"submitting the Spark job ({opts.master}); jars: "
              + ", ".join(j.name for j in jars.jars))
    t0 = time.monotonic()
    res = run_spark_submit(
        cmd, lambda msg: err.print(f"  [{time.monotonic() - t0:6.1f}s] {escape(msg)}"))
    if res.returncode != 0:
        raise KafkaOperationError(f"the Spark job failed (exit {res.returncode}): "
                                  f"{res.tail or 'see --debug'}; nothing committed")
    if res.result_line is not None:
        try:
            return JobResult.from_dict(parse_json(res.result_line, "the Spark job's result"))
        except InvalidInputError:
            raise InconsistentStateError("the Spark job printed an unreadable result; "
                                         "nothing committed") from None
    found = read_result_dir(output_dir, m.replay_id)
    if found is None:
        raise InconsistentStateError(
            f"the Spark job finished but no result was found under {output_dir}/{m.replay_id}/"
            "_result (cluster mode: the output must be readable here); nothing committed")
    return found


@dataclass(frozen=True)
class K8sSubmit:
    """``--master k8s://`` settings: pod templates and the password from a Secret."""

    target: K8sReplayTarget
    kafka_username: str | None


def _k8s(master: str, namespace: str | None, image: str | None, service_account: str,
         secret: str | None, username: str | None, job_uri: str) -> K8sSubmit | None:
    given = namespace or image or secret
    if not master.startswith("k8s://"):
        if given:
            raise UsageError("--k8s-* options go with a k8s:// master")
        return None
    if not given:
        return None  # the operator's own --conf settings
    if not (namespace and image):
        raise UsageError("a k8s:// master with opskit's pod templates needs --k8s-namespace "
                         "and --k8s-image")
    if secret and not username:
        raise UsageError("--k8s-kafka-secret needs --kafka-username (the SASL user)")
    target = K8sReplayTarget(namespace=namespace, image=image, service_account=service_account,
                             kafka_secret=secret, job_uri=job_uri)
    target.validate()
    return K8sSubmit(target, username)


def _load_result(path: Path) -> JobResult:
    text = read_text(path, "result file").strip()
    text = text.removeprefix("OPSKIT_RESULT").strip()
    return JobResult.from_dict(parse_json(text, f"result file {path}"))


def replay(
    group: Annotated[str | None, typer.Option("--group", "-g", help="consumer group to replay",
                                              show_default=False)] = None,
    topic: Annotated[list[str] | None, typer.Option(
        "--topic", "-t", help="topic (repeatable; default: the group's committed topics)")] = None,
    pipeline: Annotated[Pipeline | None, typer.Option(
        "--pipeline", help="events (analytics-ingest) or billing (billing-agg); default by "
        "group", show_default=False)] = None,
    from_time: Annotated[str | None, typer.Option(
        "--from-time", help="start at the first record at or after this time (UTC default) "
        "instead of the committed offsets", show_default=False)] = None,
    from_offsets: Annotated[Path | None, typer.Option(
        "--from-offsets", help="CSV topic,partition,offset of explicit starts",
        show_default=False)] = None,
    to_time: Annotated[str | None, typer.Option(
        "--to-time", help="end at the first record at or after this time (default: log end "
        "now)", show_default=False)] = None,
    no_commit: Annotated[NoCommitPolicy, typer.Option(
        "--no-commit", help="partitions without a committed offset: earliest, latest, skip "
        "or fail")] = NoCommitPolicy.EARLIEST,
    manifest: Annotated[Path | None, typer.Option(
        "--manifest", help="run (or finish) an existing manifest instead of planning",
        show_default=False)] = None,
    result_file: Annotated[Path | None, typer.Option(
        "--result", help="with --manifest: the job's result (OPSKIT_RESULT line or "
        "_result/part-*.txt) of a job run by hand, e.g. in cluster mode; verify and commit",
        show_default=False)] = None,
    output_dir: Annotated[Path | None, typer.Option(
        "--output-dir", help="where manifests and Parquet output go (default: <state>/replays)",
        show_default=False)] = None,
    dead_letter_topic: Annotated[str | None, typer.Option(
        "--dead-letter-topic", help="also produce malformed events to this topic (HIP-30: "
        "dead_letter)", show_default=False)] = None,
    billing_topic: Annotated[str | None, typer.Option(
        "--billing-topic", help="billing pipeline: produce hourly usage to this topic "
        "(HIP-30: billing_events)", show_default=False)] = None,
    master: Annotated[str, typer.Option("--master", help="Spark master")] = "local[2]",
    deploy_mode: Annotated[str | None, typer.Option(
        "--deploy-mode", help="client or cluster", show_default=False)] = None,
    conf: Annotated[list[str] | None, typer.Option(
        "--conf", help="extra spark-submit --conf KEY=VALUE (repeatable)")] = None,
    kafka_option: Annotated[list[str] | None, typer.Option(
        "--kafka-option", help="KEY=VALUE for Spark's Kafka client (security settings)")] = None,
    driver_memory: Annotated[str, typer.Option("--driver-memory")] = "1g",
    k8s_namespace: Annotated[str | None, typer.Option(
        "--k8s-namespace", help="k8s:// master: the namespace the driver and executors run in "
        "(opskit writes their pod templates)", show_default=False)] = None,
    k8s_image: Annotated[str | None, typer.Option(
        "--k8s-image", help="k8s:// master: the Spark image with the job and the connector jars",
        show_default=False)] = None,
    k8s_service_account: Annotated[str, typer.Option(
        "--k8s-service-account", help="k8s:// master: the driver's service account")] = "spark",
    k8s_kafka_secret: Annotated[str | None, typer.Option(
        "--k8s-kafka-secret", help="k8s:// master: a Secret (key 'password') with the SASL "
        "password; it reaches the pods as an environment variable, never a command line",
        show_default=False)] = None,
    kafka_username: Annotated[str | None, typer.Option(
        "--kafka-username", help="the SASL user the job logs in as (with --k8s-kafka-secret)",
        show_default=False)] = None,
    k8s_job_uri: Annotated[str, typer.Option(
        "--k8s-job-uri", help="k8s:// master: the job file as the driver pod sees it")
    ] = "local:///opt/opskit/lag_replay.py",
    execute: Annotated[bool, typer.Option("--execute", help="run the job and commit")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="plan and write the manifest "
                                          "only (default)")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    backup_dir: Annotated[Path | None, typer.Option(
        "--backup-dir", help="offsets backups (default: <state>/backups)",
        show_default=False)] = None,
    output: OutputOpt = Output.table,
    bootstrap_server: BootstrapOpt = None,
    context: ContextOpt = None,
    timeout: TimeoutOpt = 30.0,
) -> int:
    """Replay a consumer group's backlog with Spark (plan, run, verify, commit).

    Without --execute: plan, write the manifest, show it. With --execute: run
    spark_jobs/lag_replay.py on the planned ranges, verify what it wrote, and
    move the group to the ends of the ranges -- only if the group is still
    empty and its offsets did not move (backup first). A committed manifest
    makes a rerun a no-op.
    """
    if execute and dry_run:
        raise UsageError("use either --execute or --dry-run, not both")
    if deploy_mode not in (None, "client", "cluster"):
        raise UsageError(f"--deploy-mode must be client or cluster, not {deploy_mode!r}")
    opts = SubmitOptions(master=master, deploy_mode=deploy_mode, driver_memory=driver_memory,
                         conf=parse_conf(conf or []))
    check_submittable(opts)
    check_kafka_options(list(kafka_option or []))
    k8s = _k8s(master, k8s_namespace, k8s_image, k8s_service_account, k8s_kafka_secret,
               kafka_username, k8s_job_uri)
    if manifest is None and not group:
        raise UsageError("give --group NAME (or --manifest FILE)")
    if result_file is not None and manifest is None:
        raise UsageError("--result needs --manifest")
    # a bad --result file is reported before anything else is printed or changed
    given_result = _load_result(result_file) if result_file is not None else None
    if execute and given_result is None:
        require_replay_extra()  # before anything is planned, saved or connected
    err = stderr()
    base = output_dir or default_replay_dir()
    conn = resolve_connection(bootstrap_server, context)
    with OffsetsAdmin(conn, timeout=timeout) as admin:
        if manifest is not None:
            if group or topic or from_time or from_offsets or to_time:
                raise UsageError("--manifest replaces --group/--topic/--from-*/--to-time")
            m = load_manifest(manifest)
            path = manifest
            if output_dir is None and manifest.resolve().parent.name == m.replay_id:
                base = manifest.resolve().parent.parent
            if m.bootstrap is None:
                m = replace(m, bootstrap=conn.bootstrap)
        else:
            if not group:
                raise UsageError("give --group NAME (or --manifest FILE)")
            request = _request(group, list(topic or []), pipeline, from_time, from_offsets,
                               to_time, no_commit)
            m = plan_from_cluster(admin, request, _now_ms())
            path = manifest_path(base, m.replay_id)
            if path.exists():
                old = load_manifest(path)
                if old.status is not ReplayStatus.PLANNED:
                    m = old  # the same plan was run before: keep its history
        for w in m.warnings:
            err.print(f"warning: {escape(w)}")
        if m.status is ReplayStatus.COMMITTED:
            err.print(f"manifest: {path}")
            _show(m, output)
            err.print("already committed: nothing to do")
            return exits.OK
        nothing = m.is_empty and all(r.committed == r.end for r in m.ranges)
        if nothing:
            _show(m, output)
            err.print("nothing to replay: the group is at the planned end on every partition")
            return exits.OK
        if m.status is ReplayStatus.PLANNED:
            save_manifest(path, m)
        err.print(f"manifest: {path}")
        if not execute:
            _show(m, output)
            err.print("dry run: nothing run, nothing committed; rerun with --execute")
            return exits.OK
        now = admin.group_state(m.group_id)
        if not now.group.state.is_inactive:
            _show(m, output)
            raise RefusedError(
                f"group {m.group_id!r} is {now.group.state.value} with {len(now.group.members)} "
                "members; stop its consumers before replaying (nothing run, nothing committed)")
        if not yes:
            if not sys.stdin.isatty():
                raise UsageError("--execute asks for confirmation; not on a terminal, so pass "
                                 "--yes")
            if not typer.confirm(f"replay {m.expected_records:,} records of {m.group_id} and "
                                 "commit?"):
                raise typer.Abort()
        if m.result is None or m.status is ReplayStatus.FAILED or given_result is not None:
            try:
                if given_result is not None:
                    result = given_result
                elif m.is_empty:
                    result = JobResult(m.replay_id, (), 0)
                else:
                    result = _run_job(m, base, opts, dead_letter_topic, billing_topic,
                                      list(kafka_option or []), conn, k8s)
                problems = verify_result(m, result)
                if problems:
                    raise InconsistentStateError(
                        "the job's output does not match the plan: " + "; ".join(problems[:3])
                        + "; nothing committed")
            except Exception as e:
                save_manifest(path, m.with_status(ReplayStatus.FAILED,
                                                  {"event": "failed", "at_ms": _now_ms(),
                                                   "error": str(e)}))
                raise
            m = m.with_status(ReplayStatus.WRITTEN, {
                "event": "written", "at_ms": _now_ms(), "records": result.records,
                "dead_letters": result.dead_letters, "outputs": dict(result.outputs)},
                result=result)
            save_manifest(path, m)
            err.print(f"written and verified: {result.records:,} records "
                      f"({result.dead_letters:,} dead letters)")
        _test_pause()
        try:
            m = guarded_commit(admin, m, backup_dir, _now_ms)
        except RefusedError as e:
            m = m.with_status(ReplayStatus.NOT_COMMITTED,
                              {"event": "not_committed", "at_ms": _now_ms(), "reason": str(e)})
            save_manifest(path, m)
            _show(m, output)
            raise RefusedError(f"the replay was written but the group was not moved: {e}. "
                               f"Retry the commit: opskit replay --manifest {path} --execute"
                               ) from None
        save_manifest(path, m)
        _show(m, output)
        err.print(f"committed: group {m.group_id} moved to the end of the replayed ranges")
        return exits.OK
