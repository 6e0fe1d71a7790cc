"""Strict reading of saved plan and backup documents: every error names the field."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

from opskit.core.models import TopicPartition
from opskit.core.offset_reset.topics import INT32_MAX, INT64_MAX, INT64_MIN, topic_name_problem
from opskit.core.strict_read import DOCUMENT
from opskit.errors import InvalidInputError

_E = TypeVar("_E", bound=Enum)

FORMAT_VERSION = 1


def offsets_to_list(offsets: Mapping[TopicPartition, int]) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition, "offset": off}
        for tp, off in sorted(offsets.items())
    ]


def offsets_from_list(data: Any, where: str) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for i, item in enumerate(as_list(data, where)):
        at = f"{where}[{i}]"
        d = as_dict(item, at)
        only_keys(d, {"topic", "partition", "offset"}, at)
        tp = topic_partition(d, at)
        if tp in out:
            raise InvalidInputError(f"{at}: {tp} is listed twice")
        out[tp] = int_field(d, "offset", at)
    return out


def topic_partition(d: Mapping[str, Any], where: str) -> TopicPartition:
    """The ``topic`` and ``partition`` fields of ``d``."""
    return TopicPartition(as_topic(need(d, "topic", where), f"{where}.topic"),
                          int_field(d, "partition", where, 0, INT32_MAX))


def read_document(data: Any, expected_format: str, where: str, fields: set[str]) -> dict[str, Any]:
    """A saved document's top level: a mapping of ``expected_format`` (and this opskit's
    version) with no field but ``fields``."""
    d = as_dict(data, where)
    check_format(d, expected_format, where)
    only_keys(d, fields, where)
    return d


as_dict = DOCUMENT.as_dict
as_list = DOCUMENT.as_list
need = DOCUMENT.need


def only_keys(d: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise InvalidInputError(f"{where} has unknown field {unknown[0]!r}")


def as_int(value: Any, where: str, minimum: int = INT64_MIN, maximum: int = INT64_MAX) -> int:
    return DOCUMENT.as_int(value, where, minimum, maximum)


as_str = DOCUMENT.as_str
str_field = DOCUMENT.str_field
optional_str_field = DOCUMENT.optional_str_field


def int_field(d: Mapping[str, Any], key: str, where: str, minimum: int = 0,
              maximum: int = INT64_MAX) -> int:
    return DOCUMENT.int_field(d, key, where, minimum, maximum)


def optional_int_field(d: Mapping[str, Any], key: str, where: str, minimum: int = 0,
                       maximum: int = INT64_MAX) -> int | None:
    return DOCUMENT.optional_int_field(d, key, where, minimum, maximum)


def as_topic(value: Any, where: str) -> str:
    name = as_str(value, where)
    problem = topic_name_problem(name)
    if problem:
        raise InvalidInputError(f"{where}: {problem}")
    return name


def as_enum(enum: type[_E], value: Any, where: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(str(e.value) for e in enum)
        raise InvalidInputError(f"{where} must be one of {choices}, got {value!r}") from None


def check_format(d: Mapping[str, Any], expected: str, where: str) -> None:
    if d.get("format") != expected:
        raise InvalidInputError(
            f"{where} is not an {expected} document (format={d.get('format')!r})"
        )
    if d.get("version") != FORMAT_VERSION:
        raise InvalidInputError(f"{where} has unsupported version {d.get('version')!r}")
