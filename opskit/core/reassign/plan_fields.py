"""The field checks a reassignment plan file is read with (pure): strict JSON (no duplicate
keys, no NaN), and typed fields that name where a bad value is (``opskit.goal.brokers[2]``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opskit.core.strict_read import PLAN_FILE, describe_value
from opskit.errors import InvalidInputError

_INT32_MAX = 2**31 - 1


def _no_duplicates(pairs: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise InvalidInputError(f"not valid JSON: key {k!r} appears twice in one object")
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise InvalidInputError(f"not valid JSON: {name} is not a number")


_obj = PLAN_FILE.as_dict
_list = PLAN_FILE.as_list
_field = PLAN_FILE.need


def _int(d: Mapping[str, Any], key: str, where: str, lo: int = 0, hi: int | None = None) -> int:
    return PLAN_FILE.int_field(d, key, where, lo, hi)


def _optional_count(d: Mapping[str, Any], key: str, where: str) -> int | None:
    return None if d.get(key) is None else _int(d, key, where, lo=0)


def _int_item(v: Any, where: str, lo: int = 0, hi: int | None = None) -> int:
    return PLAN_FILE.as_int(v, where, lo, hi)


_str_item = PLAN_FILE.as_str


def _bool(d: Mapping[str, Any], key: str, where: str) -> bool:
    v = _field(d, key, where)
    if not isinstance(v, bool):
        raise InvalidInputError(f"{where}.{key}: expected true or false, got {describe_value(v)}")
    return v


def _id_list(v: Any, where: str, allow_empty: bool) -> tuple[int, ...]:
    ids = tuple(_int_item(x, f"{where}[{i}]", 0, _INT32_MAX) for i, x in enumerate(_list(v, where)))
    if not ids and not allow_empty:
        raise InvalidInputError(f"{where}: is empty")
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise InvalidInputError(f"{where}: broker {dup} is listed twice")
    return ids


def _broker_bytes(v: Any, where: str) -> dict[int, int]:
    d = _obj(v, where)
    out: dict[int, int] = {}
    for k, x in d.items():
        if not (k.isascii() and k.isdigit()):
            raise InvalidInputError(f"{where}: key {k!r} is not a broker id")
        out[int(k)] = _int_item(x, f"{where}.{k}", 0)
    return out
