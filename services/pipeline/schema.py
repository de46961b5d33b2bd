"""The row layout of Spark's Kafka source, as a Spark schema and the Arrow schema the
Python data source must hand back for it (Spark checks the two are equal).

``timestampType`` uses the Java client's ids (0 CreateTime, 1 LogAppendTime,
-1 none), not librdkafka's (1, 2, 0).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")


def source_schema(include_headers: bool) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE)))
    return StructType(fields)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects back for ``schema`` (UTC timestamps)."""
    return to_arrow_schema(schema, timezone="UTC")
