"""Kafka and file I/O for ``opskit replay``: gather the plan's inputs, keep the
manifest, and the guarded commit (reusing the offsets-reset safeguards).

The decisions live in ``opskit.core.replay_plan``; this module reads what they
need and acts on them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from opskit.adapters.files.safe_read import parse_json, read_text
from opskit.adapters.files.safe_write import write_file
from opskit.adapters.offsets.admin import (
    BackupStatus,
    OffsetsAdmin,
    mark_backup,
    save_backup,
)
from opskit.core.models import TopicPartition
from opskit.core.offset_reset.backup import OffsetsBackup
from opskit.core.offset_reset.planner import check_unchanged
from opskit.core.replay_plan import (
    JobResult,
    ReplayManifest,
    ReplayRequest,
    ReplayStatus,
    StartKind,
    commit_plan,
    plan_replay,
)
from opskit.errors import InvalidInputError, NotFoundError, RefusedError, UsageError
from opskit.paths import state_dir

log = logging.getLogger(__name__)


def default_replay_dir() -> Path:
    return state_dir() / "replays"


def manifest_path(directory: Path, replay_id: str) -> Path:
    return directory / replay_id / "manifest.json"


def save_manifest(path: Path, manifest: ReplayManifest) -> None:
    write_file(path, manifest.to_json(), what="manifest")


def load_manifest(path: Path) -> ReplayManifest:
    text = read_text(path, "manifest")
    try:
        return ReplayManifest.from_json(text)
    except InvalidInputError as e:
        raise InvalidInputError(f"manifest {path}: {e}") from None


def plan_from_cluster(admin: OffsetsAdmin, request: ReplayRequest, now_ms: int) -> ReplayManifest:
    """Read the group, its committed offsets and the log offsets, and plan."""
    state = admin.group_state(request.group_id)
    topics = request.topics
    if not topics:
        topics = tuple(sorted({tp.topic for tp in state.committed}))
        if not topics:
            raise NotFoundError(f"group {request.group_id!r} has no committed offsets; "
                                "name the topics with --topic")
        request = replace(request, topics=topics)
    log_offsets, cluster_id = admin.log_offsets_of_topics(topics)
    tps = sorted(log_offsets)
    start_by_time: dict[TopicPartition, int | None] = {}
    end_by_time: dict[TopicPartition, int | None] = {}
    if request.start is StartKind.TIMESTAMP and request.start_timestamp_ms is not None and tps:
        start_by_time = admin.offsets_for_times(tps, request.start_timestamp_ms)
    if request.end_timestamp_ms is not None and tps:
        end_by_time = admin.offsets_for_times(tps, request.end_timestamp_ms)
    return plan_replay(request, state.group, state.committed, log_offsets, start_by_time,
                       end_by_time, now_ms, cluster_id=cluster_id,
                       bootstrap=admin.conn.bootstrap)


def read_result_dir(output: Path, replay_id: str) -> JobResult | None:
    """The job's result saved under the output (local file systems only)."""
    d = output / replay_id / "_result"
    for part in sorted(d.glob("part-*")) if d.is_dir() else []:
        text = read_text(part, "replay result").strip()
        if text:
            return JobResult.from_dict(parse_json(text, f"replay result {part}"))
    return None


def guarded_commit(
    admin: OffsetsAdmin,
    manifest: ReplayManifest,
    backup_dir: Path | None,
    now_ms: Callable[[], int],
) -> ReplayManifest:
    """Commit the ends of the replayed ranges, only if the group is still empty and
    its offsets did not move since planning; a backup is saved first.

    Returns the manifest with status COMMITTED; raises ``RefusedError`` (the
    manifest is then for the caller to mark NOT_COMMITTED)."""
    if manifest.status is ReplayStatus.COMMITTED:
        raise UsageError("the replay is already committed")
    if manifest.result is None:
        raise RefusedError("the replay has no verified result; nothing committed")
    plan = commit_plan(manifest)
    now = admin.group_state(manifest.group_id)
    cluster_id = admin.metadata().cluster_id
    if manifest.cluster_id and cluster_id and cluster_id != manifest.cluster_id:
        raise RefusedError(f"the replay was planned on cluster {manifest.cluster_id}, this is "
                           f"{cluster_id}; nothing committed")
    try:
        check_unchanged(plan, now.group, now.committed)
    except RefusedError as e:
        raise RefusedError(f"not committed: {e}") from None
    backup = OffsetsBackup.of_plan(plan, taken_at_ms=now_ms(),
                                   reason=f"replay {manifest.replay_id}",
                                   cluster_id=cluster_id, bootstrap=admin.conn.bootstrap)
    saved = save_backup(backup, plan.offsets_to_commit(), backup_dir)
    # compare-and-set again right before writing: the backup took time
    now = admin.group_state(manifest.group_id)
    try:
        check_unchanged(plan, now.group, now.committed)
    except RefusedError as e:
        mark_backup(saved, BackupStatus.ABORTED, str(e), now_ms())
        raise RefusedError(f"not committed: {e}") from None
    try:
        admin.alter_group_offsets(manifest.group_id, plan.offsets_to_commit())
    except Exception as e:
        mark_backup(saved, BackupStatus.FAILED, str(e), now_ms())
        raise
    mark_backup(saved, BackupStatus.APPLIED, None, now_ms())
    return manifest.with_status(ReplayStatus.COMMITTED, {
        "event": "committed", "at_ms": now_ms(), "backup": str(saved.path),
        "offsets": {str(tp): off for tp, off in sorted(plan.offsets_to_commit().items())}})
