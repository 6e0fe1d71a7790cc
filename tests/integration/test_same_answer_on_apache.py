"""Two Apache Kafka defects of issue 21 (real Kafka 3.7): one question, one answer.

* ``lag -g C -o json`` and ``lag --all-groups -o json`` gave different retention fields
  for the same partition (a partition a live member of C owns and C never committed):
  the topic configs were read only for topics some group of the report had committed
  on, so C alone had none (basis null), and with another group's commit there it had
  them (basis "unknown", a note).
* ``offsets reset`` read record times with librdkafka's default read_committed while
  ``lag`` reads read_uncommitted: behind an open transaction the reset found no record
  (waiting out its timeout twice, then "?"), where lag showed the record's time. Both
  now read read_uncommitted (opskit.adapters.kafka.record_times.ISOLATION_LEVEL).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer
from helpers import ActiveMember, commit, create_topic, produce, run_cli

RETENTION = ("retention_time_left_seconds", "retention_basis", "retention_eligible_now",
             "retention_bytes_headroom", "retention_notes", "partition_size_bytes")


def _rows(data: dict[str, Any], group: str) -> dict[int, dict[str, Any]]:
    [g] = [g for g in data["groups"] if g["group"] == group]
    return {p["partition"]: {k: p[k] for k in RETENTION} for p in g["partitions"]}


def test_retention_fields_do_not_depend_on_the_other_groups(kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = kafka.bootstrap
    t, live, other = f"ret_{uniq}", f"ret-live-{uniq}", f"ret-other-{uniq}"
    create_topic(bs, t, 2, config={"retention.ms": "3600000", "retention.bytes": "10000000"})
    produce(bs, t, {0: 10, 1: 10})
    commit(bs, other, {(t, 0): 3, (t, 1): 4})  # another group brings the topic into --all-groups
    with ActiveMember(bs, live, [t]):  # owns both partitions, never commits
        alone = run_cli("lag", "-g", live, "-o", "json", "-b", bs)
        every = run_cli("lag", "--all-groups", "-o", "json", "-b", bs)
    assert alone.code == 0 and every.code == 0, (alone.err, every.err)
    a, e = _rows(alone.json(), live), _rows(every.json(), live)
    assert a == e, (a, e)
    assert a[0]["retention_basis"] is not None, a  # the topic's configs were read


def test_reset_reads_record_times_as_lag_does_behind_an_open_transaction(kafka, uniq) -> None:  # type: ignore[no-untyped-def]
    bs = kafka.bootstrap
    t, g = f"txreset_{uniq}", f"txreset-g-{uniq}"
    create_topic(bs, t, 1)
    produce(bs, t, {0: 5})
    commit(bs, g, {(t, 0): 2})
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"txreset-{uniq}"})
    p.init_transactions(30)
    p.begin_transaction()
    for _ in range(3):  # offsets 5..7, in a transaction left open during the test
        p.produce(t, value=b"open", partition=0)
    assert p.flush(30) == 0
    try:
        lag = run_cli("lag", "-g", g, "-o", "json", "-b", bs)
        reset = run_cli("offsets", "reset", "--group", g, "--topic", t, "--to-latest",
                        "-o", "json", "-b", bs)
    finally:
        p.abort_transaction(30)
    assert lag.code == 0, lag.err
    [lp] = lag.json()["groups"][0]["partitions"]
    assert lp["log_end_offset"] == 8 and lp["oldest_unconsumed_timestamp_ms"] is not None, lp
    assert reset.code == 0, reset.err
    [row] = reset.json()["groups"][0]["rows"]
    assert (row["current_offset"], row["target_offset"]) == (2, 8), row
    # the first record skipped is lag's oldest unconsumed one: the same time; the last one
    # skipped is inside the open transaction (read_committed found neither: both None)
    assert row["first_record_ts_ms"] == lp["oldest_unconsumed_timestamp_ms"], (row, lp)
    assert row["last_record_ts_ms"] is not None, row
