"""What an append must satisfy before it touches the log (Kafka's LogValidator and
``UnifiedLog.analyzeAndValidateRecords``).

Leader appends (produced records): whole v2 batches with valid CRCs from one producer
(:func:`odradek.records.batch.validate_v2_batches`), each at most
``max.message.bytes`` (MESSAGE_TOO_LARGE), the whole blob at most ``segment.bytes``
(RECORD_BATCH_TOO_LARGE); then, as in Kafka's ``validateMessagesAndAssignOffsets``,
once offsets are assigned: for a client's produce no control batches (only the
transaction coordinator writes markers) and a sequence with every producer id
(INVALID_RECORD); CreateTime timestamps only and, when
``message.timestamp.before/after.max.ms`` are set, within them (INVALID_TIMESTAMP).

Follower appends (replicated records, offsets and epochs assigned by the leader):
whole valid batches, each at most ``max.message.bytes``, offsets increasing.

Pure functions over buffers and batch headers (:mod:`odradek.records.header`); the
log applies their results under its lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from odradek.config_catalog.definition import LONG_MAX
from odradek.log.errors import (
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from odradek.records.batch import (
    BatchesSummary,
    BatchTooLargeError,
    CorruptRecordError,
    validate_batch,
    validate_v2_batches,
)
from odradek.records.header import HEADER_SIZE, TIMESTAMP_TYPE_MASK, BatchHeader, Buffer
from odradek.topic_config import LogConfig


def check_segment_fits(total: int, config: LogConfig, partition: str) -> None:
    """One append goes into one segment, so it may not exceed ``segment.bytes``."""
    if total > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"Message batch size is {total} bytes in append to partition {partition} which "
            f"exceeds the maximum configured segment size of {config.segment_bytes}."
        )


def validate_leader_records(records: Buffer, config: LogConfig, partition: str) -> BatchesSummary:
    """Sizes, CRCs and producer of a produced records blob (before offsets are assigned)."""
    summary = validate_v2_batches(records, max_batch_bytes=config.max_message_bytes)
    check_segment_fits(len(records), config, partition)
    return summary


def check_client_batches(headers: Sequence[BatchHeader], partition: str) -> None:
    """Kafka's LogValidator.validateBatch for AppendOrigin.CLIENT."""
    for h in headers:
        if h.is_control:
            raise InvalidRecordError(
                f"Clients are not allowed to write control records in topic partition {partition}"
            )
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise InvalidRecordError(
                f"Invalid sequence number {h.base_sequence} in record batch with producerId "
                f"{h.producer_id} in topic partition {partition}"
            )


def check_timestamps(
    positions: Sequence[int],
    headers: Sequence[BatchHeader],
    now_ms: int,
    config: LogConfig,
    partition: str,
) -> None:
    """Producers may not claim LogAppendTime; CreateTime must be within the configured bounds.

    Runs on the produced headers, before the broker stamps LogAppendTime itself.
    """
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    check_bounds = (before < LONG_MAX or after < LONG_MAX) and not config.log_append_time
    for i, h in enumerate(headers):
        if h.attributes & TIMESTAMP_TYPE_MASK:
            raise InvalidTimestampError(
                f"Invalid timestamp type in message at position {positions[i]} in "
                f"partition {partition}: producers must not set the timestamp type to "
                "LogAppendTime"
            )
        if not check_bounds:
            continue
        for ts in (h.base_timestamp, h.max_timestamp):
            if ts < 0:
                continue
            if ts < now_ms - before or ts > now_ms + after:
                raise InvalidTimestampError(
                    f"Timestamp {ts} of message in partition {partition} is out of range. The "
                    f"timestamp should be within [{now_ms - before}, {now_ms + after}]"
                )


@dataclass(frozen=True, slots=True)
class ReplicatedRecords:
    """What a follower append needs to know about the leader's batches."""

    headers: tuple[BatchHeader, ...]  # of the batches, back to back in the records
    epochs: tuple[tuple[int, int], ...]  # (partitionLeaderEpoch, baseOffset) per batch
    first_offset: int
    next_offset: int
    record_count: int
    max_timestamp: int
    offset_of_max_timestamp: int


def analyze_replicated_records(
    records: Buffer, config: LogConfig, partition: str
) -> ReplicatedRecords:
    """Validate non-empty replicated records (CRC included) and summarise them."""
    total = len(records)
    check_segment_fits(total, config, partition)
    headers: list[BatchHeader] = []
    epochs: list[tuple[int, int]] = []
    pos = 0
    first = -1
    prev_next = -1
    record_count = 0
    max_timestamp, offset_of_max = -1, -1
    while pos < total:
        if total - pos < HEADER_SIZE:
            raise CorruptRecordError("trailing bytes shorter than a batch header")
        h = validate_batch(records, pos)
        size = h.size
        if size > config.max_message_bytes:
            raise BatchTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}"
            )
        base, last = h.base_offset, h.last_offset
        if first < 0:
            first = base
        if base < prev_next:
            raise UnexpectedAppendOffsetError(
                f"Out of order offsets found in append to {partition}", first, last
            )
        if h.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = h.max_timestamp, last
        if h.partition_leader_epoch >= 0:
            epochs.append((h.partition_leader_epoch, base))
        record_count += h.records_count
        headers.append(h)
        prev_next = last + 1
        pos += size
    return ReplicatedRecords(
        tuple(headers),
        tuple(epochs),
        first,
        prev_next,
        record_count,
        max_timestamp,
        offset_of_max,
    )
