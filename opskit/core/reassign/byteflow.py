"""The fewest bytes among the placements that move the fewest replicas, and a placement
moving them (pure; used by ``opskit.core.reassign.plan`` after the exact fallback of
``opskit.core.reassign.flow``, whose goal, classes and network this shares).

Among replica-minimal placements the bytes depend on *which* partitions of a class (same
staying replicas before, RF and counted replicas) move, and how many replicas each
moves: partition i moving n_i replicas costs n_i x size_i. For a class flow (per broker,
partitions of the class kept there or arriving there) the bytes are at least, per rack R
holding the class's replicas on the brokers H_R before:

- where R may keep them all (|H_R| <= the rack limit): the d_h partitions leaving a
  broker h of H_R are distinct, so they weigh at least the d_h smallest of the class;
  summed over h (the smallest partitions leaving the most brokers: a "staircase");
- where it may not (q = |H_R| - limit > 0): every partition leaves at least q of H_R and
  at most |H_R|; so at least q x (the class's bytes), plus the extra departures beyond q
  each, limit per partition at most, placed on the smallest partitions.

That is a convex function of the kept flow (per broker, or per rack summed over H_R),
so the least such bytes over the class flows is a min-cost flow with convex costs: the
network of ``flow`` (class -> (class, rack) -> broker -> sink at floor..ceil), each convex
arc carrying its marginal cost (the size of the partition that would start or stop
leaving). Solved twice, by cancelling negative cycles from the planner's placement, one
unit at a time on a convex arc (the class network is small, tens of classes, so this is
fast at 10,000 partitions):

- with no cost per replica: ``bound``, a **true lower bound of the bytes of every plan
  reaching the goal** (any such plan's class flow is feasible, and its bytes are at least
  the relaxation's), at least the relaxations ``racks.rack_bounds`` and
  ``balance.bytes_lower_bound`` (often above them). This is what the planner prints: the
  meaning of the printed byte bound is unchanged;
- with each arrival costing a constant above any bytes: ``least``, the same for the
  plans reaching the goal with the fewest replicas (at least ``bound``), and the flow the
  placement is taken from.

Capped by ``BUDGET`` arc scans: over it, no answer (the planner keeps its own).

Among the flows of least bytes, a second cost (below one byte) prefers arrivals in racks
where the class already has a replica: an arrival there can replace the replica that
leaves the rack, where an arrival elsewhere needs a partition that leaves some rack,
and a class flow with more such arrivals than partitions moving does not split into the
staircase. The flow is then split into replica sets (``staircase``): the smallest
partitions first, each leaving every broker whose departures are not used up and taking
arrivals on the brokers with the most arrivals left, as far as the rest stays splittable
(``flow.decompose``'s test). Where every class's split reaches its relaxation the
placement's bytes equal ``least``: byte-minimal among replica-minimal placements (proved
by the relaxation); it is used when it moves fewer bytes than the start.

Leaders (``byte_fallback``): moving the smallest partitions whole can leave no partition
spanning the brokers that lead too many and the others (the old and the new brokers), so
the leaders cannot be balanced by reordering; ``_cross`` then exchanges the moves of
partitions next to each other in size (a few bytes each) for ones that span the two, instead
of ``leaders.repair_leaders``' size-blind exchanges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from opskit.core.reassign.balance import RackRule
from opskit.core.reassign.bytes import broker_bytes
from opskit.core.reassign.flow import (
    _arrange,
    _GiveUp,
    _reaches_goal,
    _Residual,
    decompose,
    moves_of,
    rack_bounds,
)
from opskit.core.reassign.leaders import balance_leaders
from opskit.core.reassign.model import PartitionState

__all__ = ["BUDGET", "ByteMin", "byte_fallback", "byte_minimal", "staircase"]

#: arc scans the cycle search may make (the grow shapes at 10,000 partitions take ~25,000)
BUDGET = 2_000_000


@dataclass(frozen=True)
class ByteMin:
    """``bound``: no placement reaching the goal moves fewer bytes; ``least``: no
    placement reaching it with the fewest replicas moves fewer (at least ``bound``).
    ``reps``: one moving as few replicas as the start and fewer bytes (None: none found);
    ``minimal``: its bytes (or the start's) equal ``least``."""

    bound: int
    least: int
    reps: list[list[int]] | None
    minimal: bool


class _Convex:
    """A convex arc: ``flow`` partitions kept (on a broker, or on the brokers a class held
    in one rack), ``width`` at most per partition; the departures are ``width x k -
    flow``, the j-th of them (from 0) costing ``sizes[j // width]`` (smallest first)."""

    __slots__ = ("flow", "sizes", "width")

    def __init__(self, sizes: list[int], width: int, flow: int) -> None:
        self.sizes, self.width, self.flow = sizes, width, flow

    def set(self, g: _Residual, e: int) -> None:
        room = self.width * len(self.sizes) - self.flow  # departures
        g.cap[e] = 1 if room > 0 else 0  # one more kept: one departure fewer
        g.cost[e] = -self.sizes[(room - 1) // self.width] if room > 0 else 0
        g.cap[e ^ 1] = 1 if self.flow > 0 else 0
        g.cost[e ^ 1] = self.sizes[room // self.width] if self.flow > 0 else 0


def _departure_bytes(sizes: Sequence[int], width: int, departures: int) -> int:
    """The least bytes of ``departures`` departures, at most ``width`` per partition, on
    partitions of ``sizes`` (smallest first)."""
    full, part = divmod(departures, width)
    return width * sum(sizes[:full]) + (part * sizes[full] if part else 0)


_Class = tuple[list[int], dict[int, int], list[tuple[_Convex, int]], int]


def byte_minimal(base: Sequence[Sequence[int]], start: Sequence[Sequence[int]],
                 sizes: Sequence[int], stay: Sequence[int], drained: Sequence[int],
                 racks: RackRule, budget: int = BUDGET) -> ByteMin | None:
    """The byte bounds and a byte-cheaper placement (module docstring) for ``start``, a
    placement reaching the goal with the fewest replicas. None: ``start`` does not reach
    the goal, or the work went over ``budget``."""
    staying = set(stay)
    counted = staying | set(drained)
    if not stay or not base or not _reaches_goal(base, start, stay, counted, racks):
        return None
    left = [budget]
    try:
        classes, least = _least(base, start, sizes, stay, counted, racks, True, left)
        bound = _least(base, start, sizes, stay, counted, racks, False, left)[1]
    except _GiveUp:
        return None
    brokers = sorted(stay)
    rack_of = {b: (racks.rack_of.get(b, "") if racks.active else "") for b in brokers}
    out = [list(rs) for rs in start]
    for idx, flow in classes:
        kept = {b for b in base[idx[0]] if b in staying}
        rf = len(base[idx[0]])
        limit = racks.limit(rf) if racks.active else rf
        sets = staircase(flow, kept, rack_of, limit, len(idx))
        order = idx
        if sets is None:  # (not expected: the flow is splittable) the planner's split
            order = idx[::-1]
            sets = decompose(flow, rack_of, limit, [[b for b in base[i] if b in staying]
                                                    for i in order])
            if sets is None:
                return None
        for i, chosen in zip(order, sets, strict=True):
            out[i] = _arrange(base[i], start[i], chosen, counted)
    before = _bytes(base, start, sizes)
    if not _reaches_goal(base, out, stay, counted, racks) or moves_of(base, out) != moves_of(base, start):
        return ByteMin(bound, least, None, before == least)  # (a defect: keep the start)
    after = _bytes(base, out, sizes)
    if after >= before:
        return ByteMin(bound, least, None, before == least)
    return ByteMin(bound, least, out, after == least)


def _least(base: Sequence[Sequence[int]], start: Sequence[Sequence[int]], sizes: Sequence[int],
           stay: Sequence[int], counted: set[int], racks: RackRule, fewest: bool,
           budget: list[int]) -> tuple[list[tuple[list[int], dict[int, int]]], int]:
    """The convex class flow of least bytes (``fewest``: among those of the fewest
    replicas), from ``start``'s: per class its members (smallest first) and broker flow,
    and the least bytes."""
    staying = set(stay)
    brokers = sorted(stay)
    rack_of = {b: (racks.rack_of.get(b, "") if racks.active else "") for b in brokers}
    rack_names = sorted(set(rack_of.values()))
    total = sum(1 for rs in base for b in rs if b in counted)
    floor, ceil = total // len(brokers), -(-total // len(brokers))
    scale = total + 1  # bytes x scale + arrivals in a rack the class holds nothing in
    big = (sum(sizes) * max(len(rs) for rs in base) + 1) * scale if fewest else 0
    g = _Residual()
    sink = g.node()
    node = {b: g.node() for b in brokers}
    load = dict.fromkeys(brokers, 0)
    members: dict[tuple[frozenset[int], int, int], list[int]] = {}
    key_of: dict[tuple[int, ...], tuple[frozenset[int], int, int]] = {}  # (few distinct)
    for i, was in enumerate(base):
        t = tuple(was)
        key = key_of.get(t)
        if key is None:
            key = key_of[t] = (frozenset(b for b in was if b in staying), len(was),
                               sum(1 for b in was if b in counted))
        members.setdefault(key, []).append(i)
    convex: dict[int, _Convex] = {}
    classes: list[_Class] = []
    for (held, rf, _units), idx in members.items():
        idx.sort(key=lambda i: (sizes[i], i))
        k = len(idx)
        scaled = [sizes[i] * scale for i in idx]
        limit = racks.limit(rf) if racks.active else rf
        on = dict.fromkeys(brokers, 0)
        for i in idx:
            for b in start[i]:
                if b in staying:
                    on[b] += 1
        c = g.node()
        to_broker: dict[int, int] = {}
        arcs: list[tuple[_Convex, int]] = []
        constant = sum(sizes[i] for i in idx) * sum(1 for b in base[idx[0]]
                                                    if b in counted and b not in staying)
        for r in rack_names:
            in_rack = [b for b in brokers if rack_of[b] == r]
            mine = [b for b in in_rack if b in held]
            y = sum(on[b] for b in in_rack)
            cr = g.node()
            g.arc(c, cr, limit * k - y, y, 0)
            forced = len(mine) - limit  # departures every partition makes from this rack
            kept_node = cr
            if forced > 0:
                kept_node = g.node()
                e = g.arc(cr, kept_node, 0, 0, 0)
                convex[e] = cv = _Convex(scaled, limit, sum(on[b] for b in mine))
                cv.set(g, e)
                arcs.append((cv, forced * sum(sizes[i] for i in idx)))
            for b in in_rack:
                if b in held and forced > 0:
                    e = g.arc(kept_node, node[b], k - on[b], on[b], 0)
                elif b in held:
                    e = g.arc(cr, node[b], 0, 0, 0)
                    convex[e] = cv = _Convex(scaled, 1, on[b])
                    cv.set(g, e)
                    arcs.append((cv, 0))
                else:
                    e = g.arc(cr, node[b], k - on[b], on[b], big + (0 if mine else 1))
                to_broker[b] = e
                load[b] += on[b]
        classes.append((idx, to_broker, arcs, constant))
    for b in brokers:
        g.arc(node[b], sink, ceil - load[b], load[b] - floor, 0)
    _cancel(g, convex, budget)
    least = 0
    out: list[tuple[list[int], dict[int, int]]] = []
    for idx, to_broker, arcs, constant in classes:
        srt = [sizes[i] for i in idx]
        least += constant + sum(extra + _departure_bytes(srt, cv.width, cv.width * len(idx) - cv.flow)
                                for cv, extra in arcs)
        out.append((idx, {b: convex[e].flow if e in convex else g.cap[e ^ 1]
                          for b, e in to_broker.items()}))
    return out, least


def _bytes(base: Sequence[Sequence[int]], reps: Sequence[Sequence[int]], sizes: Sequence[int]) -> int:
    return sum(s * len(set(rs) - set(was)) for was, rs, s in zip(base, reps, sizes, strict=True))


def _cancel(g: _Residual, convex: dict[int, _Convex], budget: list[int]) -> None:
    """Cancel negative cycles until none is left; a convex arc carries one unit at a time
    (its marginal cost changes), so a cycle is pushed again while it stays negative."""
    cycle = g.negative_cycle(budget)
    while cycle is not None:
        while True:
            g.cancel(cycle)
            for e in cycle:
                cv = convex.get(e & ~1)
                if cv is not None:
                    cv.flow += 1 if e % 2 == 0 else -1
                    cv.set(g, e & ~1)
            if any(g.cap[e] <= 0 for e in cycle) or sum(g.cost[e] for e in cycle) >= 0:
                break
        cycle = g.negative_cycle(budget, [g.to[e] for e in cycle])


def staircase(flow: dict[int, int], held: AbstractSet[int], rack_of: dict[int, str], limit: int,
              k: int) -> list[list[int]] | None:
    """Split a class's broker flow (as ``flow.decompose``) into k replica sets, the
    smallest partition first: each keeps only the brokers it must (a broker every
    partition left must keep, or what the rack bounds force) and otherwise takes the
    arriving brokers with the most flow left, so the smallest partitions move the most.
    None when the flow does not split."""
    if k == 0:
        return []
    f = {b: n for b, n in flow.items() if n > 0}
    total = sum(f.values())
    if total % k:
        return None
    u = total // k
    out: list[list[int]] = []
    while len(out) < k:
        m = k - len(out)  # partitions left, this one included
        bounds = rack_bounds(f, rack_of, limit, m, u)
        if bounds is None:
            return None
        per, lo, hi = bounds

        def rank(b: int, m: int = m) -> tuple[int, int, int]:
            # forced; then arriving brokers, the most left first; then kept ones, the
            # most left first (a replica kept that a larger partition could keep instead)
            if f[b] == m:
                return (0, 0, b)
            return (1 if b not in held else 2, -f[b], b)

        order = {r: sorted(bs, key=rank) for r, bs in per.items()}
        take = dict(lo)
        extra = sorted((rank(order[r][t]), r) for r in per for t in range(lo[r], hi[r]))
        for _, r in extra[: u - sum(take.values())]:
            take[r] += 1
        chosen = [b for r in per for b in order[r][: take[r]]]
        # the next partitions take the same set while the rest stays splittable (no
        # broker left with more than the partitions left, no rack above the limit for
        # them) and its arriving brokers keep at least the flow of the others
        inside = set(chosen)
        others = [f[b] for b in f if b not in inside and b not in held]
        times = min([f[b] for b in chosen] + [m - f[b] for b in f if b not in inside]
                    + [(limit * m - sum(f[b] for b in bs)) // (limit - take[r])
                       for r, bs in per.items() if take[r] < limit])
        arriving = [f[b] for b in chosen if b not in held]
        if others and arriving:
            times = min(times, 1 + min(arriving) - max(others) + m // 4)
        times = max(1, min(times, m))
        for b in chosen:
            f[b] -= times
            if not f[b]:
                del f[b]
        out += [sorted(chosen) for _ in range(times)]
    return out


def byte_fallback(parts: Sequence[PartitionState], reps: list[list[int]], stay: list[int],
                  drained: list[int], racks: RackRule, capacity: Mapping[int, int],
                  lower: tuple[int, int], leaders: bool = True) -> int:
    """The planner's byte step, after the exact fallback: where the placement in ``reps``
    moves exactly ``lower[0]`` replicas (a true lower bound, so the fewest) and reaches
    the goal, the byte-cheaper placement of :func:`byte_minimal` replaces it (never onto
    a broker over its capacity and above what it holds now, never moving a partition
    without a leader). With ``leaders`` its preferred leaders are balanced
    (``leaders.balance_leaders``) and, where they cannot be (the smallest partitions moved
    whole leave no partition spanning the brokers that lead too many and the others),
    :func:`_cross` exchanges the cheapest moves for ones that let leadership cross.
    Returns the byte bound: the larger of ``lower[1]`` and :func:`byte_minimal`'s
    ``bound`` (both lower bounds of every plan reaching the goal), ``lower[1]`` where the
    step does not run (the placement is not the fewest replicas, or not balanced)."""
    base = [p.replicas for p in parts]
    if moves_of(base, reps) != lower[0]:
        return lower[1]
    sizes = [p.size_bytes for p in parts]
    found = byte_minimal(base, reps, sizes, stay, drained, racks)
    if found is None:
        return lower[1]
    better = found.reps
    crossed = False
    if leaders:
        if better is None:  # the start is byte-minimal: can its leaders be balanced?
            better = [list(rs) for rs in reps]
        balance_leaders(better, stay)
        for _ in range(CROSS_ROUNDS):
            if _leader_spread(better, stay) <= 1 or not _cross(base, better, sizes, stay, racks):
                break
            crossed = True
            balance_leaders(better, stay)
        crossed = crossed and _leader_spread(better, stay) <= 1
        if found.reps is None and not crossed:
            better = None  # nothing gained over the start (the planner balances its leaders)
    if better is not None and not any(p.offline and rs != list(p.replicas)
                                      for p, rs in zip(parts, better, strict=True)):
        before = broker_bytes(base, sizes) if capacity else {}
        after = broker_bytes(better, sizes) if capacity else {}
        if all(after.get(b, 0) <= max(c, before.get(b, 0)) for b, c in capacity.items()) \
                and (crossed or _bytes(base, better, sizes) < _bytes(base, reps, sizes)):
            reps[:] = better
    return max(lower[1], found.bound)


#: rounds of leader-crossing exchanges tried before leaving it to ``leaders.repair_leaders``
CROSS_ROUNDS = 6


def _leader_spread(reps: Sequence[Sequence[int]], stay: Sequence[int]) -> int:
    leads = dict.fromkeys(stay, 0)
    for rs in reps:
        if rs and rs[0] in leads:
            leads[rs[0]] += 1
    return max(leads.values()) - min(leads.values())


def _cross(base: Sequence[Sequence[int]], reps: list[list[int]], sizes: Sequence[int],
           stay: Sequence[int], racks: RackRule) -> bool:
    """Leaders balanced as far as reordering goes, but not within 1: the brokers the
    most-leading one can pass leadership to (directly or not), S, lead more than their
    share. Exchange a move across S's border so that a partition led in S gets a replica
    outside: partition j (on y, not on a) moves y -> a instead of partition i, which keeps
    y; i or j is led in S and wholly in it before (i when a is in S, j when y is); as
    many replicas moved, the same counts; j - i bytes more, the cheapest exchanges first,
    as many as S leads beyond its share. False: none found."""
    ids = sorted(stay)
    leads = dict.fromkeys(ids, 0)
    edges: dict[int, set[int]] = {b: set() for b in ids}
    for rs in reps:
        if rs and rs[0] in leads:
            leads[rs[0]] += 1
            edges[rs[0]].update(b for b in rs[1:] if b in leads)
    top = max(ids, key=lambda b: (leads[b], -b))
    inside = {top}
    queue = [top]
    while queue:
        for v in edges[queue.pop()]:
            if v not in inside:
                inside.add(v)
                queue.append(v)
    if len(inside) == len(ids):
        return False
    ceil = -(-sum(leads.values()) // len(ids))
    need = sum(max(0, leads[b] - ceil) for b in inside) or 1
    def whole(i: int) -> bool:  # led in S, every replica in S
        rs = reps[i]
        return bool(rs) and rs[0] in inside and all(b in inside for b in rs if b in leads)

    movers: dict[tuple[int, int], list[int]] = {}  # (y, a) -> partitions that moved y -> a
    keepers: dict[int, list[int]] = {}  # y -> partitions that kept y
    for i, (was, rs) in enumerate(zip(base, reps, strict=True)):
        gone = [y for y in was if y in leads and y not in rs]
        for a in rs:
            if a not in was and a in leads:
                for y in gone:
                    if (y in inside) != (a in inside):
                        movers.setdefault((y, a), []).append(i)
        for y in rs:
            if y in was and y in leads:
                keepers.setdefault(y, []).append(i)
    options: list[tuple[int, int, int, int, int]] = []  # bytes more, i, j, y, a
    for (y, a), mi in movers.items():
        # the partition that loses a replica outside S must not lead from it (S would
        # lead one more)
        if a in inside:  # i, led in S and wholly in it, keeps y outside
            mi = [i for i in mi if whole(i)]
        else:
            mi = [i for i in mi if reps[i][0] != a]
        mi.sort(key=lambda i: -sizes[i])
        js = sorted((j for j in keepers.get(y, ()) if a not in base[j] and a not in reps[j]
                     and (whole(j) if a not in inside else reps[j][0] != y)),
                    key=lambda j: sizes[j])
        for i, j in zip(mi[:need], js[:need], strict=False):
            options.append((sizes[j] - sizes[i], i, j, y, a))
    options.sort()
    used: set[int] = set()
    done = 0
    for _, i, j, y, a in options:
        if done >= need or i in used or j in used:
            continue
        ri, rj = reps[i], reps[j]
        if y in ri or a in rj or not racks.allows_move(ri, a, y) or not racks.allows_move(rj, y, a):
            continue
        ri[ri.index(a)] = y
        rj[rj.index(y)] = a
        used.update((i, j))
        done += 1
    return done > 0
