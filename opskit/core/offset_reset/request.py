"""What the operator asks for one group: the reset strategy, its scope, the request."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from opskit.core.models import TopicPartition
from opskit.core.offset_reset.document import (
    as_dict,
    as_enum,
    as_int,
    as_list,
    as_str,
    as_topic,
    need,
    offsets_from_list,
    offsets_to_list,
    only_keys,
)
from opskit.core.offset_reset.time_text import format_ms, parse_duration_nanos
from opskit.core.offset_reset.topics import INT32_MAX, TopicSelection, parse_topic_scope
from opskit.errors import InvalidInputError, UsageError


class FrozenOffsets(Mapping[TopicPartition, int]):
    """An immutable, hashable ``{TopicPartition: offset}`` in partition order."""

    def __init__(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._data = dict(sorted(offsets.items()))

    def __getitem__(self, tp: TopicPartition) -> int:
        return self._data[tp]

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(self._data.items()))

    def __repr__(self) -> str:
        return f"FrozenOffsets({self._data!r})"


class ResetKind(str, Enum):
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    TO_CURRENT = "to-current"
    TO_OFFSET = "to-offset"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"
    FROM_FILE = "from-file"
    #: not a tool option: put back offsets saved in an ``OffsetsBackup``
    RESTORE = "restore"


_PARAM_OF: dict[ResetKind, str] = {
    ResetKind.TO_OFFSET: "offset",
    ResetKind.SHIFT_BY: "shift",
    ResetKind.TO_DATETIME: "timestamp_ms",
    ResetKind.BY_DURATION: "duration",
    ResetKind.FROM_FILE: "offsets",
    ResetKind.RESTORE: "offsets",
}
_PARAMS = ("offset", "shift", "timestamp_ms", "duration", "offsets")


@dataclass(frozen=True)
class ResetStrategy:
    """Exactly one reset specification and its parameter. Build with the class methods."""

    kind: ResetKind
    offset: int | None = None
    shift: int | None = None
    timestamp_ms: int | None = None
    #: ISO-8601 text as given, e.g. "PT1H"
    duration: str | None = None
    offsets: Mapping[TopicPartition, int] | None = None

    def __post_init__(self) -> None:
        needed = _PARAM_OF.get(self.kind)
        for name in _PARAMS:
            if (getattr(self, name) is not None) != (name == needed):
                raise ValueError(
                    f"{self.kind.value} {'needs' if name == needed else 'takes no'} {name}"
                )
        if self.offset is not None and self.offset < 0:
            raise UsageError(f"--to-offset {self.offset} is negative")
        if self.timestamp_ms is not None and self.timestamp_ms < 0:
            raise UsageError(f"--to-datetime is before 1970 ({self.timestamp_ms} ms)")
        if self.duration is not None and parse_duration_nanos(self.duration) < 0:
            # The tool accepts it: now - (negative) is in the future, no record is
            # that new, so every partition falls back to the log end.
            raise UsageError(
                f"--by-duration {self.duration} is negative, which points to the future; "
                "use --to-latest"
            )
        if self.offsets is not None:
            frozen: dict[TopicPartition, int] = {}
            for tp, value in sorted(self.offsets.items()):
                if value < 0:
                    raise InvalidInputError(f"offset {value} for {tp} is negative")
                frozen[tp] = value
            object.__setattr__(self, "offsets", FrozenOffsets(frozen))

    @classmethod
    def to_earliest(cls) -> ResetStrategy:
        return cls(ResetKind.TO_EARLIEST)

    @classmethod
    def to_latest(cls) -> ResetStrategy:
        return cls(ResetKind.TO_LATEST)

    @classmethod
    def to_current(cls) -> ResetStrategy:
        return cls(ResetKind.TO_CURRENT)

    @classmethod
    def to_offset(cls, offset: int) -> ResetStrategy:
        return cls(ResetKind.TO_OFFSET, offset=offset)

    @classmethod
    def shift_by(cls, shift: int) -> ResetStrategy:
        return cls(ResetKind.SHIFT_BY, shift=shift)

    @classmethod
    def to_datetime(cls, timestamp_ms: int) -> ResetStrategy:
        """Use ``parse_datetime`` for the user's text first."""
        return cls(ResetKind.TO_DATETIME, timestamp_ms=timestamp_ms)

    @classmethod
    def by_duration(cls, duration: str) -> ResetStrategy:
        return cls(ResetKind.BY_DURATION, duration=duration)

    @classmethod
    def from_file(cls, offsets: Mapping[TopicPartition, int]) -> ResetStrategy:
        """Offsets for this one group; see ``parse_offsets_csv`` and ``offsets_for_group``."""
        return cls(ResetKind.FROM_FILE, offsets=offsets)

    @classmethod
    def restore(cls, offsets: Mapping[TopicPartition, int]) -> ResetStrategy:
        return cls(ResetKind.RESTORE, offsets=offsets)

    @property
    def duration_ns(self) -> int | None:
        return None if self.duration is None else parse_duration_nanos(self.duration)

    def describe(self) -> str:
        """The strategy as the tool's flag, for humans."""
        if self.kind is ResetKind.TO_OFFSET:
            return f"--to-offset {self.offset}"
        if self.kind is ResetKind.SHIFT_BY:
            return f"--shift-by {self.shift}"
        if self.kind is ResetKind.TO_DATETIME and self.timestamp_ms is not None:
            return f"--to-datetime {format_ms(self.timestamp_ms)}"
        if self.kind is ResetKind.BY_DURATION:
            return f"--by-duration {self.duration}"
        if self.kind is ResetKind.FROM_FILE:
            return f"--from-file ({len(self.offsets or {})} partitions)"
        if self.kind is ResetKind.RESTORE:
            return f"restore from backup ({len(self.offsets or {})} partitions)"
        return f"--{self.kind.value}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        name = _PARAM_OF.get(self.kind)
        if name == "offsets":
            out["offsets"] = offsets_to_list(self.offsets or {})
        elif name is not None:
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "strategy") -> ResetStrategy:
        d = as_dict(data, where)
        kind = as_enum(ResetKind, d.get("kind"), f"{where}.kind")
        name = _PARAM_OF.get(kind)
        only_keys(d, {"kind"} | ({name} if name else set()), where)
        if name is None:
            return cls(kind)
        raw = need(d, name, where)
        try:
            if name == "offsets":
                return cls(kind, offsets=offsets_from_list(raw, f"{where}.offsets"))
            if name == "duration":
                return cls(kind, duration=as_str(raw, f"{where}.duration"))
            value = as_int(raw, f"{where}.{name}")
            if name == "offset":
                return cls(kind, offset=value)
            if name == "shift":
                return cls(kind, shift=value)
            return cls(kind, timestamp_ms=value)
        except UsageError as exc:
            raise InvalidInputError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class ResetScope:
    """``--all-topics`` (partitions the group has committed offsets for) or ``--topic`` values."""

    all_topics: bool = False
    topics: tuple[TopicSelection, ...] = ()

    def __post_init__(self) -> None:
        # The tool accepts both and lets --all-topics win (getPartitionsToReset
        # tests allTopicsOpt first); opskit refuses the ambiguity.
        if self.all_topics and self.topics:
            raise UsageError("give either --all-topics or --topic, not both")
        if not self.all_topics and not self.topics:
            raise UsageError("one of --all-topics or --topic is required")

    @classmethod
    def of_all_topics(cls) -> ResetScope:
        return cls(all_topics=True)

    @classmethod
    def of_topics(cls, args: Iterable[str]) -> ResetScope:
        return cls(topics=tuple(parse_topic_scope(a) for a in args))

    def contains(self, tp: TopicPartition, committed: Mapping[TopicPartition, int]) -> bool:
        if self.all_topics:
            return tp in committed
        return any(
            s.topic == tp.topic and (s.partitions is None or tp.partition in s.partitions)
            for s in self.topics
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "all_topics": self.all_topics,
            "topics": [
                {
                    "topic": s.topic,
                    "partitions": None if s.partitions is None else list(s.partitions),
                }
                for s in self.topics
            ],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "scope") -> ResetScope:
        d = as_dict(data, where)
        only_keys(d, {"all_topics", "topics"}, where)
        all_topics = need(d, "all_topics", where)
        if not isinstance(all_topics, bool):
            raise InvalidInputError(f"{where}.all_topics must be true or false")
        selections: list[TopicSelection] = []
        for i, item in enumerate(as_list(need(d, "topics", where), f"{where}.topics")):
            at = f"{where}.topics[{i}]"
            s = as_dict(item, at)
            only_keys(s, {"topic", "partitions"}, at)
            topic = as_topic(need(s, "topic", at), f"{at}.topic")
            raw = need(s, "partitions", at)
            parts = None
            if raw is not None:
                parts = tuple(
                    sorted(
                        {
                            as_int(p, f"{at}.partitions[{j}]", 0, INT32_MAX)
                            for j, p in enumerate(as_list(raw, f"{at}.partitions"))
                        }
                    )
                )
            selections.append(TopicSelection(topic, parts))
        try:
            return cls(all_topics, tuple(selections))
        except UsageError as exc:
            raise InvalidInputError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class ResetRequest:
    """What the operator asked for one group. ``scope`` may be None only with
    ``--from-file`` (tool: "One scope must be specified unless you use
    '--from-file'"; ``getPartitionsToReset``) or a restore."""

    group_id: str
    strategy: ResetStrategy
    scope: ResetScope | None = None

    def __post_init__(self) -> None:
        if not self.group_id:
            raise UsageError("group id is empty")
        if self.scope is None and self.strategy.kind not in (
            ResetKind.FROM_FILE,
            ResetKind.RESTORE,
        ):
            raise UsageError("one of --all-topics or --topic is required")

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group_id,
            "strategy": self.strategy.to_dict(),
            "scope": None if self.scope is None else self.scope.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "request") -> ResetRequest:
        d = as_dict(data, where)
        only_keys(d, {"group", "strategy", "scope"}, where)
        scope_raw = need(d, "scope", where)
        try:
            return cls(
                as_str(need(d, "group", where), f"{where}.group"),
                ResetStrategy.from_dict(need(d, "strategy", where), f"{where}.strategy"),
                None if scope_raw is None else ResetScope.from_dict(scope_raw, f"{where}.scope"),
            )
        except UsageError as exc:
            raise InvalidInputError(f"{where}: {exc}") from None
