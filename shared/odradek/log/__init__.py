"""Partition log storage: segments, indexes, recovery, retention and compaction.

The storage service uses :class:`PartitionLog` per partition and :class:`LogManager`
per node; everything else is the machinery behind them.
"""

from odradek.log.cleaner import CleanResult, LogCleaner, cleanable_logs
from odradek.log.errors import (
    BatchTooLargeError,
    CorruptRecordError,
    InvalidConfigError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRecordsError,
    InvalidTimestampError,
    InvalidTimestampsError,
    KafkaStorageError,
    LogDirLockedError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordValidationError,
    UnexpectedAppendOffsetError,
)
from odradek.log.leader_epoch import LeaderEpochCache
from odradek.log.log import AppendResult, PartitionLog, ReadResult
from odradek.log.manager import LogManager
from odradek.log.producer_state import ProducerStateManager

__all__ = [
    "AppendResult",
    "BatchTooLargeError",
    "CleanResult",
    "CorruptRecordError",
    "InvalidConfigError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidRecordsError",
    "InvalidTimestampError",
    "InvalidTimestampsError",
    "KafkaStorageError",
    "LeaderEpochCache",
    "LogCleaner",
    "LogDirLockedError",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "ProducerStateManager",
    "ReadResult",
    "RecordBatchTooLargeError",
    "RecordValidationError",
    "UnexpectedAppendOffsetError",
    "cleanable_logs",
]
