"""Strict readers of parsed documents (JSON or YAML): one line per error, naming the field.

The checks are the same for every document opskit reads back (a value has the type
asked for, an integer is within its bounds, a string is not empty, a field is
present); only the wording differs, kept as each document's readers had it:

- :data:`DOCUMENT` for opskit's own saved documents (offset reset plans and backups):
  ``backup.offsets[0].offset must be an integer, got '5'``;
- :data:`PLAN_FILE` for reassignment plan files (kafka-reassign-partitions' format):
  ``partitions[0].partition: expected an integer, got a string``.

Pure: no I/O. Every error is an :class:`~opskit.errors.InvalidInputError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opskit.errors import InvalidInputError

__all__ = ["DOCUMENT", "PLAN_FILE", "StrictReader", "describe_value"]


class StrictReader:
    """The checks; subclasses say how an error reads."""

    def as_dict(self, value: Any, where: str) -> dict[str, Any]:
        """``value`` as a mapping with string keys."""
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise InvalidInputError(self.wrong_type(value, where, "mapping"))
        return value

    def as_list(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise InvalidInputError(self.wrong_type(value, where, "list"))
        return value

    def need(self, d: Mapping[str, Any], key: str, where: str) -> Any:
        """``d[key]``; an error when it is missing."""
        if key not in d:
            raise InvalidInputError(self.missing(key, where))
        return d[key]

    def as_int(self, value: Any, where: str, lo: int, hi: int | None) -> int:
        """An integer (not a boolean) in ``lo..hi`` (``hi`` None: no upper bound)."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(self.wrong_type(value, where, "integer"))
        if value < lo or (hi is not None and value > hi):
            raise InvalidInputError(self.out_of_range(value, where, lo, hi))
        return value

    def as_str(self, value: Any, where: str, *, allow_empty: bool = False) -> str:
        if not isinstance(value, str):
            raise InvalidInputError(self.wrong_type(value, where, "string"))
        if not value and not allow_empty:
            raise InvalidInputError(self.empty(value, where))
        return value

    # ----- a mapping's fields: ``{where}.{key}`` in the errors
    def int_field(self, d: Mapping[str, Any], key: str, where: str, lo: int,
                  hi: int | None) -> int:
        return self.as_int(self.need(d, key, where), f"{where}.{key}", lo, hi)

    def optional_int_field(self, d: Mapping[str, Any], key: str, where: str, lo: int,
                           hi: int | None) -> int | None:
        """A field that must be present, null or an integer in ``lo..hi``."""
        value = self.need(d, key, where)
        return None if value is None else self.as_int(value, f"{where}.{key}", lo, hi)

    def str_field(self, d: Mapping[str, Any], key: str, where: str, *,
                  allow_empty: bool = False) -> str:
        return self.as_str(self.need(d, key, where), f"{where}.{key}", allow_empty=allow_empty)

    def optional_str_field(self, d: Mapping[str, Any], key: str, where: str, *,
                           allow_empty: bool = False) -> str | None:
        """A field that must be present, null or a string."""
        value = self.need(d, key, where)
        return None if value is None else self.as_str(value, f"{where}.{key}",
                                                      allow_empty=allow_empty)

    # ----- wording
    def wrong_type(self, value: Any, where: str, wanted: str) -> str:
        raise NotImplementedError

    def missing(self, key: str, where: str) -> str:
        raise NotImplementedError

    def out_of_range(self, value: int, where: str, lo: int, hi: int | None) -> str:
        raise NotImplementedError

    def empty(self, value: str, where: str) -> str:
        raise NotImplementedError


class _DocumentWording(StrictReader):
    def wrong_type(self, value: Any, where: str, wanted: str) -> str:
        if wanted in ("mapping", "list"):
            return f"{where} must be a {wanted}, got {type(value).__name__}"
        if wanted == "string":
            return self.empty(value, where)
        return f"{where} must be an {wanted}, got {value!r}"

    def missing(self, key: str, where: str) -> str:
        return f"{where}.{key} is missing"

    def out_of_range(self, value: int, where: str, lo: int, hi: int | None) -> str:
        return f"{where} must be between {lo} and {hi}, got {value}"

    def empty(self, value: Any, where: str) -> str:
        return f"{where} must be a non-empty string, got {value!r}"


class _PlanFileWording(StrictReader):
    _NAMES: Final = {"mapping": "an object", "list": "a list", "integer": "an integer",
              "string": "a string"}

    def wrong_type(self, value: Any, where: str, wanted: str) -> str:
        return f"{where}: expected {self._NAMES[wanted]}, got {describe_value(value)}"

    def missing(self, key: str, where: str) -> str:
        return f"{where}: missing field {key!r}"

    def out_of_range(self, value: int, where: str, lo: int, hi: int | None) -> str:
        return f"{where}: {value} is below {lo}" if value < lo else f"{where}: {value} is above {hi}"

    def empty(self, value: str, where: str) -> str:
        return f"{where}: is empty"


#: opskit's saved documents (offset reset plans, backups, requests)
DOCUMENT: StrictReader = _DocumentWording()
#: reassignment plan files
PLAN_FILE: StrictReader = _PlanFileWording()


def describe_value(v: Any) -> str:
    """What a JSON value is, for an error: ``null``, ``a string``, ``the number 1.5``..."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__
