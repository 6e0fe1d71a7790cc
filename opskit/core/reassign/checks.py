"""Before an execution: refusals, batches, bytes to copy and duration; after it, a
partition's verify verdict (pure).

Everything here decides from plain data the runner read (assignment, brokers,
reassignments in flight, sizes, write rates); nothing changes the cluster. A
refusal is :class:`RefusedError` (exit 5), an unknown topic or partition
:class:`NotFoundError` (exit 4): one line naming the first partition concerned. A topic
whose ``min.insync.replicas`` could not be read (None) is refused, not taken as 1.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from opskit.core.models import TopicPartition
from opskit.core.reassign.machine import InFlight, Move, MoveStatus
from opskit.core.reassign.plan_input import ExecPlan
from opskit.errors import NotFoundError, RefusedError

__all__ = ["ClusterView", "batches", "build_moves", "bytes_remaining",
           "bytes_remaining_by_broker", "check_write_rates",
           "copy_bytes", "duration_bound", "foreign_in_flight", "min_isr_unread",
           "replicas_verdict"]


@dataclass(frozen=True)
class ClusterView:
    """What the runner read before starting."""

    replicas: Mapping[TopicPartition, tuple[int, ...]]
    brokers: frozenset[int]
    in_flight: Mapping[TopicPartition, InFlight]
    #: topic -> min.insync.replicas; None: could not be read (a topic missing counts as 1)
    min_isr: Mapping[str, int | None]


def min_isr_unread(where: str, topic: str, replicas: int) -> RefusedError:
    """The refusal of a move of ``topic`` (at ``where``) to ``replicas`` replicas when its
    min.insync.replicas could not be read: any value above ``replicas`` would refuse it."""
    return RefusedError(
        f"{where}: min.insync.replicas of topic {topic!r} could not be read, so opskit cannot "
        f"check that {replicas} replica(s) keep acks=all producers working")


def replicas_verdict(now: tuple[int, ...] | list[int] | None, target: tuple[int, ...],
                     moving: bool) -> str:
    """``reassign verify``'s verdict on one partition: its replicas ``now`` (None: the
    partition is gone) against the plan's ``target``, ``moving`` while its reassignment
    is in flight."""
    return ("missing" if now is None else "moving" if moving
            else "done" if tuple(now) == target
            else "done (order differs)" if set(now) == set(target) else "differs")


def _fmt(tp: TopicPartition) -> str:
    return f"{tp.topic}:{tp.partition}"


def build_moves(plan: ExecPlan, view: ClusterView, adopt: bool = False) -> tuple[Move, ...]:
    """The plan's moves against the cluster, or the first reason to refuse it.

    Compare-and-set: with the plan's recorded base, each partition must still have
    those replicas (or already the target); without one (a plan of Kafka's tool) the
    base is the assignment read now.
    """
    topics = {tp.topic for tp in view.replicas}
    moves: list[Move] = []
    n_brokers = len(view.brokers)
    for pm in plan.moves:
        tp = pm.tp
        if tp not in view.replicas:
            if tp.topic not in topics:
                raise NotFoundError(f"topic {tp.topic!r} of the plan does not exist")
            raise NotFoundError(f"partition {_fmt(tp)} of the plan does not exist")
        if len(pm.target) > n_brokers:
            raise RefusedError(f"{_fmt(tp)}: replication factor {len(pm.target)} is above the "
                               f"{n_brokers} registered brokers")
        unknown = sorted(set(pm.target) - view.brokers)
        if unknown:
            raise RefusedError(
                f"{_fmt(tp)}: target broker(s) {', '.join(map(str, unknown))} not registered "
                f"in the cluster (brokers: {', '.join(map(str, sorted(view.brokers)))})")
        min_isr = view.min_isr.get(tp.topic, 1)
        if min_isr is None:
            raise min_isr_unread(_fmt(tp), tp.topic, len(pm.target))
        if len(pm.target) < min_isr:
            raise RefusedError(
                f"{_fmt(tp)}: {len(pm.target)} replica(s) would leave it under "
                f"min.insync.replicas={min_isr} (acks=all producers would fail)")
        now = view.replicas[tp]
        base = plan.base.get(tp) if plan.base is not None else None
        flight = view.in_flight.get(tp)
        if flight is not None:
            ours = set(flight.replicas) == set(pm.target) | set(flight.removing)
            if not adopt:
                raise RefusedError(
                    f"{_fmt(tp)} is being reassigned by something other than this opskit run "
                    f"(replicas {list(flight.replicas)}, adding {list(flight.adding)}, removing "
                    f"{list(flight.removing)}); wait for it, or pass --adopt to wait for it "
                    "and continue")
            if not ours:
                raise RefusedError(
                    f"{_fmt(tp)} is being reassigned to other replicas than the plan's "
                    f"(in flight: {list(flight.replicas)}, plan: {list(pm.target)}); opskit "
                    "never overrides a reassignment it did not start")
            start = tuple(b for b in flight.replicas if b not in flight.adding)
            moves.append(Move(tp, base or start, pm.target))
            continue
        if base is not None and tuple(now) != base and tuple(now) != tuple(pm.target):
            raise RefusedError(
                f"the assignment changed since the plan was made: {_fmt(tp)} has replicas "
                f"{list(now)}, the plan was made from {list(base)} (make a new plan)")
        moves.append(Move(tp, tuple(now), pm.target))
    return tuple(moves)


def foreign_in_flight(plan: ExecPlan, view: ClusterView) -> list[TopicPartition]:
    """Reassignments in flight on partitions the plan does not name."""
    named = {m.tp for m in plan.moves}
    return sorted(tp for tp in view.in_flight if tp not in named)


def batches(moves: tuple[Move, ...], max_per_broker: int | None) -> list[list[Move]]:
    """How the moves would be submitted if each batch finished together (a preview:
    the execution submits the next move as soon as a slot frees)."""
    pending = [m for m in moves if m.base != m.target]
    out: list[list[Move]] = []
    while pending:
        load: Counter[int] = Counter()
        batch: list[Move] = []
        rest: list[Move] = []
        for m in pending:
            if (max_per_broker is None or not m.brokers
                    or all(load[b] < max_per_broker for b in m.brokers)):
                batch.append(m)
                load.update(m.brokers)
            else:
                rest.append(m)
        out.append(batch)
        pending = rest
    return out


def copy_bytes(moves: tuple[Move, ...], sizes: Mapping[TopicPartition, int]
               ) -> dict[int, int]:
    """Bytes each broker receives (new replicas x partition size)."""
    per: dict[int, int] = defaultdict(int)
    for m in moves:
        for b in m.adding:
            per[b] += sizes.get(m.tp, 0)
    return dict(per)


def bytes_remaining_by_broker(moves: tuple[Move, ...], sizes: Mapping[TopicPartition, int],
                              replica_sizes: Mapping[TopicPartition, Mapping[int, int]]
                              ) -> dict[int, int]:
    """Bytes each broker still has to receive: for every unfinished move, each new
    replica's shortfall against the partition's size."""
    left: dict[int, int] = defaultdict(int)
    for m in moves:
        if m.status in (MoveStatus.DONE, MoveStatus.FAILED):
            continue
        size = sizes.get(m.tp, 0)
        have = replica_sizes.get(m.tp, {})
        for b in m.adding:
            left[b] += max(0, size - have.get(b, 0))
    return dict(left)


def bytes_remaining(moves: tuple[Move, ...], sizes: Mapping[TopicPartition, int],
                    replica_sizes: Mapping[TopicPartition, Mapping[int, int]]) -> int:
    """Bytes still to copy, all brokers together."""
    return sum(bytes_remaining_by_broker(moves, sizes, replica_sizes).values())


def duration_bound(per_broker_bytes: Mapping[int, int], rate: int) -> float:
    """Seconds the busiest broker needs at ``rate`` bytes/s (the physical lower bound)."""
    if rate <= 0 or not per_broker_bytes:
        return 0.0
    return max(per_broker_bytes.values()) / rate


def check_write_rates(moves: tuple[Move, ...], write_rates: Mapping[TopicPartition, float],
                      rate: int, max_per_broker: int | None) -> None:
    """Refuse a throttle that the moving partitions' writes alone would fill.

    A new replica copies at most ``rate`` bytes/s per broker and direction; while it
    catches up, producers keep writing. If the partitions moving through one broker at
    once are written faster than the throttle, they never catch up.
    """
    per_broker: dict[int, list[float]] = defaultdict(list)
    for m in moves:
        if not m.moves_data or m.base == m.target:
            continue
        w = write_rates.get(m.tp, 0.0)
        for b in m.adding:  # follower side: what b receives
            per_broker[b].append(w)
        if m.base:  # leader side: the leader sends to every new replica
            per_broker[m.base[0]].append(w * len(m.adding))
    for b, rates in sorted(per_broker.items()):
        rates.sort(reverse=True)
        concurrent = rates if max_per_broker is None else rates[:max_per_broker]
        need = sum(concurrent)
        if need >= rate:
            raise RefusedError(
                f"throttle {rate:,} B/s is below the write rate of the partitions moving "
                f"through broker {b} ({math.ceil(need):,} B/s): the moves could never finish; "
                "raise --throttle")
