"""Publish each streaming micro-batch's records to a topic exactly once, across
crashes and replays, without Kafka transactions.

Spark re-runs a micro-batch whose commit it did not record, so a plain producer
would write that batch's records again. Here every record says who wrote it and
where it belongs, in its headers:

    odradek.writer   the writer's id (the streaming query id, stable across restarts)
    odradek.batch    the micro-batch id, decimal ASCII
    odradek.seq      the record's position among this batch's records in its partition

and the publisher picks the partition itself (CRC-32 of the key, modulo the
partition count), so a replay sends each record to the same partition as before.

Invariants this relies on:
- one writer per topic partition (the job owns its summary topic), and batches are
  published in increasing id order, each after Spark committed the one before;
- an idempotent producer (``enable.idempotence=true``) writes a partition's records
  in order with no gaps: whatever reached the log before a crash is a prefix of
  that partition's planned records;
- a replayed batch plans the same records in the same order (the caller builds
  them deterministically from the batch's data).

Publishing batch N therefore reads back the last ``n`` records of each partition
it writes to (``n`` = records planned there); the ones tagged (writer, N) are the
prefix an earlier attempt wrote, and only the rest is produced. A record tagged
with this writer and a later batch means the checkpoint is older than the topic
(restored or copied): that raises rather than guess.

Crash behaviour: a crash at any point leaves, per partition, a prefix of batch N's
records; the next attempt completes it. Consumers see every record once, in order.
What this cannot cover: a second live writer (a zombie driver still producing), or
partitions added to the topic while a batch is half published.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.pipeline.range_reader import fetch_messages
from odradek.pipeline.topics import metadata_client, partition_count

HEADER_WRITER = "odradek.writer"
HEADER_BATCH = "odradek.batch"
HEADER_SEQ = "odradek.seq"


@dataclass(frozen=True)
class OutRecord:
    key: bytes
    value: bytes
    timestamp_ms: int = 0  # 0: the producer's clock


@dataclass(frozen=True)
class PublishReport:
    planned: int
    already_present: int
    written: int


class InconsistentTopicError(RuntimeError):
    """The topic holds records this writer could not have written at this point."""


def partition_for(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


class BatchPublisher:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        writer_id: str,
        *,
        client_conf: Mapping[str, Any] | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self.topic = topic
        self.writer_id = writer_id
        self._timeout = timeout_s
        base = {"bootstrap.servers": bootstrap, **(client_conf or {})}
        self._consumer_conf: dict[str, Any] = {
            **base,
            "group.id": f"odradek-publisher-{writer_id}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 10,  # reads stop at the high watermark: never wait
        }
        self._producer_conf: dict[str, Any] = {
            **base,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
        self._meta = metadata_client(self._consumer_conf)
        self._producer: Producer | None = None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self._timeout)
            self._producer = None
        self._meta.close()

    def _partitions(self) -> int:
        n = partition_count(self._meta, self.topic, self._timeout)
        if n == 0:
            raise RuntimeError(f"topic {self.topic} does not exist")
        return n

    def plan(self, records: Sequence[OutRecord]) -> dict[int, list[OutRecord]]:
        n = self._partitions()
        planned: dict[int, list[OutRecord]] = {}
        for rec in records:
            planned.setdefault(partition_for(rec.key, n), []).append(rec)
        return planned

    def published_prefix(self, partition: int, batch_id: int, planned: int) -> int:
        """How many of batch ``batch_id``'s records are already at the partition's end."""
        lo, hi = self._meta.get_watermark_offsets(
            KafkaTopicPartition(self.topic, partition), timeout=self._timeout, cached=False
        )
        start = max(lo, hi - planned)
        if start >= hi:
            return 0
        found = 0
        for msgs, _ in fetch_messages(
            self._consumer_conf,
            self.topic,
            partition,
            start,
            hi,
            fail_on_data_loss=False,
            poll_timeout_ms=int(self._timeout * 1000),
        ):
            for m in msgs:
                writer, batch, seq = _tags(m)
                if writer != self.writer_id:
                    continue
                if batch > batch_id:
                    raise InconsistentTopicError(
                        f"{self.topic}-{partition} offset {m.offset()} holds batch {batch} of "
                        f"writer {writer} while batch {batch_id} is being published: the "
                        "checkpoint is older than the topic"
                    )
                if batch == batch_id:
                    if seq != found:
                        raise InconsistentTopicError(
                            f"{self.topic}-{partition} offset {m.offset()}: batch {batch_id} "
                            f"record {seq} where {found} was expected"
                        )
                    found += 1
        return found

    def publish(self, batch_id: int, records: Sequence[OutRecord]) -> PublishReport:
        planned = self.plan(records)
        present = 0
        todo: list[tuple[int, int, OutRecord]] = []
        for partition in sorted(planned):
            recs = planned[partition]
            done = self.published_prefix(partition, batch_id, len(recs))
            present += done
            todo += [(partition, seq, rec) for seq, rec in enumerate(recs) if seq >= done]
        self._produce(batch_id, todo)
        return PublishReport(planned=len(records), already_present=present, written=len(todo))

    def _produce(self, batch_id: int, todo: list[tuple[int, int, OutRecord]]) -> None:
        if not todo:
            return
        errors: list[str] = []

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"{msg.topic()}-{msg.partition()}: {err}")

        if self._producer is None:
            self._producer = Producer(self._producer_conf)
        producer = self._producer
        batch = str(batch_id).encode()
        writer = self.writer_id.encode()
        for partition, seq, rec in todo:
            headers: list[tuple[str, str | bytes | None]] = [
                (HEADER_WRITER, writer),
                (HEADER_BATCH, batch),
                (HEADER_SEQ, str(seq).encode()),
            ]
            while True:
                try:
                    producer.produce(
                        self.topic,
                        rec.value,
                        rec.key,
                        partition=partition,
                        timestamp=rec.timestamp_ms,
                        headers=headers,
                        on_delivery=on_delivery,
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        left = producer.flush(self._timeout)
        if left or errors:
            # An idempotent producer that lost records may be wedged: start afresh next time.
            self._producer = None
            raise RuntimeError(
                f"publishing batch {batch_id} to {self.topic} failed: "
                f"{len(errors)} delivery error(s), {left} unflushed; first: {errors[:1]}"
            )


def _tags(m: Message) -> tuple[str | None, int, int]:
    writer: str | None = None
    batch = seq = -1
    for key, value in cast(list[tuple[str, bytes | None]], m.headers() or []):
        if value is None:
            continue
        if key == HEADER_WRITER:
            writer = value.decode()
        elif key == HEADER_BATCH:
            batch = int(value)
        elif key == HEADER_SEQ:
            seq = int(value)
    return writer, batch, seq
