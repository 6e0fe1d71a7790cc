"""Byte balance and disk capacity for the reassignment planner (pure; used by
``opskit.core.reassign.plan``).

Bytes per broker: the sum of the sizes of every replica it holds (followers count as
much as leaders: each replica is a full copy on that broker's disk).

The byte goal (``reassign plan --balance-bytes``): with T bytes of replicas over the n
staying brokers (a drained broker's replicas included: they land on the others) and a
tolerance t, every staying broker ends with

    lo = ceil(T/n x (1 - t))  <=  bytes  <=  hi(b) = min(floor(T/n x (1 + t)), capacity(b))

Lower bound (``byte_goal_bounds``; true for every plan reaching that band from the
cluster as it is, whatever else it does): the replication factor stays, so the bytes
moved (the sizes of the replicas created) equal the bytes removed. A broker above
hi(b) must lose at least its excess, a drained broker everything, and a byte removed
from one broker reduces only that broker's excess: the bytes moved are at least the sum
of those. Likewise every broker below lo must receive its deficit, a byte received
fills one broker: at least the sum of the deficits. The bound is the larger sum.
Replicas: a broker above hi(b) removes at least as many replicas as its largest ones
must be to sum to the excess; a broker below lo receives at least as many partitions as
the largest ones it does not hold must be to sum to the deficit.

The planner (``balance_bytes``) runs after the count balance and the rack spread, on
their result: a greedy descent on the total violation (bytes above hi(b) plus bytes
below lo, summed over brokers). Each step takes the single replica move or the swap of
two replicas between two brokers that removes the most violation per byte it adds to
the plan (a move back to where a replica was before the plan costs nothing); among
equal ratios the one that removes the most. When no such step helps, one large replica
is traded for up to four smaller ones of the other broker (a bundle). Once in the band,
moved replicas go back where they were, largest first, wherever the band, capacity,
racks and the counts' range allow (fewer bytes, the same goals). A step never crowds a rack (the rack rule
of ``reassign.balance``), never puts a broker above its capacity, never puts two
replicas of a partition on one broker. Replica counts: first only steps that keep every
broker within floor..ceil of the replicas per broker (moves from a broker at ceil to one
at floor, swaps); then, while the band is not reached, counts may leave that range by
1, 2, 4, ... more (the plan reports how far they spread). The descent stops at the band
or when no step lowers the violation: the band is then not reached and the plan says so.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from opskit.core.reassign.balance import RackRule
from opskit.core.reassign.plan_fields import _bool, _broker_bytes, _int, _obj
from opskit.errors import InvalidInputError, UsageError

#: the default --byte-tolerance (percent of the mean)
DEFAULT_TOLERANCE_PCT = 10
#: candidates looked at on each side of a break point, per broker pair
_NEAR = 3
#: at most this many small replicas traded for one large one
_BUNDLE = 4


@dataclass(frozen=True)
class Band:
    """Bytes per staying broker the goal allows: ``lo`` <= bytes <= ``high[b]``."""

    lo: int
    hi: int
    high: Mapping[int, int]


def band(total: int, stay: Sequence[int], tolerance: Fraction,
         capacity: Mapping[int, int]) -> Band:
    n = len(stay)
    lo = math.ceil(Fraction(total) * (1 - tolerance) / n) if n else 0
    hi = math.floor(Fraction(total) * (1 + tolerance) / n) if n else 0
    high = {b: min(hi, capacity[b]) if b in capacity else hi for b in stay}
    return Band(max(0, lo), hi, high)


def broker_bytes(reps: Iterable[Sequence[int]], sizes: Sequence[int],
                 brokers: Iterable[int] = ()) -> dict[int, int]:
    """Bytes per broker (every replica at its partition's size); ``brokers`` listed at 0
    when they hold nothing."""
    out = dict.fromkeys(brokers, 0)
    for rs, size in zip(reps, sizes, strict=True):
        for b in rs:
            out[b] = out.get(b, 0) + size
    return out


def byte_goal_bounds(reps: Sequence[Sequence[int]], sizes: Sequence[int], stay: Sequence[int],
                     drained: Sequence[int], goal: Band) -> tuple[int, int]:
    """(replicas, bytes) every plan reaching ``goal`` from ``reps`` moves at least (see
    the module docstring)."""
    staying, gone = set(stay), set(drained)
    held: dict[int, list[int]] = {b: [] for b in stay}
    shed_bytes = shed_reps = 0
    for i, rs in enumerate(reps):
        for b in rs:
            if b in staying:
                held[b].append(i)
            elif b in gone:
                shed_bytes += sizes[i]
                shed_reps += 1
    by_size = sorted(range(len(reps)), key=lambda i: -sizes[i])
    recv_bytes = recv_reps = 0
    for b in stay:
        load = sum(sizes[i] for i in held[b])
        over = load - goal.high[b]
        if over > 0:
            shed_bytes += over
            shed_reps += _fewest(sorted((sizes[i] for i in held[b]), reverse=True), over)
        under = goal.lo - load
        if under > 0:
            recv_bytes += under
            mine = set(held[b])
            recv_reps += _fewest((sizes[i] for i in by_size if i not in mine), under)
    return max(shed_reps, recv_reps), max(shed_bytes, recv_bytes)


def _fewest(sizes_desc: Iterable[int], amount: int) -> int:
    """How many of these sizes (largest first) it takes to reach ``amount`` (all of them
    when they cannot)."""
    n = 0
    for s in sizes_desc:
        if amount <= 0:
            break
        amount -= s
        n += 1
    return n


def violation(load: Mapping[int, int], goal: Band) -> int:
    return sum(max(0, load[b] - goal.high[b]) + max(0, goal.lo - load[b]) for b in goal.high)


def balance_bytes(reps: list[list[int]], base: Sequence[Sequence[int]], sizes: Sequence[int],
                  stay: Sequence[int], racks: RackRule, goal: Band,
                  capacity: Mapping[int, int]) -> bool:
    """Move replicas (in place in ``reps``) until every staying broker is within
    ``goal`` (see the module docstring); ``base``: each partition's replicas before the
    plan (a move back there is free). True when the band is reached."""
    order = sorted(stay)
    holds: dict[int, set[int]] = {b: set() for b in order}
    for i, rs in enumerate(reps):
        for b in rs:
            if b in holds:
                holds[b].add(i)
    load = {b: sum(sizes[i] for i in holds[b]) for b in order}
    count = {b: len(holds[b]) for b in order}
    total = sum(count.values())
    floor, ceil = (total // len(order), -(-total // len(order))) if order else (0, 0)
    was = [set(rs) for rs in base]
    sorted_on: dict[int, list[tuple[int, int]]] = {}

    def on(b: int) -> list[tuple[int, int]]:
        if b not in sorted_on:
            sorted_on[b] = sorted((sizes[i], i) for i in holds[b])
        return sorted_on[b]

    def viol(b: int, x: int) -> int:
        return max(0, x - goal.high[b]) + max(0, goal.lo - x)

    def cost(i: int, a: int, b: int) -> int:
        return sizes[i] * ((a in was[i]) - (b in was[i]))

    def fits(b: int, x: int) -> bool:
        return b not in capacity or x <= capacity[b]

    def can_move(i: int, a: int, b: int) -> bool:
        return b not in reps[i] and racks.allows_move(reps[i], a, b)

    def near(items: list[tuple[int, int]], target: int) -> list[tuple[int, int]]:
        k = bisect_left(items, (target, -1))
        return items[max(0, k - _NEAR): k + _NEAR]

    def best_step(slack: int) -> tuple[tuple[Any, ...], list[tuple[int, int, int]]] | None:
        best: tuple[tuple[Any, ...], list[tuple[int, int, int]]] | None = None

        def consider(gain: int, c: int, steps: list[tuple[int, int, int]]) -> None:
            nonlocal best
            if gain <= 0:
                return
            key = (0, -gain, c) if c <= 0 else (1, Fraction(-gain, c), -gain)
            key = (*key, steps)
            if best is None or key < best[0]:
                best = (key, steps)

        for a in order:
            for b in order:
                la, lb = load[a], load[b]
                if a == b or la <= lb or (la <= goal.high[a] and lb >= goal.lo):
                    continue
                base_v = viol(a, la) + viol(b, lb)
                points = {p for p in (la - goal.high[a], goal.lo - lb, goal.high[b] - lb,
                                      la - goal.lo, (la - lb) // 2) if p > 0}
                count_ok = (count[a] - count[b] >= 2
                            or (count[a] - 1 >= floor - slack and count[b] + 1 <= ceil + slack))
                mine = on(a)
                if count_ok:
                    seen: set[int] = set()
                    for p in points:
                        for s, i in near(mine, p + 1):
                            if i in seen:
                                continue
                            seen.add(i)
                            if not fits(b, lb + s) or not can_move(i, a, b):
                                continue
                            consider(base_v - viol(a, la - s) - viol(b, lb + s), cost(i, a, b),
                                     [(i, a, b)])
                theirs = on(b)
                firsts = {i for _, i in mine[-2 * _NEAR:]}
                for p in points:
                    firsts.update(i for _, i in near(mine, p + 1))
                for i in firsts:
                    si = sizes[i]
                    if not can_move(i, a, b):
                        continue
                    for p in points:
                        for sj, j in near(theirs, si - p):
                            d = si - sj
                            if d <= 0 or j == i or not fits(b, lb + d) or not can_move(j, b, a):
                                continue
                            consider(base_v - viol(a, la - d) - viol(b, lb + d),
                                     cost(i, a, b) + cost(j, b, a), [(i, a, b), (j, b, a)])
        return best

    def best_bundle(slack: int) -> tuple[tuple[Any, ...], list[tuple[int, int, int]]] | None:
        """When no move or swap helps: one replica from a to b against up to _BUNDLE
        smaller ones from b to a (one large partition for several small ones)."""
        best: tuple[tuple[Any, ...], list[tuple[int, int, int]]] | None = None
        for a in order:
            for b in order:
                la, lb = load[a], load[b]
                if a == b or la <= lb or (la <= goal.high[a] and lb >= goal.lo):
                    continue
                base_v = viol(a, la) + viol(b, lb)
                points = {p for p in (la - goal.high[a], goal.lo - lb, (la - lb) // 2) if p > 0}
                mine, theirs = on(a), on(b)
                for si, i in mine[-2 * _NEAR:]:
                    if not can_move(i, a, b):
                        continue
                    for p in points:
                        room = si - p
                        taken: list[tuple[int, int, int]] = []
                        k = bisect_left(theirs, (room + 1, -1)) - 1
                        looked = 0
                        while k >= 0 and room > 0 and len(taken) < _BUNDLE and looked < 4 * _BUNDLE:
                            sj, j = theirs[k]
                            k -= 1
                            looked += 1
                            if sj <= room and j != i and can_move(j, b, a):
                                taken.append((j, b, a))
                                room -= sj
                        if len(taken) < 2:
                            continue
                        extra = len(taken) - 1
                        if not (count[b] - count[a] >= 2 * extra
                                or (count[b] - extra >= floor - slack
                                    and count[a] + extra <= ceil + slack)):
                            continue
                        d = si - sum(sizes[j] for j, _, _ in taken)
                        if d <= 0 or not fits(b, lb + d):
                            continue
                        gain = base_v - viol(a, la - d) - viol(b, lb + d)
                        c = cost(i, a, b) + sum(cost(j, b, a) for j, _, _ in taken)
                        if gain <= 0:
                            continue
                        steps = [(i, a, b), *taken]
                        key = ((0, -gain, c) if c <= 0 else (1, Fraction(-gain, c), -gain), steps)
                        if best is None or key < best[0]:
                            best = (key, steps)
        return best

    def apply(i: int, a: int, b: int) -> None:
        reps[i][reps[i].index(a)] = b
        holds[a].discard(i)
        holds[b].add(i)
        load[a] -= sizes[i]
        load[b] += sizes[i]
        count[a] -= 1
        count[b] += 1
        sorted_on.pop(a, None)
        sorted_on.pop(b, None)

    def undo() -> None:
        """Put moved replicas back where they were (largest first) while the band, the
        capacity, the racks and the counts' range allow: fewer bytes, the same goals."""
        low = min(count.values())
        high = max(count.values())
        lo_c, hi_c = min(floor, low), max(ceil, high)
        changed = True
        while changed:
            changed = False
            for i in sorted(range(len(reps)), key=lambda i: (-sizes[i], i)):
                s = sizes[i]
                for b in [b for b in reps[i] if b not in was[i] and b in holds]:
                    back = next((a for a in sorted(was[i]) if a in holds and a not in reps[i]
                                 and load[b] - s >= goal.lo and load[a] + s <= goal.high[a]
                                 and fits(a, load[a] + s) and count[b] - 1 >= lo_c
                                 and count[a] + 1 <= hi_c and racks.allows_move(reps[i], b, a)),
                                None)
                    if back is not None:
                        apply(i, b, back)
                        changed = True

    slack = 0
    while True:
        while violation(load, goal) > 0:
            step = best_step(slack) or best_bundle(slack)
            if step is None:
                break
            for i, a, b in step[1]:
                apply(i, a, b)
        if violation(load, goal) == 0:
            undo()
            return True
        if slack > total:
            return False
        slack = max(1, slack * 2)


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class ByteReport:
    """Bytes per broker before and after the plan (every registered broker and every
    broker holding a replica), over ``brokers`` (the staying ones: the max/min ratio is
    taken over them), the capacity known per broker and where it came from; with
    ``--balance-bytes`` also the tolerance, the band, whether the plan reached it, the
    byte goal's own lower bounds and how far replica counts spread after."""

    before: Mapping[int, int]
    after: Mapping[int, int]
    brokers: tuple[int, ...]
    capacity: Mapping[int, int] = field(default_factory=dict)
    capacity_source: str | None = None
    tolerance_pct: float | None = None
    low: int | None = None
    high: int | None = None
    reached: bool | None = None
    goal_bytes_lower_bound: int | None = None
    goal_replicas_lower_bound: int | None = None
    count_spread_after: int | None = None

    def ratio(self, which: Mapping[int, int]) -> float | None:
        """max/min bytes per broker over ``brokers``; None when a broker holds 0."""
        vals = [which.get(b, 0) for b in self.brokers]
        if not vals or min(vals) <= 0:
            return None
        return max(vals) / min(vals)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "before": {str(k): v for k, v in sorted(self.before.items())},
            "after": {str(k): v for k, v in sorted(self.after.items())},
            "brokers": list(self.brokers),
            "max_min_before": _round(self.ratio(self.before)),
            "max_min_after": _round(self.ratio(self.after)),
            "capacity": {str(k): v for k, v in sorted(self.capacity.items())},
            "capacity_source": self.capacity_source,
        }
        if self.tolerance_pct is not None:
            out |= {"tolerance_pct": self.tolerance_pct, "low": self.low, "high": self.high,
                    "reached": self.reached,
                    "goal_bytes_lower_bound": self.goal_bytes_lower_bound,
                    "goal_replicas_lower_bound": self.goal_replicas_lower_bound,
                    "count_spread_after": self.count_spread_after}
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "opskit.estimates.bytes_per_broker") -> ByteReport:
        d = _obj(data, where)
        brokers = d.get("brokers", [])
        if not isinstance(brokers, list) or not all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in brokers):
            raise InvalidInputError(f"{where}.brokers: expected a list of broker ids")
        source = d.get("capacity_source")
        if source is not None and not isinstance(source, str):
            raise InvalidInputError(f"{where}.capacity_source: expected a string or null")
        tol = d.get("tolerance_pct")
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, int | float)
                                or not 0 <= tol < 100):
            raise InvalidInputError(f"{where}.tolerance_pct: expected a number 0-100 or null")
        balanced = tol is not None
        return cls(
            before=_broker_bytes(d.get("before", {}), f"{where}.before"),
            after=_broker_bytes(d.get("after", {}), f"{where}.after"),
            brokers=tuple(brokers),
            capacity=_broker_bytes(d.get("capacity", {}), f"{where}.capacity"),
            capacity_source=source,
            tolerance_pct=None if tol is None else float(tol),
            low=_int(d, "low", where, lo=0) if balanced else None,
            high=_int(d, "high", where, lo=0) if balanced else None,
            reached=_bool(d, "reached", where) if balanced else None,
            goal_bytes_lower_bound=_int(d, "goal_bytes_lower_bound", where, lo=0) if balanced else None,
            goal_replicas_lower_bound=_int(d, "goal_replicas_lower_bound", where, lo=0)
            if balanced else None,
            count_spread_after=_int(d, "count_spread_after", where, lo=0) if balanced else None,
        )


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# --------------------------------------------------------------------------- input


