"""``df.write.format("odradek")`` and ``df.writeStream.format("odradek")``.

Columns as in Spark's Kafka sink: ``value`` (string or binary, required), ``key``
(string or binary), ``topic`` (string; required unless the ``topic`` option is
set, which then wins), ``partition`` (int; null lets the partitioner choose) and
``headers`` (``array<struct<key:string,value:binary>>``). Names match
case-insensitively, like Spark's.

Each task writes through its own idempotent producer (``enable.idempotence=true``,
``acks=all``): retries inside a task never duplicate or reorder records. The task
flushes before it reports success, so a committed Spark task means acknowledged
records, and any delivery error fails the task. Like Spark's Kafka sink this is
at-least-once across task retries and streaming replays: a retried task writes
its records again. (Exactly-once needs an idempotent consumer of the output; the
access-log job shows one way.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from odradek.pipeline.client_config import producer_config
from odradek.pipeline.options import OptionError, SinkOptions
from odradek.pipeline.schema import HEADER_TYPE

FLUSH_POLL_S = 0.05


@dataclass
class Written(WriterCommitMessage):
    records: int


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


class _Delivery:
    """Collects failed deliveries and fatal client errors (successes send no callback)."""

    def __init__(self) -> None:
        self.failed = 0
        self.first: str | None = None

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._record(f"delivery to {msg.topic()}-{msg.partition()} failed: {err}")

    def on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._record(f"fatal producer error: {err}")

    def _record(self, text: str) -> None:
        self.failed += 1
        if self.first is None:
            self.first = text

    def raise_if_failed(self) -> None:
        if self.failed:
            raise RuntimeError(f"{self.failed} record(s) not written to Kafka; first: {self.first}")


def produce_batches(opts: SinkOptions, cols: SinkColumns, batches: Iterator[pa.RecordBatch]) -> int:
    """Write every row with one idempotent producer, flush, and fail on any error."""
    delivery = _Delivery()
    conf: dict[str, Any] = {
        **producer_config(opts),
        "on_delivery": delivery.on_delivery,
        "error_cb": delivery.on_error,
    }
    producer = Producer(conf)
    produce = producer.produce
    written = 0
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        values = batch.column(cols.value).to_pylist()
        keys = batch.column(cols.key).to_pylist() if cols.key else [None] * n
        if cols.topic:
            topics = batch.column(cols.topic).to_pylist()
            if None in topics:
                raise ValueError("null topic present in the data; set the topic option or fill it")
        else:
            topics = [opts.topic] * n
        parts = batch.column(cols.partition).to_pylist() if cols.partition else None
        headers = batch.column(cols.headers).to_pylist() if cols.headers else None
        for i in range(n):
            extra: dict[str, Any] = {}
            if parts is not None and parts[i] is not None:
                extra["partition"] = parts[i]
            if headers is not None and headers[i]:
                extra["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    produce(topics[i], values[i], keys[i], **extra)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(FLUSH_POLL_S)
        written += n
        producer.poll(0)
        delivery.raise_if_failed()
    while producer.flush(1.0) > 0:
        delivery.raise_if_failed()
    delivery.raise_if_failed()
    return written


def _check_mode(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            "Save mode Overwrite is not allowed for Kafka topics, which are append-only; use append"
        )


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType, overwrite: bool) -> None:
        _check_mode(overwrite)
        self.opts = opts
        self.cols = sink_columns(schema, opts.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return Written(produce_batches(self.opts, self.cols, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records were acknowledged before each task reported success."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records already acknowledged stay in the topic; Kafka has no rollback here."""


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType, overwrite: bool) -> None:
        # Complete output mode (``overwrite``) appends every result row each batch,
        # as Spark's Kafka sink does: a topic cannot be truncated.
        self.opts = opts
        self.cols = sink_columns(schema, opts.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return Written(produce_batches(self.opts, self.cols, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records were acknowledged before each task reported success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records already acknowledged stay in the topic; the batch will be replayed."""
