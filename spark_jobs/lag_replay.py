"""Spark lag-replay job: read a planned offset range of Kafka, process it, write it.

Run by ``opskit replay`` (which plans, submits this file with ``spark-submit``,
verifies the result and commits the group), or by hand::

    spark-submit --master local[2] --jars <spark-sql-kafka and deps> \\
        spark_jobs/lag_replay.py --spec "$(jq -c .job manifest.json)" \\
        --bootstrap broker:9092 --output /data/replays

Self-contained (PySpark and the standard library only) so it runs unchanged in
cluster mode. The range is given as numbers (``--spec``: replay id, pipeline and
``[topic, partition, start, end)`` per partition); this job never resolves
"earliest"/"latest" itself and never commits offsets.

Pipelines (HIP-30):

- ``events`` (analytics-ingest): envelopes to Parquet under
  ``OUTPUT/<replay id>/data/sink=events/event_date=D/event_type=T``;
- ``billing`` (billing-agg): hourly usage per team from llm_usage (requests,
  tokens, cost) to ``OUTPUT/<replay id>/billing_hourly``, optionally produced as
  ``billing.usage.hourly`` events to ``--billing-topic``.

Malformed events never vanish: they go to ``.../sink=dead_letter`` (events) or
``.../dead_letter`` (billing) with the reason, and to ``--dead-letter-topic``
when given. Parquet output is written with mode overwrite under the replay id,
so a rerun of the same plan replaces it. Kafka output is at-least-once: every
record carries ``opskit-replay-id``, ``opskit-source-topic``,
``opskit-source-partition`` and ``opskit-source-offset`` headers, and records
of one key are written by one task in source order.

The driver prints ``OPSKIT_PROGRESS ...`` lines and one final
``OPSKIT_RESULT {json}`` line (also saved under ``OUTPUT/<replay id>/_result``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

SCHEMA_ID = "hanzo.stream.v1"
REQUIRED = ("id", "type", "source", "timestamp")
SRC_HEADERS = ("opskit-replay-id", "opskit-source-topic", "opskit-source-partition",
               "opskit-source-offset")

#: the envelope's top-level fields read by the job (``data`` as JSON text)
FIELDS = ("schema", "id", "type", "source", "timestamp", "team_id", "org_id", "data")
USAGE = StructType([
    StructField("model", StringType()), StructField("prompt_tokens", LongType()),
    StructField("completion_tokens", LongType()), StructField("total_tokens", LongType()),
    StructField("cost_usd", DoubleType()),
])


def progress(msg: str) -> None:
    sys.stdout.write(f"OPSKIT_PROGRESS {msg}\n")
    sys.stdout.flush()


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="opskit Spark lag-replay job")
    p.add_argument("--spec", required=True, help="JSON: replay_id, pipeline, ranges")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--output", required=True, help="base directory or URI of the Parquet output")
    p.add_argument("--dead-letter-topic", default=None)
    p.add_argument("--billing-topic", default=None)
    p.add_argument("--kafka-option", action="append", default=[],
                   help="KEY=VALUE passed as kafka.KEY to the source and sinks (security)")
    p.add_argument("--kafka-username", default=None,
                   help="SASL user; with --kafka-password-env builds the login module setting")
    p.add_argument("--kafka-password-env", default=None, metavar="VAR",
                   help="read the SASL password from this environment variable (a Kubernetes "
                        "Secret): it never appears on a command line")
    p.add_argument("--kafka-password-file", default=None, metavar="PATH",
                   help="read the SASL password from this file or named pipe (opskit serves it "
                        "over a pipe): it never appears on a command line or in an environment")
    p.add_argument("--min-partitions", type=int, default=None)
    p.add_argument("--sink-partitions", type=int, default=4)
    return p.parse_args(argv)


_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def sasl_login(mechanism: str, username: str, password: str) -> str:
    """The ``sasl.jaas.config`` value for a user and password (quotes escaped)."""
    module = _LOGIN_MODULES.get(mechanism.upper())
    if module is None:
        raise SystemExit(f"lag_replay: unsupported SASL mechanism {mechanism!r}")

    def q(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"')

    return f'{module} required username="{q(username)}" password="{q(password)}";'


def kafka_options(args: argparse.Namespace) -> dict[str, str]:
    opts = {"kafka.bootstrap.servers": args.bootstrap}
    for item in args.kafka_option:
        k, _, v = item.partition("=")
        opts[f"kafka.{k}"] = v
    password: str | None = None
    if getattr(args, "kafka_password_file", None):
        try:
            with open(args.kafka_password_file, encoding="utf-8") as f:
                password = f.read()
        except OSError as e:
            raise SystemExit(f"lag_replay: cannot read --kafka-password-file: {e.strerror}") from None
    elif args.kafka_password_env:
        password = os.environ.get(args.kafka_password_env)
        if password is None:
            raise SystemExit(f"lag_replay: ${args.kafka_password_env} is not set")
    if password is not None:
        if not args.kafka_username:
            raise SystemExit("lag_replay: a password needs --kafka-username")
        mechanism = opts.get("kafka.sasl.mechanism", "PLAIN")
        opts["kafka.sasl.jaas.config"] = sasl_login(mechanism, args.kafka_username, password)
    return opts


def read_range(spark: SparkSession, spec: dict[str, Any], args: argparse.Namespace) -> DataFrame:
    assign: dict[str, list[int]] = {}
    starts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    for topic, part, start, end in spec["ranges"]:
        assign.setdefault(topic, []).append(int(part))
        starts.setdefault(topic, {})[str(part)] = int(start)
        ends.setdefault(topic, {})[str(part)] = int(end)
    reader = (spark.read.format("kafka").options(**kafka_options(args))
              .option("assign", json.dumps(assign))
              .option("startingOffsets", json.dumps(starts))
              .option("endingOffsets", json.dumps(ends))
              # records deleted between planning and reading must fail the job, not vanish
              .option("failOnDataLoss", "true"))
    if args.min_partitions:
        reader = reader.option("minPartitions", str(args.min_partitions))
    return reader.load()


def observe_read(df: DataFrame, spec: dict[str, Any]) -> tuple[DataFrame, Observation]:
    """Per-partition count / min / max offset, measured while the data streams
    through the write (no second read of Kafka).

    Each row's range index is looked up once (integer ``partition`` first, the
    topic string only for a matching partition); the 3 aggregates per range then
    compare that small integer, instead of the topic and partition each."""
    idx: Column | None = None
    for i, (topic, part, _s, _e) in enumerate(spec["ranges"]):
        mine = (F.col("partition") == int(part)) & (F.col("topic") == topic)
        idx = F.when(mine, F.lit(i)) if idx is None else idx.when(mine, F.lit(i))
    assert idx is not None
    src = F.col("_opskit_range")
    exprs: list[Column] = []
    for i in range(len(spec["ranges"])):
        exprs += [F.count_if(src == i).alias(f"n{i}"),
                  F.min(F.when(src == i, F.col("offset"))).alias(f"lo{i}"),
                  F.max(F.when(src == i, F.col("offset"))).alias(f"hi{i}")]
    obs = Observation("opskit_read")
    return df.withColumn("_opskit_range", idx).observe(obs, *exprs).drop("_opskit_range"), obs


#: set by ``from_json`` to the raw text when a value is not a JSON object (malformed
#: JSON, an array, a scalar); null for every object
CORRUPT = "_opskit_not_object"
#: the envelope as ``from_json`` reads it: every field as text, ``data`` (an object)
#: re-serialised as JSON text; one parser per record, fields matched by name
ENVELOPE = StructType([StructField(f, StringType()) for f in FIELDS]
                      + [StructField(CORRUPT, StringType())])


#: a local date and time followed by ``Z``: the form of HIP-30's timestamps
#: (with seconds: Spark refuses ``10:00Z`` yet accepts ``10:00``, so without seconds the
#: full parse decides)
UTC_Z = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$"


def event_time(text: Column) -> Column:
    """The envelope's ``timestamp`` as a timestamp, null when it does not parse.

    For a zone written in the text Spark calls ``getZoneId`` on every row, which
    compiles a regular expression each time (``String.replaceFirst``): about 3% of
    the job's CPU in a profile. HIP-30 timestamps are a date and time followed by
    ``Z`` (:data:`UTC_Z`, one precompiled pattern); for those the ``Z`` is dropped and
    the rest parsed in the session time zone, which this job sets to UTC: the same
    instant, no zone lookup. Any other text takes Spark's full parse."""
    return F.when(text.rlike(UTC_Z), F.try_to_timestamp(F.left(text, F.length(text) - 1))
                  ).otherwise(F.try_to_timestamp(text))


