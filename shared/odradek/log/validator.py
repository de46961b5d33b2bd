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

Every record of a client's batch is read too (:func:`validate_client_records`, Kafka's
``assignOffsetsNonCompressed``/``validateMessagesAndAssignOffsetsCompressed`` record
loops), compressed batches decompressed first (bounded): recordsCount must equal
lastOffsetDelta + 1 and the records present, each record's offsetDelta its index, every
length and varint must stay inside its record and the records fill the batch exactly
(INVALID_RECORD otherwise, as Kafka's ``DefaultRecord.readFrom`` answers). Per record,
a null key on a compacted topic (INVALID_RECORD) and a CreateTime outside the bounds
(INVALID_TIMESTAMP) are collected as ``record_errors`` (KIP-467) and reject the whole
append. A batch whose maxTimestamp disagrees with its records gets its records' maximum
(Kafka's ``setMaxTimestamp``), so a forged header cannot pin time-based retention.

Follower appends (replicated records, offsets and epochs assigned by the leader):
whole valid batches, each at most ``max.message.bytes``, offsets increasing.

Pure functions over buffers and batch headers (:mod:`odradek.records.header`); the
log applies their results under its lock.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.config_catalog.definition import LONG_MAX
from odradek.log.errors import (
    InvalidRecordError,
    InvalidRecordsError,
    InvalidTimestampError,
    InvalidTimestampsError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from odradek.records.batch import (
    BatchesSummary,
    BatchTooLargeError,
    CorruptRecordError,
    compute_crc,
    validate_batch,
    validate_v2_batches,
)
from odradek.records.compression import DEFAULT_MAX_OUTPUT_SIZE, decompress
from odradek.records.header import (
    COMPRESSION_CODEC_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Buffer,
    read_batch_header,
)
from odradek.records.varint import decode_varint, decode_varlong
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


# length(1) attributes(1) timestampDelta(1) offsetDelta(1) key(1) value(1) headers(1)
_MIN_RECORD_SIZE = 7
_Q = struct.Struct(">q")
_UI = struct.Struct(">I")


def validate_client_records(
    records: bytearray | memoryview,
    summary: BatchesSummary,
    config: LogConfig,
    now_ms: int,
    partition: str,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> None:
    """Read every record of a produced blob that :func:`validate_leader_records` passed.

    Raises InvalidRecordError for a malformed batch, CorruptRecordError for compressed
    data that does not decompress (or exceeds ``max_decompressed_bytes``), and
    :class:`RecordValidationError` carrying per-record errors. Patches a CreateTime
    batch's maxTimestamp (and its CRC) to its records' maximum and updates
    ``summary.max_timestamp`` / ``offset_of_max_timestamp_delta`` to match.
    """
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    check_ts = not config.log_append_time
    low, high = now_ms - before, now_ms + after
    low_c, high_c = max(low, -LONG_MAX - 1), min(high, LONG_MAX)  # the C walk's int64 bounds
    compacted = config.compact
    problems: list[tuple[int, str, bool]] = []  # (batch index, message, is a timestamp error)
    summary_max, summary_max_delta = -1, -1
    offset_cursor = 0
    for pos in summary.positions:
        h = read_batch_header(records, pos)
        count = h.records_count
        if h.attributes & TIMESTAMP_TYPE_MASK:
            raise InvalidTimestampError(
                f"Invalid timestamp type in message at position {pos} in partition "
                f"{partition}: producers must not set the timestamp type to LogAppendTime"
            )
        if h.is_control:
            offset_cursor += h.last_offset_delta + 1
            continue
        from_offsets = h.last_offset_delta + 1
        if count <= 0:
            raise InvalidRecordError(
                f"Invalid reported count for record batch: {count} in topic partition {partition}"
            )
        if from_offsets != count:
            raise InvalidRecordError(
                f"Inconsistent batch offset range [0, {h.last_offset_delta}] and count of "
                f"records {count} in topic partition {partition}"
            )
        section: Buffer = records
        start, stop = pos + HEADER_SIZE, pos + h.size
        if h.attributes & COMPRESSION_CODEC_MASK:
            section = decompress(
                h.attributes & COMPRESSION_CODEC_MASK,
                memoryview(records)[start:stop],
                max_decompressed_bytes,
            )
            start, stop = 0, len(section)
        found = _fast_scan(
            section, start, stop, count, h.base_timestamp, compacted, check_ts, low_c, high_c
        )
        if found is None:  # something is wrong: the Python walk says what, in Kafka's words
            found = _scan_records(
                bytes(memoryview(section)[start:stop]),
                count,
                h.base_timestamp,
                compacted,
                check_ts,
                low,
                high,
                partition,
                problems,
            )
        max_ts, max_index = found
        if check_ts and max_ts != h.max_timestamp:
            _Q.pack_into(records, pos + MAX_TIMESTAMP_OFFSET, max_ts)
            _UI.pack_into(records, pos + CRC_OFFSET, compute_crc(records, pos, h.size))
        batch_max = max_ts if check_ts else h.max_timestamp
        if batch_max > summary_max:
            summary_max, summary_max_delta = (
                batch_max,
                offset_cursor + (max_index if check_ts else h.last_offset_delta),
            )
        offset_cursor += from_offsets
    if problems:
        errors = tuple((i, m) for i, m, _ in problems)
        if any(ts for _, _, ts in problems):
            raise InvalidTimestampsError(
                "One or more records have been rejected due to invalid timestamp",
                errors,
            )
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise InvalidRecordsError(
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]",
            errors,
        )
    summary.max_timestamp = summary_max
    summary.offset_of_max_timestamp_delta = summary_max_delta


def _python_scan(
    b: Buffer,
    start: int,
    stop: int,
    count: int,
    base_timestamp: int,
    compacted: bool,
    check_ts: bool,
    low: int,
    high: int,
) -> tuple[int, int] | None:
    """:func:`_scan_records` as a yes/no check: the stand-in for ``odradek.log._scan``."""
    problems: list[tuple[int, str, bool]] = []
    try:
        found = _scan_records(
            bytes(memoryview(b)[start:stop]),
            count,
            base_timestamp,
            compacted,
            check_ts,
            low,
            high,
            "",
            problems,
        )
    except InvalidRecordError:
        return None
    return None if problems else found


def _zigzag(b: Buffer, p: int) -> tuple[int, int]:
    """A zigzag varint, unrolled for the one- and two-byte forms most fields take."""
    x = b[p]
    if x < 0x80:
        return (x >> 1) ^ -(x & 1), p + 1
    y = b[p + 1]
    if y < 0x80:
        raw = (x & 0x7F) | (y << 7)
        return (raw >> 1) ^ -(raw & 1), p + 2
    return decode_varint(b, p)


def _scan_records(
    b: Buffer,
    count: int,
    base_timestamp: int,
    compacted: bool,
    check_ts: bool,
    low: int,
    high: int,
    partition: str,
    problems: list[tuple[int, str, bool]],
) -> tuple[int, int]:
    """Walk ``count`` records filling ``b`` exactly -> (max timestamp, its record index).

    Structure errors raise InvalidRecordError at once; key and timestamp problems are
    appended to ``problems``.
    """
    end = len(b)
    if count * _MIN_RECORD_SIZE > end:
        raise InvalidRecordError(
            f"Found invalid number of records {count} in {end} bytes of topic partition {partition}"
        )
    p = 0
    max_ts, max_index = -1, -1
    dv, dvl = _zigzag, decode_varlong
    try:
        for i in range(count):
            length, p = dv(b, p)
            body_end = p + length
            if length < _MIN_RECORD_SIZE - 1 or body_end > end:
                raise InvalidRecordError(f"Invalid record size {length} of record {i}")
            ts_delta, q = dvl(b, p + 1)
            offset_delta, q = dv(b, q)
            if offset_delta != i:
                raise InvalidRecordError(
                    f"Record {i} has offset delta {offset_delta} in topic partition {partition}"
                )
            key_len, q = dv(b, q)
            if key_len < -1:
                raise InvalidRecordError(f"Invalid key length {key_len} of record {i}")
            if key_len == -1 and compacted:
                problems.append(
                    (
                        i,
                        "Compacted topic cannot accept message without key in topic "
                        f"partition {partition}.",
                        False,
                    )
                )
            if key_len > 0:
                q += key_len
            value_len, q = dv(b, q)
            if value_len < -1:
                raise InvalidRecordError(f"Invalid value length {value_len} of record {i}")
            if value_len > 0:
                q += value_len
            if q >= body_end:
                raise InvalidRecordError(f"Record {i} ends inside its key or value")
            headers, q = dv(b, q)
            if headers < 0 or 2 * headers > body_end - q:
                raise InvalidRecordError(f"Found invalid number of record headers {headers}")
            for _ in range(headers):
                key_len, q = dv(b, q)
                if key_len < 0:
                    raise InvalidRecordError(f"Invalid header key length {key_len}")
                value_len, q = dv(b, q + key_len)
                if value_len < -1:
                    raise InvalidRecordError(f"Invalid header value length {value_len}")
                q += max(value_len, 0)
                if q > body_end:
                    raise InvalidRecordError(f"Record {i} headers run past the record")
            if q != body_end:
                raise InvalidRecordError(
                    f"Invalid record size: expected {length} bytes in record payload, "
                    f"read {q - (body_end - length)}"
                )
            p = body_end
            ts = base_timestamp + ts_delta
            if ts > max_ts:
                max_ts, max_index = ts, i
            if check_ts and ts != -1 and (ts < low or ts > high):  # -1: NO_TIMESTAMP
                problems.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {i} is out of range. The "
                        f"timestamp should be within [{low}, {high}]",
                        True,
                    )
                )
    except IndexError:
        raise InvalidRecordError(
            f"Incorrect declared batch size, premature EOF reached in topic partition {partition}"
        ) from None
    except CorruptRecordError as exc:  # a varint too long or cut off
        raise InvalidRecordError(
            f"Incorrect declared batch size, premature EOF reached ({exc}) in topic "
            f"partition {partition}"
        ) from None
    if p != end:
        raise InvalidRecordError(
            "Incorrect declared batch size, records still remaining in file "
            f"(topic partition {partition})"
        )
    return max_ts, max_index


try:  # the same walk in C, built by setup.py when a compiler is at hand
    from odradek.log._scan import scan as _fast_scan
except ImportError:  # pragma: no cover - installs without a C compiler
    _fast_scan = _python_scan


@dataclass(slots=True)
class ReplicatedRecords:
    """What a follower append needs to know about the leader's batches (not frozen: one
    per follower append, and a frozen dataclass costs three times as much to build)."""

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
