"""Exceptions raised by the log layer, each naming the Kafka error the broker answers with.

The storage service maps ``exc.kafka_error`` to the protocol error code, so every
failure a client can cause carries the name Kafka itself would use.
``MESSAGE_TOO_LARGE``, ``CORRUPT_MESSAGE`` and ``INVALID_RECORD`` for produced batches
come from :mod:`odradek.records.errors` (``BatchTooLargeError``, ``CorruptRecordError``,
``InvalidRecordError``).
"""

from __future__ import annotations

from odradek.config_catalog.definition import InvalidConfigError
from odradek.records.errors import BatchTooLargeError, CorruptRecordError, InvalidRecordError

__all__ = [
    "BatchTooLargeError",
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidRecordsError",
    "InvalidTimestampError",
    "InvalidTimestampsError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "LogDirLockedError",
    "LogError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordValidationError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
]


class LogError(Exception):
    """Base of log-layer errors."""

    kafka_error: str = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(LogError):
    """A fetch/delete offset outside [log start offset, log end offset]."""

    kafka_error = "OFFSET_OUT_OF_RANGE"


class InvalidTimestampError(LogError):
    """A CreateTime outside message.timestamp.before/after.max.ms, or a client-set LogAppendTime."""

    kafka_error = "INVALID_TIMESTAMP"


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch does not follow its last sequence."""

    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(LogError):
    """A batch from a fenced (older) producer epoch."""

    kafka_error = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(LogError):
    """A transactional write outside a transaction the coordinator knows about, or a
    non-transactional write inside one (Kafka's InvalidTxnStateException)."""

    kafka_error = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(LogError):
    """A marker from a coordinator epoch older than the one that last wrote for the producer."""

    kafka_error = "TRANSACTION_COORDINATOR_FENCED"


class RecordBatchTooLargeError(LogError):
    """One produce larger than segment.bytes can never fit a segment."""

    kafka_error = "RECORD_LIST_TOO_LARGE"


class UnexpectedAppendOffsetError(LogError):
    """A follower append whose offsets go backwards (below the log end offset or non-monotonic).

    Kafka raises UnexpectedAppendOffsetException here; the replication layer decides
    whether to truncate. On the wire it is an internal failure.
    """

    kafka_error = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class LogDirLockedError(LogError):
    """Another process holds the log directory's ``.lock``."""

    kafka_error = "KAFKA_STORAGE_ERROR"


class KafkaStorageError(LogError):
    """A disk failure or an unreadable on-disk structure."""

    kafka_error = "KAFKA_STORAGE_ERROR"


class RecordValidationError(LogError):
    """Records rejected one by one (Kafka's RecordValidationException).

    ``record_errors`` are ``(batch index, message)`` pairs, what ProduceResponse v8+
    returns as ``record_errors`` (KIP-467).
    """

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...]) -> None:
        super().__init__(message)
        self.message = message
        self.record_errors = record_errors


class InvalidRecordsError(RecordValidationError, InvalidRecordError):
    """A null key on a compacted topic (INVALID_RECORD with per-record errors)."""

    kafka_error = "INVALID_RECORD"


class InvalidTimestampsError(RecordValidationError, InvalidTimestampError):
    """CreateTimes outside message.timestamp.before/after.max.ms, per record."""

    kafka_error = "INVALID_TIMESTAMP"
