"""``python -m odradek.pipeline.jobs.copy_topic``: copy a topic's records (key, value,
headers) to another topic through Spark, with the sink's chosen delivery guarantee.

    python -m odradek.pipeline.jobs.copy_topic --bootstrap-server 127.0.0.1:9092 \\
        --source orders --destination orders_copy --checkpoint /data/ckpt/copy \\
        [--exactly-once --transactional-id-prefix orders-copy] [--trigger-available-now]

With ``--exactly-once`` the destination, read with ``isolation.level=read_committed``,
holds every source record once, however often the job is killed (SIGKILL included)
and restarted with the same checkpoint and prefix; without it, records of a replayed
micro-batch may appear twice.
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql.streaming import StreamingQuery

from odradek.pipeline import FORMAT
from odradek.pipeline.jobs.running import run_until_stopped
from odradek.pipeline.session import local_session


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m odradek.pipeline.jobs.copy_topic")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--destination", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--exactly-once", action="store_true")
    p.add_argument("--transactional-id-prefix", help="required with --exactly-once")
    p.add_argument("--max-offsets-per-trigger", type=int, default=10_000)
    p.add_argument("--trigger-interval", default="1 second")
    p.add_argument("--trigger-available-now", action="store_true")
    p.add_argument("--master", default="local[2]")
    return p.parse_args(argv)


def start(args: argparse.Namespace) -> StreamingQuery:
    spark = local_session("odradek-copy-topic", master=args.master)
    rows = (
        spark.readStream.format(FORMAT)
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("subscribe", args.source)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        .load()
        .select("key", "value", "headers")
    )
    writer = (
        rows.writeStream.format(FORMAT)
        .option("kafka.bootstrap.servers", args.bootstrap_server)
        .option("topic", args.destination)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.exactly_once:
        writer = writer.option("deliveryGuarantee", "exactly-once").option(
            "transactionalIdPrefix", args.transactional_id_prefix or ""
        )
    if args.trigger_available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger_interval)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    query = start(args)
    return run_until_stopped(query, args.checkpoint)


if __name__ == "__main__":
    raise SystemExit(main())
