"""Draining log directories (JBOD disks) within their brokers: the pure planning.

``opskit reassign plan --remove-log-dirs BROKER:DIR[,BROKER:DIR...]`` moves every replica
on each named log directory to the broker's other log directories (intra-broker moves:
AlterReplicaLogDirs, KIP-113; no data crosses the network and the replica sets do not
change). Each replica goes, largest first, to the remaining directory that holds the
fewest bytes so far, among those with room (greedy, byte-balanced: after the plan the
remaining directories differ by at most the largest replica moved onto them, beyond what
they held before).

Refused with one line: a broker that is not registered or a directory the broker does
not report (exit 4, :class:`NotFoundError`); a directory that is the broker's only one,
or whose broker has no other online, uncordoned directory; a drained directory that is
offline; an intra-broker move already in flight on the broker; remaining directories
that do not report their space (DescribeLogDirs v4+, Kafka 3.3+) or lack it: after the
drain each volume must keep :data:`MIN_FREE_PCT` percent of its size free, counting every
byte that arrives and none that leaves (a replica is copied before its old copy is
deleted; two directories on one volume, reported with the same figures, are one volume)
(exit 5, :class:`RefusedError`).

The plan file is Kafka's reassignment JSON (``kafka-reassign-partitions.sh``): each
moved partition with its current replicas and ``log_dirs`` naming the target directory at
the drained broker's position (``any`` elsewhere), plus an ``opskit`` section
(:data:`DISK_PLAN_FORMAT`) with the moves and the bytes per directory before/after.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opskit.core.models import TopicPartition
from opskit.core.reassign.model import ANY_LOG_DIR, KAFKA_JSON_VERSION, load_json
from opskit.errors import InvalidInputError, NotFoundError, RefusedError, UsageError

__all__ = [
    "DISK_PLAN_FORMAT", "MIN_FREE_PCT", "DirMove", "DiskPlan", "LogDir", "Replica",
    "dirs_plan_id", "is_disk_plan", "parse_disk_plan", "parse_log_dir_targets", "plan_dir_drain",
]

DISK_PLAN_FORMAT = "opskit/log-dir-drain"
DISK_FORMAT_VERSION = 1
GOAL_KIND = "remove-log-dirs"
#: percent of a volume's size that must stay free after the drain
MIN_FREE_PCT = 5


def norm_dir(path: str) -> str:
    """A log directory path as compared (``/a/b/`` == ``/a/b``)."""
    return posixpath.normpath(path) if path else path


@dataclass(frozen=True)
class LogDir:
    """One log directory as its broker reports it (DescribeLogDirs)."""

    broker: int
    path: str
    #: volume size and free bytes (-1: not reported, before DescribeLogDirs v4)
    total_bytes: int = -1
    usable_bytes: int = -1
    #: KIP-1066 (DescribeLogDirs v5); None: not reported
    cordoned: bool | None = None
    error_code: int = 0


@dataclass(frozen=True)
class Replica:
    """A replica in a log directory; ``future``: the copy an intra-broker move is making."""

    tp: TopicPartition
    broker: int
    path: str
    size_bytes: int
    future: bool = False
    #: a future replica's offsets behind the replica it copies (-1: not reported)
    offset_lag: int = -1


@dataclass(frozen=True)
class DirMove:
    tp: TopicPartition
    broker: int
    source: str
    target: str
    size_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.tp.topic, "partition": self.tp.partition, "broker": self.broker,
                "from": self.source, "to": self.target, "size_bytes": self.size_bytes}


@dataclass(frozen=True)
class DiskPlan:
    drained: tuple[tuple[int, str], ...]
    moves: tuple[DirMove, ...]
    #: (broker, dir) -> bytes held before / after the plan
    before: Mapping[tuple[int, str], int]
    after: Mapping[tuple[int, str], int]
    #: each moved partition's replicas (order kept), for Kafka's JSON
    replicas: Mapping[TopicPartition, tuple[int, ...]]
    created: str = ""
    space: Mapping[tuple[int, str], tuple[int, int]] | None = None

    @property
    def brokers(self) -> tuple[int, ...]:
        return tuple(sorted({b for b, _ in self.drained}))

    @property
    def bytes_moved(self) -> int:
        return sum(m.size_bytes for m in self.moves)

    def plan_id(self) -> str:
        return dirs_plan_id((m.tp, m.broker, m.target) for m in self.moves)

    def to_dict(self) -> dict[str, Any]:
        by_tp: dict[TopicPartition, dict[int, str]] = {}
        for m in self.moves:
            by_tp.setdefault(m.tp, {})[m.broker] = m.target
        parts = [{"topic": tp.topic, "partition": tp.partition,
                  "replicas": list(self.replicas[tp]),
                  "log_dirs": [by_tp[tp].get(b, ANY_LOG_DIR) for b in self.replicas[tp]]}
                 for tp in sorted(by_tp)]
        keys = sorted(set(self.before) | set(self.after))
        space = self.space or {}
        return {
            "version": KAFKA_JSON_VERSION,
            "partitions": parts,
            "opskit": {
                "format": DISK_PLAN_FORMAT, "format_version": DISK_FORMAT_VERSION,
                "created": self.created,
                "goal": {"kind": GOAL_KIND,
                         "log_dirs": [{"broker": b, "dir": d} for b, d in self.drained]},
                "moves": [m.to_dict() for m in self.moves],
                "bytes_moved": self.bytes_moved,
                "dirs": [{"broker": b, "dir": d, "bytes_before": self.before.get((b, d), 0),
                          "bytes_after": self.after.get((b, d), 0),
                          "total_bytes": space.get((b, d), (-1, -1))[0],
                          "usable_bytes": space.get((b, d), (-1, -1))[1],
                          "drained": (b, d) in self.drained} for b, d in keys],
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


def dirs_plan_id(targets: Iterable[tuple[TopicPartition, int, str]]) -> str:
    """The id (the journal's name) of the moves (partition, broker, target directory)."""
    canon = ";".join(f"{tp.topic}:{tp.partition}@{b}={d}"
                     for tp, b, d in sorted(targets, key=lambda t: (t[0], t[1])))
    return "dirs-" + hashlib.sha256(canon.encode()).hexdigest()[:16]


def parse_log_dir_targets(text: str, flag: str = "--remove-log-dirs"
                          ) -> tuple[tuple[int, str], ...]:
    """``1:/data/a,2:/data/b`` -> ((1, "/data/a"), (2, "/data/b")); UsageError when malformed
    (a directory must be an absolute path, as Kafka reports it)."""
    out: list[tuple[int, str]] = []
    for raw in text.split(","):
        b, sep, d = raw.strip().partition(":")
        b = b.strip()
        d = d.strip()
        if not sep or not (b.isascii() and b.isdigit()) or not d.startswith("/"):
            raise UsageError(f"{flag}: {raw.strip()!r} is not BROKER:DIR (a broker id and an "
                             "absolute log directory path, like 1:/var/lib/kafka/data-2)")
        pair = (int(b), norm_dir(d))
        if pair not in out:
            out.append(pair)
    return tuple(sorted(out))


def _fmt(n: int) -> str:
    for unit, size in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def plan_dir_drain(dirs: Sequence[LogDir], replicas: Sequence[Replica],
                   drained: Sequence[tuple[int, str]], registered: Iterable[int],
                   partition_replicas: Mapping[TopicPartition, tuple[int, ...]],
                   created: str = "") -> DiskPlan:
    """The moves that empty ``drained`` (see the module doc for the rules and refusals)."""
    live = set(registered)
    by_broker: dict[int, list[LogDir]] = {}
    for d in dirs:
        by_broker.setdefault(d.broker, []).append(d)
    wanted = {(b, norm_dir(p)) for b, p in drained}
    for b, p in sorted(wanted):
        if b not in live:
            raise NotFoundError(f"--remove-log-dirs: broker {b} is not registered")
        known = {norm_dir(d.path): d for d in by_broker.get(b, [])}
        if p not in known:
            raise NotFoundError(f"--remove-log-dirs: broker {b} has no log directory {p} "
                                f"(it reports: {', '.join(sorted(known)) or 'none'})")
        if known[p].error_code:
            raise RefusedError(f"--remove-log-dirs: log directory {p} on broker {b} is offline "
                               f"(error {known[p].error_code}): its replicas cannot be moved "
                               "within the broker (reassign them to other brokers instead)")
    before: dict[tuple[int, str], int] = {}
    space: dict[tuple[int, str], tuple[int, int]] = {}
    targets: dict[int, list[str]] = {}
    for b in sorted({b for b, _ in wanted}):
        if len(by_broker[b]) == 1:
            raise RefusedError(f"--remove-log-dirs: {by_broker[b][0].path} is broker {b}'s only "
                               "log directory: there is nowhere within the broker to move to "
                               "(drain the broker: --remove-brokers)")
        for d in by_broker[b]:
            key = (b, norm_dir(d.path))
            if not d.error_code:
                before[key] = 0
                space[key] = (d.total_bytes, d.usable_bytes)
        targets[b] = [norm_dir(d.path) for d in by_broker[b]
                      if (b, norm_dir(d.path)) not in wanted and not d.error_code
                      and not d.cordoned]
        if not targets[b]:
            raise RefusedError(f"--remove-log-dirs: broker {b} has no other online, uncordoned "
                               "log directory to move to")
    moving: list[Replica] = []
    for r in replicas:
        key = (r.broker, norm_dir(r.path))
        if r.future and r.broker in targets:
            raise RefusedError(f"--remove-log-dirs: an intra-broker move of "
                               f"{r.tp.topic}:{r.tp.partition} is in flight on broker "
                               f"{r.broker} (future replica in {r.path}): wait for it to finish")
        if r.future or key not in before:
            continue
        before[key] += r.size_bytes
        if key in wanted:
            moving.append(r)
    after = dict(before)
    incoming: dict[tuple[int, int, int], int] = {}  # (broker, total, usable) volume -> bytes
    moves: list[DirMove] = []
    for r in sorted(moving, key=lambda r: (-r.size_bytes, r.tp, r.broker)):
        src = norm_dir(r.path)
        best: str | None = None
        for t in sorted(targets[r.broker], key=lambda t: (after[(r.broker, t)], t)):
            if _fits(space[(r.broker, t)], incoming, r.broker, r.size_bytes):
                best = t
                break
        if best is None:
            _refuse_space(r.broker, targets[r.broker], space, moving, incoming)
        assert best is not None
        total, usable = space[(r.broker, best)]
        vol = (r.broker, total, usable)
        incoming[vol] = incoming.get(vol, 0) + r.size_bytes
        after[(r.broker, src)] -= r.size_bytes
        after[(r.broker, best)] += r.size_bytes
        moves.append(DirMove(r.tp, r.broker, src, best, r.size_bytes))
    moves.sort(key=lambda m: (m.tp, m.broker))
    missing = sorted({m.tp for m in moves} - set(partition_replicas))
    if missing:
        raise RefusedError(f"--remove-log-dirs: {missing[0].topic}:{missing[0].partition} is on "
                           "disk but not in the metadata (being deleted?): plan again")
    return DiskPlan(tuple(sorted(wanted)), tuple(moves), before, after,
                    {m.tp: partition_replicas[m.tp] for m in moves}, created, space)


def _fits(vol_space: tuple[int, int], incoming: Mapping[tuple[int, int, int], int],
          broker: int, size: int) -> bool:
    total, usable = vol_space
    if total < 0 or usable < 0:
        return False
    return usable - incoming.get((broker, total, usable), 0) - size >= total * MIN_FREE_PCT / 100


def _refuse_space(broker: int, targets: list[str], space: Mapping[tuple[int, str], tuple[int, int]],
                  moving: Sequence[Replica], incoming: Mapping[tuple[int, int, int], int]) -> None:
    unknown = [t for t in targets if min(space[(broker, t)]) < 0]
    if unknown:
        raise RefusedError(f"--remove-log-dirs: broker {broker} does not report the space of "
                           f"{', '.join(unknown)} (DescribeLogDirs v4+, Kafka 3.3+): cannot "
                           "check that the drain fits")
    need = sum(r.size_bytes for r in moving if r.broker == broker)
    vols = {space[(broker, t)] for t in targets}
    free = sum(max(0, int(u - total * MIN_FREE_PCT / 100)) for total, u in vols)
    raise RefusedError(f"--remove-log-dirs: broker {broker}'s remaining log directories lack "
                       f"the space: {_fmt(need)} to move, {_fmt(free)} free on "
                       f"{', '.join(targets)} keeping {MIN_FREE_PCT}% of each volume free")


# --------------------------------------------------------------------------- the plan file


def is_disk_plan(data: Any) -> bool:
    o = data.get("opskit") if isinstance(data, dict) else None
    return isinstance(o, dict) and o.get("format") == DISK_PLAN_FORMAT


def parse_disk_plan(text: str, source: str = "plan") -> DiskPlan | None:
    """The disk drain of a plan file's text; None when the file is another kind of plan.
    InvalidInputError (one line) when malformed."""
    data = load_json(text)
    if not is_disk_plan(data):
        return None
    try:
        o = data["opskit"]
        if int(o.get("format_version", 0)) > DISK_FORMAT_VERSION:
            raise InvalidInputError(f"opskit.format_version {o['format_version']} is newer than "
                                    f"this opskit reads ({DISK_FORMAT_VERSION})")
        drained = tuple(sorted((_nat(g["broker"]), norm_dir(_path(g["dir"])))
                               for g in o["goal"]["log_dirs"]))
        moves = tuple(DirMove(TopicPartition(_str(m["topic"]), _nat(m["partition"])),
                              _nat(m["broker"]), norm_dir(_path(m["from"])),
                              norm_dir(_path(m["to"])), _nat(m["size_bytes"]))
                      for m in o["moves"])
        replicas = {TopicPartition(_str(p["topic"]), _nat(p["partition"])):
                    tuple(_nat(b) for b in p["replicas"]) for p in data["partitions"]}
        dirs = [(_nat(d["broker"]), norm_dir(_path(d["dir"])), _nat(d["bytes_before"]),
                 _nat(d["bytes_after"]), int(d.get("total_bytes", -1)),
                 int(d.get("usable_bytes", -1))) for d in o.get("dirs", [])]
    except InvalidInputError as e:
        raise InvalidInputError(f"{source}: {e}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidInputError(f"{source}: not a valid log-directory drain plan "
                                f"({type(e).__name__}: {e})") from None
    if not moves:
        raise InvalidInputError(f"{source}: the plan has no moves")
    seen: set[tuple[TopicPartition, int]] = set()
    for m in moves:
        if (m.tp, m.broker) in seen or m.tp not in replicas or m.broker not in replicas[m.tp] \
                or m.source == m.target:
            raise InvalidInputError(f"{source}: move of {m.tp.topic}:{m.tp.partition} on broker "
                                    f"{m.broker} is listed twice, not in 'partitions' or to its "
                                    "own directory")
        seen.add((m.tp, m.broker))
    return DiskPlan(drained, moves, {(b, d): x for b, d, x, _, _, _ in dirs},
                    {(b, d): y for b, d, _, y, _, _ in dirs}, replicas, str(o.get("created", "")),
                    {(b, d): (t, u) for b, d, _, _, t, u in dirs})


def _nat(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidInputError(f"expected an integer >= 0, got {v!r}")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise InvalidInputError(f"expected a non-empty string, got {v!r}")
    return v


def _path(v: Any) -> str:
    if not isinstance(v, str) or not v.startswith("/"):
        raise InvalidInputError(f"expected an absolute log directory path, got {v!r}")
    return v
