"""The replay job's envelope parsing and validation (spark_jobs/lag_replay.py,
``parse_envelopes``), on a local Spark session in this process: no Kafka needed.

Each value below is what a record's bytes could be; the test names the reason it
must get (None: valid) and, for valid ones, the event time. It covers what the job
decides in the JVM: ``from_json`` with a fixed schema (malformed JSON, arrays,
scalars, empty text and ``null`` are "not a JSON object"; ``data`` kept as JSON
text) and the timestamp fast path for HIP-30's ``...Z`` form (texts Spark refuses
with a zone must stay refused).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "spark_jobs"))

OK: dict[str, Any] = {"schema": "hanzo.stream.v1", "id": "e1", "type": "t.x", "source": "s",
                      "timestamp": "2026-11-18T10:00:00.123Z", "team_id": "t1", "org_id": None,
                      "data": {"a": 1, "b": {"c": "x\u00e9"}, "l": [1, "2", None]}}


def _with(**kw: Any) -> str:
    return json.dumps({**OK, **kw})


def _us(text: str) -> int:
    dt = datetime.fromisoformat(text)
    dt = dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt
    return int(dt.timestamp()) * 1_000_000 + dt.microsecond


NOT_OBJECT = "not a JSON object"
#: value -> (reason, event time in microseconds for valid ones)
CASES: list[tuple[str | None, str | None, int | None]] = [
    (json.dumps(OK), None, _us("2026-11-18T10:00:00.123+00:00")),
    ("  " + json.dumps(OK), None, _us("2026-11-18T10:00:00.123+00:00")),
    ('{"schema": "hanzo.stream.v1", "id": "evt_broken"', NOT_OBJECT, None),
    ("[1, 2]", NOT_OBJECT, None),
    ("5", NOT_OBJECT, None),
    ('"text"', NOT_OBJECT, None),
    ("null", NOT_OBJECT, None),
    ("", NOT_OBJECT, None),
    ('{"a":[1,2}', NOT_OBJECT, None),
    (None, "empty value", None),
    ("{}", "unknown schema (none)", None),
    ('{"id": "x"}', "unknown schema (none)", None),
    (_with(schema="other"), "unknown schema other", None),
    (json.dumps({k: v for k, v in OK.items() if k != "type"}), "missing field 'type'", None),
    (_with(type=""), "missing field 'type'", None),
    (_with(id=123), None, _us("2026-11-18T10:00:00.123+00:00")),  # a number id is its text
    (_with(timestamp="yesterday"), "bad timestamp yesterday", None),
    # the HIP-30 form (fast path) and its neighbours (Spark's full parse)
    (_with(timestamp="2026-11-18T10:00:00Z"), None, _us("2026-11-18T10:00:00+00:00")),
    (_with(timestamp="2026-11-18 10:00:00.123456Z"), None, _us("2026-11-18T10:00:00.123456+00:00")),
    (_with(timestamp="2024-02-29T23:59:59.999Z"), None, _us("2024-02-29T23:59:59.999+00:00")),
    (_with(timestamp="2026-11-18T10:00:00+02:00"), None, _us("2026-11-18T08:00:00+00:00")),
    (_with(timestamp="2026-11-18T10:00:00"), None, _us("2026-11-18T10:00:00+00:00")),
    (_with(timestamp="2026-11-18T10:00Z"), "bad timestamp 2026-11-18T10:00Z", None),
    (_with(timestamp="2026-11-18T10:00:00ZZ"), "bad timestamp 2026-11-18T10:00:00ZZ", None),
    (_with(timestamp="2026-11-18T25:00:00Z"), "bad timestamp 2026-11-18T25:00:00Z", None),
    (_with(timestamp="2026-11-18T10:00:00.123+01:00Z"),
     "bad timestamp 2026-11-18T10:00:00.123+01:00Z", None),
]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("test-replay-parse")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        yield session
    finally:
        session.stop()


def test_envelopes_get_the_documented_reason_and_event_time(spark: Any) -> None:
    import lag_replay
    from pyspark.sql import functions as F

    rows = [("t", 0, i, None, None, None if v is None else v.encode())
            for i, (v, _r, _t) in enumerate(CASES)]
    raw = spark.createDataFrame(rows, "topic string, partition int, offset long, "
                                "timestamp timestamp, key binary, value binary")
    got = {r["offset"]: r for r in lag_replay.parse_envelopes(raw).select(
        "offset", "reason", F.unix_micros("event_ts").alias("us"),
        F.col("env.id").alias("id"), F.col("env.data").alias("data")).collect()}
    assert len(got) == len(CASES)
    for i, (value, reason, us) in enumerate(CASES):
        r = got[i]
        assert (r["reason"], r["us"] if reason is None else None) == (reason, us), value
    # data stays JSON text (the same document), a number id its text
    assert json.loads(got[0]["data"]) == OK["data"]
    assert got[15]["id"] == "123"
