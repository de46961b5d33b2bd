"""Spark source and sink rates as ratios to a plain confluent-kafka consumer and
producer moving the same records, same cluster, same run.

    python -m bench pipeline [--messages N] [--partitions P] [--bootstrap-server HOST:PORT]

Starts a local Odradek cluster (unless ``--bootstrap-server`` is given), writes
``--messages`` records (default 1,000,000, ``--value-size`` bytes each) to a fresh
topic, then reads all of them twice over:
- a plain consumer: one confluent-kafka ``Consumer``, all partitions assigned,
  ``consume()`` in batches of 10,000, touching every value;
- the Spark source: ``spark.read.format("odradek")`` in ``local[2]``, every row
  materialised through the ``noop`` sink (so Spark converts each Arrow batch);
- reference points that split Spark's time from the connector's
  (``bench/spark_floor.py``): Spark's floor for the source (a Python source yielding
  as many ready-made rows, same partitions, same sink), the source's reader without
  Spark (one process, partitions in turn, like the plain consumer) and Spark's
  floor for the sink (the same DataFrame handed to a Python writer that drops it);
- a plain producer: one confluent-kafka ``Producer`` (the sink's settings:
  idempotent, ``acks=all``, ``linger.ms=5``, 1 MB batches) producing the same
  ``--messages`` values in a Python loop, then flushing;
- the Spark sink: ``df.write.format("odradek")`` of a DataFrame of as many rows of
  the same size, built by Spark (``spark.range``), in ``local[2]``.
The JVM and Python workers are warmed up first; each side runs ``--repeat`` times
and the best time counts. Goals: source/plain consumer >= 2.0, sink/plain producer
>= 1.0.
"""

from __future__ import annotations

import argparse
import os
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from bench.producing import produce_waiting
from bench.spark_floor import direct_read, spark_floor, spark_sink_floor
from odradek.pipeline.topics import ensure_topic

SOURCE_GOAL = 2.0
SINK_GOAL = 1.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench pipeline")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--value-size", type=int, default=150)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--bootstrap-server", help="use this cluster instead of starting one")
    return p.parse_args(argv)


def fill(bs: str, topic: str, n: int, partitions: int, size: int) -> float:
    ensure_topic(bs, topic, partitions=partitions)
    payload = os.urandom(size // 2).hex().encode()[:size]
    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": True,
        }
    )
    start = time.perf_counter()
    for i in range(n):
        produce_waiting(p, topic, payload, i % partitions)
        if i % 50_000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} benchmark records not delivered")
    return time.perf_counter() - start


def plain_consumer(bs: str, topic: str, n: int, partitions: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "bench-plain",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
        }
    )
    start = time.perf_counter()
    consumer.assign([KafkaTopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    size = 0
    while seen < n:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is None:
                seen += 1
                size += len(m.value() or b"")
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def spark_source(spark: object, bs: str, topic: str, n: int) -> float:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    df = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", topic)
        .load()
    )
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    elapsed = time.perf_counter() - start
    rows = df.count()
    if rows != n:
        raise RuntimeError(f"spark read {rows} rows, expected {n}")
    return elapsed


def plain_producer(bs: str, topic: str, n: int, size: int) -> float:
    payload = os.urandom(size // 2).hex().encode()[:size]
    p = Producer(
        {
            "bootstrap.servers": bs,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
        }
    )
    start = time.perf_counter()
    for _ in range(n):
        produce_waiting(p, topic, payload)
    left = p.flush(300)
    elapsed = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{left} records not delivered by the plain producer")
    return elapsed


def spark_sink(spark: object, bs: str, topic: str, n: int, size: int) -> float:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    assert isinstance(spark, SparkSession)
    df = spark.range(n, numPartitions=2).select(
        F.expr(f"repeat('x', {size})").cast("binary").alias("value")
    )
    start = time.perf_counter()
    df.write.format("odradek").option("kafka.bootstrap.servers", bs).option("topic", topic).mode(
        "append"
    ).save()
    return time.perf_counter() - start


def ratio_line(name: str, ratio: float, goal: float) -> str:
    below = "" if ratio >= goal else "  BELOW GOAL"
    return f"ratio {name}: {ratio:.2f} (goal >= {goal}){below}"


def run(args: argparse.Namespace, bs: str) -> None:
    from odradek.pipeline.session import local_session

    n = args.messages
    topic = f"bench-pipeline-{os.getpid()}"
    secs = fill(bs, topic, n, args.partitions, args.value_size)
    print(
        f"wrote {n:,} records of {args.value_size} B in {secs:.1f}s ({n / secs:,.0f}/s)", flush=True
    )
    spark = local_session("bench-pipeline", master=args.master)
    warm = f"{topic}-warmup"
    fill(bs, warm, 10_000, args.partitions, args.value_size)
    spark_source(spark, bs, warm, 10_000)
    plain = min(plain_consumer(bs, topic, n, args.partitions) for _ in range(args.repeat))
    source = min(spark_source(spark, bs, topic, n) for _ in range(args.repeat))
    print(f"plain confluent-kafka consumer: {n / plain:12,.0f} rows/s ({plain:.2f}s)")
    print(f"spark odradek source ({args.master}): {n / source:12,.0f} rows/s ({source:.2f}s)")
    spark_floor(spark, 10_000, args.partitions, args.value_size)  # warm-up
    floor = min(spark_floor(spark, n, args.partitions, args.value_size) for _ in range(args.repeat))
    direct = min(direct_read(bs, topic, n, args.partitions) for _ in range(args.repeat))
    print(
        f"  spark floor, ready-made rows ({args.master}): {n / floor:12,.0f} rows/s "
        f"({floor:.2f}s; the source's best case here is "
        f"{plain / floor:.2f}x the plain consumer)"
    )
    print(
        f"  source reader without spark (1 process): {n / direct:12,.0f} rows/s "
        f"({direct:.2f}s; {plain / direct:.2f}x the plain consumer)"
    )
    out = f"{topic}-out"
    ensure_topic(bs, out, partitions=args.partitions)
    spark_sink(spark, bs, out, 10_000, args.value_size)  # warm-up
    producer = min(plain_producer(bs, out, n, args.value_size) for _ in range(args.repeat))
    sink = min(spark_sink(spark, bs, out, n, args.value_size) for _ in range(args.repeat))
    print(f"plain confluent-kafka producer: {n / producer:12,.0f} rows/s ({producer:.2f}s)")
    print(f"spark odradek sink ({args.master}):   {n / sink:12,.0f} rows/s ({sink:.2f}s)")
    spark_sink_floor(spark, 10_000, args.value_size)  # warm-up
    sink_floor = min(spark_sink_floor(spark, n, args.value_size) for _ in range(args.repeat))
    print(
        f"  spark floor, rows dropped by a Python writer ({args.master}): "
        f"{n / sink_floor:12,.0f} rows/s ({sink_floor:.2f}s; the sink's best case here is "
        f"{producer / sink_floor:.2f}x the plain producer)"
    )
    print(ratio_line("source/plain consumer", plain / source, SOURCE_GOAL))
    print(ratio_line("sink/plain producer", producer / sink, SINK_GOAL))


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    if args.bootstrap_server:
        run(args, args.bootstrap_server)
        return
    from bench.local_cluster import temporary_cluster

    with temporary_cluster("bench-pipeline-") as cluster:
        run(args, cluster.bootstrap_servers)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
