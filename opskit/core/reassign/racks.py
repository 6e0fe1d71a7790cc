"""Rack-aware placement for the reassignment planner (pure; used by
``opskit.core.reassign.plan``).

The rack goal: no rack holds more than ``RackRule.limit(RF)`` replicas of a partition
(RF <= racks: every replica in a distinct rack; RF > racks: at most ceil(RF / racks) in
one rack, or the smallest limit the racks' sizes allow) and no replica is left on a
drained broker.

Lower bound, per partition: of its replicas on staying brokers a rack can keep at most
the limit, and the replicas on drained brokers all leave, so at least

    surplus(p) = (replicas on drained brokers) + sum over racks of max(0, in rack - limit)

of them leave, and as many arrive elsewhere (add, remove and rebalance keep the
replication factor). The rack goal alone is reached with exactly that many moves:
``spread_over_racks`` moves each surplus replica once, to a rack below the limit (one
exists: the limit is chosen so the racks can hold RF), and moves nothing else.

Combined with balance (every staying broker at floor or ceil of replicas / brokers): a
replica leaving a rack's brokers is one move, so the moves out of a rack are at least
the larger of its brokers' excess over ceil (``reassign.balance``) and its partitions'
surplus; the bound is max(sum over racks of that, sum of deficits under floor). That
holds for every plan reaching both goals. When the racks make balance impossible (a rack
of one broker must hold a replica of every partition), the bound is the rack bound alone.
Bytes likewise, with each replica counted at its partition's size.
"""

from __future__ import annotations

from bisect import insort
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opskit.core.reassign.balance import RackRule, count_targets


@dataclass(frozen=True)
class RackBounds:
    """``replicas``/``bytes``: no plan reaching the goal moves less. ``rack_replicas`` /
    ``rack_bytes``: the rack goal's own bounds (the surplus summed over partitions). ``unspread``: partitions
    over the limit in some rack (or on a drained broker) before the plan. ``balanced``:
    the bound includes the balance goal (False: the racks make it impossible)."""

    replicas: int
    bytes: int
    rack_replicas: int
    rack_bytes: int
    unspread: int
    balanced: bool


def _per_rack(brokers: Sequence[int], rack_of: Mapping[int, str]) -> dict[str, int]:
    """How many of ``brokers`` (each with a rack in ``rack_of``) each rack holds."""
    per: dict[str, int] = defaultdict(int)
    for b in brokers:
        per[rack_of[b]] += 1
    return per


