"""``spark.read.format("odradek")``: exact offset ranges, planned on the driver from
``startingOffsets``/``endingOffsets`` (default earliest to latest) and read by the
executors, one Spark task per partition range (split by ``minPartitions`` and
``maxRecordsPerPartition``)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from odradek.pipeline.offset_lookup import OffsetLookup
from odradek.pipeline.offsets import describe, plan_ranges
from odradek.pipeline.options import SourceOptions
from odradek.pipeline.scan import RangePartition, ScanSettings


class OdradekBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.scan = ScanSettings.create(opts, schema, "executor")

    def partitions(self) -> list[InputPartition]:
        opts = self.opts
        lookup = OffsetLookup(opts)
        try:
            tps = lookup.partitions()
            start = lookup.resolve(
                opts.starting,
                tps,
                option="startingOffsets",
                timestamp_strategy=opts.timestamp_strategy,
            )
            end = lookup.resolve(opts.ending, tps, option="endingOffsets")
        finally:
            lookup.close()
        for tp in tps:
            if end[tp] < start[tp]:
                raise ValueError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} "
                    f"for topic partition {describe(tp)}"
                )
        ranges = plan_ranges(
            start,
            end,
            min_partitions=opts.min_partitions,
            max_records_per_partition=opts.max_records_per_partition,
        )
        return [RangePartition.of(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.scan.read(partition)
