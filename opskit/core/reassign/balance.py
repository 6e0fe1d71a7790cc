"""Minimal-movement balancing of replica counts (pure; used by
``opskit.core.reassign.plan``).

Replica counts. With T replicas on n brokers a balanced cluster has every broker at
f = floor(T/n) or c = ceil(T/n) (exactly T - n*f of them at c). Any balanced result needs
at least

    E = sum over brokers of max(0, count - c)     (a broker above c must shed that many;
                                                    a broker being drained counts with c = 0)
    D = sum over brokers of max(0, f - count)     (a broker below f must receive that many)

moves, and each move sheds from one broker and fills one: the lower bound is max(E, D).
(E alone is the usual "adding brokers" bound; it is the whole bound when the existing
brokers are above c, as when a balanced cluster gains brokers.) The planner reaches it:
the brokers with the most replicas get the r targets at c, the others f (after the drain,
a broker a forced replica left at c keeps c, swapped with one still waiting to reach c);
each broker
above its target sheds its smallest replicas, each to the receiver with the largest
deficit that does not hold that partition (one exists whenever the giver has more
replicas than the receiver) and keeps the rack spread. A replica on a drained broker
that no receiver can take goes to the least loaded broker that can, which then sheds one
of its own (a chain: one extra move, reported against the bound).

Bytes: once the counts are balanced, ``trim_bytes`` exchanges a planned move for one of
a smaller replica where that keeps the counts balanced, the racks spread and the number
of replicas moved (local exchanges: byte-minimal among replica-minimal plans in most
small cases, not always).

Leader counts are balanced afterwards by :mod:`opskit.core.reassign.leaders`.

State is a list of replica lists (``reps``) the caller owns; nothing else is mutated.
"""

from __future__ import annotations

import math
from bisect import insort
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property


@dataclass(frozen=True)
class RackRule:
    """Rack spread: at most ``limit(RF)`` replicas of a partition in one rack: ceil(RF /
    racks) when every rack has that many brokers (RF <= racks: one per rack), else the
    smallest limit the racks' sizes can meet. Empty ``rack_of`` = no racks (every move
    allowed)."""

    rack_of: Mapping[int, str]

    @property
    def active(self) -> bool:
        return bool(self.rack_of)

    @cached_property
    def _rack_sizes(self) -> tuple[int, ...]:
        return tuple(sorted(Counter(self.rack_of.values()).values()))

    @cached_property
    def _limits(self) -> dict[int, int]:
        return {}  # rf -> limit, filled as asked (allows_move runs millions of times)

    def limit(self, rf: int) -> int:
        limits = self._limits
        out = limits.get(rf)
        if out is None:
            out = limits[rf] = _rack_limit(self._rack_sizes, rf)
        return out

    def allows_move(self, replicas: Sequence[int], giver: int | None, receiver: int) -> bool:
        """May ``receiver`` take a replica of this partition from ``giver`` (None: an added
        replica) without crowding a rack?"""
        rack_of = self.rack_of
        if not rack_of:
            return True
        rack = rack_of.get(receiver)
        if giver is not None and rack_of.get(giver) == rack:
            return True
        in_rack = 1
        for r in replicas:
            if r != giver and rack_of.get(r) == rack:
                in_rack += 1
        if in_rack == 1 and (replicas or giver is None):
            return True  # alone in its rack: every limit (of an RF of 1 or more) is 1 or more
        return in_rack <= self.limit(len(replicas) + (1 if giver is None else 0))


@cache
def _rack_limit(sizes: tuple[int, ...], rf: int) -> int:
    """The least per-rack limit racks of these sizes can meet for ``rf`` replicas."""
    if not sizes:
        return rf
    limit = math.ceil(rf / len(sizes))
    while limit < rf and sum(min(limit, n) for n in sizes) < rf:
        limit += 1
    return limit


def count_targets(counts: Mapping[int, int], total: int) -> dict[int, int]:
    """Each broker's balanced count: the ``total % n`` brokers with the most replicas get
    ceil, the others floor (ties: the lower id gets ceil)."""
    n = len(counts)
    if n == 0:
        return {}
    f, r = divmod(total, n)
    order = sorted(counts, key=lambda b: (-counts[b], b))
    return {b: f + (1 if i < r else 0) for i, b in enumerate(order)}


