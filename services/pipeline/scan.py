"""What the driver hands to executors for reading: one ``RangePartition`` per planned
offset range, plus the picklable ``ScanSettings`` both the batch and the streaming
reader carry (client settings, Arrow schema, data-loss policy).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from odradek.pipeline.client_config import consumer_config, direct_fetch_ok
from odradek.pipeline.options import OptionError, SourceOptions
from odradek.pipeline.range_reader import read_range_batches
from odradek.pipeline.schema import arrow_schema, source_schema
from odradek.pipeline.spark_offsets import OffsetRange


class RangePartition(InputPartition):
    """Offsets ``[start, end)`` of ``topic``-``partition``: one Spark task."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    @classmethod
    def of(cls, r: OffsetRange) -> RangePartition:
        return cls(r.topic, r.partition, r.start, r.end)


@dataclass
class ScanSettings:
    consumer_conf: dict[str, Any]
    arrow_schema: pa.Schema
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    direct: bool

    @classmethod
    def create(cls, opts: SourceOptions, schema: StructType, role: str) -> ScanSettings:
        expected = source_schema(opts.include_headers)
        if schema != expected:
            raise OptionError(
                "The odradek source has a fixed schema and cannot be set with a custom one "
                f"(expected {expected.simpleString()}, got {schema.simpleString()})"
            )
        group_id = f"{opts.group_id_prefix}-{uuid.uuid4()}-{role}"
        return cls(
            consumer_conf=consumer_config(opts, group_id),
            arrow_schema=arrow_schema(expected),
            include_headers=opts.include_headers,
            fail_on_data_loss=opts.fail_on_data_loss,
            poll_timeout_ms=opts.poll_timeout_ms,
            direct=direct_fetch_ok(opts),
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, RangePartition):
            return iter(())  # Spark's placeholder when there is nothing to read
        return read_range_batches(
            self.consumer_conf,
            partition.topic,
            partition.partition,
            partition.start,
            partition.end,
            self.arrow_schema,
            include_headers=self.include_headers,
            fail_on_data_loss=self.fail_on_data_loss,
            poll_timeout_ms=self.poll_timeout_ms,
            direct=self.direct,
        )
