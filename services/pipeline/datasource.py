"""The ``odradek`` Spark data source: Spark's Kafka source and sink, in Python, over
any Kafka-compatible cluster (PySpark 4.2+ ``pyspark.sql.datasource``).

Spark's own connector is a JVM jar outside the ``pyspark`` wheel; this one needs
only ``confluent-kafka`` and ``pyarrow`` on the driver and executors.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.pipeline.batch_reader import OdradekBatchReader
from odradek.pipeline.options import parse_sink_options, parse_source_options
from odradek.pipeline.schema import source_schema
from odradek.pipeline.sink import OdradekBatchWriter, OdradekStreamWriter
from odradek.pipeline.stream_reader import OdradekStreamReader

FORMAT = "odradek"


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        """Called by ``load()``: the options are checked here, as Spark's Kafka source
        checks them when the DataFrame is defined, not when the query starts."""
        opts = parse_source_options(self.options, streaming=None)
        return source_schema(opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return OdradekBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OdradekStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return OdradekBatchWriter(parse_sink_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return OdradekStreamWriter(parse_sink_options(self.options), schema, overwrite)