def rack_bounds(reps: Sequence[Sequence[int]], sizes: Sequence[int], stay: Sequence[int],
                drained: Sequence[int], racks: RackRule, rack_of: Mapping[int, str | None]) -> RackBounds:
    """The lower bounds (see the module docstring) for ``reps`` as they are now."""
    staying = set(stay)
    gone = set(drained)

    def group(b: int) -> str:
        return rack_of.get(b) or f"broker {b}"  # a drained broker without a rack: its own

    forced: dict[str, int] = defaultdict(int)
    forced_bytes: dict[str, int] = defaultdict(int)
    holdings: dict[int, list[int]] = {b: [] for b in stay}
    unspread = 0
    # per distinct replica list: its staying brokers, the rack groups of its drained ones,
    # the racks over the limit (with the surplus), whether it is unspread
    seen: dict[tuple[int, ...], tuple[list[int], list[str], list[tuple[str, int]], bool]] = {}
    for rs, size in zip(reps, sizes, strict=True):
        t = tuple(rs)
        known = seen.get(t)
        if known is None:
            limit = racks.limit(len(rs))
            on_staying = [b for b in rs if b in staying]
            per = _per_rack(on_staying, racks.rack_of)
            over = [(r, n - limit) for r, n in per.items() if n > limit]
            known = seen[t] = (on_staying,
                               [group(b) for b in rs if b not in staying and b in gone],
                               over, bool(over) or any(b in gone for b in rs))
        on, off, over, unspread_one = known
        for b in on:
            holdings[b].append(size)
        for g in off:
            forced[g] += 1
            forced_bytes[g] += size
        for r, n in over:
            forced[r] += n
            forced_bytes[r] += n * size
        unspread += unspread_one
    rack_replicas = sum(forced.values())
    rack_bytes = sum(forced_bytes.values())
    total = sum(len(h) for h in holdings.values()) + sum(
        1 for rs in reps for b in rs if b in gone)
    if not stay or not _balance_possible(reps, stay, racks, total):
        return RackBounds(rack_replicas, rack_bytes, rack_replicas, rack_bytes, unspread, False)
    ceil = -(-total // len(stay))
    floor = total // len(stay)
    excess: dict[str, int] = defaultdict(int)
    excess_bytes: dict[str, int] = defaultdict(int)
    for b, held in holdings.items():
        if len(held) > ceil:
            excess[group(b)] += len(held) - ceil
            excess_bytes[group(b)] += sum(sorted(held)[: len(held) - ceil])
    for r in set(excess) | set(forced):
        forced[r] = max(forced[r], excess[r])
        forced_bytes[r] = max(forced_bytes[r], excess_bytes[r])
    deficit = sum(max(0, floor - len(h)) for h in holdings.values())
    return RackBounds(max(sum(forced.values()), deficit), sum(forced_bytes.values()),
                      rack_replicas, rack_bytes, unspread, True)


def rack_only(bounds: RackBounds) -> RackBounds:
    """The bounds of the rack goal alone."""
    return RackBounds(bounds.rack_replicas, bounds.rack_bytes, bounds.rack_replicas,
                      bounds.rack_bytes, bounds.unspread, False)


def _balance_possible(reps: Sequence[Sequence[int]], stay: Sequence[int], racks: RackRule,
                      total: int) -> bool:
    """A necessary condition for a balanced, rack-spread result: every rack can hold at
    least floor x its brokers, and needs at most ceil x its brokers, replicas."""
    size: dict[str, int] = defaultdict(int)
    for b in stay:
        size[racks.rack_of[b]] += 1
    floor = total // len(stay)
    ceil = -(-total // len(stay))
    most: dict[str, int] = dict.fromkeys(size, 0)
    least: dict[str, int] = dict.fromkeys(size, 0)
    per_rf: dict[int, int] = defaultdict(int)  # (the terms depend on the RF alone)
    for rs in reps:
        per_rf[len(rs)] += 1
    for rf, k in per_rf.items():
        limit = racks.limit(rf)
        room = {r: min(limit, n, rf) for r, n in size.items()}
        everywhere = sum(room.values())
        for r in size:
            most[r] += k * room[r]
            least[r] += k * max(0, rf - (everywhere - room[r]))
    return all(least[r] <= ceil * n and most[r] >= floor * n for r, n in size.items())


def spread_over_racks(reps: list[list[int]], stay: Sequence[int], drained: Sequence[int],
                      racks: RackRule) -> int:
    """Move (in place in ``reps``) each partition's surplus replicas out of over-full
    racks, each to the least loaded broker (fewest replicas against its balanced count)
    of a rack below the limit that does not hold the partition. From an over-full rack
    the most loaded broker gives (among equals a follower before the first replica: a
    leader change is a reorder, an extra move is data). Replicas on
    drained brokers are left to the balancer (they may stay in their rack). Returns the
    moves made: exactly the rack surplus of the staying replicas."""
    staying = set(stay)
    gone = set(drained)
    counts = {b: 0 for b in stay}
    for rs in reps:
        for b in rs:
            if b in counts:
                counts[b] += 1
    total = sum(counts.values()) + sum(1 for rs in reps for b in rs if b in gone)
    target = count_targets(counts, total)
    moves = 0
    for rs in reps:
        limit = racks.limit(len(rs))
        per: dict[str, list[int]] = defaultdict(list)
        for b in rs:
            if b in staying:
                per[racks.rack_of[b]].append(b)
        for rack in sorted(r for r, bs in per.items() if len(bs) > limit):
            givers = sorted(per[rack], key=lambda b: (target[b] - counts[b], b == rs[0], b))
            for giver in givers[: len(per[rack]) - limit]:
                options = [b for b in stay if b not in rs and racks.rack_of[b] != rack
                           and len(per.get(racks.rack_of[b], ())) < limit]
                to = min(options, key=lambda b: (counts[b] - target[b], counts[b], b))
                rs[rs.index(giver)] = to
                per[rack].remove(giver)
                per.setdefault(racks.rack_of[to], []).append(to)
                counts[giver] -= 1
                counts[to] += 1
                moves += 1
    return moves


def unspread_count(reps: Sequence[Sequence[int]], racks: RackRule) -> int:
    """Partitions with more than the limit in some rack (brokers without a rack in
    ``racks`` not counted)."""
    out = 0
    seen: dict[tuple[int, ...], bool] = {}
    for rs in reps:
        t = tuple(rs)
        over = seen.get(t)
        if over is None:
            limit = racks.limit(len(rs))
            per = _per_rack([b for b in rs if b in racks.rack_of], racks.rack_of)
            over = seen[t] = any(n > limit for n in per.values())
        out += over
    return out


def even_out(reps: list[list[int]], sizes: Sequence[int], stay: Sequence[int], racks: RackRule) -> int:
    """After ``balance_replicas``, whose targets ignore racks (it can give a broker that
    cannot shed, the only one of its rack, a target below what the rack spread forces on
    it, and stop): move replicas (in place in ``reps``) along the shortest chain of
    brokers, each passing one replica (its smallest that can go) to the next, from a
    broker that can spare one to a broker below floor, or from a broker above ceil to one
    below ceil, keeping every partition spread. Only the chain's ends change their
    counts, so each chain narrows the distance to balance and this ends. Returns the
    moves made."""
    holds: dict[int, set[int]] = {b: set() for b in stay}
    # per broker, its partitions grouped by replica set, each group smallest first (the
    # search below looks at a set's smallest partition only: indexed once, kept up to date)
    groups: dict[int, dict[frozenset[int], list[tuple[int, int]]]] = {b: {} for b in stay}
    for i, rs in enumerate(reps):
        key: frozenset[int] | None = None
        for b in rs:
            if b in holds:
                holds[b].add(i)
                if key is None:
                    key = frozenset(rs)
                groups[b].setdefault(key, []).append((sizes[i], i))
    if not holds:
        return 0
    for per in groups.values():
        for group in per.values():
            group.sort()
    total = sum(len(h) for h in holds.values())
    floor, ceil = total // len(holds), -(-total // len(holds))
    order = sorted(holds)
    moves = 0

    def chain(starts: Sequence[int], ends: set[int]) -> list[tuple[int, int, int]] | None:
        prev: dict[int, tuple[int, int] | None] = dict.fromkeys(starts)
        queue = deque(starts)
        while queue:
            if len(prev) == len(order):
                return None  # every broker reached, none of them an end
            u = queue.popleft()
            # u's partitions smallest first (by size, then partition), one per replica set:
            # a later one with the same brokers reaches nothing an earlier one did not
            for _, i in sorted(group[0] for group in groups[u].values() if group):
                if len(prev) == len(order):
                    break
                for v in order:
                    if v in prev or v in reps[i] or not racks.allows_move(reps[i], u, v):
                        continue
                    prev[v] = (i, u)
                    if v in ends:
                        out = []
                        node = v
                        while (step := prev[node]) is not None:
                            out.append((step[0], step[1], node))
                            node = step[1]
                        return out[::-1]
                    queue.append(v)
        return None

    while True:
        low = {b for b in order if len(holds[b]) < floor}
        high = [b for b in order if len(holds[b]) > ceil]
        path = None
        if low:
            path = chain([b for b in order if len(holds[b]) > floor], low)
        if path is None and high:
            path = chain(high, {b for b in order if len(holds[b]) < ceil})
        if path is None or len({i for i, _, _ in path}) < len(path):
            return moves  # (a partition twice in a chain: its later step was checked
            #              against replicas the earlier one changes)
        for i, u, v in path:
            rs = reps[i]
            entry = (sizes[i], i)
            old = frozenset(rs)
            for b in old:
                if b in groups:
                    groups[b][old].remove(entry)
            rs[rs.index(u)] = v
            holds[u].discard(i)
            holds[v].add(i)
            new = frozenset(rs)
            for b in new:
                if b in groups:
                    insort(groups[b].setdefault(new, []), entry)
        moves += len(path)
