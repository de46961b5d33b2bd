"""How a DataFrame maps onto Kafka records in the sink, checked with Spark's rules
and messages: ``value`` (string or binary, required), ``key`` (string or binary),
``topic`` (string; required unless the ``topic`` option is set, which then wins),
``partition`` (int; null lets the partitioner choose) and ``headers``
(``array<struct<key:string,value:binary>>``, any nullability). Names match
case-insensitively, like Spark's.

Pure code: schema checks only.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import ArrayType, BinaryType, DataType, IntegerType, StringType, StructType

from odradek.pipeline.options import OptionError
from odradek.pipeline.schema import HEADER_TYPE


@dataclass(frozen=True)
class SinkColumns:
    """Actual column names in the written DataFrame (``None`` when absent)."""

    value: str
    key: str | None
    topic: str | None
    partition: str | None
    headers: str | None


def is_headers_type(dt: DataType) -> bool:
    """``array<struct<key:string,value:binary>>`` whatever the nullability of the array,
    its elements and their fields, as Spark's Kafka sink matches it: ``F.array(F.struct(
    F.lit("k").alias("key"), F.lit(b"v").alias("value")))`` is non-nullable throughout."""
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = dt.elementType.fields
    return (
        len(fields) == 2
        and (fields[0].name, fields[1].name)
        == (HEADER_TYPE.fields[0].name, HEADER_TYPE.fields[1].name)
        and isinstance(fields[0].dataType, StringType)
        and isinstance(fields[1].dataType, BinaryType)
    )


def sink_columns(schema: StructType, topic_option: str | None) -> SinkColumns:
    """Check the DataFrame against Spark's Kafka sink rules, with Spark's messages."""
    by_name = {f.name.lower(): f for f in schema.fields}

    def pick(name: str, allowed: tuple[type, ...], what: str) -> str | None:
        field = by_name.get(name)
        if field is None:
            return None
        if not isinstance(field.dataType, allowed):
            raise OptionError(
                f"{name} attribute type must be {what}, got {field.dataType.simpleString()}"
            )
        return field.name

    value = pick("value", (StringType, BinaryType), "a string or binary")
    if value is None:
        raise OptionError("Required attribute 'value' not found")
    topic = pick("topic", (StringType,), "a string")
    if topic is None and topic_option is None:
        raise OptionError(
            "topic option required when no 'topic' attribute is present. "
            "Use the topic option for setting a topic."
        )
    headers_field = by_name.get("headers")
    if headers_field is not None and not is_headers_type(headers_field.dataType):
        raise OptionError(
            "headers attribute type must be array<struct<key:string,value:binary>>, got "
            f"{headers_field.dataType.simpleString()}"
        )
    return SinkColumns(
        value=value,
        key=pick("key", (StringType, BinaryType), "a string or binary"),
        topic=None if topic_option is not None else topic,
        partition=pick("partition", (IntegerType,), "an int"),
        headers=headers_field.name if headers_field is not None else None,
    )
