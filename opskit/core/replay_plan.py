"""Planning core of ``opskit replay`` (Spark lag-replay): pure, no I/O, no clock.

A replay reads a bounded offset range ``[start, end)`` of each partition of a
group's topics with Spark, processes and writes it, and then moves the group
to ``end`` so its live consumers resume after the range. Everything the job
and the commit rely on is fixed here, as numbers, at plan time:

- start: the group's committed offset (``committed``), the first offset at or
  after a timestamp (``timestamp``), or explicit offsets (``offsets``).
  Partitions without a committed offset follow ``NoCommitPolicy``. A start
  below the log start is clamped to it and the deleted records are counted as
  ``lost``; a start beyond the log end is clamped to the log end.
- end: the log end (high watermark) at plan time (``latest``), or the first
  offset at or after a timestamp (``timestamp``). Never below start.

The manifest (``ReplayManifest``) is the one document of a replay: the plan,
then the job's verified result, then the commit (with the backup). Its
``replay_id`` is derived from the group, cluster, pipeline and ranges, so the
same plan always writes to the same place (a rerun overwrites) and a
committed manifest makes a rerun a no-op.

Offsets can have gaps (transaction markers, compaction): ``expected_records``
is an upper bound, never an equality to check against.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from opskit.core.models import GroupDescription, GroupState, PartitionOffsets, TopicPartition
from opskit.core.offset_reset.plan import ResetPlan, ResetRow
from opskit.core.offset_reset.request import ResetStrategy
from opskit.errors import InvalidInputError, NotFoundError, UsageError

MANIFEST_FORMAT = "opskit/replay-manifest"
MANIFEST_VERSION = 1


class StartKind(str, Enum):
    COMMITTED = "committed"
    TIMESTAMP = "timestamp"
    OFFSETS = "offsets"


class EndKind(str, Enum):
    LATEST = "latest"
    TIMESTAMP = "timestamp"


class NoCommitPolicy(str, Enum):
    """What a partition without a committed offset replays (start kind ``committed``)."""

    #: from the log start: nothing the group never read is skipped (default)
    EARLIEST = "earliest"
    #: nothing: the range is empty and the group is moved to the planned end
    LATEST = "latest"
    #: the partition is left out of the replay and of the commit
    SKIP = "skip"
    #: refuse to plan
    FAIL = "fail"


class Pipeline(str, Enum):
    #: analytics-ingest: HIP-30 envelopes to Parquet by event date and type
    EVENTS = "events"
    #: billing-agg: hourly usage per team from llm_usage (tokens, cost)
    BILLING = "billing"


class ReplayStatus(str, Enum):
    PLANNED = "planned"
    WRITTEN = "written"
    COMMITTED = "committed"
    #: the write succeeded but the commit was refused (group active, offsets moved)
    NOT_COMMITTED = "not_committed"
    FAILED = "failed"


#: HIP-30 default pipeline per group
DEFAULT_PIPELINES = {"analytics-ingest": Pipeline.EVENTS, "billing-agg": Pipeline.BILLING}


@dataclass(frozen=True)
class ReplayRequest:
    group_id: str
    topics: tuple[str, ...]
    pipeline: Pipeline
    start: StartKind = StartKind.COMMITTED
    start_timestamp_ms: int | None = None
    start_offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    end: EndKind = EndKind.LATEST
    end_timestamp_ms: int | None = None
    no_commit: NoCommitPolicy = NoCommitPolicy.EARLIEST

    def __post_init__(self) -> None:
        if (self.start is StartKind.TIMESTAMP) != (self.start_timestamp_ms is not None):
            raise UsageError("a start timestamp is needed exactly when the start is a timestamp")
        if (self.end is EndKind.TIMESTAMP) != (self.end_timestamp_ms is not None):
            raise UsageError("an end timestamp is needed exactly when the end is a timestamp")
        if self.start is StartKind.OFFSETS and not self.start_offsets:
            raise UsageError("explicit start offsets are empty")
        if (self.start_timestamp_ms is not None and self.end_timestamp_ms is not None
                and self.end_timestamp_ms < self.start_timestamp_ms):
            raise UsageError("the end time is before the start time")
        if any(o < 0 for o in self.start_offsets.values()):
            raise UsageError("start offsets must not be negative")


@dataclass(frozen=True)
class ReplayRange:
    """One partition's range ``[start, end)`` and what it was derived from."""

    tp: TopicPartition
    start: int
    end: int
    #: the group's committed offset at plan time (None: no commit)
    committed: int | None
    log_start: int
    log_end: int
    #: records deleted by retention between the requested start and the log start
    lost: int = 0
    note: str | None = None

    @property
    def expected_records(self) -> int:
        """Upper bound: offsets can have gaps (transactions, compaction)."""
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "start": self.start,
                "end": self.end, "committed": self.committed, "log_start": self.log_start,
                "log_end": self.log_end, "lost": self.lost, "note": self.note,
                "expected_records": self.expected_records}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> ReplayRange:
        d = _dict(d, where)
        try:
            committed = d["committed"]
            r = cls(TopicPartition(str(d["topic"]), int(d["partition"])), int(d["start"]),
                    int(d["end"]), None if committed is None else int(committed),
                    int(d["log_start"]), int(d["log_end"]), int(d.get("lost", 0)),
                    d.get("note"))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"{where}: malformed ({e!r})") from None
        if not 0 <= r.start <= r.end:
            raise InvalidInputError(f"{where}: need 0 <= start <= end, got [{r.start}, {r.end})")
        return r