def parse_envelopes(raw: DataFrame) -> DataFrame:
    """Source columns, the envelope's top-level fields (``env``), and ``reason``
    (None when valid).

    ``from_json`` with a fixed schema, in the JVM: one Jackson parser per record,
    strings taken as they are, only the nested ``data`` copied out as JSON text.
    (``json_tuple``, used before, created a JSON generator for every one of the eight
    fields of every record: a quarter of the job's CPU in a profile.) A value that is
    not a JSON object fills :data:`CORRUPT` (PERMISSIVE mode), or gives no struct at
    all (empty text, ``null``): both are "not a JSON object"."""
    src = raw.select(
        F.col("topic"), F.col("partition"), F.col("offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("raw_value"),
    )
    df = src.select("*", F.from_json("raw_value", ENVELOPE, {
        "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}).alias("env"))
    ts = event_time(F.col("env.timestamp"))
    not_object = F.col("env").isNull() | F.col(f"env.{CORRUPT}").isNotNull()
    reason = F.when(F.col("raw_value").isNull(), F.lit("empty value")).when(
        not_object, F.lit("not a JSON object")).when(
        F.coalesce(F.col("env.schema"), F.lit("")) != SCHEMA_ID,
        F.concat(F.lit("unknown schema "), F.coalesce(F.col("env.schema"), F.lit("(none)"))))
    for name in REQUIRED:
        reason = reason.when(F.col(f"env.{name}").isNull() | (F.col(f"env.{name}") == ""),
                             F.lit(f"missing field '{name}'"))
    reason = reason.when(ts.isNull(), F.concat(F.lit("bad timestamp "), F.col("env.timestamp")))
    return df.withColumn("event_ts", ts).withColumn("reason", reason)


def events_pipeline(spark: SparkSession, raw: DataFrame, rid: str, base: str,
                    obs: Observation) -> dict[str, Any] | None:
    parsed = parse_envelopes(raw)
    out = parsed.select(
        F.when(F.col("reason").isNull(), F.lit("events")).otherwise(F.lit("dead_letter"))
        .alias("sink"),
        F.when(F.col("reason").isNull(), F.to_date("event_ts")).alias("event_date"),
        F.when(F.col("reason").isNull(), F.col("env.type")).alias("event_type"),
        F.col("env.id").alias("id"), F.col("env.source").alias("source"),
        F.col("event_ts"), F.col("env.team_id").alias("team_id"),
        F.col("env.org_id").alias("org_id"), F.col("env.data").alias("data"),
        F.col("key"), F.col("topic"), F.col("partition"), F.col("offset"),
        F.col("kafka_timestamp"), F.col("reason"),
        F.when(F.col("reason").isNotNull(), F.col("raw_value")).alias("original"),
        F.lit(rid).alias("replay_id"),
    )
    path = f"{base}/data"
    progress(f"reading Kafka and writing Parquet to {path}")
    (out.write.mode("overwrite").options(**parquet_options())
     .partitionBy("sink", "event_date", "event_type").parquet(path))
    if not any(int(v or 0) for k, v in obs.get.items() if k.startswith("n")):
        return None  # offset gaps only: nothing was written
    progress("verifying the written Parquet")
    back = spark.read.parquet(path).select("sink", "topic", "partition")
    dead = back.where(F.col("sink") == "dead_letter")
    outputs = {"events": f"{path}/sink=events", "dead_letter": f"{path}/sink=dead_letter"}
    return {"back": back, "dead_source": spark.read.parquet(path).where(
        F.col("sink") == "dead_letter"), "dead": dead, "outputs": outputs}


def billing_pipeline(spark: SparkSession, raw: DataFrame, rid: str, base: str,
                     obs: Observation) -> dict[str, Any] | None:
    parsed = parse_envelopes(raw).withColumn("usage", F.from_json("env.data", USAGE))
    reason = (F.when(F.col("reason").isNotNull(), F.col("reason"))
              .when(F.col("env.type") != "llm.usage.completed",
                    F.concat(F.lit("not an llm usage event: "), F.col("env.type")))
              .when(F.coalesce(F.col("env.team_id"), F.lit("")) == "",
                    F.lit("missing field 'team_id'"))
              .when(F.col("usage.total_tokens").isNull(), F.lit("missing data.total_tokens"))
              .when(F.col("usage.cost_usd").isNull(), F.lit("missing data.cost_usd")))
    parsed = parsed.withColumn("reason", reason).select(
        "topic", "partition", "offset", "kafka_timestamp", "key", "reason",
        F.when(F.col("reason").isNotNull(), F.col("raw_value")).alias("original"),
        F.col("env.team_id").alias("team_id"), F.col("env.org_id").alias("org_id"),
        F.date_trunc("hour", "event_ts").alias("hour"),
        F.col("usage.prompt_tokens").alias("prompt_tokens"),
        F.col("usage.completion_tokens").alias("completion_tokens"),
        F.col("usage.total_tokens").alias("total_tokens"),
        F.col("usage.cost_usd").alias("cost_usd"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    progress("reading Kafka and aggregating hourly usage per team")
    hourly = (parsed.where(F.col("reason").isNull())
              .groupBy("team_id", "hour", "topic", "partition")
              .agg(F.max("org_id").alias("org_id"), F.count(F.lit(1)).alias("requests"),
                   F.sum("prompt_tokens").alias("prompt_tokens"),
                   F.sum("completion_tokens").alias("completion_tokens"),
                   F.sum("total_tokens").alias("total_tokens"),
                   F.round(F.sum("cost_usd"), 6).alias("cost_usd"),
                   F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"))
              .withColumn("replay_id", F.lit(rid)))
    hourly_path, dead_path = f"{base}/billing_hourly", f"{base}/dead_letter"
    hourly.write.mode("overwrite").parquet(hourly_path)
    (parsed.where(F.col("reason").isNotNull())
     .select("topic", "partition", "offset", "kafka_timestamp", "key", "reason", "original",
             F.lit(rid).alias("replay_id"))
     .write.mode("overwrite").options(**parquet_options()).parquet(dead_path))
    parsed.unpersist()
    if not any(int(v or 0) for k, v in obs.get.items() if k.startswith("n")):
        return None  # offset gaps only: nothing was written
    progress("verifying the written Parquet")
    h = spark.read.parquet(hourly_path)
    d = spark.read.parquet(dead_path)
    # one row per source record: expand each aggregate's request count
    back = (h.select(F.lit("events").alias("sink"), "topic", "partition",
                     F.col("requests").alias("n"))
            .unionByName(d.select(F.lit("dead_letter").alias("sink"), "topic", "partition",
                                  F.lit(1).cast("long").alias("n"))))
    return {"back_counts": back, "dead_source": d, "hourly": h,
            "outputs": {"billing_hourly": hourly_path, "dead_letter": dead_path}}


#: columns with few distinct values: the only ones Parquet dictionary-encodes
LOW_CARDINALITY = ("source", "team_id", "org_id", "key", "topic", "partition", "reason",
                   "replay_id", "model")


def parquet_options() -> dict[str, str]:
    """Writer options: dictionary encoding only where values repeat.

    For unique values (ids, offsets, timestamps, the JSON ``data``) the writer
    would hash every value into a dictionary, overflow it and fall back to plain
    encoding anyway; that hashing was the largest single cost of the write."""
    opts = {"parquet.enable.dictionary": "false"}
    opts.update({f"parquet.enable.dictionary#{c}": "true" for c in LOW_CARDINALITY})
    return opts


def _headers(rid: str, topic: Column, partition: Column, offset: Column) -> Column:
    return F.array(*[
        F.struct(F.lit(name).alias("key"), v.cast("string").cast("binary").alias("value"))
        for name, v in zip(SRC_HEADERS, (F.lit(rid), topic, partition, offset))
    ])


def write_kafka(df: DataFrame, topic: str, args: argparse.Namespace) -> int:
    """At-least-once; one key per task, in source order (idempotent producer)."""
    ordered = df.repartition(args.sink_partitions, "key").sortWithinPartitions(
        "key", "src_partition", "src_offset")
    (ordered.select("key", "value", "headers").write.format("kafka")
     .options(**kafka_options(args)).option("topic", topic)
     .option("kafka.acks", "all").option("kafka.enable.idempotence", "true").save())
    return int(df.count())


def dead_letters_to_kafka(dead: DataFrame, rid: str, args: argparse.Namespace) -> int:
    env = F.to_json(F.struct(
        F.lit(SCHEMA_ID).alias("schema"),
        F.concat_ws("_", F.lit("dlq"), F.lit(rid), F.col("topic"), F.col("partition"),
                    F.col("offset")).alias("id"),
        F.lit("stream.dead_letter").alias("type"), F.lit("opskit-replay").alias("source"),
        F.date_format("kafka_timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("timestamp"),
        F.struct(F.col("topic").alias("source_topic"),
                 F.col("partition").alias("source_partition"),
                 F.col("offset").alias("source_offset"), F.col("reason"),
                 F.col("original")).alias("data")))
    out = dead.select(
        F.col("topic").alias("key"), env.alias("value"),
        _headers(rid, F.col("topic"), F.col("partition"), F.col("offset")).alias("headers"),
        F.col("partition").alias("src_partition"), F.col("offset").alias("src_offset"))
    return write_kafka(out, args.dead_letter_topic, args)


def billing_to_kafka(hourly: DataFrame, rid: str, args: argparse.Namespace) -> int:
    env = F.to_json(F.struct(
        F.lit(SCHEMA_ID).alias("schema"),
        F.concat_ws("_", F.lit("bill"), F.col("team_id"),
                    F.date_format("hour", "yyyyMMddHH")).alias("id"),
        F.lit("billing.usage.hourly").alias("type"), F.lit("billing-agg").alias("source"),
        F.date_format("hour", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("timestamp"),
        F.col("org_id"), F.col("team_id"),
        F.struct(F.date_format("hour", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("hour"),
                 "requests", "prompt_tokens", "completion_tokens", "total_tokens", "cost_usd",
                 F.lit(rid).alias("replay_id")).alias("data")))
    out = hourly.select(
        F.coalesce(F.col("org_id"), F.col("team_id")).alias("key"), env.alias("value"),
        _headers(rid, F.col("topic"), F.col("partition"), F.col("last_offset")).alias("headers"),
        F.col("partition").alias("src_partition"), F.col("last_offset").alias("src_offset"))
    return write_kafka(out, args.billing_topic, args)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    spec = json.loads(args.spec)
    rid = str(spec["replay_id"])
    if not rid.replace("-", "").isalnum():
        raise SystemExit(f"bad replay id {rid!r}")
    base = f"{args.output.rstrip('/')}/{rid}"
    spark = (SparkSession.builder.appName(f"opskit-lag-replay-{rid}")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.sources.partitionOverwriteMode", "static")
             # write date/type partitions without sorting each task's rows first
             .config("spark.sql.maxConcurrentOutputFileWriters", "32")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    t0 = time.monotonic()
    parts: dict[tuple[str, int], dict[str, Any]] = {
        (t, int(p)): {"records": 0, "min_offset": None, "max_offset": None, "written": 0,
                      "dead_letters": 0} for t, p, _s, _e in spec["ranges"]}
    kafka_records = 0
    outputs: dict[str, str] = {}
    verified = 0
    if spec["ranges"]:
        raw, obs = observe_read(read_range(spark, spec, args), spec)
        res: dict[str, Any] | None
        counts: list[Any] = []
        if spec["pipeline"] == "billing":
            res = billing_pipeline(spark, raw, rid, base, obs)
            if res is not None:
                counts = res["back_counts"].groupBy("topic", "partition", "sink").agg(
                F.sum("n").alias("n")).collect()
        else:
            res = events_pipeline(spark, raw, rid, base, obs)
        if res is not None and spec["pipeline"] != "billing":
            back = res["back"]
            # a duplicate would show as more rows written than read (checked by opskit)
            counts = back.groupBy("topic", "partition", "sink").agg(
                F.count(F.lit(1)).alias("n")).collect()
        metrics = obs.get
        for i, (t, p, _s, _e) in enumerate(spec["ranges"]):
            d = parts[(t, int(p))]
            d["records"] = int(metrics.get(f"n{i}") or 0)
            d["min_offset"] = metrics.get(f"lo{i}")
            d["max_offset"] = metrics.get(f"hi{i}")
        for r in counts:
            d = parts.setdefault((r["topic"], int(r["partition"])), {
                "records": 0, "min_offset": None, "max_offset": None, "written": 0,
                "dead_letters": 0})
            d["written" if r["sink"] == "events" else "dead_letters"] += int(r["n"])
        verified = sum(int(r["n"]) for r in counts)
        outputs = {} if res is None else dict(res["outputs"])
        if res is not None and args.dead_letter_topic:
            progress(f"producing dead letters to Kafka topic {args.dead_letter_topic}")
            kafka_records += dead_letters_to_kafka(res["dead_source"], rid, args)
        if res is not None and args.billing_topic and spec["pipeline"] == "billing":
            progress(f"producing hourly usage to Kafka topic {args.billing_topic}")
            kafka_records += billing_to_kafka(res["hourly"], rid, args)
    result = {
        "replay_id": rid, "verified_rows": verified, "kafka_records": kafka_records,
        "outputs": outputs, "seconds": round(time.monotonic() - t0, 3),
        "partitions": [{"topic": t, "partition": p, **d} for (t, p), d in sorted(parts.items())],
    }
    text = json.dumps(result, separators=(",", ":"))
    spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode(
        "overwrite").text(f"{base}/_result")
    sys.stdout.write(f"OPSKIT_RESULT {text}\n")
    sys.stdout.flush()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
