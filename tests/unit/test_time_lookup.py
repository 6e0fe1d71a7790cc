"""Checking a broker's offset-by-time answer against the records around it."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opskit.core.models import TopicPartition
from opskit.core.time_lookup import SeenRecord, contradiction, positions_to_read

TP = TopicPartition("t", 0)


def _check(times: list[int], start: int, ts: int, answer: int | None) -> str | None:
    """The check as the adapter runs it, records at offsets start.. with ``times``."""
    end = start + len(times)

    def rec(off: int) -> SeenRecord | None:
        return SeenRecord(off, times[off - start]) if start <= off < end else None

    wanted = positions_to_read(answer, start, end)
    at = end if answer is None else answer
    return contradiction(TP, ts, answer, start, end, rec(at) if at in wanted else None,
                         rec(at - 1) if at - 1 in wanted else None)


def _kafka_answer(times: list[int], start: int, ts: int) -> int | None:
    """Kafka: the first offset whose record is at or after ts, else none."""
    return next((start + i for i, t in enumerate(times) if t >= ts), None)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, 50), max_size=12), st.integers(0, 5), st.integers(-5, 60))
def test_kafkas_answers_always_pass(times: list[int], start: int, ts: int) -> None:
    assert _check(times, start, ts, _kafka_answer(times, start, ts)) is None


def test_the_gateways_zero_is_refused_when_records_are_older() -> None:
    times = [10, 20, 30]
    assert _check(times, 0, 5, 0) is None  # every record is newer: 0 is right
    why = _check(times, 0, 25, 0)  # Kafka: 2
    assert why is not None and "record at offset 0 is older" in why
    why = _check(times, 0, 99, 0)  # Kafka: none (the log end)
    assert why is not None and "older" in why


def test_heraclitus_log_end_is_refused_when_records_are_newer() -> None:
    times = [10, 20, 30]
    assert _check(times, 0, 99, 3) is None  # nothing that new: the end is right
    why = _check(times, 0, 15, 3)  # Kafka: 1
    assert why is not None and "offset 2 before it is already that new" in why
    assert _check(times, 0, 15, None) is not None  # "none" while record 2 is newer


def test_outside_the_log_and_what_settles_nothing() -> None:
    assert "outside the log" in (contradiction(TP, 5, 7, 0, 3, None, None) or "")
    assert "outside the log" in (contradiction(TP, 5, 1, 2, 3, None, None) or "")
    # unread records, records without a timestamp and offset gaps disprove nothing
    assert contradiction(TP, 25, 0, 0, 3, None, None) is None
    assert contradiction(TP, 25, 0, 0, 3, SeenRecord(0, -1), None) is None
    assert contradiction(TP, 25, 2, 0, 3, None, SeenRecord(2, 99)) is None  # not offset 1
    assert positions_to_read(None, 4, 4) == ()
    assert positions_to_read(0, 0, 3) == (0,)
    assert positions_to_read(None, 0, 3) == (2,)
