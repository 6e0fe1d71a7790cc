"""Which --group-allow patterns name one group (read on brokers that cannot list groups)."""

from __future__ import annotations

import pytest

from opskit.exporter.options import literal_name


@pytest.mark.parametrize(("pattern", "name"), [
    ("orders", "orders"),
    (r"analytics\.ingest", "analytics.ingest"),
    ("a.b", "a.b"),
    ("billing-v2_x", "billing-v2_x"),
    ("orders-.*", None),
    ("a|b", None),
    ("(a)", None),
    ("x+", None),
    ("", None),
    (r"x\d", None),
])
def test_literal_name(pattern: str, name: str | None) -> None:
    assert literal_name(pattern) == name
