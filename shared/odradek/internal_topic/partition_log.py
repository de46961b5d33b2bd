"""Reading and appending one partition of an internal topic through the storage nodes.

:func:`read_partition` replays a partition from its log start to the high watermark
seen when the read began (the owning service is the partition's only writer, so
nothing it must see can arrive later); every record, control records included, goes
to the caller with its batch. :class:`PartitionAppender` is group commit for one
partition: writes that arrive while a Produce is in flight are coalesced into the next
record batch, so 100 groups committing at once cost a handful of appends, and one
writer task keeps the log order equal to the order in which the cache is updated.
Every append uses ``acks=-1`` and a write counts only once the storage node answers
without error; the cache is updated (``on_durable``) before the writer hears back.

Transactions: a write may belong to a transactional producer (TxnOffsetCommit,
:class:`TxnProducer`): it goes alone into a transactional batch of that producer,
appended with Kafka's ``AppendOrigin.COORDINATOR`` (epoch and transaction checks, no
sequence checks; Kafka's CoordinatorRuntime writes such batches with base sequence 0).
Other writes to the partition (transaction markers, which travel as
``Storage.WriteTxnMarkers``) go through :meth:`PartitionAppender.write` so they take
their place in the same order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc

from odradek.protocol.errors import ErrorCode
from odradek.records.record import BatchBuilder, DecodedBatch, DecodedRecord, decode_batches
from odradek.rpc.v1 import storage_pb2
from odradek.storage_client import StoragePool, StorageUnavailable

log = logging.getLogger(__name__)

FETCH_MAX_BYTES = 8 * 1024 * 1024
BATCH_SOFT_LIMIT = 512 * 1024
# Errors worth retrying while the commit timeout lasts: leadership is moving.
_RETRY = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS,
}

Record = tuple[bytes, bytes | None]
# The Produce version a coordinator's transactional append claims: failed KIP-890
# verifications then answer TRANSACTION_ABORTABLE (Kafka's genericError operation).
TXN_API_VERSION = 11
# Called for every record replayed, in log order, with the batch holding it.
ApplyRecord = Callable[[DecodedBatch, DecodedRecord], None]


class LoadError(Exception):
    """The partition cannot be read right now (no leader yet, storage starting)."""

    kafka_error = "COORDINATOR_LOAD_IN_PROGRESS"


def _leader(storage: StoragePool, topic: str, partition: int) -> int:
    part = storage.metadata.current.partition(topic, partition)
    if part is None or part.leader < 0:
        raise LoadError(f"{topic}-{partition} has no leader")
    return part.leader


async def _offsets(storage: StoragePool, topic: str, partition: int) -> tuple[int, int]:
    """(log start, high watermark) from the leader."""
    stub = storage.stub(_leader(storage, topic, partition))
    request = storage_pb2.ListOffsetsRequest(
        isolation_level=0,
        partitions=[
            storage_pb2.ListOffsetsPartition(
                topic=topic, partition=partition, timestamp=ts, current_leader_epoch=-1
            )
            for ts in (-2, -1)
        ],
    )
    response = await stub.ListOffsets(request, timeout=10.0)
    start = end = -1
    for r in response.partitions:
        if r.error_code:
            raise LoadError(f"ListOffsets on {topic}-{partition}: error {r.error_code}")
    start, end = response.partitions[0].offset, response.partitions[1].offset
    return start, end


async def read_partition(
    storage: StoragePool,
    topic: str,
    partition: int,
    apply: ApplyRecord,
    *,
    max_bytes: int = FETCH_MAX_BYTES,
) -> int:
    """Replay every record from the log start to the current high watermark (control
    records included: ``batch.is_control``); returns the number of records replayed.
    Raises :class:`LoadError` (retry later), also while the high watermark is below
    the leader's log end: after a restart the leader's high watermark comes from its
    checkpoint and moves up only when the followers fetch again, so acknowledged
    writes can lie above it for a moment, and a cache loaded without them would never
    see them (the shard's own appends are the only reads after the load). Kafka's
    coordinators load up to the log end for the same reason (CoordinatorLoaderImpl)."""
    try:
        offset, end = await _offsets(storage, topic, partition)
    except (grpc.aio.AioRpcError, StorageUnavailable) as exc:
        raise LoadError(str(exc)) from None
    count = 0
    checked_end = False
    while offset < end or not checked_end:
        try:
            stub = storage.stub(_leader(storage, topic, partition))
            response = await stub.Fetch(
                storage_pb2.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=max_bytes,
                    isolation_level=0,
                    partitions=[
                        storage_pb2.FetchPartition(
                            topic=topic,
                            partition=partition,
                            fetch_offset=offset,
                            partition_max_bytes=max_bytes,
                            current_leader_epoch=-1,
                            log_start_offset=-1,
                            last_fetched_epoch=-1,
                        )
                    ],
                ),
                timeout=30.0,
            )
        except (grpc.aio.AioRpcError, StorageUnavailable) as exc:
            raise LoadError(str(exc)) from None
        if not response.partitions:
            raise LoadError("empty fetch response")
        result = response.partitions[0]
        if result.error_code:
            raise LoadError(f"fetch {topic}-{partition}@{offset}: error {result.error_code}")
        if not checked_end:
            if result.log_end_offset > end:
                raise LoadError(
                    f"{topic}-{partition}: high watermark {end} is below the log end "
                    f"{result.log_end_offset} (followers not caught up yet)"
                )
            checked_end = True
        batches = decode_batches(result.records) if result.records else []
        if not batches:
            if offset >= end:
                break
            raise LoadError(f"no progress reading {topic}-{partition} at {offset}")
        for batch in batches:
            if batch.next_offset <= offset:
                continue
            for record in batch.records:
                if record.offset >= offset:
                    apply(batch, record)
                    count += 1
            offset = batch.next_offset
    return count


def build_batch(records: list[Record], timestamp_ms: int) -> bytes:
    builder = BatchBuilder()
    for key, value in records:
        builder.append(timestamp_ms, key, value)
    return builder.build()


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a write belongs to (its id, epoch and transactional
    id, which the storage leader verifies against the transaction coordinator)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


def build_txn_batch(records: list[Record], timestamp_ms: int, producer: TxnProducer) -> bytes:
    builder = BatchBuilder(
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )
    for key, value in records:
        builder.append(timestamp_ms, key, value)
    return builder.build()


# A write of its own kind (a transaction marker): returns 0 or a storage error code.
Write = Callable[[], Awaitable[int]]


@dataclass(slots=True)
class _Pending:
    records: list[Record]
    on_durable: Callable[[], None]
    future: asyncio.Future[int]
    size: int = field(default=0)
    producer: TxnProducer | None = None
    write: Write | None = None

    @property
    def alone(self) -> bool:
        """Cannot share a record batch with other writes."""
        return self.producer is not None or self.write is not None


class PartitionAppender:
    """Group commit for one partition: one Produce in flight, the rest coalesced."""

    def __init__(self, storage: StoragePool, topic: str, partition: int, timeout_ms: int) -> None:
        self.storage = storage
        self.topic = topic
        self.partition = partition
        self.timeout_ms = timeout_ms
        self._pending: list[_Pending] = []
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"append-{topic}-{partition}"
        )
        self.appends = 0
        self.on_append: Callable[[int, float], None] | None = None

    async def append(
        self,
        records: list[Record],
        on_durable: Callable[[], None],
        *,
        producer: TxnProducer | None = None,
    ) -> int:
        """0 once durable (``on_durable`` has run), else the raw storage error code.
        With ``producer``, the records go as that producer's transactional batch."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        size = sum(len(k) + (len(v) if v else 0) + 16 for k, v in records)
        self._pending.append(_Pending(records, on_durable, future, size, producer))
        self._wake.set()
        return await future

    async def write(self, write: Write, on_durable: Callable[[], None]) -> int:
        """Run ``write`` in its turn among the appends (0 once it succeeded and
        ``on_durable`` has run, else its error code)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending([], on_durable, future, write=write))
        self._wake.set()
        return await future

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):
            pass
        for p in self._pending:
            if not p.future.done():
                p.future.set_result(ErrorCode.NOT_COORDINATOR)
        self._pending.clear()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                take, total = 0, 0
                for p in self._pending:
                    if take and (p.alone or total + p.size > BATCH_SOFT_LIMIT):
                        break
                    take += 1
                    total += p.size
                    if p.alone:
                        break
                batch_items = self._pending[:take]
                del self._pending[:take]
                first = batch_items[0]
                records = [r for p in batch_items for r in p.records]
                started = time.perf_counter()
                now = int(time.time() * 1000)
                if first.write is not None:
                    error = await self._write(first.write)
                elif first.producer is not None:
                    error = await self._produce(
                        build_txn_batch(records, now, first.producer), first.producer
                    )
                else:
                    error = await self._produce(build_batch(records, now))
                if self.on_append is not None and records:
                    self.on_append(len(records), time.perf_counter() - started)
                for p in batch_items:
                    if not error:
                        try:
                            p.on_durable()
                        except Exception:  # the write is durable; a cache bug must not hide it
                            log.exception("updating the cache after an append failed")
                    if not p.future.done():
                        p.future.set_result(error)

    async def _write(self, write: Write) -> int:
        try:
            return await write()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("a write to %s-%d failed", self.topic, self.partition)
            return ErrorCode.UNKNOWN_SERVER_ERROR

    async def _produce(self, data: bytes, producer: TxnProducer | None = None) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000.0
        backoff = 0.05
        while True:
            error: int
            try:
                stub = self.storage.stub(_leader(self.storage, self.topic, self.partition))
                response = await stub.Produce(
                    storage_pb2.ProduceRequest(
                        acks=-1,
                        timeout_ms=self.timeout_ms,
                        partitions=[
                            storage_pb2.ProducePartition(
                                topic=self.topic, partition=self.partition, records=data
                            )
                        ],
                        transactional_id=producer.transactional_id if producer else "",
                        # TxnOffsetCommit v4+ understands TRANSACTION_ABORTABLE; the
                        # gateway maps it down for older versions.
                        api_version=TXN_API_VERSION if producer else 0,
                        origin=storage_pb2.APPEND_ORIGIN_COORDINATOR
                        if producer
                        else storage_pb2.APPEND_ORIGIN_CLIENT,
                    ),
                    timeout=self.timeout_ms / 1000.0 + 5.0,
                )
                error = response.partitions[0].error_code if response.partitions else -1
            except (LoadError, StorageUnavailable):
                error = ErrorCode.LEADER_NOT_AVAILABLE
            except grpc.aio.AioRpcError as exc:
                error = (
                    ErrorCode.REQUEST_TIMED_OUT
                    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
                    else ErrorCode.LEADER_NOT_AVAILABLE
                )
            self.appends += 1
            if error not in _RETRY or loop.time() + backoff >= deadline:
                return error
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)


AppendFn = Callable[[list[Record], Callable[[], None]], Awaitable[int]]
