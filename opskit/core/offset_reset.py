"""Planning core of ``opskit offsets reset``: pure, no Kafka client, no clock.

Semantics follow Apache Kafka's ``kafka-consumer-groups.sh --reset-offsets``,
read from its source: Kafka 3.7 ``core/.../kafka/admin/ConsumerGroupCommand.scala``
(``ConsumerGroupService``) and Kafka 4.x
``tools/.../consumer/group/ConsumerGroupCommand.java`` plus
``tools/.../GroupOffsetsResetter.java`` (where 4.x moved the reset logic) and
``clients/.../common/utils/Utils.getDateTime``. Each rule below names the method
it was read from. Where opskit deliberately differs (it refuses instead of
guessing), the comment says so.

Adapter flow (the adapter does the I/O, this module decides):

1. describe the group -> ``GroupDescription``; list its committed offsets ->
   ``committed`` (only partitions that *have* a commit; drop null / -1 answers).
2. ``topics_to_describe(request, committed)`` -> describe those topics and read
   log start (``OffsetSpec.earliest``) and log end (``OffsetSpec.latest``, the
   high watermark) of **every** partition of them -> ``log_offsets``. A
   partition missing from ``log_offsets`` means "does not exist"; a partition
   without a leader is the adapter's error to raise, not a missing entry.
3. ``ts = timestamp_lookups_needed(request, now_ms)``; when not None, ask
   ListOffsets ``OffsetSpec.forTimestamp(ts)`` for each partition of
   ``partitions_in_scope(...)``; a ``-1`` (UNKNOWN_OFFSET) answer becomes None
   -> ``offsets_for_times``.
4. ``plan_offset_reset(...)`` -> ``ResetPlan``; show or save it.
5. Before applying: ``plan.raise_if_refused()``, re-read group and committed
   offsets, ``check_unchanged(plan, group_now, committed_now)``, save an
   ``OffsetsBackup.of_plan(...)``, then AlterConsumerGroupOffsets with
   ``plan.offsets_to_commit()``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from enum import Enum
from typing import Any, TypeVar

from opskit.core.models import GroupDescription, GroupState, PartitionOffsets, TopicPartition
from opskit.errors import InconsistentStateError, InvalidInputError, RefusedError, UsageError

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_NANOS_PER_MS = 1_000_000
_NANOS_PER_S = 1_000_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
_DIGITS = re.compile(r"[0-9]+")

_E = TypeVar("_E", bound=Enum)

PLAN_FORMAT = "opskit/offset-reset-plan"
BACKUP_FORMAT = "opskit/offsets-backup"
FORMAT_VERSION = 1


# --------------------------------------------------------------------------- values


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


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Kafka topic name (Kafka's ``Topic.validate``), or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > 249:
        return f"topic name is {len(name)} characters long (at most 249)"
    if not _TOPIC_CHARS.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_', '-'"
    return None


@dataclass(frozen=True)
class TopicSelection:
    """One ``--topic`` argument: a topic, and its partitions or None for all of them."""

    topic: str
    partitions: tuple[int, ...] | None = None

    def __str__(self) -> str:
        if self.partitions is None:
            return self.topic
        return f"{self.topic}:{','.join(str(p) for p in self.partitions)}"


def parse_topic_scope(arg: str) -> TopicSelection:
    """Parse one ``--topic`` value: ``topic`` or ``topic:0,1,2``.

    Tool fact (3.7 ``ConsumerGroupService.parseTopicPartitionsToReset`` /
    ``parseTopicsWithPartitions``; 4.x ``GroupOffsetsResetter`` same names): an
    argument containing ':' is split on ':' into exactly two parts, the second
    split on ',' with each item read by ``Integer.parseInt``; otherwise it names
    a whole topic (all its partitions, from DescribeTopics). Java's ``split``
    drops trailing empty strings, so ``t:0,1,`` is accepted and kept here.
    opskit is stricter where the tool would fail later or misread: topic names
    are validated, partitions must be plain non-negative ASCII integers.
    """
    if ":" not in arg:
        problem = topic_name_problem(arg)
        if problem:
            raise InvalidInputError(f"invalid --topic {arg!r}: {problem}")
        return TopicSelection(arg, None)
    topic, _, rest = arg.partition(":")
    items = rest.split(",")
    while items and items[-1] == "":
        items.pop()
    if ":" in rest or not items:
        raise InvalidInputError(
            f"invalid --topic {arg!r}: expected a topic name, or topic:partition,partition,..."
        )
    problem = topic_name_problem(topic)
    if problem:
        raise InvalidInputError(f"invalid --topic {arg!r}: {problem}")
    partitions: set[int] = set()
    for item in items:
        if not _DIGITS.fullmatch(item) or int(item) > _INT32_MAX:
            raise InvalidInputError(f"invalid partition {item!r} in --topic {arg!r}")
        partitions.add(int(item))
    return TopicSelection(topic, tuple(sorted(partitions)))


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE | re.ASCII,
)


def _checked_long(value: int, text: str) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidInputError(f"invalid duration {text!r}: overflow (java.time.Duration limits)")
    return value


def parse_duration_nanos(text: str) -> int:
    """Exact nanoseconds of an ISO-8601 duration, as ``java.time.Duration.parse``.

    Tool fact (3.7 ``ConsumerGroupService.prepareOffsetsToReset`` and 4.x
    ``GroupOffsetsResetter.resetByDuration`` call ``Duration.parse``): format
    ``[-+]PnDTnHnMn.nS``, case-insensitive, each number signed, a day is 24 h,
    no years/months/weeks, seconds may carry up to 9 fraction digits after '.'
    or ',', the fraction takes the sign of the seconds, a leading '-' negates
    the whole, "P", "PT" and "P1DT" are invalid, long overflow is an error.
    """
    m = _DURATION.fullmatch(text)
    groups = (2, 4, 5, 6)
    if m is None or (m.group(3) or "").upper() == "T" or all(m.group(g) is None for g in groups):
        raise InvalidInputError(
            f"invalid duration {text!r}: expected ISO-8601 PnDTnHnMn.nS, e.g. PT1H, P1DT12H, PT30M"
        )

    def part(group: int, seconds: int) -> int:
        raw = m.group(group)
        return 0 if raw is None else _checked_long(_checked_long(int(raw), text) * seconds, text)

    days, hours, minutes, secs = part(2, 86_400), part(4, 3_600), part(5, 60), part(6, 1)
    # Duration.create: addExact(days, addExact(hours, addExact(minutes, seconds)))
    total = _checked_long(
        days + _checked_long(hours + _checked_long(minutes + secs, text), text), text
    )
    fraction = m.group(7)
    nanos = int((fraction + "000000000")[:9]) if fraction else 0
    if m.group(6) is not None and m.group(6).startswith("-"):
        nanos = -nanos
    total_ns = total * _NANOS_PER_S + nanos
    if m.group(1) == "-":
        total_ns = -total_ns
    _checked_long(total_ns // _NANOS_PER_S, text)  # Duration seconds must fit a long
    return total_ns


def parse_duration(text: str) -> int:
    """Milliseconds of an ISO-8601 duration: ``Duration.parse(text).toMillis()``.

    ``toMillis`` truncates toward zero (PT0.0005S is 0, PT-0.0015S is -1) and
    fails when the milliseconds overflow a long.
    """
    ns = parse_duration_nanos(text)
    ms = ns // _NANOS_PER_MS if ns >= 0 else -((-ns) // _NANOS_PER_MS)
    if not _INT64_MIN <= ms <= _INT64_MAX:
        raise InvalidInputError(f"invalid duration {text!r}: overflow in milliseconds")
    return ms


_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]*))?(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?",
    re.ASCII,
)


def parse_datetime(text: str, default_tz: tzinfo) -> int:
    """Epoch milliseconds of a ``--to-datetime`` value ``YYYY-MM-DDTHH:mm:SS.sss[zone]``.

    Tool fact (``Utils.getDateTime``, used by 3.7 ``prepareOffsetsToReset`` and
    4.x ``GroupOffsetsResetter.resetToDateTime``): if the part after 'T' has no
    '+', '-' or 'Z', the tool appends "Z" -- **a value without a zone is UTC**,
    not the JVM's local time. So pass ``UTC`` as ``default_tz`` for
    parity; another zone is an explicit opskit choice. Zones accepted: ``Z``,
    ``+HH:MM`` (pattern ``...SSSXXX``), ``+HH`` (fallback pattern ``...SSSX``).
    Non-lenient ``SimpleDateFormat``, so Feb 30 or 24:00 are errors.

    Where the tool silently misreads, opskit refuses instead:
    ``+0530`` (the X fallback reads only "+05" and ignores "30"; ``+HH00`` is
    accepted since it means the same), fractions that are not exactly three
    digits (the tool reads ``.5`` as 5 ms), and instants before 1970 (a
    negative timestamp in ListOffsets means LATEST/EARLIEST/... to the broker).
    A local time that falls in a DST gap or overlap of ``default_tz`` is refused.
    """
    m = _DATETIME.fullmatch(text.strip())
    if m is None:
        raise InvalidInputError(
            f"invalid datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss with an optional "
            "zone Z, +HH:MM or +HH (e.g. 2024-05-01T12:00:00.000Z)"
        )
    fraction, zone = m.group(7), m.group(8)
    if fraction is None or len(fraction) != 3:
        raise InvalidInputError(
            f"invalid datetime {text!r}: give exactly three millisecond digits after the seconds "
            "(e.g. 12:00:00.000; kafka-consumer-groups reads '.5' as 5 ms)"
        )
    tz: tzinfo
    if zone is None:
        tz = default_tz
    elif zone == "Z":
        tz = UTC
    else:
        digits = zone[1:].replace(":", "")
        hh, mm = int(digits[:2]), int(digits[2:] or "0")
        if ":" not in zone and len(digits) == 4 and mm != 0:
            raise InvalidInputError(
                f"invalid datetime {text!r}: write the offset as {zone[:3]}:{digits[2:]} "
                f"(kafka-consumer-groups reads {zone} as {zone[:3]}:00)"
            )
        if hh > 23 or mm > 59:
            raise InvalidInputError(f"invalid datetime {text!r}: zone offset {zone} out of range")
        offset = timedelta(hours=hh, minutes=mm)
        tz = timezone(-offset if zone[0] == "-" else offset)
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    try:
        when = datetime(year, month, day, hour, minute, second, int(fraction) * 1000, tzinfo=tz)
    except ValueError as exc:
        raise InvalidInputError(f"invalid datetime {text!r}: {exc}") from None
    if zone is None:
        _check_local_time_exists(when, text, default_tz)
    millis = (when - _EPOCH) // timedelta(milliseconds=1)
    if millis < 0:
        raise InvalidInputError(f"invalid datetime {text!r}: before 1970-01-01T00:00:00Z")
    return millis


def _check_local_time_exists(when: datetime, text: str, zone: tzinfo) -> None:
    first, second = when.replace(fold=0), when.replace(fold=1)
    if first.utcoffset() == second.utcoffset():
        return
    wall = first.replace(tzinfo=None)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != wall:
        raise InvalidInputError(
            f"datetime {text!r} does not exist in {zone} (clocks skip it); give an explicit offset"
        )
    raise InvalidInputError(
        f"datetime {text!r} is ambiguous in {zone} (clocks pass it twice); give an explicit offset"
    )


def format_ms(millis: int) -> str:
    """Epoch milliseconds as ``YYYY-MM-DDTHH:mm:SS.sssZ`` (the tool's input format, in UTC)."""
    when = _EPOCH + timedelta(milliseconds=millis)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- CSV


def parse_offsets_csv(text: str) -> dict[str | None, dict[TopicPartition, int]]:
    """Parse a ``--from-file`` CSV: ``topic,partition,offset`` or ``group,topic,partition,offset``.

    Returns ``{None: offsets}`` for the three-column form and ``{group: offsets}``
    for the four-column form. Tool fact (3.7 ``ConsumerGroupService.parseResetPlan``,
    4.x ``GroupOffsetsResetter.parseResetPlan``): the text is split on "\\n", no
    header; the first line decides the form (it is three-column if it parses as
    ``topic,partition:int,offset:long``), values may be CSV-quoted (Jackson CSV).
    The three-column form is used only with exactly one ``--group``; otherwise
    every line is read as four columns (see ``offsets_for_group``).

    opskit is stricter or kinder where it is safe: blank lines, a trailing "\\r"
    and a BOM are ignored; one optional header line is accepted; all lines must
    have the same number of columns; duplicate partitions, negative offsets and
    invalid topic names are errors (the tool keeps the last duplicate and clamps
    negatives to the log start). Every error names the 1-based line number.
    """
    result: dict[str | None, dict[TopicPartition, int]] = {}
    first_line_of: dict[tuple[str | None, TopicPartition], int] = {}
    width = 0
    width_line = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        try:
            fields = next(csv.reader([line], strict=True))
        except csv.Error as exc:
            raise _line_error(number, f"malformed CSV ({exc})") from None
        if width == 0 and [f.strip().lower() for f in fields] in (_HEADER_NO_GROUP, _HEADER_GROUP):
            width, width_line = len(fields), number
            continue
        if width == 0:
            if len(fields) not in (3, 4):
                raise _line_error(
                    number,
                    f"expected 3 columns (topic,partition,offset) or 4 columns "
                    f"(group,topic,partition,offset), found {len(fields)}",
                )
            width, width_line = len(fields), number
        elif len(fields) != width:
            raise _line_error(
                number, f"expected {width} columns like line {width_line}, found {len(fields)}"
            )
        group: str | None = None
        if width == 4:
            group = fields[0]
            if not group:
                raise _line_error(number, "group is empty")
            fields = fields[1:]
        tp, offset = _parse_csv_row(number, fields)
        key = (group, tp)
        if key in first_line_of:
            owner = "" if group is None else f" of group {group!r}"
            raise _line_error(number, f"{tp}{owner} is already given on line {first_line_of[key]}")
        first_line_of[key] = number
        result.setdefault(group, {})[tp] = offset
    if not result:
        raise InvalidInputError("offsets file has no rows")
    return result


_HEADER_NO_GROUP = ["topic", "partition", "offset"]
_HEADER_GROUP = ["group", "topic", "partition", "offset"]


def _line_error(number: int, problem: str) -> InvalidInputError:
    return InvalidInputError(f"offsets file line {number}: {problem}")


def _parse_csv_row(number: int, fields: list[str]) -> tuple[TopicPartition, int]:
    topic, partition, offset = (f.strip() for f in fields)
    problem = topic_name_problem(topic)
    if problem:
        raise _line_error(number, problem)
    if not _DIGITS.fullmatch(partition) or int(partition) > _INT32_MAX:
        raise _line_error(number, f"partition {partition!r} is not a non-negative integer")
    if offset.startswith("-") and _DIGITS.fullmatch(offset[1:]):
        raise _line_error(number, f"offset {offset} is negative")
    if not _DIGITS.fullmatch(offset) or int(offset) > _INT64_MAX:
        raise _line_error(number, f"offset {offset!r} is not a non-negative integer")
    return TopicPartition(topic, int(partition)), int(offset)


def offsets_for_group(
    parsed: Mapping[str | None, Mapping[TopicPartition, int]], group_id: str, *, single_group: bool
) -> dict[TopicPartition, int]:
    """The rows of a parsed offsets file that apply to ``group_id``.

    ``single_group`` is True when exactly one ``--group`` was given. Tool fact
    (``parseResetPlan``): the three-column form applies to the single group; with
    several groups or ``--all-groups`` the tool reads lines as four columns
    (a three-column file is then misread and finds no rows), and a group with
    no rows gets "No reset plan for group ... found" and nothing is reset (exit 0).
    opskit raises instead.
    """
    if None in parsed:
        if not single_group:
            raise UsageError(
                "the offsets file has no group column (topic,partition,offset); "
                "use it with exactly one --group"
            )
        return dict(parsed[None])
    if group_id not in parsed:
        known = ", ".join(sorted(g for g in parsed if g is not None)[:5])
        raise InvalidInputError(
            f"the offsets file has no rows for group {group_id!r} (it has: {known})"
        )
    return dict(parsed[group_id])


def _csv_field(value: str) -> str:
    # Tool fact: export goes through Jackson's CsvMapper with default features
    # (CsvUtils.writerFor; CsvEncoder._mayNeedQuotes, loose check): a string is
    # quoted when longer than 24 characters (MAX_QUOTE_CHECK) or when it holds any
    # character below '-' (0x2D: space, '!', '"', '#', ..., ','); '"' is doubled.
    # Numbers are never quoted.
    if len(value) > 24 or any(ord(c) < 0x2D for c in value):
        return '"' + value.replace('"', '""') + '"'
    return value


def export_csv(plans: Sequence[ResetPlan], *, with_group: bool) -> str:
    """The ``--export`` CSV of several plans, one line per row, each ending in "\\n".

    Tool fact (3.7 ``ConsumerGroupService.exportOffsetsToCsv``, 4.x
    ``ConsumerGroupService.exportOffsetsToCsv``): ``topic,partition,offset``
    when exactly one ``--group`` was given, else ``group,topic,partition,offset``
    (also for ``--all-groups`` with a single group); no header; "\\n" after each
    record; the tool then ``println``s it, adding one more "\\n". Rows come in
    hash-map order there; here in topic, partition order. A refused group
    contributes no rows in the tool (its map is empty); ``to_csv`` exports what
    was planned, so callers export only non-refused plans for parity.
    """
    lines: list[str] = []
    for plan in plans:
        for row in plan.rows:
            cells = [_csv_field(row.tp.topic), str(row.tp.partition), str(row.target)]
            if with_group:
                cells.insert(0, _csv_field(plan.group_id))
            lines.append(",".join(cells) + "\n")
    return "".join(lines)


# --------------------------------------------------------------------------- request


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
            out["offsets"] = _offsets_to_list(self.offsets or {})
        elif name is not None:
            out[name] = getattr(self, name)
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "strategy") -> ResetStrategy:
        d = _as_dict(data, where)
        kind = _enum(ResetKind, d.get("kind"), f"{where}.kind")
        name = _PARAM_OF.get(kind)
        _only_keys(d, {"kind"} | ({name} if name else set()), where)
        if name is None:
            return cls(kind)
        raw = _need(d, name, where)
        try:
            if name == "offsets":
                return cls(kind, offsets=_offsets_from_list(raw, f"{where}.offsets"))
            if name == "duration":
                return cls(kind, duration=_str(raw, f"{where}.duration"))
            value = _int(raw, f"{where}.{name}")
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
        d = _as_dict(data, where)
        _only_keys(d, {"all_topics", "topics"}, where)
        all_topics = _need(d, "all_topics", where)
        if not isinstance(all_topics, bool):
            raise InvalidInputError(f"{where}.all_topics must be true or false")
        selections: list[TopicSelection] = []
        for i, item in enumerate(_list(_need(d, "topics", where), f"{where}.topics")):
            at = f"{where}.topics[{i}]"
            s = _as_dict(item, at)
            _only_keys(s, {"topic", "partitions"}, at)
            topic = _topic(_need(s, "topic", at), f"{at}.topic")
            raw = _need(s, "partitions", at)
            parts = None
            if raw is not None:
                parts = tuple(
                    sorted(
                        {
                            _int(p, f"{at}.partitions[{j}]", 0, _INT32_MAX)
                            for j, p in enumerate(_list(raw, f"{at}.partitions"))
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
        d = _as_dict(data, where)
        _only_keys(d, {"group", "strategy", "scope"}, where)
        scope_raw = _need(d, "scope", where)
        try:
            return cls(
                _str(_need(d, "group", where), f"{where}.group"),
                ResetStrategy.from_dict(_need(d, "strategy", where), f"{where}.strategy"),
                None if scope_raw is None else ResetScope.from_dict(scope_raw, f"{where}.scope"),
            )
        except UsageError as exc:
            raise InvalidInputError(f"{where}: {exc}") from None


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class ResetRow:
    """One partition of a plan. Counts are offset distances: an upper bound on
    records, since compaction and transaction markers leave gaps in offsets."""

    tp: TopicPartition
    #: committed offset when planned; None when the group had none
    current: int | None
    target: int
    log_start: int
    log_end: int
    #: the requested offset was outside [log_start, log_end] and was moved to the nearest end
    clamped: bool = False
    warning: str | None = None

    @property
    def changed(self) -> bool:
        return self.current != self.target

    @property
    def delta(self) -> int | None:
        return None if self.current is None else self.target - self.current

    @property
    def records_skipped(self) -> int | None:
        """Existing offsets between the current and a later target: never consumed."""
        if self.current is None:
            return None
        return max(0, self.target - max(self.current, self.log_start))

    @property
    def records_replayed(self) -> int | None:
        """Existing offsets between an earlier target and the current: consumed again."""
        if self.current is None:
            return None
        return max(0, min(self.current, self.log_end) - max(self.target, self.log_start))

    def to_dict(self) -> dict[str, Any]:
        return {
            "topic": self.tp.topic,
            "partition": self.tp.partition,
            "current_offset": self.current,
            "target_offset": self.target,
            "log_start_offset": self.log_start,
            "log_end_offset": self.log_end,
            "clamped": self.clamped,
            "warning": self.warning,
            # derived, for readers of the JSON; ignored by from_dict
            "delta": self.delta,
            "records_skipped": self.records_skipped,
            "records_replayed": self.records_replayed,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "row") -> ResetRow:
        d = _as_dict(data, where)
        derived = {"delta", "records_skipped", "records_replayed"}
        _only_keys(
            d,
            {
                "topic",
                "partition",
                "current_offset",
                "target_offset",
                "log_start_offset",
                "log_end_offset",
                "clamped",
                "warning",
            }
            | derived,
            where,
        )
        current = _need(d, "current_offset", where)
        clamped = _need(d, "clamped", where)
        warning = _need(d, "warning", where)
        if not isinstance(clamped, bool):
            raise InvalidInputError(f"{where}.clamped must be true or false")
        row = cls(
            TopicPartition(
                _topic(_need(d, "topic", where), f"{where}.topic"),
                _int(_need(d, "partition", where), f"{where}.partition", 0, _INT32_MAX),
            ),
            None if current is None else _int(current, f"{where}.current_offset", 0),
            _int(_need(d, "target_offset", where), f"{where}.target_offset", 0),
            _int(_need(d, "log_start_offset", where), f"{where}.log_start_offset", 0),
            _int(_need(d, "log_end_offset", where), f"{where}.log_end_offset", 0),
            clamped,
            None if warning is None else _str(warning, f"{where}.warning", allow_empty=True),
        )
        if row.log_start > row.log_end:
            raise InvalidInputError(
                f"{where}: log start {row.log_start} is past log end {row.log_end}"
            )
        return row


@dataclass(frozen=True)
class ResetPlan:
    group_id: str
    group_state: GroupState
    strategy: ResetStrategy
    scope: ResetScope | None
    rows: tuple[ResetRow, ...]
    #: every warning of the plan, row warnings included, prefixed by partition
    warnings: tuple[str, ...] = ()
    #: why the plan must not be applied (active group); None when it may be
    refusal: str | None = None
    planned_at_ms: int | None = None
    #: the timestamp looked up for --to-datetime / --by-duration
    target_timestamp_ms: int | None = None

    @property
    def is_refused(self) -> bool:
        return self.refusal is not None

    @property
    def is_noop(self) -> bool:
        """True when applying would change no committed offset (nor create one)."""
        return not any(row.changed for row in self.rows)

    @property
    def changed_rows(self) -> tuple[ResetRow, ...]:
        return tuple(row for row in self.rows if row.changed)

    @property
    def records_skipped(self) -> int:
        return sum(row.records_skipped or 0 for row in self.rows)

    @property
    def records_replayed(self) -> int:
        return sum(row.records_replayed or 0 for row in self.rows)

    def raise_if_refused(self) -> None:
        if self.refusal is not None:
            raise RefusedError(self.refusal)

    def offsets_to_commit(self) -> dict[TopicPartition, int]:
        """Every row's target, unchanged ones included, as the tool commits them
        (3.7 ``resetOffsets`` passes all prepared offsets to AlterConsumerGroupOffsets)."""
        return {row.tp: row.target for row in self.rows}

    def to_csv(self, with_group: bool = False) -> str:
        """This plan in the tool's ``--export`` format (see ``export_csv``)."""
        return export_csv([self], with_group=with_group)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "version": FORMAT_VERSION,
            "group": self.group_id,
            "group_state": self.group_state.value,
            "strategy": self.strategy.to_dict(),
            "scope": None if self.scope is None else self.scope.to_dict(),
            "planned_at_ms": self.planned_at_ms,
            "target_timestamp_ms": self.target_timestamp_ms,
            "refusal": self.refusal,
            "warnings": list(self.warnings),
            "rows": [row.to_dict() for row in self.rows],
            # derived, for readers of the JSON; ignored by from_dict
            "is_noop": self.is_noop,
            "records_skipped": self.records_skipped,
            "records_replayed": self.records_replayed,
        }

    @classmethod
    def from_dict(cls, data: Any) -> ResetPlan:
        """Strict: raises ``InvalidInputError`` naming the first bad field."""
        where = "plan"
        d = _as_dict(data, where)
        _check_format(d, PLAN_FORMAT, where)
        _only_keys(
            d,
            {
                "format",
                "version",
                "group",
                "group_state",
                "strategy",
                "scope",
                "planned_at_ms",
                "target_timestamp_ms",
                "refusal",
                "warnings",
                "rows",
                "is_noop",
                "records_skipped",
                "records_replayed",
            },
            where,
        )
        scope_raw = _need(d, "scope", where)
        refusal = _need(d, "refusal", where)
        planned = _need(d, "planned_at_ms", where)
        target_ts = _need(d, "target_timestamp_ms", where)
        rows = tuple(
            ResetRow.from_dict(r, f"{where}.rows[{i}]")
            for i, r in enumerate(_list(_need(d, "rows", where), f"{where}.rows"))
        )
        if len({r.tp for r in rows}) != len(rows):
            raise InvalidInputError(f"{where}.rows lists a partition twice")
        strategy = ResetStrategy.from_dict(_need(d, "strategy", where), f"{where}.strategy")
        if scope_raw is None and strategy.kind not in (ResetKind.FROM_FILE, ResetKind.RESTORE):
            raise InvalidInputError(f"{where}.scope is required for {strategy.kind.value}")
        return cls(
            _str(_need(d, "group", where), f"{where}.group"),
            _enum(GroupState, _need(d, "group_state", where), f"{where}.group_state"),
            strategy,
            None if scope_raw is None else ResetScope.from_dict(scope_raw, f"{where}.scope"),
            rows,
            tuple(
                _str(w, f"{where}.warnings[{i}]", allow_empty=True)
                for i, w in enumerate(_list(_need(d, "warnings", where), f"{where}.warnings"))
            ),
            None if refusal is None else _str(refusal, f"{where}.refusal"),
            None if planned is None else _int(planned, f"{where}.planned_at_ms", 0),
            None if target_ts is None else _int(target_ts, f"{where}.target_timestamp_ms", 0),
        )


def timestamp_lookups_needed(request: ResetRequest, now_ms: int) -> int | None:
    """The timestamp the adapter must look up with ListOffsets, or None.

    For it, the adapter asks ``OffsetSpec.forTimestamp(ts)`` for every partition
    of ``partitions_in_scope`` and passes the answers as ``offsets_for_times``
    (None where the broker answers -1: no record with timestamp >= ts).
    ``--by-duration``: ts = now - duration, as 3.7 ``prepareOffsetsToReset`` /
    4.x ``resetByDuration`` compute ``Instant.now().minus(duration).toEpochMilli()``
    (floor to the millisecond). A duration reaching before 1970 gives 0 here:
    the tool would send a negative timestamp, which the broker reads as a
    special value.
    """
    strategy = request.strategy
    if strategy.kind is ResetKind.TO_DATETIME:
        return strategy.timestamp_ms
    if strategy.kind is ResetKind.BY_DURATION:
        duration_ns = strategy.duration_ns or 0
        return max(0, (now_ms * _NANOS_PER_MS - duration_ns) // _NANOS_PER_MS)
    return None


def topics_to_describe(
    request: ResetRequest, committed: Mapping[TopicPartition, int]
) -> tuple[str, ...]:
    """Topics whose partitions and log offsets the adapter must read for ``request``."""
    strategy, scope = request.strategy, request.scope
    if strategy.offsets is not None:
        topics = {tp.topic for tp in strategy.offsets}
    elif scope is not None and scope.all_topics:
        topics = {tp.topic for tp in committed}
    else:
        topics = {s.topic for s in scope.topics} if scope is not None else set()
    return tuple(sorted(topics))


def partitions_in_scope(
    request: ResetRequest,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
) -> tuple[TopicPartition, ...]:
    """The partitions the plan will have rows for, sorted."""
    return _resolve_partitions(request, committed, log_offsets)[0]


def _resolve_partitions(
    request: ResetRequest,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
) -> tuple[tuple[TopicPartition, ...], list[str]]:
    strategy, scope = request.strategy, request.scope
    warnings: list[str] = []
    if strategy.offsets is not None:
        # Tool fact (prepareOffsetsToReset / resetFromFile): --from-file uses the
        # file's partitions for this group and ignores --topic/--all-topics.
        # opskit applies a given scope as a filter and says what it left out.
        wanted = sorted(strategy.offsets)
        if scope is not None:
            outside = [tp for tp in wanted if not scope.contains(tp, committed)]
            if outside:
                warnings.append(
                    f"{len(outside)} partitions of the file are outside the scope and left "
                    f"unchanged (e.g. {outside[0]})"
                )
            wanted = [tp for tp in wanted if scope.contains(tp, committed)]
        missing = [tp for tp in wanted if tp not in log_offsets]
        if missing and strategy.kind is ResetKind.FROM_FILE:
            raise InvalidInputError(
                f"the offsets file names partitions that do not exist: {_few(missing)}"
            )
        for tp in missing:
            warnings.append(f"{tp}: the partition no longer exists; its offset is not restored")
        return tuple(tp for tp in wanted if tp in log_offsets), warnings
    if scope is None:  # ResetRequest allows it only for FROM_FILE / RESTORE, handled above
        raise ValueError("request has no scope")
    if scope.all_topics:
        # Tool fact (getPartitionsToReset): --all-topics is the set of partitions
        # the group has committed offsets for -- not every partition of those topics.
        # 4.x fails the whole command if one of them no longer exists
        # (checkAllTopicPartitionsValid); opskit skips it with a warning.
        gone = sorted(tp for tp in committed if tp not in log_offsets)
        for tp in gone:
            warnings.append(
                f"{tp}: the group has an offset for it but the partition no longer exists; skipped"
            )
        return tuple(sorted(tp for tp in committed if tp in log_offsets)), warnings
    existing: dict[str, set[int]] = {}
    for tp in log_offsets:
        existing.setdefault(tp.topic, set()).add(tp.partition)
    chosen: set[TopicPartition] = set()
    for selection in scope.topics:
        have = existing.get(selection.topic)
        if not have:
            raise InvalidInputError(f"topic {selection.topic!r} does not exist")
        if selection.partitions is None:
            chosen.update(TopicPartition(selection.topic, p) for p in have)
            continue
        unknown = [p for p in selection.partitions if p not in have]
        if unknown:
            # 4.x checkAllTopicPartitionsValid: "The partitions ... do not exist"
            raise InvalidInputError(
                f"partition {selection.topic}:{unknown[0]} does not exist "
                f"(topic {selection.topic!r} has partitions {_ranges(sorted(have))})"
            )
        chosen.update(TopicPartition(selection.topic, p) for p in selection.partitions)
    return tuple(sorted(chosen)), warnings


def _refusal(group: GroupDescription) -> str | None:
    # Tool fact (3.7 ConsumerGroupService.resetOffsets; 4.x same): offsets are
    # reset only when the state is "Empty" or "Dead"; otherwise it prints
    # "Assignments can only be reset if the group ... is inactive" and resets
    # nothing -- with exit code 0. 4.x also resets a group the coordinator does
    # not know (GroupIdNotFoundException; the adapter reports it as Dead) and
    # refuses KIP-1071 streams groups.
    if group.protocol_type in ("streams", "share"):
        return (
            f"group {group.group_id!r} is a {group.protocol_type} group; reset it with the "
            f"{group.protocol_type} group tools"
        )
    if not group.state.is_inactive:
        count = len(group.members)
        members = f" with {count} member{'' if count == 1 else 's'}" if count else ""
        return (
            f"group {group.group_id!r} is {group.state.value}{members}; offsets can only be reset "
            "while it is Empty or Dead (stop its consumers first)"
        )
    return None


def _clamp(requested: int, log: PartitionOffsets) -> tuple[int, str | None]:
    # Tool fact (3.7 ConsumerGroupService.checkOffsetsRange; 4.x
    # GroupOffsetsResetter.checkOffsetsRange), used by --to-offset, --shift-by and
    # --from-file: above the log end -> log end; else below the log start ->
    # log start; each with a warning.
    if requested > log.log_end:
        return log.log_end, f"requested offset {requested} is past the log end; using {log.log_end}"
    if requested < log.log_start:
        return log.log_start, (
            f"requested offset {requested} is below the log start (deleted records); "
            f"using {log.log_start}"
        )
    return requested, None


def _check_log_offsets(log_offsets: Mapping[TopicPartition, PartitionOffsets]) -> None:
    for tp, log in log_offsets.items():
        if log.tp != tp:
            raise ValueError(f"log_offsets[{tp}] describes {log.tp}")
        if log.log_start < 0 or log.log_start > log.log_end:
            raise InconsistentStateError(
                f"{tp}: broker reported log start {log.log_start} and log end {log.log_end}"
            )


def plan_offset_reset(
    request: ResetRequest,
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
    offsets_for_times: Mapping[TopicPartition, int | None],
    now_ms: int,
) -> ResetPlan:
    """Decide the new committed offset of every partition in scope. Reads its inputs only."""
    if group.group_id != request.group_id:
        raise ValueError(
            f"request is for group {request.group_id!r}, description for {group.group_id!r}"
        )
    _check_log_offsets(log_offsets)
    partitions, warnings = _resolve_partitions(request, committed, log_offsets)
    strategy = request.strategy
    kind = strategy.kind
    target_ts = timestamp_lookups_needed(request, now_ms)
    if kind is ResetKind.BY_DURATION and target_ts == 0:
        warnings.append("the duration reaches before 1970; looking up timestamp 0 (the earliest)")
    no_commit = [tp for tp in partitions if tp not in committed]
    if kind is ResetKind.SHIFT_BY and no_commit:
        # Tool fact (3.7 prepareOffsetsToReset; 4.x resetByShiftBy):
        # IllegalArgumentException "Cannot shift offset for partition ... since
        # there is no current committed offset" -- the whole command fails.
        raise UsageError(
            f"cannot shift {_few(no_commit)}: the group has no committed offset there "
            "(use --to-earliest, --to-latest or --to-offset for those partitions)"
        )
    rows: list[ResetRow] = []
    for tp in partitions:
        log = log_offsets[tp]
        current = committed.get(tp)
        notes: list[str] = []
        requested: int | None = None
        target = 0
        if kind is ResetKind.TO_EARLIEST:
            target = log.log_start  # resetToEarliest: log start, no range check
        elif kind is ResetKind.TO_LATEST:
            target = log.log_end  # resetToLatest: high watermark, no range check
        elif kind is ResetKind.TO_CURRENT:
            # Tool fact (3.7 prepareOffsetsToReset, 4.x resetToCurrent): keeps the
            # committed offset as is (no range check); a partition with no commit
            # gets the log end.
            if current is None:
                target = log.log_end
                notes.append(f"no committed offset; using the log end {log.log_end}")
            else:
                target = current
                if current < log.log_start or current > log.log_end:
                    notes.append(
                        f"committed offset {current} is outside the log "
                        f"[{log.log_start}, {log.log_end}]; kept as is"
                    )
        elif kind is ResetKind.TO_OFFSET:
            requested = strategy.offset
        elif kind is ResetKind.SHIFT_BY:
            requested = committed[tp] + (strategy.shift or 0)
        elif kind in (ResetKind.TO_DATETIME, ResetKind.BY_DURATION):
            if tp not in offsets_for_times:
                raise ValueError(f"offsets_for_times has no answer for {tp}")
            found = offsets_for_times[tp]
            if found is None:
                # Tool fact (3.7 ConsumerGroupService.getLogTimestampOffsets; 4.x
                # GroupOffsetsResetter.getLogTimestampOffsets): UNKNOWN_OFFSET ->
                # "Partition ... is empty. Falling back to latest known offset."
                # and the log end is used.
                target = log.log_end
                notes.append(
                    f"no record at or after {format_ms(target_ts or 0)}; "
                    f"using the log end {log.log_end}"
                )
            else:
                # The tool does not range-check these; opskit clamps in case the
                # log moved between the two reads.
                requested = found
        else:  # FROM_FILE, RESTORE
            requested = (strategy.offsets or {})[tp]
        clamped = False
        if requested is not None:
            target, note = _clamp(requested, log)
            if note:
                clamped = True
                notes.append(note)
        rows.append(
            ResetRow(
                tp, current, target, log.log_start, log.log_end, clamped, "; ".join(notes) or None
            )
        )
        warnings.extend(f"{tp}: {note}" for note in notes)
    if not rows:
        warnings.append("nothing to reset: no partition is in scope")
    return ResetPlan(
        group_id=group.group_id,
        group_state=group.state,
        strategy=strategy,
        scope=request.scope,
        rows=tuple(rows),
        warnings=tuple(warnings),
        refusal=_refusal(group),
        planned_at_ms=now_ms,
        target_timestamp_ms=target_ts,
    )


def check_unchanged(
    plan: ResetPlan, group_now: GroupDescription, committed_now: Mapping[TopicPartition, int]
) -> None:
    """Compare-and-set guard, right before applying: raise ``RefusedError`` if the
    plan is refused, the group became active, or a committed offset in scope moved
    (or appeared) since planning."""
    if group_now.group_id != plan.group_id:
        raise ValueError(f"plan is for group {plan.group_id!r}, not {group_now.group_id!r}")
    plan.raise_if_refused()
    refusal = _refusal(group_now)
    if refusal is not None:
        raise RefusedError(f"since planning, {refusal}; nothing was changed")
    moved = [row for row in plan.rows if committed_now.get(row.tp) != row.current]
    if moved:
        first = moved[0]
        raise RefusedError(
            f"committed offsets of group {plan.group_id!r} changed since planning on "
            f"{len(moved)} partitions (e.g. {first.tp}: {_offset_text(first.current)} -> "
            f"{_offset_text(committed_now.get(first.tp))}); nothing was changed, plan again"
        )


# --------------------------------------------------------------------------- backup


@dataclass(frozen=True)
class OffsetsBackup:
    """Committed offsets saved before a reset, so it can be undone (``plan_restore``)."""

    group_id: str
    taken_at_ms: int
    offsets: Mapping[TopicPartition, int]
    reason: str
    cluster_id: str | None = None
    bootstrap: str | None = None
    #: partitions in the reset's scope that had no committed offset before it
    uncommitted: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        if any(off < 0 for off in self.offsets.values()):
            raise InvalidInputError("backup offsets must not be negative")
        object.__setattr__(self, "offsets", FrozenOffsets(self.offsets))
        object.__setattr__(self, "uncommitted", tuple(sorted(set(self.uncommitted))))

    @classmethod
    def of_plan(
        cls,
        plan: ResetPlan,
        *,
        taken_at_ms: int,
        reason: str,
        cluster_id: str | None = None,
        bootstrap: str | None = None,
    ) -> OffsetsBackup:
        """The offsets the plan will overwrite (valid once ``check_unchanged`` passed)."""
        return cls(
            group_id=plan.group_id,
            taken_at_ms=taken_at_ms,
            offsets={row.tp: row.current for row in plan.rows if row.current is not None},
            reason=reason,
            cluster_id=cluster_id,
            bootstrap=bootstrap,
            uncommitted=tuple(row.tp for row in plan.rows if row.current is None),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": BACKUP_FORMAT,
            "version": FORMAT_VERSION,
            "group": self.group_id,
            "taken_at_ms": self.taken_at_ms,
            "cluster_id": self.cluster_id,
            "bootstrap": self.bootstrap,
            "reason": self.reason,
            "offsets": _offsets_to_list(self.offsets),
            "uncommitted": [
                {"topic": tp.topic, "partition": tp.partition} for tp in self.uncommitted
            ],
        }

    @classmethod
    def from_dict(cls, data: Any) -> OffsetsBackup:
        """Strict: raises ``InvalidInputError`` naming the first bad field."""
        where = "backup"
        d = _as_dict(data, where)
        _check_format(d, BACKUP_FORMAT, where)
        _only_keys(
            d,
            {
                "format",
                "version",
                "group",
                "taken_at_ms",
                "cluster_id",
                "bootstrap",
                "reason",
                "offsets",
                "uncommitted",
            },
            where,
        )
        cluster_id = _need(d, "cluster_id", where)
        bootstrap = _need(d, "bootstrap", where)
        offsets = _offsets_from_list(_need(d, "offsets", where), f"{where}.offsets")
        uncommitted: list[TopicPartition] = []
        for i, item in enumerate(_list(_need(d, "uncommitted", where), f"{where}.uncommitted")):
            at = f"{where}.uncommitted[{i}]"
            u = _as_dict(item, at)
            _only_keys(u, {"topic", "partition"}, at)
            tp = TopicPartition(
                _topic(_need(u, "topic", at), f"{at}.topic"),
                _int(_need(u, "partition", at), f"{at}.partition", 0, _INT32_MAX),
            )
            if tp in offsets or tp in uncommitted:
                raise InvalidInputError(f"{at}: {tp} is listed twice")
            uncommitted.append(tp)
        return cls(
            group_id=_str(_need(d, "group", where), f"{where}.group"),
            taken_at_ms=_int(_need(d, "taken_at_ms", where), f"{where}.taken_at_ms", 0),
            offsets=offsets,
            reason=_str(_need(d, "reason", where), f"{where}.reason", allow_empty=True),
            cluster_id=None if cluster_id is None else _str(cluster_id, f"{where}.cluster_id"),
            bootstrap=None if bootstrap is None else _str(bootstrap, f"{where}.bootstrap"),
            uncommitted=tuple(uncommitted),
        )


def plan_restore(
    backup: OffsetsBackup,
    group: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_offsets: Mapping[TopicPartition, PartitionOffsets],
    now_ms: int | None = None,
) -> ResetPlan:
    """Plan putting back the offsets of ``backup``: clamped to the log like
    ``--from-file`` (retention may have deleted them since), partitions that no
    longer exist are skipped with a warning. Offsets cannot be un-committed: a
    partition that had none before the reset gets a warning (delete its offset
    with DeleteConsumerGroupOffsets if that matters)."""
    if backup.group_id != group.group_id:
        raise InvalidInputError(
            f"the backup is for group {backup.group_id!r}, not {group.group_id!r}"
        )
    if not backup.offsets and not backup.uncommitted:
        raise InvalidInputError("the backup holds no offsets")
    request = ResetRequest(group.group_id, ResetStrategy.restore(backup.offsets))
    plan = plan_offset_reset(request, group, committed, log_offsets, {}, now_ms or 0)
    extra = tuple(
        f"{tp}: had no committed offset before the reset; restore leaves it at "
        f"{_offset_text(committed.get(tp))}"
        for tp in backup.uncommitted
    )
    return ResetPlan(
        group_id=plan.group_id,
        group_state=plan.group_state,
        strategy=plan.strategy,
        scope=None,
        rows=plan.rows,
        warnings=plan.warnings + extra,
        refusal=plan.refusal,
        planned_at_ms=now_ms,
        target_timestamp_ms=None,
    )


# --------------------------------------------------------------------------- helpers


def _offset_text(offset: int | None) -> str:
    return "none" if offset is None else str(offset)


def _few(tps: Sequence[TopicPartition], limit: int = 5) -> str:
    shown = ", ".join(str(tp) for tp in tps[:limit])
    return shown + (f" and {len(tps) - limit} more" if len(tps) > limit else "")


def _ranges(values: Sequence[int]) -> str:
    if values and values == list(range(values[0], values[-1] + 1)):
        return f"{values[0]}-{values[-1]}" if len(values) > 1 else str(values[0])
    return ",".join(str(v) for v in values)


def _offsets_to_list(offsets: Mapping[TopicPartition, int]) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition, "offset": off}
        for tp, off in sorted(offsets.items())
    ]


def _offsets_from_list(data: Any, where: str) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for i, item in enumerate(_list(data, where)):
        at = f"{where}[{i}]"
        d = _as_dict(item, at)
        _only_keys(d, {"topic", "partition", "offset"}, at)
        tp = TopicPartition(
            _topic(_need(d, "topic", at), f"{at}.topic"),
            _int(_need(d, "partition", at), f"{at}.partition", 0, _INT32_MAX),
        )
        if tp in out:
            raise InvalidInputError(f"{at}: {tp} is listed twice")
        out[tp] = _int(_need(d, "offset", at), f"{at}.offset", 0)
    return out


def _as_dict(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise InvalidInputError(f"{where} must be a mapping, got {type(data).__name__}")
    return data


def _list(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise InvalidInputError(f"{where} must be a list, got {type(data).__name__}")
    return data


def _need(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise InvalidInputError(f"{where}.{key} is missing")
    return d[key]


def _only_keys(d: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise InvalidInputError(f"{where} has unknown field {unknown[0]!r}")


def _int(value: Any, where: str, minimum: int = _INT64_MIN, maximum: int = _INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{where} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise InvalidInputError(f"{where} must be between {minimum} and {maximum}, got {value}")
    return value


def _str(value: Any, where: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise InvalidInputError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _topic(value: Any, where: str) -> str:
    name = _str(value, where)
    problem = topic_name_problem(name)
    if problem:
        raise InvalidInputError(f"{where}: {problem}")
    return name


def _enum(enum: type[_E], value: Any, where: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(e.value) for e in enum)
        raise InvalidInputError(f"{where} must be one of {choices}, got {value!r}") from None


def _check_format(d: Mapping[str, Any], expected: str, where: str) -> None:
    if d.get("format") != expected:
        raise InvalidInputError(
            f"{where} is not an {expected} document (format={d.get('format')!r})"
        )
    if d.get("version") != FORMAT_VERSION:
        raise InvalidInputError(f"{where} has unsupported version {d.get('version')!r}")
