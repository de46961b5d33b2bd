"""Produce on the leader: verify transactions, append, then answer per ``acks``.

Per partition (Kafka's ReplicaManager.handleProduceAppend + appendRecords + DelayedProduce):

* not hosted -> UNKNOWN_TOPIC_OR_PARTITION; hosted but not leading ->
  NOT_LEADER_OR_FOLLOWER with our leader epoch as a hint (KIP-951);
* transactional batches of more than one producer in one request ->
  INVALID_PRODUCER_ID_MAPPING for every partition (Kafka's InvalidPidMappingException);
* a transactional batch whose producer has no ongoing transaction on the partition is
  verified with the transaction coordinator first (KIP-890,
  :mod:`odradek.storage.txn_verification`, ``transaction.partition.verification.enable``);
  a failed verification answers its mapped error and appends nothing, and a
  verification overtaken by a marker (the coordinator aborted meanwhile) fails the
  append with INVALID_TXN_STATE, so a late produce never opens a hanging transaction;
* ``acks=-1`` with an ISR smaller than ``min.insync.replicas`` -> NOT_ENOUGH_REPLICAS
  before anything is appended;
* the log validates (CORRUPT_MESSAGE, INVALID_RECORD — control batches from clients
  included —, MESSAGE_TOO_LARGE above ``max.message.bytes``, INVALID_TIMESTAMP; a
  compressed blob of at least ``VALIDATE_OFF_LOOP_BYTES`` is decompressed and checked
  in a worker thread, :mod:`odradek.offload`, so the loop keeps serving), checks
  the producer (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE
  for a non-transactional batch inside a transaction) and answers a retried duplicate
  with its original offsets without appending. ``origin`` COORDINATOR (the offset
  store's transactional offset commits) skips the sequence checks and duplicate
  detection, as Kafka's AppendOrigin.COORDINATOR;
* ``acks`` 0 and 1 answer after the leader's append; ``acks=-1`` waits until the
  high watermark passes the batch's last offset (a duplicate waits for its original
  offsets too), then answers NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR meanwhile
  fell below ``min.insync.replicas``, NOT_LEADER_OR_FOLLOWER if leadership moved, and
  REQUEST_TIMED_OUT when ``timeout_ms`` passes first.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from odradek.log.errors import RecordValidationError
from odradek.log.producer_state import AppendOrigin, VerificationGuard
from odradek.offload import run_heavy
from odradek.protocol.errors import ErrorCode, KafkaError, error_code_for
from odradek.records.batch import BatchesSummary
from odradek.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Buffer,
    read_batch_header,
)
from odradek.rpc.v1 import storage_pb2
from odradek.storage.deadlines import Deadlines
from odradek.storage.metrics import StorageMetrics
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.replication_wait import ReplicationWait, await_replication
from odradek.storage.txn_verification import TxnVerifier
from odradek.storage.wakeup_turn import WakeupTurn

log = logging.getLogger(__name__)

# Compressed blobs at least this large are validated in a worker thread (odradek.offload).
VALIDATE_OFF_LOOP_BYTES = 64 * 1024
# The low byte of a batch's attributes (INT16, big-endian): its compression codec.
_ATTRIBUTES_LOW = ATTRIBUTES_OFFSET + 1

_ORIGINS = {
    storage_pb2.APPEND_ORIGIN_CLIENT: AppendOrigin.CLIENT,
    storage_pb2.APPEND_ORIGIN_COORDINATOR: AppendOrigin.COORDINATOR,
}


@dataclass(frozen=True, slots=True)
class TransactionalBatch:
    """The producer of a partition's transactional batches and the first one's sequence."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


def transactional_batch(records: Buffer) -> TransactionalBatch | None:
    """The first transactional batch with a producer id in a produced blob (None: none).

    Walks batch headers only; malformed bytes end the walk (the log rejects them later).
    """
    pos, end = 0, len(records)
    while pos + HEADER_SIZE <= end:
        h = read_batch_header(records, pos)
        if h.magic != 2 or h.batch_length + LOG_OVERHEAD < HEADER_SIZE:
            return None
        if h.is_transactional and h.producer_id >= 0:
            return TransactionalBatch(h.producer_id, h.producer_epoch, h.base_sequence)
        pos += h.batch_length + LOG_OVERHEAD
    return None


