"""Minimal-movement balancing of replica and leader counts (pure; used by
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

Leader counts. The preferred leader is the first replica. After the replica moves, the
leaders are balanced (each broker at floor or ceil of partitions / brokers) by putting
another replica first, along shortest augmenting paths between brokers, so as few
partitions as possible change their preferred leader. A reorder moves no data.

State is a list of replica lists (``reps``) the caller owns; nothing else is mutated.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise


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

    def limit(self, rf: int) -> int:
        sizes = Counter(self.rack_of.values())
        if not sizes:
            return rf
        limit = math.ceil(rf / len(sizes))
        while limit < rf and sum(min(limit, n) for n in sizes.values()) < rf:
            limit += 1
        return limit

    def allows_move(self, replicas: Sequence[int], giver: int | None, receiver: int) -> bool:
        """May ``receiver`` take a replica of this partition from ``giver`` (None: an added
        replica) without crowding a rack?"""
        if not self.rack_of:
            return True
        rack = self.rack_of.get(receiver)
        if giver is not None and self.rack_of.get(giver) == rack:
            return True
        rf = len(replicas) + (1 if giver is None else 0)
        in_rack = sum(1 for r in replicas if r != giver and self.rack_of.get(r) == rack)
        return in_rack + 1 <= self.limit(rf)


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

    def best_receiver(i: int, giver: int, candidates: Sequence[int]) -> int | None:
        best: int | None = None
        best_key: tuple[int, int, int] | None = None
        rs = reps[i]
        for b in candidates:
            if b in rs or not racks.allows_move(rs, giver, b):
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
            u = queue.popleft()
            for q in placed[u]:
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
            for i in sorted(holds[a], key=lambda i: (sizes[i], i)):
                if not pool or need[a] >= 0:
                    break
                to = best_receiver(i, a, pool)
                if to is not None:
                    move(i, a, to)
                    progress = True


def balance_leaders(reps: list[list[int]], brokers: Sequence[int]) -> None:
    """Reorder replica lists (in place) so that first replicas are balanced over
    ``brokers`` (counts differ by at most 1 where the replicas allow it), changing few
    first replicas: each step moves one unit of leadership from a broker to one with at
    least two fewer, along a shortest path of brokers (u leads a partition v holds). A
    partition whose first replica is not in ``brokers`` is left alone."""
    stay = sorted(set(brokers))
    if not stay:
        return
    leads: dict[int, int] = dict.fromkeys(stay, 0)
    # via[u][v]: partitions led by u that have a replica on v
    via: dict[int, dict[int, set[int]]] = {u: {v: set() for v in stay if v != u} for u in stay}
    for i, rs in enumerate(reps):
        if rs and rs[0] in leads:
            leads[rs[0]] += 1
            for v in rs[1:]:
                if v in leads:
                    via[rs[0]][v].add(i)

    def shift(i: int, u: int, v: int) -> None:
        rs = reps[i]
        for w in rs[1:]:
            if w in leads:
                via[u][w].discard(i)
        rs.remove(v)
        rs.insert(0, v)
        for w in rs[1:]:
            if w in leads:
                via[v][w].add(i)
        leads[u] -= 1
        leads[v] += 1

    while True:
        for source in sorted(stay, key=lambda b: (-leads[b], b)):
            path = _path_to_lower(source, leads, via)
            if path is not None:
                for u, v in pairwise(path):
                    shift(next(iter(via[u][v])), u, v)
                break
        else:
            return


def repair_leaders(base: Sequence[Sequence[int]], reps: list[list[int]], brokers: Sequence[int],
                   racks: RackRule, attempts: int = 60) -> None:
    """When leaders stay unbalanced after ``balance_leaders`` (the brokers split into a set
    that leadership cannot leave: say the smallest partitions, moved whole onto the new
    brokers, have all their replicas there, or a broker received single-replica
    partitions), exchange a replica move for another one from the same giver to the same
    receiver (as many moves, same replica counts) that lets leadership cross, and balance
    again. An exchange is kept only when the leaders get more even; at most ``attempts``
    exchanges are tried."""
    stay = sorted(set(brokers))
    score = _leader_score(reps, stay)
    while score[0] > 1 and attempts > 0:
        closed = _closed_set(reps, stay)
        improved = False
        for i, y, a in _planned_moves(base, reps, closed, set(stay)):
            if not racks.allows_move(reps[i], y, a):
                continue
            options = [q for q, rs in enumerate(reps) if a in rs and a in base[q] and y not in rs
                       and racks.allows_move(rs, a, y)]
            if y in closed:  # the closed set takes another partition: a flexible one
                options.sort(key=lambda q: (-len(reps[q]), reps[q][0] in closed, q))
            else:  # the closed set gives another partition: one it is stuck leading
                options.sort(key=lambda q: (reps[q][0] != a, len(reps[q]), q))
            for q in options[:3]:
                attempts -= 1
                trial = [list(rs) for rs in reps]
                trial[i][trial[i].index(y)] = a
                trial[q][trial[q].index(a)] = y
                balance_leaders(trial, stay)
                now = _leader_score(trial, stay)
                if now < score:
                    reps[:] = trial
                    score, improved = now, True
                    break
                if attempts <= 0:
                    break
            if improved or attempts <= 0:
                break
        if not improved:
            return


def _leader_score(reps: Sequence[Sequence[int]], stay: Sequence[int]) -> tuple[int, int]:
    """(spread, sum of squares) of the leader counts: smaller is more even."""
    leads = dict.fromkeys(stay, 0)
    for rs in reps:
        if rs and rs[0] in leads:
            leads[rs[0]] += 1
    return max(leads.values()) - min(leads.values()), sum(v * v for v in leads.values())


def _closed_set(reps: Sequence[Sequence[int]], stay: Sequence[int]) -> set[int]:
    """Brokers the most-leading broker can pass leadership to, directly or not."""
    leads = dict.fromkeys(stay, 0)
    edges: dict[int, set[int]] = {b: set() for b in stay}
    for rs in reps:
        if rs and rs[0] in leads:
            leads[rs[0]] += 1
            edges[rs[0]].update(b for b in rs[1:] if b in leads)
    top = max(stay, key=lambda b: (leads[b], -b))
    seen = {top}
    queue = deque([top])
    while queue:
        for v in edges[queue.popleft()]:
            if v not in seen:
                seen.add(v)
                queue.append(v)
    return seen


def _planned_moves(base: Sequence[Sequence[int]], reps: Sequence[Sequence[int]],
                   closed: set[int], stay: set[int]) -> list[tuple[int, int, int]]:
    """(partition, receiver, giver) of the planned moves across the border of ``closed``."""
    out = []
    for i, (was, rs) in enumerate(zip(base, reps, strict=True)):
        gone = [a for a in was if a not in rs and a in stay]
        out += [(i, y, a) for y in rs if y not in was for a in gone
                if (y in closed) != (a in closed)]
    # first the exchanges that move a leader across: a move into the closed set that
    # made the receiver lead, a move out of it that did not
    out.sort(key=lambda m: (reps[m[0]][0] == m[1]) != (m[1] in closed))
    return out


def _path_to_lower(source: int, leads: Mapping[int, int],
                   via: Mapping[int, Mapping[int, set[int]]]) -> list[int] | None:
    """Shortest path source -> ... -> v with leads[v] <= leads[source] - 2, to the v with
    the fewest leaders among those reachable (BFS over at most a few dozen brokers)."""
    prev: dict[int, int | None] = {source: None}
    queue = deque([source])
    best: int | None = None
    while queue:
        u = queue.popleft()
        for v, parts in via[u].items():
            if v in prev or not parts:
                continue
            prev[v] = u
            queue.append(v)
            if leads[v] <= leads[source] - 2 and (best is None or leads[v] < leads[best]):
                best = v
    if best is None:
        return None
    path = [best]
    node = prev[best]
    while node is not None:
        path.append(node)
        node = prev[node]
    return path[::-1]


def balance_topic_leaders(reps: list[list[int]], topics: Sequence[str], brokers: Sequence[int]) -> bool:
    """After ``balance_leaders`` (the cluster's counts), balance preferred leaders within
    each topic (``topics[i]`` is partition i's) without undoing it: along a shortest path
    of the topic's partitions (u leads one that v holds), pass one unit of the topic's
    leadership from a broker to one leading at least two fewer of the topic. Only the
    path's ends change their counts. The path is taken alone when the source leads more
    of the cluster than the target and the cluster's spread stays within max(1, what it
    was); else with a path of another topic from the target back to the source that
    leads at least one more of that topic on the target (the cluster's counts do not
    change, that topic gets no less even). Every step makes the topics more even (their
    sum of squared counts falls), so this ends. Reorders only; no data moves. Returns
    whether anything changed."""
    stay = sorted(set(brokers))
    if not stay:
        return False
    leads: dict[int, int] = dict.fromkeys(stay, 0)
    groups: dict[str, list[list[int]]] = {}
    for i, rs in enumerate(reps):
        if rs and rs[0] in leads:
            leads[rs[0]] += 1
        groups.setdefault(topics[i], []).append(rs)
    changed = progress = False
    while True:
        for topic in sorted(groups):
            while _improve_topic(topic, groups, stay, leads):
                changed = progress = True
        if not progress:
            return changed
        progress = False


def _improve_topic(topic: str, groups: Mapping[str, Sequence[list[int]]], stay: Sequence[int],
                   leads: dict[int, int]) -> bool:
    mine = groups[topic]
    held = _held(mine, stay)
    spread = max(leads.values()) - min(leads.values())
    for source in sorted(stay, key=lambda b: (-held[b], -leads[b], b)):
        if held[source] - min(held.values()) < 2:
            return False
        prev = _reach(mine, source, stay)
        targets = sorted((v for v in prev if held[v] <= held[source] - 2),
                         key=lambda v: (held[v], leads[v], v))
        for v in targets:
            if _keeps_spread(leads, source, v, spread):
                _apply(_path(prev, v))
                leads[source] -= 1
                leads[v] += 1
                return True
            for other in sorted(groups):
                if other == topic:
                    continue
                theirs = groups[other]
                held2 = _held(theirs, stay)
                if held2[v] < held2[source] + 1:
                    continue
                back = _reach(theirs, v, stay)
                if source in back:
                    _apply(_path(prev, v))
                    _apply(_path(back, source))
                    return True
    return False


def _held(partitions: Sequence[Sequence[int]], stay: Sequence[int]) -> dict[int, int]:
    held = dict.fromkeys(stay, 0)
    for rs in partitions:
        if rs and rs[0] in held:
            held[rs[0]] += 1
    return held


def _reach(partitions: Sequence[list[int]], source: int,
           stay: Sequence[int]) -> dict[int, tuple[list[int], int, int] | None]:
    """Breadth-first from ``source``: each reachable broker's last step (replicas, from,
    to) over partitions its predecessor leads and it holds."""
    ok = set(stay)
    led: dict[int, list[list[int]]] = {b: [] for b in stay}
    for rs in partitions:
        if rs and rs[0] in led:
            led[rs[0]].append(rs)
    prev: dict[int, tuple[list[int], int, int] | None] = {source: None}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for rs in led[u]:
            for v in rs[1:]:
                if v in ok and v not in prev:
                    prev[v] = (rs, u, v)
                    queue.append(v)
    return prev


def _path(prev: Mapping[int, tuple[list[int], int, int] | None], target: int) -> list[tuple[list[int], int]]:
    out = []
    node = target
    while (step := prev[node]) is not None:
        out.append((step[0], step[2]))
        node = step[1]
    return out[::-1]


def _apply(path: Sequence[tuple[list[int], int]]) -> None:
    for rs, v in path:
        rs.remove(v)
        rs.insert(0, v)


def _keeps_spread(leads: Mapping[int, int], source: int, target: int, spread: int) -> bool:
    """The source leads more of the cluster than the target (the two counts swap or
    close in: the cluster's range never widens) and the spread stays within max(1, it)."""
    if leads[source] <= leads[target]:
        return False
    after = dict(leads)
    after[source] -= 1
    after[target] += 1
    return max(after.values()) - min(after.values()) <= max(1, spread)


def balance_all_leaders(reps: list[list[int]], topics: Sequence[str], brokers: Sequence[int],
                        rounds: int = 8) -> None:
    """``balance_leaders`` (the cluster) and ``balance_topic_leaders`` (each topic) in turn
    until neither changes anything (at most ``rounds`` times; the cluster's pass last)."""
    for _ in range(rounds):
        firsts = [rs[0] for rs in reps if rs]
        balance_leaders(reps, brokers)
        moved = firsts != [rs[0] for rs in reps if rs]
        if not balance_topic_leaders(reps, topics, brokers) and not moved:
            return
    balance_leaders(reps, brokers)
