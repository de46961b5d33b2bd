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
from odradek.pipeline.options import OptionError, SourceOptions, SpecificOffsets
from odradek.pipeline.scan import RangePartition, ScanSettings
from odradek.pipeline.spark_offsets import PartitionOffsets, describe, plan_ranges


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
            for tp in tps:
                if end[tp] < start[tp]:
                    raise ValueError(
                        f"Beginning offset {start[tp]} is after the ending offset {end[tp]} "
                        f"for topic partition {describe(tp)}"
                    )
            if isinstance(opts.ending, SpecificOffsets):
                _check_ending(end, lookup.latest(tps))
        finally:
            lookup.close()
        ranges = plan_ranges(
            start,
            end,
            min_partitions=opts.min_partitions,
            max_records_per_partition=opts.max_records_per_partition,
        )
        return [RangePartition.of(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.scan.read(partition)


def _check_ending(end: PartitionOffsets, latest: PartitionOffsets) -> None:
    """An explicit ending offset past the log end is a mistake in the option, not data
    loss: those records were never written."""
    beyond = sorted(tp for tp, o in end.items() if o > latest.get(tp, o))
    if beyond:
        raise OptionError(
            "endingOffsets beyond the end of the log: "
            + ", ".join(
                f"{describe(tp)} asks for {end[tp]} but ends at {latest[tp]}" for tp in beyond
            )
            + " (use -1 for latest)"
        )
