"""Minimal-change balancing of preferred leaders (pure; used by ``opskit.core.reassign.plan``).

The preferred leader is the first replica. After the replica moves
(:mod:`opskit.core.reassign.balance`), the leaders are balanced (each broker at floor or
ceil of partitions / brokers) by putting another replica first, along shortest
augmenting paths between brokers, so as few partitions as possible change their
preferred leader; then per topic as far as that keeps the cluster's balance. A reorder
moves no data. State is a list of replica lists (``reps``) the caller owns.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Mapping, Sequence
from itertools import pairwise

from opskit.core.reassign.balance import RackRule


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
    views = _TopicViews(groups, stay)
    changed = progress = False
    while True:
        for topic in sorted(groups):
            while _improve_topic(topic, groups, stay, leads, views):
                changed = progress = True
        if not progress:
            return changed
        progress = False


class _TopicViews:
    """Each topic's leader counts and the partitions each broker leads, kept up to date
    as its partitions are reordered (the same as recomputing them: counts, and each
    broker's partitions in the topic's order); its reachability computed once per state
    of that topic (dropped when the topic changes)."""

    def __init__(self, groups: Mapping[str, Sequence[list[int]]], stay: Sequence[int]) -> None:
        self.groups = groups
        self.stay = stay
        self._held: dict[str, dict[int, int]] = {}
        self._reach: dict[str, dict[int, dict[int, tuple[list[int], int, int] | None]]] = {}
        self._led: dict[str, dict[int, list[list[int]]]] = {}
        #: topic -> broker u -> (broker v, the first partition u leads that v holds), for
        #: the brokers whose led partitions did not change since
        self._firsts: dict[str, dict[int, list[tuple[int, list[int]]]]] = {}
        #: topic -> id(partition's replica list) -> its place in the topic
        self._pos: dict[str, dict[int, int]] = {}
        #: topic -> broker u -> broker v -> how many of the partitions u leads v holds
        #: (kept with ``_led``: a scan of u's led partitions can stop once it met them all)
        self._follow: dict[str, dict[int, dict[int, int]]] = {}

    def held(self, topic: str) -> dict[int, int]:
        out = self._held.get(topic)
        if out is None:
            out = self._held[topic] = _held(self.groups[topic], self.stay)
        return out

    def reach(self, topic: str, source: int) -> dict[int, tuple[list[int], int, int] | None]:
        per = self._reach.setdefault(topic, {})
        out = per.get(source)
        if out is None:
            led = self._led.get(topic)
            if led is None:
                led = self._led[topic] = _led(self.groups[topic], self.stay)
                self._follow[topic] = _follow(led, self.stay)
            out = per[source] = _reach(led, self._firsts.setdefault(topic, {}), source,
                                       self.stay, self._follow[topic])
        return out

    def apply(self, topic: str, path: Sequence[tuple[list[int], int]]) -> None:
        """Put each step's broker first in its partition (:func:`_apply`), updating the
        topic's counts and led lists."""
        held, led = self._held.get(topic), self._led.get(topic)
        follow = self._follow.get(topic)
        firsts = self._firsts.get(topic, {})
        pos = self._pos.get(topic)
        if led is not None and pos is None:
            pos = self._pos[topic] = {id(rs): i for i, rs in enumerate(self.groups[topic])}
        for rs, v in path:
            u = rs[0]
            # only u's and v's led partitions change (this one, from u's to v's, reordered)
            firsts.pop(u, None)
            firsts.pop(v, None)
            if held is not None:
                held[u] -= 1
                held[v] += 1
            if led is not None and pos is not None:
                def at(r: list[int], pos: dict[int, int] = pos) -> int:
                    return pos[id(r)]

                lst = led[u]
                i = bisect_left(lst, at(rs), key=at)
                assert lst[i] is rs
                del lst[i]
                insort(led[v], rs, key=at)
                if follow is not None:  # u stops leading rs, v leads it: followers change
                    for w in rs[1:]:
                        if w in follow:
                            follow[u][w] -= 1
                    for w in rs:
                        if w != v and w in follow:
                            follow[v][w] += 1
        _apply(path)
        self._reach.pop(topic, None)