_SIZE_UNITS = {"": 1, "B": 1, "KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4,
               "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3, "TIB": 1024**4}


def parse_size(text: str, flag: str) -> int:
    """A size in bytes: ``500GB``, ``1.5TiB``, ``1048576`` (decimal and binary units)."""
    raw = text.strip().upper().replace(" ", "")
    num = raw.rstrip("KMGTIB")
    unit = raw[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = -1.0
    if unit not in _SIZE_UNITS or not value > 0 or value * _SIZE_UNITS[unit] > 2**62:
        raise UsageError(f"{flag}: {text!r} is not a size like 500GB, 1.5TiB or 1048576 (bytes, > 0)")
    return max(1, int(value * _SIZE_UNITS[unit]))


def parse_capacity(text: str) -> dict[int, int]:
    """``--capacity 0=500GB,1=1TB`` -> {0: ..., 1: ...}."""
    out: dict[int, int] = {}
    for item in text.split(","):
        broker, sep, size = item.partition("=")
        broker = broker.strip()
        if not sep or not (broker.isascii() and broker.isdigit()) or int(broker) > 2**31 - 1:
            raise UsageError(f"--capacity: {item.strip()!r} is not BROKER=SIZE (like 0=500GB)")
        b = int(broker)
        if b in out:
            raise UsageError(f"--capacity: broker {b} is given twice")
        out[b] = parse_size(size, f"--capacity {b}")
    return out


def parse_tolerance(text: str) -> float:
    """``--byte-tolerance 10`` or ``10%`` -> 10.0 (percent, > 0 and < 100)."""
    raw = text.strip().removesuffix("%").strip()
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 100:
        raise UsageError(f"--byte-tolerance: {text!r} is not a percentage above 0 and below 100 "
                         "(like 10 or 2.5%)")
    return value
