"""Preferred leaders balanced by bytes-in where the rates are known (pure; used by
``opskit.core.reassign.plan`` with ``reassign plan --leader-weights FILE``).

A partition's leader takes all of its produce traffic, so with rates per partition the
leader bytes-in per broker (the sum of the rates of the partitions it leads) is the load
to even out, not only the count. The pass runs last, on the planned replicas, after the
count balance of :mod:`opskit.core.reassign.leaders`: it only reorders replica lists (the
replicas moved are exactly those of the plan without weights) and keeps what that balance
reached: every topic's leader counts within max(1, their spread before the pass), the
cluster's within max(1, its spread).

Each step passes leadership between two brokers u (more load) and v (less), the load
difference being d: one partition u leads and v holds (rate w, 0 < w < d), or two at once,
one each way (net x = w1 - w2, 0 < x < d), whichever lowers the sum of squared loads most.
Both loads stay within [load v, load u], so the max - min of the loads never grows, and the
sum of squares falls at every step: the pass ends, and is never worse than the balance by
counts alone. It is a local search: the result is as even as such steps get, not proved
optimal.

The rates file (``parse_rates``), JSON, one of:

- per partition (opskit's format)::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "bytes_in_per_second": 1200.5}]}

- the JSON ``opskit throughput -o json`` prints: its rates are per topic, so each partition
  gets its topic's ``bytes_per_second`` divided by the topic's partitions (said in a note).

Partitions without a rate weigh 0 (they keep the leader the count balance gave them).
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opskit.core.models import TopicPartition
from opskit.core.reassign.plan_fields import _broker_bytes, _obj
from opskit.errors import InvalidInputError


@dataclass(frozen=True)
class Rates:
    """Bytes-in per second read from a rates file: per partition, or per topic (split
    evenly over the topic's partitions); ``source`` says which."""

    partitions: Mapping[TopicPartition, float]
    topics: Mapping[str, float]
    source: str

    def weights(self, tps: Sequence[TopicPartition]) -> tuple[list[int], list[str]]:
        """Integer bytes/s for each of ``tps`` (0 where unknown) and notes on what the file
        and the cluster do not share."""
        per_topic: dict[str, int] = {}
        for tp in tps:
            per_topic[tp.topic] = per_topic.get(tp.topic, 0) + 1
        out = []
        for tp in tps:
            if tp in self.partitions:
                out.append(round(self.partitions[tp]))
            elif tp.topic in self.topics:
                out.append(round(self.topics[tp.topic] / per_topic[tp.topic]))
            else:
                out.append(0)
        notes = []
        known = set(tps)
        missing = sum(1 for tp in tps if tp not in self.partitions and tp.topic not in self.topics)
        if missing:
            notes.append(f"{missing:,} partition(s) have no rate in the leader weights: they "
                         "weigh 0")
        extra = sorted({tp for tp in self.partitions if tp not in known}
                       | {TopicPartition(t, -1) for t in self.topics if t not in per_topic})
        if extra:
            first = extra[0]
            name = first.topic if first.partition < 0 else f"{first.topic}:{first.partition}"
            notes.append(f"{len(extra):,} entr(y/ies) of the leader weights are not in the "
                         f"cluster (e.g. {name}): ignored")
        if self.topics:
            notes.append("leader weights are per topic (opskit throughput's JSON): each "
                         "partition counts its topic's bytes/s divided by its partitions")
        return out, notes


def parse_rates(text: str, where: str) -> Rates:
    """The rates file (see the module docstring); InvalidInputError naming ``where``."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except ValueError as e:
        raise InvalidInputError(f"{where}: not valid JSON ({e})") from None
    d = _obj(data, where)
    if isinstance(d.get("partitions"), list):
        parts: dict[TopicPartition, float] = {}
        for i, entry in enumerate(d["partitions"]):
            at = f"{where}: partitions[{i}]"
            item = _obj(entry, at)
            topic, part = item.get("topic"), item.get("partition")
            if not isinstance(topic, str) or not topic:
                raise InvalidInputError(f"{at}.topic: expected a topic name")
            if isinstance(part, bool) or not isinstance(part, int) or part < 0:
                raise InvalidInputError(f"{at}.partition: expected a partition number >= 0")
            tp = TopicPartition(topic, part)
            if tp in parts:
                raise InvalidInputError(f"{at}: {topic}:{part} is listed twice")
            parts[tp] = _rate(item.get("bytes_in_per_second"), f"{at}.bytes_in_per_second")
        return Rates(parts, {}, "per partition")
    if isinstance(d.get("topics"), list) and "interval_seconds" in d:
        topics: dict[str, float] = {}
        for i, entry in enumerate(d["topics"]):
            at = f"{where}: topics[{i}]"
            item = _obj(entry, at)
            topic = item.get("topic")
            if not isinstance(topic, str) or not topic:
                raise InvalidInputError(f"{at}.topic: expected a topic name")
            if item.get("bytes_per_second") is None:
                continue  # throughput could not measure it: unknown, weighs 0 (noted)
            topics[topic] = _rate(item["bytes_per_second"], f"{at}.bytes_per_second")
        return Rates({}, topics, "per topic (opskit throughput)")
    raise InvalidInputError(f"{where}: expected {{\"partitions\": [{{\"topic\", \"partition\", "
                            f"\"bytes_in_per_second\"}}]}} or opskit throughput's JSON")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _rate(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise InvalidInputError(f"{where}: expected a number of bytes per second >= 0")
    return float(v)


@dataclass(frozen=True)
class LeaderLoad:
    """Leader bytes-in per second per broker, before the plan (the current preferred
    leaders) and after it (the planned ones), over ``brokers`` (the staying ones)."""

    before: Mapping[int, int]
    after: Mapping[int, int]
    brokers: tuple[int, ...]

    def spread(self, which: Mapping[int, int]) -> int:
        vals = [which.get(b, 0) for b in self.brokers]
        return max(vals) - min(vals) if vals else 0

    def to_dict(self) -> dict[str, Any]:
        return {"before": {str(k): v for k, v in sorted(self.before.items())},
                "after": {str(k): v for k, v in sorted(self.after.items())},
                "brokers": list(self.brokers),
                "spread_before": self.spread(self.before), "spread_after": self.spread(self.after)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "opskit.estimates.leader_bytes_in") -> LeaderLoad:
        d = _obj(data, where)
        brokers = d.get("brokers", [])
        if not isinstance(brokers, list) or not all(
                isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in brokers):
            raise InvalidInputError(f"{where}.brokers: expected a list of broker ids")
        return cls(_broker_bytes(d.get("before", {}), f"{where}.before"),
                   _broker_bytes(d.get("after", {}), f"{where}.after"), tuple(brokers))


def leader_load(reps: Sequence[Sequence[int]], weights: Sequence[int],
                brokers: Sequence[int]) -> dict[int, int]:
    """Bytes-in per broker of the partitions it leads (first replica), every broker of
    ``brokers`` and every other broker leading a partition with a rate."""
    out = dict.fromkeys(brokers, 0)
    for rs, w in zip(reps, weights, strict=True):
        if rs and (w or rs[0] in out):
            out[rs[0]] = out.get(rs[0], 0) + w
    return out


def weigh_leaders(reps: list[list[int]], topics: Sequence[str], weights: Sequence[int],
                  brokers: Sequence[int]) -> None:
    """Reorder ``reps`` (in place) so the leader bytes-in per broker get more even, keeping
    the leader counts' spreads per topic and over the cluster (see the module docstring)."""
    _Weigher(reps, topics, weights, brokers).run()


class _Weigher:
    def __init__(self, reps: list[list[int]], topics: Sequence[str], weights: Sequence[int],
                 brokers: Sequence[int]) -> None:
        self.reps, self.topics, self.w = reps, topics, weights
        self.stay = sorted(set(brokers))
        ok = set(self.stay)
        self.load = dict.fromkeys(self.stay, 0)
        self.leads = dict.fromkeys(self.stay, 0)
        self.held: dict[str, dict[int, int]] = {}
        # via[u][v]: partitions with a rate, led by u, with a replica on v
        self.via: dict[int, dict[int, set[int]]] = {u: {v: set() for v in self.stay if v != u}
                                                    for u in self.stay}
        for i, rs in enumerate(reps):
            if not rs or rs[0] not in ok:
                continue
            u = rs[0]
            self.leads[u] += 1
            self.held.setdefault(topics[i], dict.fromkeys(self.stay, 0))[u] += 1
            self.load[u] += weights[i]
            if weights[i] > 0:
                for v in rs[1:]:
                    if v in ok:
                        self.via[u][v].add(i)
        self.limit = {t: max(1, _spread(h)) for t, h in self.held.items()}
        self.cluster_limit = max(1, _spread(self.leads))

    def run(self) -> None:
        for _ in range(20 * len(self.reps) + 100):  # (a safety cap: every step lowers the squares)
            order = sorted(self.stay, key=lambda b: (-self.load[b], b))
            if not any(self._step(u, v) for k, u in enumerate(order)
                       for v in reversed(order[k + 1:]) if self.load[u] > self.load[v]):
                return

    def _step(self, u: int, v: int) -> bool:
        """The best single or paired hand-over from u to v; False when none helps."""
        d = self.load[u] - self.load[v]
        best: tuple[int, int, int | None] | None = None  # (gain, i, j)
        for i in self.via[u][v]:
            x = self.w[i]
            if 0 < x < d and x * (d - x) > (best[0] if best else 0) and self._single_ok(i, u, v):
                best = (x * (d - x), i, None)
        back = sorted((self.w[j], j) for j in self.via[v][u])
        if back:
            for i in sorted(self.via[u][v]):
                wi = self.w[i]
                k = bisect_left(back, (wi - d // 2, -1))
                for wj, j in back[max(0, k - 2):k + 2]:
                    x = wi - wj
                    if 0 < x < d and x * (d - x) > (best[0] if best else 0) \
                            and self._pair_ok(i, j, u, v):
                        best = (x * (d - x), i, j)
        if best is None:
            return False
        self._hand(best[1], u, v)
        if best[2] is not None:
            self._hand(best[2], v, u)
        return True

    def _single_ok(self, i: int, u: int, v: int) -> bool:
        return (_after_spread(self.leads, u, v) <= self.cluster_limit
                and _after_spread(self.held[self.topics[i]], u, v) <= self.limit[self.topics[i]])

    def _pair_ok(self, i: int, j: int, u: int, v: int) -> bool:
        ti, tj = self.topics[i], self.topics[j]
        if ti == tj:
            return True
        return (_after_spread(self.held[ti], u, v) <= self.limit[ti]
                and _after_spread(self.held[tj], v, u) <= self.limit[tj])

    def _hand(self, i: int, u: int, v: int) -> None:
        rs = self.reps[i]
        for x in rs[1:]:
            if x in self.via[u]:
                self.via[u][x].discard(i)
        rs.remove(v)
        rs.insert(0, v)
        for x in rs[1:]:
            if x in self.via[v]:
                self.via[v][x].add(i)
        self.load[u] -= self.w[i]
        self.load[v] += self.w[i]
        self.leads[u] -= 1
        self.leads[v] += 1
        held = self.held[self.topics[i]]
        held[u] -= 1
        held[v] += 1


def _spread(counts: Mapping[int, int]) -> int:
    return max(counts.values()) - min(counts.values()) if counts else 0


def _after_spread(counts: Mapping[int, int], u: int, v: int) -> int:
    """The spread of ``counts`` with one taken from u and given to v."""
    after = dict(counts)
    after[u] -= 1
    after[v] += 1
    return _spread(after)
