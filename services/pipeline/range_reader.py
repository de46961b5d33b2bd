"""Executor side: read one offset range ``[start, end)`` of one partition and hand it
to Spark as Arrow record batches: with Odradek's own Fetch reader
(:mod:`partition_fetcher`, column-wise decoding) where it applies, otherwise with
librdkafka (assign + seek, never a group subscription), described below.

Gaps inside a range are normal (compaction, transaction markers): a record's offset
is whatever the log says, and a range ends when a record at or past ``end`` shows
up or the partition's end is reached past ``end``. Offsets the log no longer has
are data loss: with ``failOnDataLoss`` the task fails with a message saying which
offsets went missing; without it, reading skips to the earliest offset still there.

Consumers are pooled per Python worker (Spark reuses workers across tasks), keyed
by their settings, so a streaming query does not pay a client start-up per
micro-batch.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.pipeline.partition_fetcher import DataLoss
from odradek.pipeline.partition_fetcher import read_range as read_direct
from odradek.pipeline.record_columns import LegacyFormatError

MAX_BATCH_RECORDS = 10_000
POLL_SLICE_S = 0.2
POOL_SIZE = 4

Config = Mapping[str, Any]


class DataLossError(RuntimeError):
    """Offsets a query needs are gone from the log (retention, DeleteRecords,
    truncation or a re-created topic)."""


def data_loss_message(topic: str, partition: int, detail: str) -> str:
    return (
        f"{detail} (TopicPartition: {topic}-{partition}). Some data may have been lost because "
        "they are not available in Kafka any more; either the data was aged out by Kafka or "
        "the topic may have been deleted before all the data in the topic was processed. If "
        "you don't want your query to fail on such cases, set the source option "
        '"failOnDataLoss" to "false".'
    )


# -- consumer pool -----------------------------------------------------------------

_POOL: OrderedDict[tuple[tuple[str, str], ...], Consumer] = OrderedDict()


def _pool_key(conf: Config) -> tuple[tuple[str, str], ...]:
    # group.id is only a label for an assign-only consumer; one client serves any.
    return tuple(sorted((k, str(v)) for k, v in conf.items() if k != "group.id"))


def _acquire(conf: Config) -> tuple[tuple[tuple[str, str], ...], Consumer]:
    key = _pool_key(conf)
    consumer = _POOL.pop(key, None)
    if consumer is None:
        consumer = Consumer(dict(conf))
    return key, consumer


def _release(key: tuple[tuple[str, str], ...], consumer: Consumer, healthy: bool) -> None:
    try:
        consumer.unassign()
    except KafkaException:
        healthy = False
    if not healthy:
        consumer.close()
        return
    _POOL[key] = consumer
    while len(_POOL) > POOL_SIZE:
        _, old = _POOL.popitem(last=False)
        old.close()


# -- reading -------------------------------------------------------------------------


def fetch_messages(
    conf: Config,
    topic: str,
    partition: int,
    start: int,
    end: int,
    *,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
    max_batch: int = MAX_BATCH_RECORDS,
) -> Iterator[tuple[list[Message], list[int]]]:
    """Yield ``(messages, offsets)`` chunks covering ``start <= offset < end`` in order."""
    if end <= start:
        return
    key, consumer = _acquire(conf)
    healthy = False
    try:
        yield from _fetch(
            consumer, topic, partition, start, end, fail_on_data_loss, poll_timeout_ms, max_batch
        )
        healthy = True
    finally:
        _release(key, consumer, healthy)


def _fetch(
    consumer: Consumer,
    topic: str,
    partition: int,
    start: int,
    end: int,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
    max_batch: int,
) -> Iterator[tuple[list[Message], list[int]]]:
    pos = start
    consumer.assign([KafkaTopicPartition(topic, partition, pos)])
    timeout_s = poll_timeout_ms / 1000.0
    deadline = time.monotonic() + timeout_s
    while pos < end:
        msgs = consumer.consume(min(max_batch, end - pos), min(POLL_SLICE_S, timeout_s))
        if not msgs:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Cannot fetch record for offset {pos} in {poll_timeout_ms} milliseconds "
                    f"(TopicPartition: {topic}-{partition}, range [{start}, {end}))"
                )
            continue
        errors = [m for m in msgs if m.error() is not None]
        good = [m for m in msgs if m.error() is None] if errors else msgs
        if good:
            # Messages without an error always carry their offset.
            offsets = cast(list[int], [m.offset() for m in good])
            if offsets[0] < pos:  # never expected from librdkafka; keep the range exact
                cut = bisect_left(offsets, pos)
                good, offsets = good[cut:], offsets[cut:]
            done = bool(offsets) and offsets[-1] >= end - 1
            if offsets and offsets[-1] >= end:
                cut = bisect_left(offsets, end)
                good, offsets = good[:cut], offsets[:cut]
            if offsets:
                pos = offsets[-1] + 1
                deadline = time.monotonic() + timeout_s
                yield good, offsets
            if done:
                return
        for m in errors:
            outcome = _on_error(consumer, m, topic, partition, pos, end, fail_on_data_loss)
            if outcome is None:
                continue
            if outcome >= end:
                return
            pos = outcome
            consumer.assign([KafkaTopicPartition(topic, partition, pos)])
            break


def _watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int]:
    lo, hi = consumer.get_watermark_offsets(
        KafkaTopicPartition(topic, partition), timeout=30.0, cached=False
    )
    return int(lo), int(hi)


def _on_error(
    consumer: Consumer,
    msg: Message,
    topic: str,
    partition: int,
    pos: int,
    end: int,
    fail_on_data_loss: bool,
) -> int | None:
    """What to do after an error event: ``None`` keeps polling; a number re-assigns
    the partition at that offset (``>= end`` means the range is complete)."""
    err = msg.error()
    assert err is not None
    code = err.code()
    if code == KafkaError._PARTITION_EOF:
        if (msg.offset() or 0) >= end or pos >= end:
            return end  # everything below end that still exists has been delivered
        lo, hi = _watermarks(consumer, topic, partition)
        if hi >= end:
            return None  # the end offset was visible when planned; keep reading
        if fail_on_data_loss:
            raise DataLossError(
                data_loss_message(
                    topic,
                    partition,
                    f"Offsets [{hi}, {end}) were planned but the log now ends at {hi}",
                )
            )
        return end
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        lo, hi = _watermarks(consumer, topic, partition)
        if pos < lo:
            if fail_on_data_loss:
                raise DataLossError(
                    data_loss_message(
                        topic,
                        partition,
                        f"Cannot fetch offset {pos}: the earliest offset is now {lo}, so "
                        f"offsets [{pos}, {min(lo, end)}) are gone",
                    )
                )
            return lo
        if pos >= hi:
            if fail_on_data_loss:
                raise DataLossError(
                    data_loss_message(
                        topic, partition, f"Cannot fetch offset {pos}: the log now ends at {hi}"
                    )
                )
            return end
        return pos  # a transient out-of-range (e.g. a leader change): seek again
    if err.retriable() or code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
        return None
    raise KafkaException(err)


# -- Arrow conversion ------------------------------------------------------------------


def to_record_batch(
    msgs: list[Message],
    offsets: list[int],
    topic: str,
    partition: int,
    schema: pa.Schema,
    include_headers: bool,
) -> pa.RecordBatch:
    """One Arrow batch in the source's column order; columns built from whole lists."""
    n = len(msgs)
    types, millis = zip(*[m.timestamp() for m in msgs], strict=True)
    ts_ms = pa.array(millis, pa.int64())
    columns: list[pa.Array] = [
        pa.array([m.key() for m in msgs], pa.binary()),
        pa.array([m.value() for m in msgs], pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pc.multiply(ts_ms, 1000).cast(schema.field("timestamp").type),
        # librdkafka: 0 none, 1 CreateTime, 2 LogAppendTime; Java (and Spark): -1, 0, 1.
        pc.subtract(pa.array(types, pa.int32()), 1),
    ]
    if include_headers:
        columns.append(_headers_array(msgs, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _headers_array(msgs: list[Message], list_type: pa.DataType) -> pa.Array:
    starts = [0]
    keys: list[str] = []
    values: list[bytes | None] = []
    mask = []
    for m in msgs:
        hs = cast(list[tuple[str, bytes | None]] | None, m.headers())  # librdkafka gives a list
        mask.append(not hs)
        if hs:
            for k, v in hs:
                keys.append(k)
                values.append(v)
        starts.append(len(keys))
    struct_type = list_type.value_type
    items = pa.StructArray.from_arrays(
        [pa.array(keys, pa.string()), pa.array(values, pa.binary())],
        fields=list(struct_type),
    )
    return pa.ListArray.from_arrays(
        pa.array(starts, pa.int32()), items, type=list_type, mask=pa.array(mask, pa.bool_())
    )


def read_range_batches(
    conf: Config,
    topic: str,
    partition: int,
    start: int,
    end: int,
    schema: pa.Schema,
    *,
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    poll_timeout_ms: int = 120_000,
    direct: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The range as Arrow batches: fetched directly from the leader and decoded
    column-wise when ``direct`` (plaintext, read_uncommitted), else through librdkafka
    (also for what remains of a range once a legacy message set shows up)."""
    if direct:
        pos = start
        try:
            for batch in read_direct(
                conf,
                topic,
                partition,
                start,
                end,
                schema,
                include_headers=include_headers,
                fail_on_data_loss=fail_on_data_loss,
                poll_timeout_ms=poll_timeout_ms,
            ):
                pos = int(batch.column(4)[-1].as_py()) + 1
                yield batch
            return
        except DataLoss as exc:
            raise DataLossError(data_loss_message(topic, partition, exc.detail)) from None
        except LegacyFormatError:
            start = pos
    for msgs, offsets in fetch_messages(
        conf,
        topic,
        partition,
        start,
        end,
        fail_on_data_loss=fail_on_data_loss,
        poll_timeout_ms=poll_timeout_ms,
    ):
        yield to_record_batch(msgs, offsets, topic, partition, schema, include_headers)
