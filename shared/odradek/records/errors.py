"""Record-format failures, each carrying the Kafka error code a broker answers with."""

from __future__ import annotations


class RecordsError(ValueError):
    """Base of record-format failures; carries the Kafka error name to answer with."""

    kafka_error = "CORRUPT_MESSAGE"


class CorruptRecordError(RecordsError):
    """Sizes or CRC do not add up (Kafka: CORRUPT_MESSAGE)."""

    kafka_error = "CORRUPT_MESSAGE"


class InvalidRecordError(RecordsError):
    """Well-formed but not acceptable (Kafka: INVALID_RECORD)."""

    kafka_error = "INVALID_RECORD"


class BatchTooLargeError(RecordsError):
    """A batch larger than ``max.message.bytes`` (Kafka: MESSAGE_TOO_LARGE)."""

    kafka_error = "MESSAGE_TOO_LARGE"
