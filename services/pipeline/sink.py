"""``df.write.format("odradek")`` and ``df.writeStream.format("odradek")``.

Columns as in Spark's Kafka sink (:mod:`odradek.pipeline.sink_columns`). Two
delivery guarantees, chosen with the ``deliveryGuarantee`` option:

``at-least-once`` (the default, and Spark's Kafka sink's): each task writes through
its own idempotent producer (``acks=all`` unless ``kafka.acks`` says otherwise:
``arrow_producer`` on plaintext clusters with default settings, else librdkafka) and
flushes before it reports success, so a committed Spark task means acknowledged
records and any delivery error fails the task; retries inside a task never
duplicate or reorder. A retried task, or a micro-batch replayed after a driver
crash, writes its records again: duplicates are possible, losses are not.

``exactly-once`` (streaming writes, with ``transactionalIdPrefix``): each task writes
in a Kafka transaction fenced by its transactional id and committed with a marker
of its micro-batch; see :mod:`odradek.pipeline.transactional_write` for the
protocol and the precise guarantee (consumers must read with
``isolation.level=read_committed``).

The driver checks the bootstrap servers before any task starts, so a wrong address
fails in seconds with its reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Producer
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from odradek.pipeline.arrow_producer import ArrowProducer
from odradek.pipeline.bootstrap_check import check_bootstrap
from odradek.pipeline.client_config import admin_config, direct_produce_ok, producer_config
from odradek.pipeline.options import OptionError, SinkOptions
from odradek.pipeline.record_producer import Delivery, flush, produce_rows
from odradek.pipeline.sink_columns import SinkColumns, sink_columns
from odradek.pipeline.transactional_write import (
    check_transactions,
    current_task,
    write_transactionally,
)

BOOTSTRAP_BUDGET_S = 5.0


@dataclass
class Written(WriterCommitMessage):
    records: int
    already_committed: bool = False


def produce_batches(opts: SinkOptions, cols: SinkColumns, batches: Iterator[pa.RecordBatch]) -> int:
    """At-least-once: write every row with one idempotent producer, flush, fail on any
    error. Arrow batches go out as whole record batches (``arrow_producer``) where that
    applies; the rest, and topics that do not exist yet (librdkafka lets the broker
    create them), through librdkafka."""
    delivery = Delivery()
    fallback: Producer | None = None
    direct = ArrowProducer(producer_config(opts)) if direct_produce_ok(opts, cols) else None
    written = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if direct is not None and _send_direct(direct, opts, cols, batch):
                written += batch.num_rows
                continue
            if fallback is None:
                fallback = Producer({**producer_config(opts), **delivery.callbacks()})
            written += produce_rows(fallback, delivery, cols, opts.topic, iter([batch]))
        if direct is not None:
            direct.flush()
        if fallback is not None:
            flush(fallback, delivery)
    finally:
        if direct is not None:
            direct.close()
    return written


def _send_direct(
    producer: ArrowProducer, opts: SinkOptions, cols: SinkColumns, batch: pa.RecordBatch
) -> bool:
    """Queue ``batch`` on the direct producer; False when a topic is unknown to it."""
    if cols.topic is None:
        assert opts.topic is not None
        groups = [(opts.topic, batch)]
    else:
        topic_col = batch.column(cols.topic)
        if topic_col.null_count:
            raise ValueError("null topic present in the data; set the topic option or fill it")
        groups = [
            (str(t), batch.filter(pc.equal(topic_col, t))) for t in pc.unique(topic_col).to_pylist()
        ]
    if not all(producer.knows(t) for t, _ in groups):
        return False
    for topic, rows in groups:
        producer.send(
            topic,
            rows.column(cols.key) if cols.key else None,
            rows.column(cols.value),
            rows.column(cols.partition) if cols.partition else None,
        )
    return True


def _check_mode(overwrite: bool) -> None:
    if overwrite:
        raise OptionError(
            "Save mode Overwrite is not allowed for Kafka topics, which are append-only; use append"
        )


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: SinkOptions, schema: StructType, overwrite: bool) -> None:
        _check_mode(overwrite)
        if opts.exactly_once:
            raise OptionError(
                "deliveryGuarantee=exactly-once applies to streaming writes (writeStream), "
                "whose micro-batch ids let a replay find what was already committed"
            )
        self.opts = opts
        self.cols = sink_columns(schema, opts.topic)
        check_bootstrap(admin_config(opts), BOOTSTRAP_BUDGET_S, "sink")

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
        check_bootstrap(admin_config(opts), BOOTSTRAP_BUDGET_S, "sink")
        if opts.exactly_once:
            check_transactions(opts)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        if not self.opts.exactly_once:
            return Written(produce_batches(self.opts, self.cols, iterator))
        batch_id, partition_id = current_task()
        n, skipped = write_transactionally(self.opts, self.cols, iterator, batch_id, partition_id)
        return Written(n, already_committed=skipped)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Each task acknowledged (or committed) its records before reporting success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records stay (at-least-once); committed transactions stay and their
        markers make the replay skip them (exactly-once)."""
