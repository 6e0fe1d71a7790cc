"""Benchmark baseline: Spark's Kafka connector alone on the replay's range.

Reads exactly what ``lag_replay.py`` reads (same ``--spec``, same source
options, the same ``read_range``) and only counts: per partition the number of
records, lowest and highest offset and the value bytes, so every record is
fetched and decoded but nothing is parsed or written. Used by
``benchmarks/bench_replay.py`` to measure the share of the replay's time that
its own processing adds; not used by ``opskit replay``.

Prints ``OPSKIT_RESULT {"records": N, "seconds": S, "partitions": [...]}``.
"""

from __future__ import annotations

import json
import sys
import time

from lag_replay import parse_args, read_range  # the job file next to this one
from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    spec = json.loads(args.spec)
    spark = (SparkSession.builder.appName(f"opskit-read-count-{spec['replay_id']}")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    t0 = time.monotonic()
    rows = (read_range(spark, spec, args).groupBy("topic", "partition")
            .agg(F.count(F.lit(1)).alias("records"), F.min("offset").alias("min_offset"),
                 F.max("offset").alias("max_offset"),
                 F.sum(F.length("value")).alias("value_bytes"))
            .collect())
    parts = [r.asDict() for r in sorted(rows, key=lambda r: (r["topic"], r["partition"]))]
    result = {"records": sum(int(p["records"]) for p in parts),
              "seconds": round(time.monotonic() - t0, 3), "partitions": parts}
    sys.stdout.write(f"OPSKIT_RESULT {json.dumps(result, separators=(',', ':'))}\n")
    sys.stdout.flush()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