@dataclass(slots=True)
class _Slot:
    """One requested partition on its way through verification and append."""

    request: storage_pb2.ProducePartition
    records: Buffer
    result: storage_pb2.ProducePartitionResult
    partition: Partition | None
    txn: TransactionalBatch | None = None
    guard: VerificationGuard | None = None


@dataclass(slots=True)
class Appended:
    """A produce request after its appends, before its acks=-1 wait."""

    slots: list[_Slot]
    timeout_ms: int
    # The answer, whose partition results the slots fill in place (_stage).
    response: storage_pb2.ProduceResponse
    waiting: list[tuple[Partition, int, int]] = field(default_factory=list)
    waiting_slots: list[_Slot] = field(default_factory=list)


class ProduceHandler:
    def __init__(
        self,
        replicas: ReplicaManager,
        metrics: StorageMetrics,
        verifier: TxnVerifier | None = None,
        *,
        verification_enabled: bool = True,
    ) -> None:
        self.replicas = replicas
        self.metrics = metrics
        self.verifier = verifier
        self.verification_enabled = verification_enabled and verifier is not None

    async def produce(
        self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer] | None = None
    ) -> storage_pb2.ProduceResponse:
        """``records[i]``, when given, are partition i's batches (the data link carries
        them beside the request); otherwise each partition's ``records`` field."""
        return await self.complete(await self.append(request, records))

    async def append(
        self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer] | None = None
    ) -> Appended:
        """Everything up to and including the appends (checks, KIP-890 verification);
        :meth:`complete` then waits for replication per ``acks`` and answers. Once this
        returns, a later request's batches land after these (the data link's ordering
        lanes rely on it)."""
        staged, live = self._stage(request, records)
        if _mixed_producers(live):
            live = []
        elif self.verification_enabled and request.transactional_id and _transactional(live):
            await self._verify(request, [s for s in live if s.txn is not None])
        origin = _ORIGINS.get(request.origin, AppendOrigin.CLIENT)
        for slot in live:
            if slot.result.error_code != ErrorCode.NONE or slot.partition is None:
                continue
            buf = _writable(slot.records)
            validated: BatchesSummary | None = None
            if _compressed(buf):
                # Decompressing to check every record can be tens of millions of
                # records of work: a worker thread, so other clients are served.
                part = slot.partition
                try:
                    validated = await run_heavy(
                        len(buf),
                        functools.partial(part.validate_records, buf, origin),
                        min_bytes=VALIDATE_OFF_LOOP_BYTES,
                    )
                except Exception as exc:
                    _refuse(slot, part, exc)
                    continue
            self._append(staged, slot, slot.partition, buf, request.acks, origin, validated)
        return staged

    def append_now(
        self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]
    ) -> Appended | None:
        """:meth:`append` without a coroutine, for a request that needs no await: None,
        having done nothing, when it may (a transactional id to verify, KIP-890, or a
        compressed blob, validated in a worker thread when large). The data link's
        one-record Produce goes here, without a task of its own (issue 18)."""
        if request.transactional_id and self.verification_enabled:
            return None
        for data in records:
            if len(data) >= HEADER_SIZE and data[_ATTRIBUTES_LOW] & COMPRESSION_CODEC_MASK:
                return None
        staged, live = self._stage(request, records)
        if _mixed_producers(live):
            return staged
        origin = _ORIGINS.get(request.origin, AppendOrigin.CLIENT)
        for slot in live:
            if slot.result.error_code == ErrorCode.NONE and slot.partition is not None:
                buf = _writable(slot.records)
                self._append(staged, slot, slot.partition, buf, request.acks, origin, None)
        return staged

    def _stage(
        self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer] | None
    ) -> tuple[Appended, list[_Slot]]:
        """A slot per requested partition, those that cannot be appended failed; the
        live ones beside."""
        self.metrics.produce_request()
        if records is not None and len(records) != len(request.partitions):
            raise ValueError(
                f"{len(records)} records blobs for {len(request.partitions)} partitions"
            )
        acks = request.acks
        slots: list[_Slot] = []
        live: list[_Slot] = []
        # Each partition's result is made in the answer and filled in there, its fields
        # set one by one: upb's keyword construction and the copy of every result into
        # the answer at the end cost about 4 us more per one-partition Produce (issue 18).
        response = storage_pb2.ProduceResponse()
        results = response.partitions
        for i, pp in enumerate(request.partitions):
            # Each upb field read once (a new str for the topic each time it is read).
            topic, index = pp.topic, pp.partition
            result = results.add()
            result.topic = topic
            result.partition = index
            result.base_offset = result.log_append_time = -1
            result.log_start_offset = result.current_leader_epoch = -1
            data = records[i] if records is not None else pp.records
            slot = _Slot(pp, data, result, self.replicas.get(topic, index))
            slots.append(slot)
            if acks not in (-1, 0, 1):
                _fail(slot, ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid required acks {acks}")
            elif slot.partition is None:
                _fail(
                    slot,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"This server does not host {topic}-{index}",
                )
            else:
                slot.txn = transactional_batch(data)
                live.append(slot)
        return Appended(slots, request.timeout_ms, response), live

    async def complete(
        self, staged: Appended, loop: asyncio.AbstractEventLoop | None = None
    ) -> storage_pb2.ProduceResponse:
        """Wait until the high watermark passes every acks=-1 append, then answer
        (``loop``: the running loop, when the caller holds it)."""
        if staged.waiting:
            codes = await await_replication(staged.waiting, staged.timeout_ms, loop)
            _apply_codes(staged, codes)
        return staged.response

    def complete_later(
        self,
        staged: Appended,
        loop: asyncio.AbstractEventLoop,
        answer: Callable[[storage_pb2.ProduceResponse], None],
        deadlines: Deadlines | None = None,
        turn: WakeupTurn | None = None,
    ) -> ReplicationWait | None:
        """:meth:`complete` as loop callbacks: ``answer`` gets the response, at once
        when nothing waits for replication (None is returned then), otherwise from the
        returned wait, which the caller cancels if it goes away first. ``deadlines``:
        the caller's connection's, timing the wait (odradek.storage.deadlines); ``turn``:
        the loop's, running its re-checks (odradek.storage.wakeup_turn)."""
        if not staged.waiting:
            answer(staged.response)
            return None

        def replicated(codes: list[ErrorCode]) -> None:
            _apply_codes(staged, codes)
            answer(staged.response)

        wait = ReplicationWait(staged.waiting, staged.timeout_ms, loop, replicated, deadlines, turn)
        return None if wait.done else wait

    async def _verify(self, request: storage_pb2.ProduceRequest, slots: list[_Slot]) -> None:
        """Start KIP-890 verification where no transaction is ongoing yet and ask the
        coordinator once for all of them."""
        assert self.verifier is not None
        to_verify: dict[tuple[str, int], _Slot] = {}
        for slot in slots:
            part, txn = slot.partition, slot.txn
            assert part is not None and txn is not None
            try:
                slot.guard = part.maybe_start_transaction_verification(
                    txn.producer_id, txn.base_sequence, txn.producer_epoch
                )
            except KafkaError as exc:
                _fail(slot, exc.code, exc.message)
                continue
            if slot.guard is not None:
                to_verify[(part.topic, part.index)] = slot
        if not to_verify:
            return
        first = next(iter(to_verify.values())).txn
        assert first is not None
        errors = await self.verifier.verify(
            request.transactional_id,
            first.producer_id,
            first.producer_epoch,
            list(to_verify),
            request.api_version,
        )
        for tp, code in errors.items():
            slot = to_verify[tp]
            if code == ErrorCode.INVALID_TXN_STATE:
                message = "Partition was not added to the transaction"
            elif code == ErrorCode.NOT_ENOUGH_REPLICAS:
                message = "Unable to verify the partition has been added to the transaction"
            else:
                message = KafkaError(code).message
            _fail(slot, code, message)

    def _append(
        self,
        staged: Appended,
        slot: _Slot,
        part: Partition,
        records: bytearray | memoryview,
        acks: int,
        origin: AppendOrigin,
        validated: BatchesSummary | None,
    ) -> None:
        """Append one partition; an acks=-1 append joins ``staged``'s waits."""
        result = slot.result
        try:
            appended = part.append_as_leader(
                records,
                acks,
                origin=origin,
                verification_guard=slot.guard,
                verification_required=self.verification_enabled,
                validated=validated,
            )
        except Exception as exc:
            _refuse(slot, part, exc)
            return
        result.base_offset = appended.first_offset
        result.log_append_time = appended.log_append_time
        result.log_start_offset = appended.log_start_offset
        if not appended.duplicate:
            self.metrics.bytes_in(part.topic, appended.size)
        if acks == -1:
            staged.waiting.append((part, appended.last_offset + 1, appended.leader_epoch))
            staged.waiting_slots.append(slot)


def _apply_codes(staged: Appended, codes: list[ErrorCode]) -> None:
    """The acks=-1 outcome of each waiting slot (replication_wait)."""
    for slot, code in zip(staged.waiting_slots, codes, strict=True):
        if code != ErrorCode.NONE:
            _fail_after_append(slot, code)


def _transactional(live: list[_Slot]) -> bool:
    return any(s.txn is not None for s in live)


def _mixed_producers(live: list[_Slot]) -> bool:
    """Transactional batches of more than one producer: every slot fails (Kafka's
    InvalidPidMappingException) and True is returned."""
    if not _transactional(live):
        return False
    producers = {(s.txn.producer_id, s.txn.producer_epoch) for s in live if s.txn is not None}
    if len(producers) <= 1:
        return False
    for slot in live:
        _fail(
            slot,
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
            "Transactional records contained more than one producer ID",
        )
    return True


def _writable(records: Buffer) -> bytearray | memoryview:
    """The records as a buffer the log can patch offsets into. The data link's blobs
    are views of their frame's own bytearray, which nothing reads after the append:
    patched in place, without the copy that was one more pass over every produced
    byte (issue 18). A gRPC request's immutable bytes are copied once."""
    if isinstance(records, memoryview) and not records.readonly:
        return records
    return bytearray(records)


def _compressed(records: bytearray | memoryview) -> bool:
    """Whether the first batch is compressed (a producer compresses all or none)."""
    return (
        len(records) >= HEADER_SIZE
        and read_batch_header(records).attributes & COMPRESSION_CODEC_MASK != 0
    )


def _refuse(slot: _Slot, part: Partition, exc: Exception) -> None:
    """An append that raised: Kafka's error code, and per-record errors (KIP-467)."""
    code = error_code_for(exc)
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        log.error("%s: append failed", part.name, exc_info=exc)
    _fail(slot, code, getattr(exc, "message", None) or str(exc))
    if isinstance(exc, RecordValidationError):
        slot.result.record_errors.extend(
            storage_pb2.RecordError(batch_index=i, message=m) for i, m in exc.record_errors
        )
    slot.result.log_start_offset = part.log_start_offset


def _fail(slot: _Slot, code: int, message: str) -> None:
    slot.result.error_code = code
    slot.result.error_message = message
    part = slot.partition
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER and part is not None:
        slot.result.current_leader_epoch = part.leader_epoch


def _fail_after_append(slot: _Slot, code: ErrorCode) -> None:
    part = slot.partition
    assert part is not None
    if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        message = (
            f"The size of the current ISR {list(part.isr)} is insufficient to satisfy the "
            f"min.isr requirement of {part.min_insync_replicas} for partition {part.name}"
        )
    elif code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        message = f"Leadership of {part.name} moved before the write was replicated"
    elif code == ErrorCode.REQUEST_TIMED_OUT:
        message = f"The write to {part.name} was not replicated to the ISR {list(part.isr)} in time"
    else:
        message = KafkaError(code).message
    _fail(slot, code, message)
