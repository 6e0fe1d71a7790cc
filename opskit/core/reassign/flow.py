"""The exact fewest replica moves for the count + rack goal, by min-cost flow on
partition classes (pure; used by ``opskit.core.reassign.plan``).

The goal (add-brokers, remove-brokers, rebalance): every counted replica (one on a
staying or drained broker; a replica on a broker that is neither stays and is not
counted) on a staying broker, every staying broker at floor or ceil of (counted replicas
/ staying brokers), no partition with more than ``RackRule.limit(RF)`` replicas in one
rack, replication factors unchanged. A move is a replica on a broker that did not hold
the partition before.

Partitions with the same replicas before (on the staying brokers), the same RF and the
same number of counted replicas form a *class*. The flow network: class c (k partitions
of u counted replicas each) -> (c, rack r) (at most limit x k) -> broker b (at most k;
cost 0 where the class held a replica on b, else 1) -> sink (at least floor, at most
ceil); every class sends u x k. A placement gives such a flow of its cost (the moves);
conversely a class's flow splits back into k replica sets of u distinct brokers, at most
the limit per rack: the per-partition sets are the bases of a laminar matroid (brokers
at most 1, racks at most the limit, u in all), whose base polytope has the integer
decomposition property, so a flow f in k times that polytope is a sum of k bases
(``decompose`` takes them one at a time, keeping the rest in (k - 1) times the
polytope). So the flow's minimum is the placement's.

The solver starts from a feasible placement (the planner's own) and cancels negative
cycles of the residual network (Bellman-Ford queue with a check of the predecessor
graph) until none is left: the flow is then of minimum cost. The planner's placement is
at most a few moves above it, so there are few cycles to cancel. The work is capped
(``budget`` arc scans): over it, no answer (the caller keeps its placement).

Bytes: where the partitions are few (``BYTE_ARCS``), the replica-minimal placement is then
made byte-minimal among replica-minimal ones by the same search with each partition its
own class and a move costing a large constant plus its size (capped by ``BYTE_BUDGET``;
over it, the replica-minimal placement stays). On larger topologies the planner's
``balance.trim_bytes`` exchanges are what reduce the bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from opskit.core.reassign.balance import RackRule, trim_bytes
from opskit.core.reassign.bytes import broker_bytes
from opskit.core.reassign.model import PartitionState

__all__ = ["Exact", "decompose", "exact_fallback", "exact_placement", "moves_of", "rack_bounds"]

#: arc scans the cycle search may make in all (a few seconds at most)
BUDGET = 4_000_000
#: partitions x brokers up to which a replica-minimal placement is also made byte-minimal
BYTE_ARCS = 5_000
#: arc scans the byte-minimal search may make
BYTE_BUDGET = 1_000_000


@dataclass(frozen=True)
class Exact:
    """``moves``: the fewest moves of any placement reaching the goal. ``reps``: a
    placement with that many (None: the start already had them)."""

    moves: int
    reps: list[list[int]] | None


def moves_of(base: Sequence[Sequence[int]], reps: Sequence[Sequence[int]]) -> int:
    """Replicas on a broker that did not hold the partition before."""
    return sum(len(set(rs) - set(was)) for was, rs in zip(base, reps, strict=True))


class _Residual:
    """A residual network: arc e and its reverse e ^ 1."""

    def __init__(self) -> None:
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.adj: list[list[int]] = []
        self.dist: list[int] = []
        self.pending: list[int] = []

    def node(self) -> int:
        self.adj.append([])
        return len(self.adj) - 1

    def arc(self, u: int, v: int, forward: int, backward: int, cost: int) -> int:
        """An arc u -> v with ``forward`` room left and ``backward`` flow on it."""
        e = len(self.to)
        self.to += [v, u]
        self.cap += [forward, backward]
        self.cost += [cost, -cost]
        self.adj[u].append(e)
        self.adj[v].append(e + 1)
        return e

    def negative_cycle(self, budget: list[int], seeds: Sequence[int] | None = None) -> list[int] | None:
        """The arcs of a negative cycle with room on every arc, None when there is none.
        The labels of the previous search are kept: after a cancelled cycle only its
        nodes (``seeds``) and those the search had still queued can have an arc that
        breaks them, so it restarts there (a cycle of the predecessor graph is negative
        whatever the labels were). Raises
        ``_GiveUp`` when ``budget[0]`` arc scans run out."""
        n = len(self.adj)
        to, cap, cost, adj = self.to, self.cap, self.cost, self.adj
        if len(self.dist) != n:
            self.dist = [0] * n
        dist = self.dist
        pred = [-1] * n
        queued = [False] * n
        queue = deque(range(n) if seeds is None else dict.fromkeys([*self.pending, *seeds]))
        for u in queue:
            queued[u] = True
        relaxed = 0
        while queue:
            u = queue.popleft()
            queued[u] = False
            du = dist[u]
            arcs = adj[u]
            budget[0] -= len(arcs)
            if budget[0] < 0:
                raise _GiveUp
            for e in arcs:
                if cap[e] > 0:
                    v = to[e]
                    d = du + cost[e]
                    if d < dist[v]:
                        dist[v] = d
                        pred[v] = e
                        relaxed += 1
                        if relaxed % n == 0:
                            cycle = self._pred_cycle(pred)
                            if cycle is not None:
                                self.pending = [u, *queue]  # not yet settled: search again
                                return cycle
                        if not queued[v]:
                            queued[v] = True
                            queue.append(v)
        return None

    def _pred_cycle(self, pred: list[int]) -> list[int] | None:
        """A cycle of the predecessor graph (negative: arcs are relaxed strictly)."""
        n = len(pred)
        mark = [0] * n
        for s in range(n):
            v = s
            while v >= 0 and not mark[v]:
                mark[v] = s + 1
                e = pred[v]
                v = self.to[e ^ 1] if e >= 0 else -1
            if v >= 0 and mark[v] == s + 1:  # back on this walk: v is on a cycle
                cycle = []
                w = v
                while True:
                    e = pred[w]
                    cycle.append(e)
                    w = self.to[e ^ 1]
                    if w == v:
                        break
                if sum(self.cost[e] for e in cycle) < 0:
                    return cycle[::-1]
        return None

    def cancel(self, cycle: list[int]) -> int:
        """Push the most the cycle allows around it; returns the cost change."""
        push = min(self.cap[e] for e in cycle)
        for e in cycle:
            self.cap[e] -= push
            self.cap[e ^ 1] += push
        return push * sum(self.cost[e] for e in cycle)


class _GiveUp(Exception):
    """Over the budget (or a flow that does not split: a defect)."""


def exact_fallback(parts: Sequence[PartitionState], reps: list[list[int]], stay: list[int],
                   drained: list[int], racks: RackRule, capacity: Mapping[int, int],
                   bound: int) -> int:
    """The planner's fallback: where the placement in ``reps`` reaches the goal with more
    moves than ``bound`` (a true lower bound), the exact minimum, and its placement in
    ``reps`` (bytes trimmed again) when that moves fewer, leaves no broker above its
    capacity and above what it holds now, and moves no partition without a leader.
    Returns the tightest true bound known (the exact minimum where computed)."""
    base = [p.replicas for p in parts]
    sizes = [p.size_bytes for p in parts]
    exact = exact_placement(base, reps, stay, drained, racks, bound, sizes)
    if exact is None:
        return bound
    better = exact.reps
    if better is not None and not any(p.offline and rs != list(p.replicas)
                                      for p, rs in zip(parts, better, strict=True)):
        before, after = broker_bytes(base, sizes), broker_bytes(better, sizes)
        if all(after.get(b, 0) <= max(c, before.get(b, 0)) for b, c in capacity.items()):
            reps[:] = better
            trim_bytes(reps, base, sizes, stay, racks)
    return max(bound, exact.moves)


def exact_placement(base: Sequence[Sequence[int]], start: Sequence[Sequence[int]],
                    stay: Sequence[int], drained: Sequence[int], racks: RackRule,
                    bound: int, sizes: Sequence[int] | None = None,
                    budget: int = BUDGET) -> Exact | None:
    """The exact fewest moves from ``base`` to the goal (module docstring) and, when
    ``start`` (a placement reaching the goal, the planner's) moves more, a placement
    moving that few, as close to ``start`` as the flow allows; with ``sizes``, where the
    partitions are few (``BYTE_ARCS``), the one of those moving the fewest bytes. None:
    ``start`` does not reach the goal, it moves no more than ``bound`` (a lower bound: it
    is then minimal), or the work went over ``budget``."""
    staying = set(stay)
    counted = staying | set(drained)
    if not stay or not _reaches_goal(base, start, stay, counted, racks):
        return None
    moved = moves_of(base, start)
    if moved <= bound:
        return None
    left = [budget]
    try:
        best = _solve(base, start, sorted(stay), counted, racks, [1] * len(base), left)
        if best is None:
            return Exact(moved, None)
    except _GiveUp:
        return None
    if sizes is not None and len(base) * len(stay) <= BYTE_ARCS:
        big = sum(sizes) * max(len(rs) for rs in base) + 1  # above any bytes moved
        try:
            best = _solve(base, best, sorted(stay), counted, racks, [big + s for s in sizes],
                          [BYTE_BUDGET]) or best
        except _GiveUp:
            pass  # replica-minimal, not byte-minimal
    if not _reaches_goal(base, best, stay, counted, racks):
        return None  # (a defect: keep the start)
    return Exact(moves_of(base, best), best)


def _solve(base: Sequence[Sequence[int]], start: Sequence[Sequence[int]], brokers: list[int],
           counted: set[int], racks: RackRule, weights: Sequence[int],
           budget: list[int]) -> list[list[int]] | None:
    """A placement of least cost (a move of partition i costs ``weights[i]``), None when
    ``start`` (reaching the goal) is one. Partitions of one class share their weight."""
    staying = set(brokers)
    rack_of = {b: (racks.rack_of.get(b, "") if racks.active else "") for b in brokers}
    rack_names = sorted(set(rack_of.values()))
    total = sum(1 for rs in base for b in rs if b in counted)
    floor, ceil = total // len(brokers), -(-total // len(brokers))
    g = _Residual()
    sink = g.node()
    node = {b: g.node() for b in brokers}
    load = dict.fromkeys(brokers, 0)
    members: dict[tuple[frozenset[int], int, int, int], list[int]] = {}
    key_of: dict[tuple[int, ...], tuple[frozenset[int], int, int]] = {}  # (few distinct)
    for i, was in enumerate(base):
        t = tuple(was)
        of_was = key_of.get(t)
        if of_was is None:
            of_was = key_of[t] = (frozenset(b for b in was if b in staying), len(was),
                                  sum(1 for b in was if b in counted))
        members.setdefault((*of_was, weights[i]), []).append(i)
    # the start's flow: per class and broker, its partitions placed there
    arcs: list[tuple[list[int], dict[int, int], dict[int, int]]] = []  # members, arcs, start
    for (held, rf, _units, weight), idx in members.items():
        k = len(idx)
        limit = racks.limit(rf) if racks.active else rf
        on = dict.fromkeys(brokers, 0)
        for i in idx:
            for b in start[i]:
                if b in staying:
                    on[b] += 1
        c = g.node()
        to_broker: dict[int, int] = {}
        for r in rack_names:
            in_rack = [b for b in brokers if rack_of[b] == r]
            y = sum(on[b] for b in in_rack)
            cr = g.node()
            g.arc(c, cr, limit * k - y, y, 0)
            for b in in_rack:
                to_broker[b] = g.arc(cr, node[b], k - on[b], on[b], 0 if b in held else weight)
                load[b] += on[b]
        arcs.append((idx, to_broker, on))
    for b in brokers:
        g.arc(node[b], sink, ceil - load[b], load[b] - floor, 0)
    gain = 0
    cycle = g.negative_cycle(budget)
    while cycle is not None:
        gain += g.cancel(cycle)
        cycle = g.negative_cycle(budget, [g.to[e] for e in cycle])
    if gain >= 0:
        return None
    out = [list(rs) for rs in start]
    for idx, to_broker, on in arcs:
        flow = {b: g.cap[e ^ 1] for b, e in to_broker.items()}
        if flow == on:
            continue  # no cycle went through this class: its partitions stay as they start
        rf = len(base[idx[0]])
        limit = racks.limit(rf) if racks.active else rf
        sets = decompose(flow, rack_of, limit, [[b for b in start[i] if b in staying] for i in idx])
        if sets is None:
            raise _GiveUp  # (cannot happen: the flow is in k times the base polytope)
        for i, chosen in zip(idx, sets, strict=True):
            out[i] = _arrange(base[i], start[i], chosen, counted)
    return out


def rack_bounds(f: Mapping[int, int], rack_of: Mapping[int, str], limit: int, m: int,
                u: int) -> tuple[dict[str, list[int]], dict[str, int], dict[str, int]] | None:
    """For the next of ``m`` partitions to take ``u`` brokers out of the flow left ``f``:
    the brokers per rack, and per rack the fewest (a broker every partition left must
    take, or what the racks' limit leaves for the other ``m - 1``) and the most it may
    take. None when no choice keeps the rest splittable."""
    per: dict[str, list[int]] = {}
    for b in f:
        per.setdefault(rack_of[b], []).append(b)
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}
    for r, bs in per.items():
        if any(f[b] > m for b in bs):
            return None
        lo[r] = max(sum(1 for b in bs if f[b] == m), sum(f[b] for b in bs) - limit * (m - 1))
        hi[r] = min(limit, len(bs))
        if lo[r] > hi[r]:
            return None
    if sum(lo.values()) > u or sum(hi.values()) < u:
        return None
    return per, lo, hi


def decompose(flow: dict[int, int], rack_of: dict[int, str], limit: int,
              hints: Sequence[Sequence[int]]) -> list[list[int]] | None:
    """Split a class's broker flow (broker -> partitions of the class placed there; at
    most k each, at most limit x k per rack, u x k in all, k = len(hints)) into k sets of
    u distinct brokers with at most ``limit`` in a rack, the i-th ``hints[i]`` where that
    keeps the rest splittable. None when the flow is not splittable (not in k times the
    base polytope)."""
    k = len(hints)
    if k == 0:
        return []
    f = {b: n for b, n in flow.items() if n > 0}
    total = sum(f.values())
    if total % k:
        return None
    u = total // k
    out: list[list[int]] = []
    for j, hint in enumerate(hints):
        m = k - j  # partitions left, this one included
        bounds = rack_bounds(f, rack_of, limit, m, u)
        if bounds is None:
            return None
        per, lo, hi = bounds
        want = set(hint)
        take = {r: len([b for b in bs if b in want]) for r, bs in per.items()}
        if len(want) != u or not want <= set(f) or any(not lo[r] <= take[r] <= hi[r] for r in per) \
                or any(f[b] == m and b not in want for b in f):
            # the hint does not fit: per rack at least lo, then toward the hint, then the
            # racks with the most flow left above what (m - 1) partitions may keep
            take = dict(lo)
            for r in sorted(per):
                extra = min(hi[r], len([b for b in per[r] if b in want])) - take[r]
                if extra > 0 and sum(take.values()) < u:
                    take[r] += min(extra, u - sum(take.values()))
            while sum(take.values()) < u:
                r = max((r for r in per if take[r] < hi[r]),
                        key=lambda r: (sum(f[b] for b in per[r]) - take[r] * m, r))
                take[r] += 1
        chosen: list[int] = []
        for r, bs in per.items():
            order = sorted(bs, key=lambda b: (f[b] != m, b not in want, -f[b], b))
            chosen += order[: take[r]]
        for b in chosen:
            f[b] -= 1
            if not f[b]:
                del f[b]
        out.append(sorted(chosen))
    return out


def _arrange(was: Sequence[int], start: Sequence[int], chosen: Sequence[int],
             counted: set[int]) -> list[int]:
    """The replica list for ``chosen``: the start's when it places the same brokers, else
    the partition's own with each replica that leaves replaced by an arriving one (kept
    replicas, and replicas on uncounted brokers, stay in their positions)."""
    if sorted(b for b in start if b in counted) == sorted(chosen):
        return list(start)
    keep = set(chosen)
    arriving = iter(sorted(keep - set(was)))
    return [b if b not in counted or b in keep else next(arriving) for b in was]


def _reaches_goal(base: Sequence[Sequence[int]], reps: Sequence[Sequence[int]],
                  stay: Sequence[int], counted: set[int], racks: RackRule) -> bool:
    """Every counted replica on a staying broker, RF kept, distinct brokers, counts at
    floor or ceil, racks within the limit. (Each distinct pair of replica lists before
    and after is checked once: thousands of partitions share a few hundred of them.)"""
    staying = set(stay)
    counts = dict.fromkeys(stay, 0)
    pairs: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
    for was, rs in zip(base, reps, strict=True):
        key = (tuple(was), tuple(rs))
        pairs[key] = pairs.get(key, 0) + 1
    for (was, rs), n in pairs.items():
        if len(rs) != len(was) or len(set(rs)) != len(rs):
            return False
        if sorted(b for b in rs if b not in counted) != sorted(b for b in was if b not in counted):
            return False
        per: dict[str, int] = {}
        for b in rs:
            if b in counted:
                if b not in staying:
                    return False
                counts[b] += n
                if racks.active:
                    per[racks.rack_of[b]] = per.get(racks.rack_of[b], 0) + 1
        if per and max(per.values()) > racks.limit(len(rs)):
            return False
    return max(counts.values()) - min(counts.values()) <= 1
