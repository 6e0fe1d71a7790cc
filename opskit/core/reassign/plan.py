"""Reassignment planning: ``plan_reassignment(topology, goal, policy, now) -> Plan``.

Pure: no I/O, no clock (``now`` is a parameter), the topology and goal are never mutated.

Goals (``opskit.core.reassign.model.GoalKind``):

- add-brokers IDS / remove-brokers IDS / rebalance: replica counts balanced over the
  registered brokers (minus the drained ones) with the fewest moves
  (``opskit.core.reassign.balance``), then preferred leaders balanced by reordering:
  over the cluster, then within each topic as far as that keeps the cluster's balance.
  add-brokers and rebalance run the same balancing (on a cluster whose old brokers are
  balanced, every move goes onto the new brokers); add-brokers checks the new ids are
  registered. With racks the rack spread comes first (``opskit.core.reassign.racks``):
  no partition keeps more than ceil(RF / racks) replicas in one rack (RF <= racks: one
  per rack), moving only each partition's surplus, then the counts are balanced over all
  brokers with moves that keep the spread, so a broker in a new rack receives its share. Then planned moves are
  exchanged for moves of smaller replicas where the counts, racks and number of moves
  allow (``balance.trim_bytes``). Where that placement moves more replicas than the
  printed bound, the exact minimum is computed (``opskit.core.reassign.flow``): it is
  then the printed bound, and its placement replaces the heuristic's when it moves fewer
  (bytes trimmed again; never onto a broker over its capacity, never moving a partition
  without a leader). Then, without a byte tolerance, the replica-minimal placement moving the
  fewest bytes replaces it where found (``opskit.core.reassign.byteflow``; its convex flow's
  least bytes of any plan reaching the goal is then the printed byte bound). Replicas on
  brokers that are not registered (a dead broker) stay and are not counted, unless that
  broker is being drained.
- replication-factor N: each partition of the chosen topics with fewer than N replicas
  gains N - RF replicas on the least loaded brokers that keep the rack spread; nothing is
  removed, the current leader stays first (so leadership does not move); partitions
  that already have N or more are left as they are (never lowered). Internal topics
  (``__consumer_offsets``, ``__transaction_state``) only when asked.
- from-json: the given target for the partitions it lists.

Bytes (``opskit.core.reassign.bytes``): with ``Policy.byte_tolerance_pct`` (add, remove,
rebalance), after the counts, racks and leaders, replicas move until every staying
broker's bytes are within that percentage of the mean (counts may then spread beyond 1;
reported), and the leaders are balanced again by reordering. Every plan carries bytes
per broker before/after (``Estimates.bytes_per_broker``).

Leader weights (``opskit.core.reassign.leader_weights``): with ``Policy.leader_rates``
(add, remove, rebalance), last of all the preferred leaders are reordered among the
planned replicas to even the leader bytes-in per broker, keeping the leader counts'
spreads (per topic, cluster); no replica moves. The plan then carries the leader
bytes-in per broker before/after (``Estimates.leader_bytes_in``).

Refusals (``RefusedError``, exit 5; nothing is planned): a target broker that is not
registered; a replication factor above the number of brokers (left); a partition that
would have fewer replicas than its topic's ``min.insync.replicas``, or would move while that
value could not be read (unknown is not 1); a partition without a
leader (its move could never finish); brokers of which only some have a rack (plan with
``respect_racks=False`` to ignore racks); a broker left above its ``Policy.capacity`` and
above what it holds now. Unknown topics or partitions are
``NotFoundError`` (exit 4).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction

from opskit.core.models import TopicPartition
from opskit.core.reassign.balance import (
    RackRule,
    balance_replicas,
    bytes_lower_bound,
    replica_lower_bound,
    trim_bytes,
)
from opskit.core.reassign.byteflow import byte_fallback
from opskit.core.reassign.bytes import (
    ByteReport,
    balance_bytes,
    band,
    broker_bytes,
    byte_goal_bounds,
)
from opskit.core.reassign.checks import min_isr_unread
from opskit.core.reassign.flow import exact_fallback
from opskit.core.reassign.leader_weights import LeaderLoad, leader_load, weigh_leaders
from opskit.core.reassign.leaders import balance_all_leaders, balance_leaders, repair_leaders
from opskit.core.reassign.model import (
    INTERNAL_TOPICS,
    Assignment,
    Estimates,
    Goal,
    GoalKind,
    PartitionBase,
    PartitionState,
    Plan,
    Policy,
    Topology,
)
from opskit.core.reassign.racks import (
    RackBounds,
    even_out,
    rack_bounds,
    rack_only,
    spread_over_racks,
    unspread_count,
)
from opskit.errors import InvalidInputError, NotFoundError, RefusedError


def plan_reassignment(topology: Topology, goal: Goal, policy: Policy, now: datetime) -> Plan:
    """The plan reaching ``goal`` from ``topology`` (see the module docstring)."""
    registered = set(topology.broker_ids)
    if not registered:
        raise RefusedError("the cluster has no registered brokers")
    parts = topology.partitions
    reps = [list(p.replicas) for p in parts]
    rack_report: tuple[int, int, int] | None = None
    stay = sorted(registered)
    byte_goal: dict[str, object] = {}
    if policy.byte_tolerance_pct is not None and goal.kind in (GoalKind.FROM_JSON,
                                                               GoalKind.REPLICATION_FACTOR):
        raise InvalidInputError("byte balance goes with add-brokers, remove-brokers or rebalance")
    if policy.leader_rates is not None and goal.kind in (GoalKind.FROM_JSON,
                                                         GoalKind.REPLICATION_FACTOR):
        raise InvalidInputError("leader weights go with add-brokers, remove-brokers or rebalance")
    weights = None if policy.leader_rates is None else policy.leader_rates.weights(
        [p.tp for p in parts])[0]
    if goal.kind is GoalKind.FROM_JSON:
        wanted = _apply_target(topology, goal.target, reps)
        lower: tuple[int, int] | None = None
    elif goal.kind is GoalKind.REPLICATION_FACTOR:
        wanted = _raise_rf(topology, goal, policy, reps)
        lower = None
    else:
        drained = _drained(topology, goal)
        stay = sorted(registered - set(drained))
        if not stay:
            raise RefusedError("no broker would be left to hold the replicas")
        top_rf = max((len(p.replicas) for p in parts), default=0)
        if top_rf > len(stay):
            worst = next(p for p in parts if len(p.replicas) == top_rf)
            raise RefusedError(f"{worst.topic} has replication factor {top_rf}, above the "
                               f"{len(stay)} brokers that would be left")
        racks = _rack_rule(topology, stay, policy)
        spread, lower = _balance(topology, reps, stay, drained, racks, policy.capacity)
        if policy.byte_tolerance_pct is None:  # the fewest bytes among the fewest replicas
            lower = (lower[0], byte_fallback(parts, reps, stay, drained, racks, policy.capacity,
                                             lower, policy.balance_leaders))
        if policy.balance_leaders:
            balance_leaders(reps, stay)
            repair_leaders([p.replicas for p in parts], reps, stay, racks)
            balance_all_leaders(reps, [p.topic for p in parts], stay)
        if policy.byte_tolerance_pct is not None:
            lower, byte_goal = _balance_bytes(topology, reps, stay, drained, racks, policy,
                                              spread, lower)
            if policy.balance_leaders:  # the byte moves carry leadership: reorder again
                balance_all_leaders(reps, [p.topic for p in parts], stay)
        if weights is not None and policy.balance_leaders:  # reorders only, counts kept
            weigh_leaders(reps, [p.topic for p in parts], weights, stay)
        wanted = list(range(len(parts)))
        if spread is not None:
            rack_report = (spread.rack_replicas, spread.unspread, unspread_count(reps, racks))
    moved = [i for i in wanted if reps[i] != list(parts[i].replicas)]
    moves = [(parts[i], reps[i]) for i in moved]
    _check_moves(topology, moves, registered)
    report = _byte_report(topology, reps, stay, policy, byte_goal)
    _check_capacity(report)
    dirs = {a.tp: a.log_dirs for a in goal.target}
    load = None if weights is None else LeaderLoad(
        leader_load([p.replicas for p in parts], weights, stay), leader_load(reps, weights, stay),
        tuple(stay))
    return _plan(topology, goal, policy, now, moves, dirs, lower, rack_report, report, load)


# --------------------------------------------------------------------------- goals


def _drained(topology: Topology, goal: Goal) -> list[int]:
    registered = set(topology.broker_ids)
    if goal.kind is GoalKind.ADD_BROKERS:
        missing = [b for b in goal.brokers if b not in registered]
        if missing:
            raise RefusedError(f"broker {missing[0]} is not registered (start it before "
                               f"planning to add it)")
        return []
    if goal.kind is GoalKind.REMOVE_BROKERS:
        holding = {b for p in topology.partitions for b in p.replicas}
        unknown = [b for b in goal.brokers if b not in registered and b not in holding]
        if unknown:
            raise RefusedError(f"broker {unknown[0]} is not registered and holds no replicas")
        return sorted(goal.brokers)
    return []


def _raise_rf(topology: Topology, goal: Goal, policy: Policy, reps: list[list[int]]) -> list[int]:
    n = goal.replication_factor
    if n is None or n < 1:
        raise InvalidInputError("the replication factor must be 1 or more")
    stay = sorted(topology.broker_ids)
    if n > len(stay):
        raise RefusedError(f"replication factor {n} is above the {len(stay)} registered brokers")
    names = {p.topic for p in topology.partitions}
    if goal.topics is None:
        chosen = {t for t in names if t not in INTERNAL_TOPICS}
    else:
        unknown = sorted(set(goal.topics) - names)
        if unknown:
            raise NotFoundError(f"topic {unknown[0]!r} does not exist")
        chosen = set(goal.topics)
    if goal.include_internal:
        chosen |= {t for t in INTERNAL_TOPICS if t in names}
    racks = _rack_rule(topology, stay, policy)
    counts = {b: 0 for b in stay}
    for rs in reps:
        for b in rs:
            if b in counts:
                counts[b] += 1
    added: dict[int, set[int]] = defaultdict(set)
    wanted: list[int] = []
    for i, p in enumerate(topology.partitions):
        if p.topic not in chosen or len(p.replicas) >= n:
            continue
        wanted.append(i)
        rs = reps[i]
        leader = p.leader if p.leader in rs else rs[0]
        rs.remove(leader)
        rs.insert(0, leader)
        for _ in range(n - len(p.replicas)):
            options = [b for b in stay if b not in rs and racks.allows_move(rs, None, b)]
            if not options:
                raise RefusedError(f"{p.topic}:{p.partition} cannot get {n} replicas on "
                                   f"distinct brokers keeping its racks spread")
            b = min(options, key=lambda b: (counts[b], b))
            rs.append(b)
            counts[b] += 1
            added[b].add(i)
    _even_out_added(reps, counts, added, racks)
    return wanted


def _even_out_added(reps: list[list[int]], counts: dict[int, int], added: dict[int, set[int]],
                    racks: RackRule) -> None:
    """Move added replicas from the fullest broker to the emptiest while that narrows
    the spread (greedy placement can leave it at 2 when partitions overlap)."""
    while True:
        order = sorted(counts, key=lambda b: (counts[b], b))
        changed = False
        for a in reversed(order):
            for b in order:
                if counts[a] - counts[b] < 2:
                    break
                i = next((i for i in sorted(added[a]) if b not in reps[i]
                          and racks.allows_move(reps[i], a, b)), None)
                if i is not None:
                    rs = reps[i]
                    rs[rs.index(a)] = b
                    added[a].discard(i)
                    added[b].add(i)
                    counts[a] -= 1
                    counts[b] += 1
                    changed = True
                    break
            if changed:
                break
        if not changed:
            return


def _apply_target(topology: Topology, target: Sequence[Assignment], reps: list[list[int]]) -> list[int]:
    index = {p.tp: i for i, p in enumerate(topology.partitions)}
    topics = {p.topic for p in topology.partitions}
    wanted: list[int] = []
    for a in target:
        i = index.get(a.tp)
        if i is None:
            if a.topic not in topics:
                raise NotFoundError(f"topic {a.topic!r} does not exist")
            raise NotFoundError(f"partition {a.topic}:{a.partition} does not exist")
        reps[i] = list(a.replicas)
        wanted.append(i)
    return wanted


def _rack_rule(topology: Topology, brokers: Iterable[int], policy: Policy) -> RackRule:
    if not policy.respect_racks:
        return RackRule({})
    racks = topology.racks()
    ids = sorted(brokers)
    with_rack = [b for b in ids if racks.get(b)]
    if not with_rack:
        return RackRule({})
    if len(with_rack) != len(ids):
        without = [b for b in ids if not racks.get(b)]
        raise RefusedError(f"brokers {','.join(map(str, without))} have no rack while others "
                           f"do: give every broker a rack, or plan ignoring racks")
    return RackRule({b: r for b, r in racks.items() if r and b in ids})


# --------------------------------------------------------------------------- checks, bounds


def _check_moves(topology: Topology, moves: Sequence[tuple[PartitionState, list[int]]],
                 registered: set[int]) -> None:
    for p, rs in moves:
        new = [b for b in rs if b not in p.replicas]
        if any(b not in registered for b in new):
            bad = next(b for b in new if b not in registered)
            raise RefusedError(f"broker {bad} is not registered ({p.topic}:{p.partition} "
                               f"would move to it)")
        need = topology.min_isr(p.topic)
        if need is None:
            raise min_isr_unread(f"{p.topic}:{p.partition}", p.topic, len(rs))
        if len(rs) < need:
            raise RefusedError(f"{p.topic}:{p.partition} would have {len(rs)} replicas, under "
                               f"its min.insync.replicas={need}")
        if p.offline:
            raise RefusedError(f"{p.topic}:{p.partition} has no leader: a move could never finish")


def _balance(topology: Topology, reps: list[list[int]], stay: list[int], drained: list[int],
             racks: RackRule, capacity: Mapping[int, int]) -> tuple[RackBounds | None, tuple[int, int]]:
    """Balance replica counts (in ``reps``) over the staying brokers; returns the rack
    bounds (None without racks) and the lower bounds (replicas, bytes).

    With racks (``opskit.core.reassign.racks``): first every partition's surplus replicas
    leave the racks holding more than the limit (the fewest moves the rack goal allows),
    then the counts are balanced over all staying brokers with moves that keep every
    partition spread (a broker in a new rack receives its share)."""
    sizes = [p.size_bytes for p in topology.partitions]
    if not racks.active:
        lower = _lower_bounds(reps, sizes, stay, drained)
        balance_replicas(reps, sizes, stay, drained, racks)
        trim_bytes(reps, [p.replicas for p in topology.partitions], sizes, stay, racks)
        return None, (exact_fallback(topology.partitions, reps, stay, drained, racks, capacity,
                                     lower[0]), lower[1])
    bounds = rack_bounds(reps, sizes, stay, drained, racks, topology.racks())
    spread_over_racks(reps, stay, drained, racks)
    balance_replicas(reps, sizes, stay, drained, racks)
    even_out(reps, sizes, stay, racks)
    trim_bytes(reps, [p.replicas for p in topology.partitions], sizes, stay, racks)
    if bounds.balanced and not _balanced(reps, stay):
        # the racks kept this plan from balancing (the balance test in rack_bounds is
        # necessary, not sufficient): it reaches the rack goal only, whose bound it reports
        bounds = rack_only(bounds)
    gone = set(drained)
    left = next(((i, d) for i, rs in enumerate(reps) for d in rs if d in gone), None)
    if left is not None:
        p = topology.partitions[left[0]]
        raise RefusedError(f"{p.topic}:{p.partition} cannot leave broker {left[1]} keeping its "
                           f"replicas spread over racks")
    if bounds.balanced:
        return bounds, (exact_fallback(topology.partitions, reps, stay, drained, racks, capacity,
                                       bounds.replicas), bounds.bytes)
    return bounds, (bounds.replicas, bounds.bytes)


def _balanced(reps: Sequence[Sequence[int]], stay: Sequence[int]) -> bool:
    counts = dict.fromkeys(stay, 0)
    for rs in reps:
        for b in rs:
            if b in counts:
                counts[b] += 1
    return max(counts.values()) - min(counts.values()) <= 1


def _lower_bounds(reps: Sequence[Sequence[int]], sizes: Sequence[int], stay: Sequence[int],
                  drained: Sequence[int]) -> tuple[int, int]:
    staying = set(stay)
    gone = set(drained)
    holdings: dict[int, list[int]] = {b: [] for b in stay}
    leaving: dict[int, list[int]] = {b: [] for b in drained}
    for rs, size in zip(reps, sizes, strict=True):
        for b in rs:
            if b in staying:
                holdings[b].append(size)
            elif b in gone:
                leaving[b].append(size)
    total = sum(len(s) for s in holdings.values()) + sum(len(s) for s in leaving.values())
    replicas = replica_lower_bound({b: len(s) for b, s in holdings.items()},
                                   {b: len(s) for b, s in leaving.items()})
    return replicas, bytes_lower_bound(holdings, leaving, total)


# --------------------------------------------------------------------------- bytes


def _balance_bytes(topology: Topology, reps: list[list[int]], stay: list[int], drained: list[int],
                   racks: RackRule, policy: Policy, spread: RackBounds | None,
                   lower: tuple[int, int]) -> tuple[tuple[int, int], dict[str, object]]:
    """Byte balance after the counts and racks (``opskit.core.reassign.bytes``): returns
    the lower bounds of what the plan then reaches and the byte goal's outcome.

    Bounds: the count goal's when the counts are still balanced after (else the rack
    goal's, or the drain's alone without racks), combined (max) with the byte goal's when
    the band is reached: each is a lower bound of every plan reaching all it reaches."""
    parts = topology.partitions
    sizes = [p.size_bytes for p in parts]
    base = [p.replicas for p in parts]
    counted = set(stay) | set(drained)
    total = sum(s * sum(1 for b in rs if b in counted) for rs, s in zip(base, sizes, strict=True))
    assert policy.byte_tolerance_pct is not None
    tol = Fraction(str(policy.byte_tolerance_pct)) / 100
    goal = band(total, stay, tol, policy.capacity)
    goal_lower = byte_goal_bounds(base, sizes, stay, drained, goal)
    reached = balance_bytes(reps, base, sizes, stay, racks, goal, policy.capacity)
    if not _balanced(reps, stay):
        if spread is not None:
            lower = (spread.rack_replicas, spread.rack_bytes)
        else:
            gone = set(drained)
            lower = (sum(1 for rs in base for b in rs if b in gone),
                     sum(s for rs, s in zip(base, sizes, strict=True) for b in rs if b in gone))
    if reached:
        lower = (max(lower[0], goal_lower[0]), max(lower[1], goal_lower[1]))
    counts = dict.fromkeys(stay, 0)
    for rs in reps:
        for b in rs:
            if b in counts:
                counts[b] += 1
    return lower, {"tolerance_pct": policy.byte_tolerance_pct, "low": goal.lo, "high": goal.hi,
                   "reached": reached, "goal_bytes_lower_bound": goal_lower[1],
                   "goal_replicas_lower_bound": goal_lower[0],
                   "count_spread_after": max(counts.values()) - min(counts.values())}


def _byte_report(topology: Topology, reps: Sequence[Sequence[int]], stay: Sequence[int],
                 policy: Policy, byte_goal: Mapping[str, object]) -> ByteReport:
    parts = topology.partitions
    sizes = [p.size_bytes for p in parts]
    ids = topology.broker_ids
    return ByteReport(
        before=broker_bytes((p.replicas for p in parts), sizes, ids),
        after=broker_bytes(reps, sizes, ids), brokers=tuple(stay),
        capacity=dict(policy.capacity), capacity_source=policy.capacity_source,
        **byte_goal)  # type: ignore[arg-type]


def _check_capacity(report: ByteReport) -> None:
    """Refuse a plan that leaves a broker above its capacity and above what it holds now
    (a broker already above it that the plan does not fill further is left to the
    caller's note)."""
    for b in sorted(report.capacity):
        after, before, cap = report.after.get(b, 0), report.before.get(b, 0), report.capacity[b]
        if after > cap and after > before:
            raise RefusedError(
                f"broker {b} would hold {after:,} B of replicas after the plan, over its "
                f"capacity of {cap:,} B ({report.capacity_source or 'given'}; it holds "
                f"{before:,} B now)")


# --------------------------------------------------------------------------- the plan


def _plan(topology: Topology, goal: Goal, policy: Policy, now: datetime,
          moves: Sequence[tuple[PartitionState, list[int]]],
          log_dirs: Mapping[TopicPartition, tuple[str, ...] | None],
          lower: tuple[int, int] | None, rack_report: tuple[int, int, int] | None = None,
          per_broker: ByteReport | None = None, load: LeaderLoad | None = None) -> Plan:
    bytes_in: dict[int, int] = defaultdict(int)
    bytes_out: dict[int, int] = defaultdict(int)
    replicas_moved = bytes_moved = leaders = 0
    for p, rs in moves:
        new = [b for b in rs if b not in p.replicas]
        replicas_moved += len(new)
        bytes_moved += len(new) * p.size_bytes
        if rs[0] != p.replicas[0]:
            leaders += 1
        source = p.leader if p.leader is not None else p.replicas[0]
        for b in new:
            bytes_in[b] += p.size_bytes
            bytes_out[source] += p.size_bytes
    rate = policy.throttle_bytes_per_s
    duration: float | None = None
    if rate is not None:
        busiest = max([0, *bytes_in.values(), *bytes_out.values()])
        duration = busiest / rate
    replicas_lb, bytes_lb = lower if lower is not None else (replicas_moved, bytes_moved)
    rack_lb, unspread_before, unspread_after = rack_report or (None, None, None)
    estimates = Estimates(replicas_moved, replicas_lb, bytes_moved, bytes_lb, leaders,
                          dict(bytes_in), dict(bytes_out), rate, duration,
                          rack_lb, unspread_before, unspread_after, per_broker, load)
    return Plan(
        partitions=tuple(Assignment(p.topic, p.partition, tuple(rs), log_dirs.get(p.tp))
                         for p, rs in moves),
        base=tuple(PartitionBase(p.topic, p.partition, p.replicas, p.size_bytes) for p, _ in moves),
        goal=goal,
        created=now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        estimates=estimates,
        brokers=tuple(sorted(topology.broker_ids)),
    )


def replica_counts(assignment: Iterable[tuple[TopicPartition, Sequence[int]]]) -> dict[int, int]:
    """Replicas per broker of an assignment (for reports and tests)."""
    out: dict[int, int] = defaultdict(int)
    for _, rs in assignment:
        for b in rs:
            out[b] += 1
    return dict(out)