@dataclass(frozen=True)
class PartitionResult:
    """What the job read and wrote for one partition."""

    tp: TopicPartition
    records: int
    min_offset: int | None
    max_offset: int | None
    written: int
    dead_letters: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "records": self.records,
                "min_offset": self.min_offset, "max_offset": self.max_offset,
                "written": self.written, "dead_letters": self.dead_letters}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> PartitionResult:
        d = _dict(d, where)
        try:
            lo, hi = d.get("min_offset"), d.get("max_offset")
            return cls(TopicPartition(str(d["topic"]), int(d["partition"])), int(d["records"]),
                       None if lo is None else int(lo), None if hi is None else int(hi),
                       int(d["written"]), int(d["dead_letters"]))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"{where}: malformed ({e!r})") from None


@dataclass(frozen=True)
class JobResult:
    """The job's own account of a run, checked by ``verify_result`` before any commit."""

    replay_id: str
    partitions: tuple[PartitionResult, ...]
    #: rows the job read back from its sinks after writing
    verified_rows: int
    outputs: Mapping[str, str] = field(default_factory=dict)
    kafka_records: int = 0

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def dead_letters(self) -> int:
        return sum(p.dead_letters for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {"replay_id": self.replay_id, "records": self.records,
                "dead_letters": self.dead_letters, "verified_rows": self.verified_rows,
                "kafka_records": self.kafka_records, "outputs": dict(self.outputs),
                "partitions": [p.to_dict() for p in self.partitions]}

    @classmethod
    def from_dict(cls, data: Any) -> JobResult:
        d = _dict(data, "result")
        try:
            return cls(str(d["replay_id"]),
                       tuple(PartitionResult.from_dict(p, f"result.partitions[{i}]")
                             for i, p in enumerate(d["partitions"])),
                       int(d["verified_rows"]), {str(k): str(v) for k, v in
                                                 dict(d.get("outputs") or {}).items()},
                       int(d.get("kafka_records", 0)))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"result: malformed ({e!r})") from None


