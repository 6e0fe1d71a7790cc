"""Lag in time, rates, catch-up ETA and retention risk: pure arithmetic.

Units: every instant is **epoch milliseconds as int** (``*_ms``), as Kafka
record timestamps and ``retention.ms`` are; ``now_ms`` is always a parameter.
Results give durations in **seconds as float** (``*_seconds``) and rates in
messages (or bytes) per second.

Every result says how it was obtained (``basis``) and how far to trust it
(``confidence``): EXACT (read from a record), LOWER_BOUND (the truth is this
or more), ESTIMATE (interpolated), UNKNOWN (no basis; value is None).

Modules: ``lag_time`` (lag in time), ``timeline`` (log end over time), ``rates`` (rates
and catch-up ETA), ``retention`` (retention risk), ``group_partition`` (both for one
group partition).
"""