def _improve_topic(topic: str, groups: Mapping[str, Sequence[list[int]]], stay: Sequence[int],
                   leads: dict[int, int], views: _TopicViews) -> bool:
    held = views.held(topic)
    spread = max(leads.values()) - min(leads.values())
    for source in sorted(stay, key=lambda b: (-held[b], -leads[b], b)):
        if held[source] - min(held.values()) < 2:
            return False
        prev = views.reach(topic, source)
        targets = sorted((v for v in prev if held[v] <= held[source] - 2),
                         key=lambda v: (held[v], leads[v], v))
        for v in targets:
            if _keeps_spread(leads, source, v, spread):
                views.apply(topic, _path(prev, v))
                leads[source] -= 1
                leads[v] += 1
                return True
            for other in sorted(groups):
                if other == topic:
                    continue
                held2 = views.held(other)
                if held2[v] < held2[source] + 1:
                    continue
                back = views.reach(other, v)
                if source in back:
                    views.apply(topic, _path(prev, v))
                    views.apply(other, _path(back, source))
                    return True
    return False


def _held(partitions: Sequence[Sequence[int]], stay: Sequence[int]) -> dict[int, int]:
    held = dict.fromkeys(stay, 0)
    for rs in partitions:
        if rs and rs[0] in held:
            held[rs[0]] += 1
    return held


def _led(partitions: Sequence[list[int]], stay: Sequence[int]) -> dict[int, list[list[int]]]:
    """The partitions each broker of ``stay`` leads (in their order)."""
    led: dict[int, list[list[int]]] = {b: [] for b in stay}
    for rs in partitions:
        if rs and rs[0] in led:
            led[rs[0]].append(rs)
    return led


def _follow(led: Mapping[int, Sequence[list[int]]], stay: Sequence[int]
            ) -> dict[int, dict[int, int]]:
    """Per broker u of ``stay``: how many of the partitions u leads (``led``) each broker
    of ``stay`` holds as a follower."""
    out: dict[int, dict[int, int]] = {u: dict.fromkeys(stay, 0) for u in stay}
    for u, parts in led.items():
        counts = out[u]
        for rs in parts:
            for w in rs[1:]:
                if w in counts:
                    counts[w] += 1
    return out


def _reach(led: Mapping[int, Sequence[list[int]]],
           firsts: dict[int, list[tuple[int, list[int]]]], source: int,
           stay: Sequence[int], follow: Mapping[int, Mapping[int, int]]
           ) -> dict[int, tuple[list[int], int, int] | None]:
    """Breadth-first from ``source``: each reachable broker's last step (replicas, from,
    to) over partitions its predecessor leads (``led``, from ``_led``) and it holds.
    ``firsts`` (filled here, kept for the same ``led``): per broker u, the brokers its
    led partitions reach, each with the first such partition, in the order a scan of
    ``led[u]`` meets them, which is all the search needs of ``led[u]``."""
    ok = set(stay)
    prev: dict[int, tuple[list[int], int, int] | None] = {source: None}
    queue = deque([source])
    while queue and len(prev) < len(ok):  # (every broker reached: nothing left to find)
        u = queue.popleft()
        out = firsts.get(u)
        if out is None:
            out = firsts[u] = _first_holders(led[u], ok, u, follow[u])
        for v, rs in out:
            if v not in prev:
                prev[v] = (rs, u, v)
                queue.append(v)
    return prev


def _first_holders(led: Sequence[list[int]], ok: set[int], u: int,
                   follows: Mapping[int, int]) -> list[tuple[int, list[int]]]:
    """(v, the first partition of ``led`` with a replica on v) for each broker v of ``ok``
    but u, in the order a scan of ``led`` (and of each partition's followers) meets them.
    ``follows``: how many partitions of ``led`` each broker holds (the scan stops once it
    met every broker holding one)."""
    seen: set[int] = set()
    out: list[tuple[int, list[int]]] = []
    want = sum(1 for v, n in follows.items() if n > 0 and v in ok and v != u)
    if want == 0:
        return out
    for rs in led:
        for v in rs[1:]:
            if v in ok and v != u and v not in seen:
                seen.add(v)
                out.append((v, rs))
        if len(seen) == want:
            break
    return out


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
