"""The sink's ``deliveryGuarantee=exactly-once`` mode: each write task writes its rows
in one Kafka transaction (KIP-98) and commits it, together with a marker that says
which micro-batch it belongs to; a replayed task finds the marker and writes nothing.

Micro-batch ``N`` (Spark's local property ``streaming.sql.batchId``), write task with
Spark partition id ``p``:

1. ``transactional.id = <transactionalIdPrefix>-<p>``; ``init_transactions()`` fences
   every earlier producer with that id (a failed or speculative attempt, the tasks of
   a killed driver) by bumping the epoch, and finishes its last transaction: an open
   one is aborted, one whose commit was already decided is completed.
2. The marker: the offset that consumer group ``<transactionalIdPrefix>-<p>`` has
   committed on partition 0 of ``MARKER_TOPIC``, read with ``require_stable``
   (read_committed). At least ``N + 1`` means an earlier attempt committed batch
   ``N`` of task ``p``: the task writes nothing.
3. Otherwise: begin, produce every row, ``send_offsets_to_transaction`` with offset
   ``N + 1`` for that group (Kafka's consume-transform-produce commit, KIP-98/447),
   commit. Rows and marker become visible together or not at all.

The guarantee, for consumers reading with ``isolation.level=read_committed``: every
row of every micro-batch appears exactly once, across task retries, speculative
attempts, executor loss and driver crashes (SIGKILL) at any point followed by a
restart from the checkpoint. It rests on what Spark already asks of an exactly-once
query: a replayable source and a deterministic query, so that a replayed batch gives
task ``p`` the same rows (the ``odradek`` source replays the same offset ranges in
the same task order). Visibility is per task, not per batch: a task's rows appear
when it commits, possibly before the rest of its batch, and a batch that fails after
some tasks committed keeps their rows, which its replay then skips rather than
repeats. ``read_uncommitted`` consumers also see rows of aborted attempts.

Spark's driver-side ``commit(messages, batchId)`` has nothing left to do: committing
there would need the producer id and epoch of each task's transaction (librdkafka
does not expose them) and would keep transactions open across the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark import TaskContext

from odradek.pipeline.client_config import producer_config, quiet
from odradek.pipeline.options import SinkOptions
from odradek.pipeline.record_producer import Delivery, flush, produce_rows
from odradek.pipeline.sink_columns import SinkColumns
from odradek.pipeline.topics import ensure_topic

# One leading underscore: names starting with "__" are reserved (odradek.controller.names).
MARKER_TOPIC = "_odradek_spark_sink_batches"
BATCH_ID_PROPERTY = "streaming.sql.batchId"  # MicroBatchExecution.BATCH_ID_KEY
TRANSACTION_TIMEOUT_MS = 600_000
CALL_TIMEOUT_S = 60.0


class TransactionsUnavailableError(RuntimeError):
    """The cluster does not serve Kafka transactions."""


def transactional_id(prefix: str, partition_id: int) -> str:
    return f"{prefix}-{partition_id}"


def transactional_config(opts: SinkOptions, tid: str) -> dict[str, Any]:
    return {
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
        **producer_config(opts),
        "transactional.id": tid,
        "enable.idempotence": True,
        "acks": "all",
    }


def check_transactions(opts: SinkOptions) -> None:
    """On the driver, before any task: the cluster serves transactions, and the marker
    topic exists. Fails with the cluster's answer otherwise."""
    assert opts.transactional_id_prefix is not None
    producer = Producer(transactional_config(opts, f"{opts.transactional_id_prefix}-check"))
    try:
        producer.init_transactions(CALL_TIMEOUT_S)
    except KafkaException as exc:
        raise TransactionsUnavailableError(
            "deliveryGuarantee=exactly-once needs Kafka transactions, which "
            f"{opts.bootstrap_servers} refused: {exc.args[0] if exc.args else exc}"
        ) from None
    ensure_topic(
        opts.bootstrap_servers,
        MARKER_TOPIC,
        conf={k: v for k, v in opts.kafka_params.items() if k != "bootstrap.servers"},
    )


def _marker_consumer(opts: SinkOptions, group: str) -> Consumer:
    return Consumer(
        quiet(
            {
                **{k: v for k, v in opts.kafka_params.items() if not k.startswith("transaction")},
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",  # OffsetFetch with require_stable
            },
            opts.kafka_params,
        )
    )


def committed_batches(consumer: Consumer) -> int:
    """The marker: how many micro-batches this task has committed (its last ``N + 1``)."""
    (tp,) = consumer.committed([KafkaTopicPartition(MARKER_TOPIC, 0)], timeout=CALL_TIMEOUT_S)
    if tp.error is not None:
        raise KafkaException(tp.error)
    return max(0, tp.offset)


def current_task() -> tuple[int, int]:
    """``(micro-batch id, Spark partition id)`` of the running write task."""
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("exactly-once writes run inside Spark tasks only")
    raw = ctx.getLocalProperty(BATCH_ID_PROPERTY)
    if raw is None:
        raise RuntimeError(
            "deliveryGuarantee=exactly-once applies to streaming writes (writeStream): "
            "no micro-batch id in this task"
        )
    return int(raw), ctx.partitionId()


def write_transactionally(
    opts: SinkOptions,
    cols: SinkColumns,
    batches: Iterator[pa.RecordBatch],
    batch_id: int,
    partition_id: int,
) -> tuple[int, bool]:
    """Write one task's rows of micro-batch ``batch_id`` exactly once; return
    ``(rows written, whether an earlier attempt had already committed them)``."""
    assert opts.transactional_id_prefix is not None
    tid = transactional_id(opts.transactional_id_prefix, partition_id)
    delivery = Delivery()
    producer = Producer({**transactional_config(opts, tid), **delivery.callbacks()})
    marker = _marker_consumer(opts, tid)
    try:
        producer.init_transactions(CALL_TIMEOUT_S)  # fences zombies, settles their txn
        if committed_batches(marker) >= batch_id + 1:
            return 0, True
        producer.begin_transaction()
        try:
            n = produce_rows(producer, delivery, cols, opts.topic, batches)
            flush(producer, delivery)
            producer.send_offsets_to_transaction(
                [KafkaTopicPartition(MARKER_TOPIC, 0, batch_id + 1)],
                marker.consumer_group_metadata(),
                CALL_TIMEOUT_S,
            )
            producer.commit_transaction(CALL_TIMEOUT_S)
        except BaseException:
            try:
                producer.abort_transaction(CALL_TIMEOUT_S)
            except KafkaException:
                pass  # fenced or broken: the next init_transactions aborts it anyway
            raise
        return n, False
    finally:
        marker.close()
