"""The shared strict readers: the same checks, each document's own wording."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from opskit.core.strict_read import DOCUMENT, PLAN_FILE, StrictReader
from opskit.errors import InvalidInputError

Check = Callable[[StrictReader], Any]

CASES: list[tuple[Check, str, str]] = [
    # (the call, the saved-document wording, the plan-file wording)
    (lambda r: r.as_dict([1], "x"), "x must be a mapping, got list", "x: expected an object, got a list"),
    (lambda r: r.as_dict({1: 2}, "x"), "x must be a mapping, got dict",
     "x: expected an object, got an object"),
    (lambda r: r.as_list({}, "x"), "x must be a list, got dict", "x: expected a list, got an object"),
    (lambda r: r.need({}, "k", "x"), "x.k is missing", "x: missing field 'k'"),
    (lambda r: r.as_int(True, "x", 0, None), "x must be an integer, got True",
     "x: expected an integer, got a boolean"),
    (lambda r: r.as_int(1.5, "x", 0, None), "x must be an integer, got 1.5",
     "x: expected an integer, got the number 1.5"),
    (lambda r: r.as_int(-1, "x", 0, 9), "x must be between 0 and 9, got -1", "x: -1 is below 0"),
    (lambda r: r.as_int(10, "x", 0, 9), "x must be between 0 and 9, got 10", "x: 10 is above 9"),
    (lambda r: r.as_str(None, "x"), "x must be a non-empty string, got None",
     "x: expected a string, got null"),
    (lambda r: r.as_str("", "x"), "x must be a non-empty string, got ''", "x: is empty"),
    (lambda r: r.int_field({"k": "1"}, "k", "x", 0, None), "x.k must be an integer, got '1'",
     "x.k: expected an integer, got a string"),
    (lambda r: r.optional_int_field({}, "k", "x", 0, None), "x.k is missing",
     "x: missing field 'k'"),
    (lambda r: r.optional_str_field({"k": 3}, "k", "x"), "x.k must be a non-empty string, got 3",
     "x.k: expected a string, got the number 3"),
]


@pytest.mark.parametrize(("call", "document", "plan_file"), CASES)
def test_each_check_fails_with_its_documents_wording(call: Check, document: str,
                                                     plan_file: str) -> None:
    for reader, message in ((DOCUMENT, document), (PLAN_FILE, plan_file)):
        with pytest.raises(InvalidInputError) as e:
            call(reader)
        assert str(e.value) == message


@pytest.mark.parametrize("reader", [DOCUMENT, PLAN_FILE])
def test_good_values_come_back_unchanged(reader: StrictReader) -> None:
    d = {"n": 5, "s": "", "none": None}
    assert reader.as_dict(d, "x") is d
    assert reader.int_field(d, "n", "x", 0, 5) == 5
    assert reader.as_int(-3, "x", -3, None) == -3
    assert reader.str_field(d, "s", "x", allow_empty=True) == ""
    assert reader.optional_int_field(d, "none", "x", 0, None) is None
    assert reader.optional_str_field(d, "none", "x") is None
    assert reader.as_list([1], "x") == [1]
