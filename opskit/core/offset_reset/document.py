"""Strict reading of saved plan and backup documents: every error names the field."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

from opskit.core.models import TopicPartition
from opskit.core.offset_reset.topics import INT32_MAX, INT64_MAX, INT64_MIN, topic_name_problem
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
        tp = TopicPartition(
            as_topic(need(d, "topic", at), f"{at}.topic"),
            as_int(need(d, "partition", at), f"{at}.partition", 0, INT32_MAX),
        )
        if tp in out:
            raise InvalidInputError(f"{at}: {tp} is listed twice")
        out[tp] = as_int(need(d, "offset", at), f"{at}.offset", 0)
    return out


def as_dict(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise InvalidInputError(f"{where} must be a mapping, got {type(data).__name__}")
    return data


def as_list(data: Any, where: str) -> list[Any]:
    if not isinstance(data, list):
        raise InvalidInputError(f"{where} must be a list, got {type(data).__name__}")
    return data


def need(d: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise InvalidInputError(f"{where}.{key} is missing")
    return d[key]


def only_keys(d: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(d) - allowed)
    if unknown:
        raise InvalidInputError(f"{where} has unknown field {unknown[0]!r}")


def as_int(value: Any, where: str, minimum: int = INT64_MIN, maximum: int = INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{where} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        raise InvalidInputError(f"{where} must be between {minimum} and {maximum}, got {value}")
    return value


def as_str(value: Any, where: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not allow_empty):
        raise InvalidInputError(f"{where} must be a non-empty string, got {value!r}")
    return value


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
