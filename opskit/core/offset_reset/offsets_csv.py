"""Offsets files: ``--from-file`` CSV in, ``--export`` CSV out, as Kafka's reset tool."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from typing import Protocol

from opskit.core.models import TopicPartition
from opskit.core.offset_reset.topics import DIGITS, INT32_MAX, INT64_MAX, topic_name_problem
from opskit.errors import InvalidInputError, UsageError


class _ExportRow(Protocol):
    @property
    def tp(self) -> TopicPartition: ...
    @property
    def target(self) -> int: ...


class ExportablePlan(Protocol):
    """What the export needs of a plan (``opskit.core.offset_reset.plan.ResetPlan``, which
    imports this module: named by shape, so the two do not import each other)."""

    @property
    def group_id(self) -> str: ...
    @property
    def rows(self) -> Sequence[_ExportRow]: ...


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
    if not DIGITS.fullmatch(partition) or int(partition) > INT32_MAX:
        raise _line_error(number, f"partition {partition!r} is not a non-negative integer")
    if offset.startswith("-") and DIGITS.fullmatch(offset[1:]):
        raise _line_error(number, f"offset {offset} is negative")
    if not DIGITS.fullmatch(offset) or int(offset) > INT64_MAX:
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


def export_csv(plans: Sequence[ExportablePlan], *, with_group: bool) -> str:
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
