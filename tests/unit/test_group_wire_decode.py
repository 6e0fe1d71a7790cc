"""Decoding consumer-protocol member assignments (the bytes DescribeGroups returns)."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from opskit.adapters.kafka.protocol.groups import decode_assignment
from opskit.core.models import TopicPartition


def _encode(version: int, topics: dict[str, list[int]], user_data: bytes | None) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for t, parts in topics.items():
        b = t.encode()
        out += struct.pack(">h", len(b)) + b + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    out += struct.pack(">i", -1) if user_data is None else struct.pack(">i", len(user_data)) + user_data
    return out


def test_empty_and_missing_assignments() -> None:
    assert decode_assignment(b"") == ()
    assert decode_assignment(None) == ()
    assert decode_assignment(_encode(0, {}, None)) == ()


@given(
    st.integers(0, 3),
    st.dictionaries(st.text("abcxyz_.-", min_size=1, max_size=20),
                    st.lists(st.integers(0, 10_000), unique=True, max_size=20), max_size=6),
    st.one_of(st.none(), st.binary(max_size=30)),
)
def test_round_trip(version: int, topics: dict[str, list[int]], user_data: bytes | None) -> None:
    want = tuple(sorted(TopicPartition(t, p) for t, ps in topics.items() for p in ps))
    assert decode_assignment(_encode(version, topics, user_data)) == want
