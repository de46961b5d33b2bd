"""One ``__transaction_state`` partition as a shard's durable state.

Loading (``TransactionStateManager.loadTransactionMetadata``): replay the partition from
its log start to the high watermark through the storage leader, keeping the latest
value per transactional id (a tombstone removes it). Keys of an unknown version are
skipped with a warning, as Kafka does; a value that does not parse fails the load
(it is retried: better stuck loudly than a transaction silently lost).

Storing: every write of the shard goes through one :class:`PartitionAppender` (group
commit, acks=all, retried while leadership moves); before a batch is sent the owner
checks the controller still gives it this shard at this epoch, so a coordinator that
lost the shard stops writing (NOT_COORDINATOR).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.internal_topic.partition_log import PartitionAppender, Record, read_partition
from odradek.protocol.errors import ErrorCode
from odradek.records.record import DecodedBatch, DecodedRecord
from odradek.storage_client import StoragePool
from odradek.transaction_log.records import (
    TransactionLogValue,
    UnknownKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from odradek.transaction_shard import TRANSACTION_STATE_TOPIC
from odradek.transactions.shard import LogWrite

log = logging.getLogger(__name__)

# Kafka's request.timeout.ms default: how long one append may retry a moving leader.
APPEND_TIMEOUT_MS = 30_000


async def load_transactions(
    storage: StoragePool, partition: int, max_bytes: int
) -> dict[str, TransactionLogValue]:
    """The latest state of every transactional id of the partition (raises
    ``LoadError`` while the partition cannot be read: the caller retries)."""
    state: dict[str, TransactionLogValue] = {}

    def apply(batch: DecodedBatch, record: DecodedRecord) -> None:
        if batch.is_control:
            return
        key = decode_key(record.key)
        if isinstance(key, UnknownKey):
            log.warning(
                "%s-%d@%d: unknown key version %d, skipped",
                TRANSACTION_STATE_TOPIC,
                partition,
                record.offset,
                key.version,
            )
            return
        value = decode_value(record.value)
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value

    await read_partition(storage, TRANSACTION_STATE_TOPIC, partition, apply, max_bytes=max_bytes)
    return state


class StateLogWriter:
    """Stores a shard's :class:`LogWrite` batches while ``owns(epoch)`` holds."""

    def __init__(self, storage: StoragePool, partition: int, owns: Callable[[int], bool]) -> None:
        self.partition = partition
        self._owns = owns
        self._appender = PartitionAppender(
            storage, TRANSACTION_STATE_TOPIC, partition, APPEND_TIMEOUT_MS
        )

    async def store(self, epoch: int, writes: list[LogWrite]) -> int:
        """0 once durable, else a storage error code (mapped by the shard)."""
        if not self._owns(epoch):
            return ErrorCode.NOT_COORDINATOR
        records: list[Record] = [
            (
                encode_key(w.transactional_id),
                None if w.value is None else encode_value(w.value),
            )
            for w in writes
        ]
        return await self._appender.append(records, lambda: None)

    async def close(self) -> None:
        await self._appender.close()