def replica_lower_bound(counts: Mapping[int, int], drained: Mapping[int, int]) -> int:
    """max(E, D) for brokers ``counts`` (the brokers that stay) and ``drained`` (brokers
    being emptied, with their replica counts)."""
    total = sum(counts.values()) + sum(drained.values())
    if not counts:
        return 0
    f = total // len(counts)
    c = -(-total // len(counts))
    excess = sum(drained.values()) + sum(max(0, k - c) for k in counts.values())
    deficit = sum(max(0, f - k) for k in counts.values())
    return max(excess, deficit)


def bytes_lower_bound(holdings: Mapping[int, Sequence[int]], drained: Mapping[int, Sequence[int]],
                      total: int) -> int:
    """Bytes every balanced result moves at least: all of a drained broker's partitions,
    and the smallest (count - ceil) partitions of a broker above ceil. ``holdings`` maps a
    staying broker to the sizes of the partitions it holds."""
    if not holdings:
        return 0
    c = -(-total // len(holdings))
    out = sum(sum(s) for s in drained.values())
    for sizes in holdings.values():
        if len(sizes) > c:
            out += sum(sorted(sizes)[: len(sizes) - c])
    return out


def balance_replicas(reps: list[list[int]], sizes: Sequence[int], brokers: Sequence[int],
                     drained: Sequence[int], racks: RackRule, shed_surplus: bool = True,
                     only: set[int] | None = None) -> None:
    """Move replicas (in place in ``reps``) until every broker of ``brokers`` is at its
    balanced count and no replica is left on a ``drained`` broker (``shed_surplus``
    False: only drain; ``only``: drain only these partitions). Replicas on other brokers
    stay where they are and are not counted."""
    stay = set(brokers)
    gone = set(drained)
    holds: dict[int, set[int]] = {b: set() for b in stay | gone}
    for i, rs in enumerate(reps):
        for b in rs:
            if b in holds:
                holds[b].add(i)
    counts = {b: len(holds[b]) for b in stay}
    total = sum(counts.values()) + sum(len(holds[b]) for b in gone)
    targets = count_targets(counts, total)
    floor_count = total // len(counts) if counts else 0
    need = {b: t - counts[b] for b, t in targets.items()}
    order = sorted(stay)
    pool = [b for b in order if need[b] > 0]

    def move(i: int, giver: int, receiver: int) -> None:
        rs = reps[i]
        rs[rs.index(giver)] = receiver
        holds[giver].discard(i)
        holds[receiver].add(i)
        if giver in need:
            need[giver] += 1
        need[receiver] -= 1
        if need[receiver] == 0 and receiver in pool:
            pool.remove(receiver)

    #: (replica set, giver) -> the brokers of ``order`` that may take the giver's replica
    #: (not holding the partition, rack spread kept): a few hundred sets, asked thousands
    #: of times
    allowed: dict[tuple[frozenset[int], int], frozenset[int]] = {}

    def best_receiver(i: int, giver: int, candidates: Sequence[int]) -> int | None:
        best: int | None = None
        best_key: tuple[int, int, int] | None = None
        rs = reps[i]
        ask = (frozenset(rs), giver)
        ok = allowed.get(ask)
        if ok is None:
            ok = allowed[ask] = frozenset(b for b in order if b not in rs
                                          and racks.allows_move(rs, giver, b))
        for b in candidates:
            if b not in ok:
                continue
            key = (-need[b], len(holds[b]), b)
            if best_key is None or key < best_key:
                best, best_key = b, key
        return best

    # 1. drain: most constrained replicas first (the fewest receivers that could take them),
    #    each to a receiver with a deficit if one can take it, else to the least loaded
    #    broker that can (which then sheds one of its own in step 2).
    placed: dict[int, list[int]] = {b: [] for b in order}  # drained replicas moved onto b

    def via_chain(i: int, g: int) -> bool:
        """Place i on a full broker s that passes a replica it received from a drained
        broker on to another one, and so on, to a broker with room (shortest chain; as
        many moved replicas as placing i directly)."""
        starts = [b for b in order if b not in reps[i] and racks.allows_move(reps[i], g, b)]
        prev: dict[int, tuple[int, int] | None] = {b: None for b in starts}
        queue = deque(starts)
        while queue:
            if len(prev) == len(order):
                return False  # every broker reached, none with room
            u = queue.popleft()
            seen: set[frozenset[int]] = set()
            for q in placed[u]:
                held = frozenset(reps[q])
                if held in seen:
                    continue  # an earlier replica with these brokers reached all this one can
                seen.add(held)
                for v in order:
                    if v in prev or v in reps[q] or not racks.allows_move(reps[q], u, v):
                        continue
                    prev[v] = (u, q)
                    if need[v] > 0:
                        node = v
                        while (step := prev[node]) is not None:
                            w, q2 = step
                            move(q2, w, node)
                            placed[w].remove(q2)
                            placed[node].append(q2)
                            node = w
                        move(i, g, node)
                        placed[node].append(i)
                        return True
                    queue.append(v)
        return False

    for g in sorted(gone):
        todo = holds[g] if only is None else holds[g] & only
        for i in sorted(todo, key=lambda i: (sum(1 for b in pool if b not in reps[i]),
                                             sum(1 for b in order if b not in reps[i]), i)):
            to = best_receiver(i, g, pool) if pool else None
            if to is None and pool and via_chain(i, g):
                continue
            if to is None:
                to = best_receiver(i, g, order)
            if to is not None:
                move(i, g, to)
                placed[to].append(i)
            # else nowhere to go (racks): the replica stays, the caller reports it
    # 1b. the drain may have forced a replica onto a broker given floor (the others held
    #    its partition): that broker keeps it at ceil, and a broker given ceil that still
    #    waits for one takes floor instead (as many at ceil as before; one move fewer).
    if shed_surplus:
        over = [a for a in order if need[a] == -1 and targets[a] == floor_count]
        under = [b for b in order if need[b] > 0 and targets[b] == floor_count + 1]
        for a, b in zip(over, under, strict=False):
            targets[a], targets[b] = targets[b], targets[a]
            need[a] += 1
            need[b] -= 1
            if need[b] == 0 and b in pool:
                pool.remove(b)
    # 2. brokers above their target shed their smallest replicas.
    progress = shed_surplus
    while progress and pool:
        progress = False
        for a in sorted(order, key=lambda b: (need[b], b)):
            if need[a] >= 0:
                break
            for _, i in sorted([(sizes[i], i) for i in holds[a]]):
                if not pool or need[a] >= 0:
                    break
                to = best_receiver(i, a, pool)
                if to is not None:
                    move(i, a, to)
                    progress = True


def trim_bytes(reps: list[list[int]], base: Sequence[Sequence[int]], sizes: Sequence[int],
               brokers: Sequence[int], racks: RackRule) -> int:
    """After the counts are balanced: exchange a planned move for a smaller one (as many
    replicas moved, counts still balanced, racks kept). A move of partition i from a to b
    is undone (b gives i back to a) and a replica j still where it was, on a' (often a),
    moves to b' (often b) instead, when j is smaller than i, every staying broker stays
    at floor or ceil and neither partition crowds a rack. Largest moves first, each the
    smallest replacement found; every exchange lowers the bytes moved, so this ends.
    Moves off brokers outside ``brokers`` (drains) are never undone. Returns the bytes
    saved."""
    stay = sorted(brokers)
    if not stay:
        return 0
    staying = set(stay)
    counts = dict.fromkeys(stay, 0)
    for rs in reps:
        for b in rs:
            if b in counts:
                counts[b] += 1
    total = sum(counts.values())
    floor, ceil = total // len(stay), -(-total // len(stay))
    if max(counts.values()) > ceil or min(counts.values()) < floor:
        return 0
    # replicas still on a broker of their base, per broker, grouped by replica set (the
    # taker depends only on the giver and the set), each group smallest first
    keys = [tuple(sorted(rs)) for rs in reps]
    kept: dict[int, dict[tuple[int, ...], list[tuple[int, int]]]] = {b: {} for b in stay}
    member: dict[int, set[int]] = {}
    for i, (was, rs) in enumerate(zip(base, reps, strict=True)):
        for b in was:
            if b in staying and b in rs:
                kept[b].setdefault(keys[i], []).append((sizes[i], i))
                member.setdefault(i, set()).add(b)
    for groups in kept.values():
        for group in groups.values():
            group.sort()

    # per broker, its groups' first replicas, smallest first: (size, partition, key).
    # Built when asked, dropped when the broker's groups change (an exchange: rare)
    heads: dict[int, list[tuple[int, int, tuple[int, ...]]]] = {}

    def heads_of(g: int) -> list[tuple[int, int, tuple[int, ...]]]:
        out = heads.get(g)
        if out is None:
            out = heads[g] = sorted((group[0][0], group[0][1], key)
                                    for key, group in kept[g].items() if group and g in key)
        return out

    def rekey(q: int, new: tuple[int, ...]) -> None:
        old = keys[q]
        for x in member.get(q, ()):
            kept[x][old].remove((sizes[q], q))
            insort(kept[x].setdefault(new, []), (sizes[q], q))
            heads.pop(x, None)
        keys[q] = new

    def taker(j: int, g: int, takers: list[int]) -> int | None:
        rj = reps[j]
        return next((t for t in takers if t != g and t not in rj
                     and racks.allows_move(rj, g, t)), None)

    saved = 0
    moves = [(-sizes[i], i, a, b) for i, (was, rs) in enumerate(zip(base, reps, strict=True))
             for a in was if a in staying and a not in rs
             for b in rs if b not in was and b in staying]
    moves.sort()  # largest first, then by partition, giver, receiver
    for _, i, a, b in moves:
        rs = reps[i]
        if a in rs or b not in rs or not racks.allows_move(rs, b, a):
            continue  # this pairing no longer exists or cannot be undone
        counts[a] += 1
        counts[b] -= 1
        # a broker the undo put out of range must be the giver (above) or taker (below)
        givers = [g for g in (a,) if counts[g] > ceil] or [g for g in stay if counts[g] > floor]
        takers = [t for t in (b,) if counts[t] < floor] or [t for t in stay if counts[t] < ceil]
        best: tuple[int, int, int] | None = None
        for g in givers:
            # the smallest replica on g (by size, then partition) below i's size and the
            # best's, other than i, whose replica set lets some taker have it
            limit = sizes[i] if best is None else min(sizes[i], sizes[best[0]])
            # (each group's first replica other than i, in ascending order: the first
            # whose set lets a taker have it is the smallest; i's own group offers its
            # second, compared on its own)
            found: tuple[int, int, int] | None = None
            for size, j, key in heads_of(g):
                if size >= limit or (found is not None and (size, j) >= found[:2]):
                    break
                if j == i:
                    group = kept[g][key]
                    if len(group) < 2 or group[1][0] >= limit:
                        continue
                    size, j = group[1]
                    if found is not None and (size, j) >= found[:2]:
                        continue
                t = taker(j, g, takers)
                if t is not None:
                    found = (size, j, t)
            if found is not None:
                best = (found[1], g, found[2])
        if best is None:
            counts[a] -= 1
            counts[b] += 1
            continue
        j, g, t = best
        rs[rs.index(b)] = a
        rj = reps[j]
        rj[rj.index(g)] = t
        counts[g] -= 1
        counts[t] += 1
        kept[g][keys[j]].remove((sizes[j], j))
        heads.pop(g, None)
        member[j].discard(g)
        rekey(i, tuple(sorted(rs)))
        rekey(j, tuple(sorted(rj)))
        insort(kept[a].setdefault(keys[i], []), (sizes[i], i))  # back on its base: movable again
        heads.pop(a, None)
        member.setdefault(i, set()).add(a)
        saved += sizes[i] - sizes[j]
    return saved