@dataclass(frozen=True)
class ReplayManifest:
    replay_id: str
    group_id: str
    pipeline: Pipeline
    planned_at_ms: int
    group_state: GroupState
    ranges: tuple[ReplayRange, ...]
    start: StartKind
    end: EndKind
    no_commit: NoCommitPolicy
    start_timestamp_ms: int | None = None
    end_timestamp_ms: int | None = None
    cluster_id: str | None = None
    bootstrap: str | None = None
    warnings: tuple[str, ...] = ()
    #: partitions left out by the SKIP policy
    skipped: tuple[TopicPartition, ...] = ()
    status: ReplayStatus = ReplayStatus.PLANNED
    result: JobResult | None = None
    #: backup file path, commit time, refusal text, spark versions, ...
    events: tuple[Mapping[str, Any], ...] = ()

    @property
    def expected_records(self) -> int:
        return sum(r.expected_records for r in self.ranges)

    @property
    def lost_records(self) -> int:
        return sum(r.lost for r in self.ranges)

    @property
    def is_empty(self) -> bool:
        return self.expected_records == 0

    def ends(self) -> dict[TopicPartition, int]:
        return {r.tp: r.end for r in self.ranges}

    def with_status(self, status: ReplayStatus, event: Mapping[str, Any] | None = None,
                    result: JobResult | None = None) -> ReplayManifest:
        events = self.events + ((dict(event),) if event else ())
        return replace(self, status=status, events=events,
                       result=result if result is not None else self.result)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
            "replay_id": self.replay_id, "group": self.group_id,
            "pipeline": self.pipeline.value, "status": self.status.value,
            "planned_at_ms": self.planned_at_ms, "group_state": self.group_state.value,
            "cluster_id": self.cluster_id, "bootstrap": self.bootstrap,
            "start": {"kind": self.start.value, "timestamp_ms": self.start_timestamp_ms,
                      "no_commit_policy": self.no_commit.value},
            "end": {"kind": self.end.value, "timestamp_ms": self.end_timestamp_ms},
            "expected_records": self.expected_records, "lost_records": self.lost_records,
            "ranges": [r.to_dict() for r in self.ranges],
            "skipped": [{"topic": tp.topic, "partition": tp.partition} for tp in self.skipped],
            "warnings": list(self.warnings),
            "result": None if self.result is None else self.result.to_dict(),
            "events": [dict(e) for e in self.events],
            # what spark_jobs/lag_replay.py takes as --spec (derived; ignored when read)
            "job": job_spec(self),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> ReplayManifest:
        d = _dict(data, "manifest")
        if d.get("format") != MANIFEST_FORMAT or d.get("version") != MANIFEST_VERSION:
            raise InvalidInputError(
                f"not an opskit replay manifest (format {d.get('format')!r}, "
                f"version {d.get('version')!r})")
        try:
            start, end = _dict(d["start"], "manifest.start"), _dict(d["end"], "manifest.end")
            return cls(
                replay_id=str(d["replay_id"]), group_id=str(d["group"]),
                pipeline=Pipeline(d["pipeline"]), planned_at_ms=int(d["planned_at_ms"]),
                group_state=GroupState(d["group_state"]),
                ranges=tuple(ReplayRange.from_dict(r, f"manifest.ranges[{i}]")
                             for i, r in enumerate(d["ranges"])),
                start=StartKind(start["kind"]), end=EndKind(end["kind"]),
                no_commit=NoCommitPolicy(start["no_commit_policy"]),
                start_timestamp_ms=_opt_int(start.get("timestamp_ms")),
                end_timestamp_ms=_opt_int(end.get("timestamp_ms")),
                cluster_id=d.get("cluster_id"), bootstrap=d.get("bootstrap"),
                warnings=tuple(str(w) for w in d.get("warnings") or ()),
                skipped=tuple(TopicPartition(str(s["topic"]), int(s["partition"]))
                              for s in d.get("skipped") or ()),
                status=ReplayStatus(d["status"]),
                result=None if d.get("result") is None else JobResult.from_dict(d["result"]),
                events=tuple(_dict(e, "manifest.events[]") for e in d.get("events") or ()),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidInputError(f"manifest: malformed ({e!r})") from None

    @classmethod
    def from_json(cls, text: str) -> ReplayManifest:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidInputError(f"manifest is not valid JSON ({e})") from None
        except RecursionError:
            raise InvalidInputError("manifest nests too deeply to be read") from None
        except ValueError as e:  # an integer of more than 4300 digits
            raise InvalidInputError(f"manifest is not usable JSON ({e})") from None
        return cls.from_dict(data)


def replay_id_for(group_id: str, cluster_id: str | None, pipeline: Pipeline,
                  ranges: Sequence[ReplayRange]) -> str:
    """Deterministic: the same plan gets the same id (and so the same output place)."""
    canon = json.dumps([group_id, cluster_id, pipeline.value,
                        [[r.tp.topic, r.tp.partition, r.start, r.end] for r in sorted(
                            ranges, key=lambda r: r.tp)]], separators=(",", ":"))
    return "rp-" + hashlib.sha256(canon.encode()).hexdigest()[:16]


def plan_replay(
    request: ReplayRequest,
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
    start_by_time: Mapping[TopicPartition, int | None],
    end_by_time: Mapping[TopicPartition, int | None],
    now_ms: int,
    cluster_id: str | None = None,
    bootstrap: str | None = None,
) -> ReplayManifest:
    """Fix every partition's ``[start, end)`` as numbers.

    ``log_offsets`` holds every partition of ``request.topics``; ``start_by_time``
    / ``end_by_time`` hold the ListOffsets-by-timestamp answers (None: no record
    at or after the time) when the request uses timestamps.
    """
    if group.group_id != request.group_id:
        raise ValueError("group description is for another group")
    tps = sorted(tp for tp in log_offsets if tp.topic in request.topics)
    missing = sorted(set(request.topics) - {tp.topic for tp in tps})
    if missing:
        raise NotFoundError(f"topic {missing[0]!r} does not exist")
    unknown = sorted(set(request.start_offsets) - set(tps))
    if unknown:
        raise InvalidInputError(f"start offset given for {unknown[0]}, which is not in the "
                                "replay's topics")
    ranges: list[ReplayRange] = []
    skipped: list[TopicPartition] = []
    warnings: list[str] = []
    for tp in tps:
        log = log_offsets[tp]
        if log.log_start > log.log_end:
            raise InvalidInputError(f"{tp}: broker reported log start {log.log_start} beyond "
                                    f"log end {log.log_end}")
        cur = committed.get(tp)
        note: str | None = None
        if request.end is EndKind.LATEST:
            end = log.log_end
        else:
            by_time = end_by_time.get(tp)
            end = log.log_end if by_time is None else min(by_time, log.log_end)
        if request.start is StartKind.COMMITTED:
            if cur is None:
                policy = request.no_commit
                if policy is NoCommitPolicy.FAIL:
                    raise InvalidInputError(
                        f"{tp}: group {request.group_id!r} has no committed offset (choose "
                        "--no-commit earliest|latest|skip)")
                if policy is NoCommitPolicy.SKIP:
                    skipped.append(tp)
                    warnings.append(f"{tp}: no committed offset; skipped (policy skip)")
                    continue
                wanted = log.log_start if policy is NoCommitPolicy.EARLIEST else end
                note = f"no committed offset: policy {policy.value}"
            else:
                wanted = cur
        elif request.start is StartKind.TIMESTAMP:
            by_time = start_by_time.get(tp)
            wanted = log.log_end if by_time is None else by_time
        else:
            if tp not in request.start_offsets:
                skipped.append(tp)
                continue
            wanted = request.start_offsets[tp]
        lost = 0
        start = wanted
        if wanted < log.log_start:
            lost = log.log_start - wanted
            start = log.log_start
            warnings.append(f"{tp}: start {wanted} is below the log start {log.log_start}: "
                            f"{lost} records were deleted by retention and cannot be replayed")
            note = f"clamped from {wanted}; {lost} records lost"
        elif wanted > log.log_end:
            start = log.log_end
            warnings.append(f"{tp}: start {wanted} is beyond the log end {log.log_end}; "
                            "nothing to replay there")
            note = f"clamped from {wanted} to the log end"
        end = max(end, start)
        ranges.append(ReplayRange(tp, start, end, cur, log.log_start, log.log_end, lost, note))
    if not ranges:
        raise InvalidInputError(f"nothing to plan: no partition of {', '.join(request.topics)} "
                                "is in the replay")
    rid = replay_id_for(request.group_id, cluster_id, request.pipeline, ranges)
    return ReplayManifest(
        replay_id=rid, group_id=request.group_id, pipeline=request.pipeline,
        planned_at_ms=now_ms, group_state=group.state, ranges=tuple(ranges),
        start=request.start, end=request.end, no_commit=request.no_commit,
        start_timestamp_ms=request.start_timestamp_ms, end_timestamp_ms=request.end_timestamp_ms,
        cluster_id=cluster_id, bootstrap=bootstrap, warnings=tuple(warnings),
        skipped=tuple(skipped))


def verify_result(manifest: ReplayManifest, result: JobResult) -> list[str]:
    """Problems that forbid committing; empty when the write is verified.

    Never ``records == end - start`` (offset gaps): every record read must lie
    in its range, nothing may come from outside the plan, the sinks must hold
    what was read (data + dead letters), and no record may be counted twice.
    """
    problems: list[str] = []
    if result.replay_id != manifest.replay_id:
        problems.append(f"result is for replay {result.replay_id}, not {manifest.replay_id}")
    ranges = {r.tp: r for r in manifest.ranges}
    for p in result.partitions:
        r = ranges.get(p.tp)
        if r is None:
            problems.append(f"{p.tp}: read, but not in the plan")
            continue
        if p.records > r.expected_records:
            problems.append(f"{p.tp}: {p.records} records read, more than the "
                            f"{r.expected_records} offsets of [{r.start}, {r.end})")
        if p.records and (p.min_offset is None or p.max_offset is None
                          or p.min_offset < r.start or p.max_offset >= r.end):
            problems.append(f"{p.tp}: offsets {p.min_offset}..{p.max_offset} outside "
                            f"[{r.start}, {r.end})")
        if p.written + p.dead_letters != p.records:
            problems.append(f"{p.tp}: read {p.records}, but wrote {p.written} + "
                            f"{p.dead_letters} dead letters")
    if result.verified_rows != result.records:
        problems.append(f"the sinks hold {result.verified_rows} rows after writing, "
                        f"{result.records} were read")
    return problems


def commit_plan(manifest: ReplayManifest) -> ResetPlan:
    """The replay's commit as an offsets-reset plan (to ``end``), so the reset
    safeguards apply unchanged: ``check_unchanged`` against the offsets committed
    at *replay planning* time, ``OffsetsBackup.of_plan`` for the backup."""
    rows = tuple(ResetRow(r.tp, r.committed, r.end, r.log_start, r.log_end)
                 for r in manifest.ranges)
    return ResetPlan(group_id=manifest.group_id, group_state=manifest.group_state,
                     strategy=ResetStrategy.from_file(manifest.ends()), scope=None, rows=rows,
                     planned_at_ms=manifest.planned_at_ms)


def job_spec(manifest: ReplayManifest) -> dict[str, Any]:
    """The part of the manifest the Spark job needs (passed on its command line)."""
    return {"replay_id": manifest.replay_id, "group": manifest.group_id,
            "pipeline": manifest.pipeline.value,
            "ranges": [[r.tp.topic, r.tp.partition, r.start, r.end]
                       for r in manifest.ranges if r.end > r.start]}


def _dict(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInputError(f"{where}: expected a mapping")
    return data


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)
