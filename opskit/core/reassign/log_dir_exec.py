"""The execution of a log-directory drain (:mod:`opskit.core.reassign.log_dirs`): its
journaled state and the pure judgements the runner
(:mod:`opskit.adapters.reassign.log_dir_runner`) makes from what the brokers report.

A move is an AlterReplicaLogDirs request: the broker creates a *future* replica in the
target directory, copies the log into it (at most
``replica.alter.log.dirs.io.max.bytes.per.second`` per broker when ``--throttle`` is
given), then swaps it in and deletes the old copy. Resending the request for a replica
already moving to the same directory changes nothing, so a resumed run resends whatever
is not done. Progress is DescribeLogDirs: done when the replica is in the target
directory and no future replica is left.

Kafka has no cancel for such a move, but pointing the replica at the directory it is in
drops the future replica (seen on Kafka 3.7.2 and 4.3.1):
``reassign cancel --execute`` does that for every move not yet finished; finished moves
stay where they went (moving them back is a new plan).

Cordon (KIP-1066, Kafka 4.3+): ``cordoned.log.dirs`` of each drained broker becomes its
value before (journaled) plus the drained directories (``*`` stays ``*``); kept after a
finished drain (the disk is to be removed), put back on cancel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from opskit.core.models import TopicPartition
from opskit.core.reassign.cordon import CORDON_ALL
from opskit.core.reassign.log_dirs import DirMove, norm_dir
from opskit.core.reassign.model import ANY_LOG_DIR, Assignment

__all__ = ["THROTTLE_KEY", "DirTarget", "DiskExec", "dir_targets", "judge", "merge_cordon",
           "newest_cordon_priors", "verify_dir", "verify_exit"]

THROTTLE_KEY = "replica.alter.log.dirs.io.max.bytes.per.second"

# move statuses
PENDING, SUBMITTED, DONE, FAILED, CANCELLED = "pending", "submitted", "done", "failed", "cancelled"
# cordon statuses (as opskit.core.reassign.cordon.CordonStatus, plus "off": --no-cordon)
C_PLANNED, C_READ, C_APPLIED, C_KEPT, C_RELEASED, C_UNSUPPORTED = (
    "planned", "read", "applied", "kept", "released", "unsupported")


def merge_cordon(prior: str | None, dirs: list[str]) -> str:
    """The ``cordoned.log.dirs`` value that adds ``dirs`` to ``prior`` (``*`` stays ``*``)."""
    have = [d.strip() for d in (prior or "").split(",") if d.strip()]
    if CORDON_ALL in have:
        return CORDON_ALL
    known = {norm_dir(d) for d in have}
    return ",".join(have + [d for d in dirs if norm_dir(d) not in known])


def judge(m: DirMove, seen: Mapping[tuple[TopicPartition, int], tuple[str | None, str | None]]
          ) -> tuple[str, str | None]:
    """(status, why) of a move from what its broker reports: (live dir, future dir) of
    the replica. ``done``: in the target, no future left; ``submitted``: the future is in
    the target; ``pending``: still in the source, nothing moving; ``failed``: elsewhere."""
    live, future = seen.get((m.tp, m.broker), (None, None))
    live = norm_dir(live) if live else None
    future = norm_dir(future) if future else None
    if live is None:
        return FAILED, f"broker {m.broker} holds no replica of it (reassigned away or deleted?)"
    if live == m.target and future is None:
        return DONE, None
    if future == m.target:
        return SUBMITTED, None
    if live == m.source and future is None:
        return PENDING, None
    return FAILED, (f"in {live}" + (f", moving to {future}" if future else "")
                    + f", not {m.source} -> {m.target} (moved by someone else?)")


@dataclass(frozen=True)
class DiskExec:
    """The journaled state of one drain execution (``state.json``)."""

    plan_id: str
    plan_path: str
    moves: tuple[DirMove, ...]
    status: tuple[str, ...]
    errors: tuple[str | None, ...]
    rate: int | None = None
    #: (broker, its dynamic per-broker throttle before) once read; None: not read yet
    throttle_prior: tuple[tuple[int, str | None], ...] | None = None
    throttle: str = "none"  # none | read | set | removed
    drained: tuple[tuple[int, str], ...] = ()
    cordon: str = C_UNSUPPORTED
    cordon_prior: tuple[tuple[int, str | None], ...] | None = None
    cordon_note: str | None = None
    cancelled: bool = False
    done: bool = False
    #: moves in flight per broker at once (1 by default: see :func:`next_moves`)
    max_moves: int = 1

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in (PENDING, SUBMITTED, DONE, FAILED, CANCELLED)}
        for s in self.status:
            out[s] += 1
        return out

    def with_status(self, i: int, status: str, error: str | None = None) -> DiskExec:
        st, er = list(self.status), list(self.errors)
        st[i], er[i] = status, error
        return replace(self, status=tuple(st), errors=tuple(er))

    def cordon_brokers(self) -> tuple[int, ...]:
        return tuple(sorted({b for b, _ in self.drained}))

    def cordon_wanted(self) -> dict[int, str]:
        """broker -> the value to set (prior value + its drained directories)."""
        prior = dict(self.cordon_prior or ())
        return {b: merge_cordon(prior.get(b), [d for bb, d in self.drained if bb == b])
                for b in self.cordon_brokers()}

    @property
    def cordon_holds(self) -> bool:
        return self.cordon in (C_READ, C_APPLIED, C_KEPT)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "log-dir-drain", "plan_id": self.plan_id, "plan_path": self.plan_path,
            "moves": [m.to_dict() for m in self.moves], "status": list(self.status),
            "errors": list(self.errors), "rate": self.rate,
            "throttle_prior": None if self.throttle_prior is None
            else [[b, v] for b, v in self.throttle_prior],
            "throttle": self.throttle, "drained": [[b, d] for b, d in self.drained],
            "cordon": self.cordon, "cordon_prior": None if self.cordon_prior is None
            else [[b, v] for b, v in self.cordon_prior],
            "cordon_note": self.cordon_note, "cancelled": self.cancelled, "done": self.done,
            "max_moves": self.max_moves,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DiskExec:
        def pairs(raw: Any) -> tuple[tuple[int, str | None], ...] | None:
            return None if raw is None else tuple((int(b), None if v is None else str(v))
                                                  for b, v in raw)
        moves = tuple(DirMove(TopicPartition(m["topic"], int(m["partition"])), int(m["broker"]),
                              m["from"], m["to"], int(m["size_bytes"])) for m in d["moves"])
        return cls(d["plan_id"], d["plan_path"], moves, tuple(d["status"]),
                   tuple(d["errors"]), d.get("rate"), pairs(d.get("throttle_prior")),
                   d.get("throttle", "none"), tuple((int(b), str(p)) for b, p in d["drained"]),
                   d.get("cordon", C_UNSUPPORTED), pairs(d.get("cordon_prior")),
                   d.get("cordon_note"), bool(d.get("cancelled")), bool(d.get("done")),
                   int(d.get("max_moves", 1)))


def initial(plan_id: str, plan_path: str, moves: tuple[DirMove, ...], rate: int | None,
            drained: tuple[tuple[int, str], ...], cordon: str, note: str | None,
            max_moves: int = 1) -> DiskExec:
    return DiskExec(plan_id, plan_path, moves, tuple(PENDING for _ in moves),
                    tuple(None for _ in moves), rate, drained=drained, cordon=cordon,
                    cordon_note=note, max_moves=max_moves)


def next_moves(st: DiskExec, statuses: list[str]) -> list[int]:
    """The pending moves to send now: per broker, up to ``max_moves`` in flight (largest
    first). One at a time by default: the broker copies one partition at a time per
    ``num.replica.alter.log.dirs.threads`` anyway, and Kafka 3.7.2 was seen to stop
    promoting future replicas (a NullPointerException in ReplicaAlterLogDirsThread's
    directory assignment, in the broker log) when nine moves were sent together."""
    busy: dict[int, int] = {}
    for i, m in enumerate(st.moves):
        if statuses[i] == SUBMITTED:
            busy[m.broker] = busy.get(m.broker, 0) + 1
    out: list[int] = []
    for i in sorted((i for i, s in enumerate(statuses) if s == PENDING),
                    key=lambda i: (-st.moves[i].size_bytes, st.moves[i].tp)):
        b = st.moves[i].broker
        if busy.get(b, 0) < st.max_moves:
            busy[b] = busy.get(b, 0) + 1
            out.append(i)
    return out


# --------------------------------------------------------------------------- verify

# verdicts of ``reassign verify`` on a plan naming log directories
V_DONE, V_MOVING, V_DIFFERS, V_MISSING, V_UNKNOWN = (
    "done", "moving", "differs", "missing", "unknown")


@dataclass(frozen=True)
class DirTarget:
    """A replica a plan puts in a named log directory (Kafka's ``log_dirs``, not ``any``)."""

    tp: TopicPartition
    broker: int
    target: str


def dir_targets(assignments: Iterable[Assignment]) -> tuple[DirTarget, ...]:
    """The named log directories of a reassignment JSON's entries (``any`` left out)."""
    return tuple(sorted((DirTarget(a.tp, b, norm_dir(d))
                         for a in assignments
                         for b, d in zip(a.replicas, a.log_dirs or (), strict=False)
                         if d != ANY_LOG_DIR), key=lambda t: (t.tp, t.broker)))


def verify_dir(t: DirTarget,
               seen: Mapping[tuple[TopicPartition, int], tuple[str | None, str | None]],
               unreadable: Mapping[int, str], offline: Mapping[int, tuple[str, ...]]
               ) -> tuple[str, str | None]:
    """(verdict, why) of one replica against its planned directory, from what its broker
    reported: ``seen`` (partition, broker) -> (directory, future directory) over the
    brokers that answered; ``unreadable`` broker -> why it gave no answer (its replicas are
    ``unknown``, never ``done``); ``offline`` broker -> its offline directories (a replica
    not found elsewhere may be in one: ``unknown``)."""
    if t.broker in unreadable:
        return V_UNKNOWN, unreadable[t.broker]
    live, future = seen.get((t.tp, t.broker), (None, None))
    live = norm_dir(live) if live else None
    future = norm_dir(future) if future else None
    if live is None and future is None:
        if offline.get(t.broker):
            return V_UNKNOWN, (f"not in an online log directory of broker {t.broker}; offline: "
                               + ", ".join(offline[t.broker]))
        return V_MISSING, f"broker {t.broker} holds no replica of it"
    if future == t.target:
        return V_MOVING, f"copying from {live} to {future}" if live else "copying"
    if future is not None:
        return V_DIFFERS, f"in {live}, moving to {future}"
    if live == t.target:
        return V_DONE, None
    return V_DIFFERS, f"in {live}"


def verify_exit(states: Iterable[str], throttle_left: bool) -> int:
    """``reassign verify``'s exit code: 2 a replica or partition differs or is missing; 3 one
    could not be verified (and none differs); 1 one is still moving or a throttle is left;
    0 every one is at its target and no throttle is left."""
    have = set(states)
    if have & {V_DIFFERS, V_MISSING}:
        return 2
    if V_UNKNOWN in have:
        return 3
    if V_MOVING in have or throttle_left:
        return 1
    return 0


def newest_cordon_priors(found: Iterable[tuple[float, Iterable[tuple[int, str | None]]]],
                         brokers: Iterable[int]) -> dict[int, str | None]:
    """broker -> the ``cordoned.log.dirs`` value found by the drain that read it last, from
    (when the drain read the values, the values it read) of finished drains: what
    ``reassign uncordon`` puts back (a broker no drain read is left out). The time is the
    journal's; ties go to the later entry."""
    wanted = set(brokers)
    out: dict[int, tuple[float, str | None]] = {}
    for ts, values in found:
        for b, v in values:
            if b in wanted and (b not in out or ts >= out[b][0]):
                out[b] = (ts, v)
    return {b: v for b, (_ts, v) in sorted(out.items())}
