"""The pipeline benchmark's reference points for the Spark source, to separate Spark's
own cost from the connector's:

- ``spark_floor``: a Python data source that reads nothing, yielding the same
  number of rows in ready-made Arrow batches of the source's schema, through the
  same ``noop`` sink: what any Python source costs in Spark (planning in a Python
  process, task launch, Arrow transfer to the JVM, row conversion).
- ``spark_sink_floor``: the sink benchmark's DataFrame written to a Python Arrow
  writer that drops every batch: what Spark costs before the sink does anything.
- ``direct_read``: the source's executor path (Fetch straight from the leader,
  column-wise decoding) for every partition in turn in this process, without Spark:
  one process like the plain consumer, so the two compare per-record costs directly.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.pipeline.schema import arrow_schema, source_schema

FLOOR_BATCH_ROWS = 50_000


def floor_batches(rows: int, value_size: int) -> Iterator[pa.RecordBatch]:
    """``rows`` rows in batches of the source's schema (null keys, fixed values)."""
    schema = arrow_schema(source_schema(False))
    per = min(rows, FLOOR_BATCH_ROWS)
    if per <= 0:
        return
    payload = os.urandom(value_size // 2 + 1).hex().encode()[:value_size]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.nulls(per, pa.binary()),
            pa.array([payload] * per, pa.binary()),
            pa.repeat(pa.scalar("floor", pa.string()), per),
            pa.repeat(pa.scalar(0, pa.int32()), per),
            pa.array(np.arange(per, dtype=np.int64)),
            pa.array(np.full(per, 1_700_000_000_000_000, dtype="datetime64[us]")).cast(
                schema.field("timestamp").type
            ),
            pa.repeat(pa.scalar(0, pa.int32()), per),
        ],
        schema=schema,
    )
    for first in range(0, rows, per):
        yield batch if first + per <= rows else batch.slice(0, rows - first)


def spark_floor(spark: object, n: int, partitions: int, value_size: int) -> float:
    """Seconds for Spark to move ``n`` ready-made rows from a Python source to ``noop``."""
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.types import StructType

    assert isinstance(spark, SparkSession)
    # Python workers may not have bench/ on their path: ship this module's code.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    class FloorReader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(partitions)]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            i = int(partition.value)
            rows = n // partitions + (1 if i < n % partitions else 0)
            return floor_batches(rows, value_size)

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "odradek-bench-floor"

        def schema(self) -> StructType:
            return source_schema(False)

        def reader(self, schema: StructType) -> DataSourceReader:
            return FloorReader()

    spark.dataSource.register(FloorSource)
    df = spark.read.format("odradek-bench-floor").load()
    start = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def spark_sink_floor(spark: object, n: int, value_size: int) -> float:
    """Seconds for Spark to hand the sink benchmark's rows to a Python Arrow writer
    that keeps nothing."""
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceWriter,
        WriterCommitMessage,
    )
    from pyspark.sql.types import StructType

    assert isinstance(spark, SparkSession)
    cloudpickle.register_pickle_by_value(sys.modules[__name__])

    class DropWriter(DataSourceArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
            for _ in iterator:
                pass
            return WriterCommitMessage()

    class DropSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "odradek-bench-drop"

        def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
            return DropWriter()

    spark.dataSource.register(DropSink)
    df = spark.range(n, numPartitions=2).select(
        F.expr(f"repeat('x', {value_size})").cast("binary").alias("value")
    )
    start = time.perf_counter()
    df.write.format("odradek-bench-drop").mode("append").save()
    return time.perf_counter() - start


def direct_read(bs: str, topic: str, n: int, partitions: int) -> float:
    """Seconds for the source's executor reader to read every partition in turn."""
    from odradek.pipeline.partition_fetcher import read_range
    from odradek.pipeline.wire_connection import close_metadata_clients

    schema = arrow_schema(source_schema(False))
    conf = {"bootstrap.servers": bs, "group.id": "bench-direct"}
    probe = Consumer({**conf, "enable.auto.commit": False})
    ends = [
        probe.get_watermark_offsets(KafkaTopicPartition(topic, p), timeout=30)[1]
        for p in range(partitions)
    ]
    probe.close()
    start = time.perf_counter()
    rows = 0
    for p, end in enumerate(ends):
        for batch in read_range(
            conf,
            topic,
            p,
            0,
            end,
            schema,
            include_headers=False,
            fail_on_data_loss=True,
            poll_timeout_ms=120_000,
        ):
            rows += batch.num_rows
    elapsed = time.perf_counter() - start
    close_metadata_clients()
    if rows != n:
        raise RuntimeError(f"direct reader read {rows} rows, expected {n}")
    return elapsed
