"""``python -m odradek.pipeline.jobs.access_log``: per-minute traffic of an nginx
access log, from a topic to Parquet and to a summary topic, exactly once.

    python -m odradek.pipeline.jobs.access_log --bootstrap-server 127.0.0.1:9092 \\
        --checkpoint /data/ckpt/access_log --output /data/access_log \\
        --summary-topic nginx_access_summary [--trigger-available-now]

Reads ``nginx_access_log`` (combined format) with the ``odradek`` source, parses
each line, and counts requests and bytes per minute of the line's own time
(``$time_local``) by status, by path (without query string) and by client
address. A minute is final once the event-time watermark (latest line time minus
``--watermark``) passes its end; lines older than the watermark are dropped, as
Spark does. Lines that are not in combined format are skipped.

Outputs, per micro-batch (``foreachBatch``) with the batch id:
- ``<output>/minute_counts/batch_id=<n>/``: the minutes finished in batch ``n``,
  rows ``(minute, dimension, value, requests, bytes)``, written under ``_staging``
  and renamed into place (``parquet_batches``);
- ``--summary-topic``: one record per finished minute (``summaries``), published
  through ``topic_batches``: tagged with the query id, batch id and sequence number,
  and completed rather than repeated when a batch is replayed.

The guarantee: Spark's checkpoint fixes each batch's input offsets (and watermark),
the stateful aggregation replays a batch from the previous batch's state, so a
replayed batch finishes the same minutes with the same counts. Each minute is
finished in exactly one batch, and each batch's outputs are published
idempotently. Kill the job at any moment and start it again with the same
checkpoint: every minute appears exactly once in the Parquet table and exactly once
in the summary topic, in minute order, with no minute missing. (It assumes this job
is the only writer of its output directory and summary topic.)

``ODRADEK_PIPELINE_CRASH=<point>@<batch>`` kills the process with SIGKILL at a
point of the first batch at or after ``<batch>`` (for crash tests):
``after-parquet``, ``mid-summary`` (half the batch's summaries published; waits
for a batch with at least two) or ``after-summary``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from odradek.pipeline import FORMAT, register
from odradek.pipeline.jobs.running import run_until_stopped
from odradek.pipeline.logformat import COMBINED_REGEX, NO_PATH, PATH_REGEX, TIME_LOCAL_SPARK_PATTERN
from odradek.pipeline.parquet_batches import ParquetBatches
from odradek.pipeline.summaries import CountRow, build_summaries
from odradek.pipeline.topic_batches import BatchPublisher, OutRecord
from odradek.pipeline.topics import ensure_topic

QUERY_NAME = "odradek_access_log"
COUNTS_TABLE = "minute_counts"
CRASH_ENV = "ODRADEK_PIPELINE_CRASH"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m odradek.pipeline.jobs.access_log",
        description="Per-minute nginx access-log counts to Parquet and a summary topic.",
    )
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", default="nginx_access_log", help="topic with the log lines")
    p.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    p.add_argument("--output", required=True, help="Parquet output directory")
    p.add_argument("--summary-topic", help="topic for per-minute summaries (created if missing)")
    p.add_argument(
        "--trigger-available-now", action="store_true", help="process what is there, then stop"
    )
    p.add_argument("--trigger-interval", default="10 seconds", help="processing-time trigger")
    p.add_argument("--max-offsets-per-trigger", type=int, default=200_000)
    p.add_argument("--starting-offsets", default="earliest")
    p.add_argument("--watermark", default="1 minute", help="how late a line may arrive")
    p.add_argument("--top", type=int, default=5, help="paths and clients listed per minute")
    p.add_argument("--master", help="Spark master (default: local[2], or spark-submit's)")
    p.add_argument(
        "-o",
        "--source-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra odradek source option",
    )
    return p.parse_args(argv)


# -- the query -------------------------------------------------------------------------


def parse_lines(lines: DataFrame) -> DataFrame:
    """Combined-format fields of ``value``; lines that do not parse are dropped."""
    line = F.col("value").cast("string")

    def group(i: int) -> Column:
        return F.regexp_extract(line, COMBINED_REGEX, i)

    path = F.regexp_extract(group(4), PATH_REGEX, 1)
    size = group(6)
    parsed = lines.select(
        F.try_to_timestamp(group(3), F.lit(TIME_LOCAL_SPARK_PATTERN)).alias("ts"),
        group(1).alias("client"),
        F.when(path == "", F.lit(NO_PATH)).otherwise(path).alias("path"),
        group(5).alias("status"),
        F.when(size == "-", F.lit(0)).otherwise(size.try_cast("long")).alias("bytes"),
    )
    return parsed.where(
        (F.col("status") != "") & F.col("ts").isNotNull() & F.col("bytes").isNotNull()
    )


def minute_counts(events: DataFrame, watermark: str) -> DataFrame:
    """Requests and bytes per (minute, dimension, value); one streaming aggregation."""
    dims = events.withWatermark("ts", watermark).select(
        "ts",
        "bytes",
        F.explode(
            F.array(
                *[
                    F.struct(F.lit(name).alias("dimension"), F.col(name).alias("value"))
                    for name in ("status", "path", "client")
                ]
            )
        ).alias("d"),
    )
    return (
        dims.groupBy(
            F.window("ts", "1 minute"),
            F.col("d.dimension").alias("dimension"),
            F.col("d.value").alias("value"),
        )
        .agg(F.count(F.lit(1)).alias("requests"), F.sum("bytes").alias("bytes"))
        .select(F.col("window.start").alias("minute"), "dimension", "value", "requests", "bytes")
    )


def ranked(counts: DataFrame, top: int) -> DataFrame:
    """What the summaries need: every status, the top paths and clients, distinct counts."""
    group = Window.partitionBy("minute", "dimension")
    order = group.orderBy(F.desc("requests"), F.asc("value"))
    return (
        counts.withColumn("rank", F.row_number().over(order))
        .withColumn("distinct", F.count(F.lit(1)).over(group))
        .where((F.col("dimension") == "status") | (F.col("rank") <= top))
    )


class _Crash:
    """The ``ODRADEK_PIPELINE_CRASH`` fault point, for crash tests."""

    def __init__(self, spec: str | None) -> None:
        self.point, _, batch = (spec or "").partition("@")
        self.batch = int(batch) if batch else 0

    def armed(self, point: str, batch_id: int) -> bool:
        return bool(self.point) and self.point == point and batch_id >= self.batch

    @staticmethod
    def now() -> None:
        sys.stdout.flush()
        # As the group leader (a test starts us so) take the JVM down too.
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)


def batch_writer(
    spark: SparkSession, args: argparse.Namespace, log: Callable[[str], None] = print
) -> Callable[[DataFrame, int], None]:
    parquet = ParquetBatches(spark, f"{args.output.rstrip('/')}/{COUNTS_TABLE}")
    crash = _Crash(os.environ.get(CRASH_ENV))
    publisher: list[BatchPublisher] = []

    def get_publisher() -> BatchPublisher:
        if not publisher:
            # The query id survives restarts from the same checkpoint: it names the writer.
            query = next(q for q in spark.streams.active if q.name == QUERY_NAME)
            publisher.append(BatchPublisher(args.bootstrap_server, args.summary_topic, query.id))
        return publisher[0]

    def process(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            wrote = parquet.write(batch_id, batch.coalesce(1))
            if crash.armed("after-parquet", batch_id):
                crash.now()
            note = f"batch {batch_id}: parquet {'written' if wrote else 'already there'}"
            if args.summary_topic:
                rows = [
                    CountRow(
                        minute=datetime.fromtimestamp(r.minute_s, UTC),
                        dimension=r.dimension,
                        value=r.value,
                        requests=r.requests,
                        bytes=r.bytes,
                        rank=r.rank,
                        distinct=r.distinct,
                    )
                    # Epoch seconds: collected timestamps would come back in local time.
                    for r in ranked(batch, args.top)
                    .withColumn("minute_s", F.col("minute").cast("long"))
                    .collect()
                ]
                summaries = build_summaries(rows, args.top)
                records = [OutRecord(s.key.encode(), s.to_json().encode()) for s in summaries]
                pub = get_publisher()
                if crash.armed("mid-summary", batch_id) and len(records) >= 2:
                    pub.publish(batch_id, records[: len(records) // 2])
                    crash.now()
                report = pub.publish(batch_id, records)
                if crash.armed("after-summary", batch_id):
                    crash.now()
                note += (
                    f", {report.planned} minute summaries ({report.already_present} already "
                    f"published, {report.written} written)"
                )
            log(note)
        finally:
            batch.unpersist()

    return process


def start(
    spark: SparkSession, args: argparse.Namespace, log: Callable[[str], None] = print
) -> StreamingQuery:
    register(spark)
    if args.summary_topic:
        ensure_topic(args.bootstrap_server, args.summary_topic)
    reader = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    )
    for item in args.source_option:
        key, _, value = item.partition("=")
        reader = reader.option(key, value)
    counts = minute_counts(parse_lines(reader.load()), args.watermark)
    writer = (
        counts.writeStream.queryName(QUERY_NAME)
        .outputMode("append")
        .option("checkpointLocation", args.checkpoint)
        .foreachBatch(batch_writer(spark, args, log))
    )
    if args.trigger_available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger_interval)
    return writer.start()


def session(args: argparse.Namespace) -> SparkSession:
    if args.master or "PYSPARK_GATEWAY_PORT" not in os.environ:
        from odradek.pipeline.session import local_session

        return local_session("odradek-access-log", master=args.master or "local[2]")
    # Under spark-submit: the cluster's settings, plus UTC minutes.
    spark = SparkSession.builder.appName("odradek-access-log").getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spark = session(args)
    query = start(spark, args, lambda text: print(text, flush=True))
    return run_until_stopped(query, args.checkpoint)


if __name__ == "__main__":
    raise SystemExit(main())
