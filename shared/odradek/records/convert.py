"""Conversion between legacy message sets (magic 0/1) and v2 record batches.

Up-conversion serves old producers (Produce v0-v2 carry magic 0/1): the broker stores
only v2. Down-conversion serves old consumers (Fetch v0-v3 read only magic 0/1).
Both follow Kafka's ``LogValidator``/``RecordsUtil.downConvert`` rules:

- up: each compressed wrapper becomes one v2 batch with the same codec, each run of
  uncompressed messages one uncompressed batch; magic 0 has no timestamps, so records
  get -1 (NO_TIMESTAMP) with CreateTime; producer id/epoch/sequence are -1; offsets are
  renumbered 0..n-1 for the broker to assign (or kept, ``keep_offsets=True``).
- down: each v2 batch becomes, with its own codec, one wrapper (or plain messages when
  uncompressed) keeping absolute offsets and, for magic 1, timestamps and timestamp
  type. Headers are dropped, control batches skipped, records below ``first_offset``
  left out; entries already at or below the target magic pass through untouched. zstd
  cannot be expressed before magic 2: :class:`UnsupportedCodecError`
  (UNSUPPORTED_COMPRESSION_TYPE), as Kafka answers old fetchers of zstd topics.

Pure code, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator

from odradek.records.batch import (
    NO_PARTITION_LEADER_EPOCH,
    Buffer,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    iter_entries,
)
from odradek.records.compression import DEFAULT_MAX_OUTPUT_SIZE, UnsupportedCodecError
from odradek.records.legacy import (
    MAGIC_V0,
    MAGIC_V1,
    LegacyMessage,
    LegacyRecordInput,
    build_message_set,
    inner_messages,
    iter_messages,
)
from odradek.records.record import BatchBuilder, decode_batch

__all__ = ["UnsupportedCodecError", "downconvert", "upconvert_legacy"]


def _legacy_groups(
    buf: Buffer, max_output_size: int
) -> Iterator[tuple[Compression, TimestampType, list[LegacyMessage]]]:
    """Messages grouped into future batches: one per wrapper, one per plain run."""
    run: list[LegacyMessage] = []
    run_key: tuple[int, TimestampType] | None = None
    for msg in iter_messages(buf, verify_crc=True):
        if msg.is_compressed:
            if run:
                yield Compression.NONE, run[0].timestamp_type, run
                run, run_key = [], None
            inner = inner_messages(msg, verify_crc=True, max_output_size=max_output_size)
            yield msg.compression, msg.timestamp_type, inner
            continue
        key = (msg.magic, msg.timestamp_type)
        if run and key != run_key:
            yield Compression.NONE, run[0].timestamp_type, run
            run = []
        run_key = key
        run.append(msg)
    if run:
        yield Compression.NONE, run[0].timestamp_type, run


def upconvert_legacy(
    buf: Buffer,
    *,
    keep_offsets: bool = False,
    max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> bytes:
    """A produced magic 0/1 message set as v2 batches (CRCs checked on the way in)."""
    for entry in iter_entries(buf):
        if entry.magic not in (MAGIC_V0, MAGIC_V1):
            raise InvalidRecordError(f"magic {entry.magic} entry in a legacy message set")
    out: list[bytes] = []
    cursor = 0
    for codec, ts_type, messages in _legacy_groups(buf, max_output_size):
        log_append = ts_type == TimestampType.LOG_APPEND_TIME
        base = messages[0].offset if keep_offsets else cursor
        builder = BatchBuilder(
            base_offset=base,
            compression=codec,
            timestamp_type=TimestampType.LOG_APPEND_TIME
            if log_append
            else TimestampType.CREATE_TIME,
            log_append_time=max(m.timestamp for m in messages) if log_append else None,
            partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
        )
        previous = -1
        for i, msg in enumerate(messages):
            delta = msg.offset - base if keep_offsets else i
            if delta <= previous:
                raise CorruptRecordError(f"legacy offsets not increasing at offset {msg.offset}")
            previous = delta
            builder.append(msg.timestamp, msg.key, msg.value, offset_delta=delta)
        out.append(builder.build())
        cursor += len(messages)
    return b"".join(out)


def downconvert(
    buf: Buffer,
    magic: int,
    *,
    first_offset: int = 0,
    max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> bytes:
    """Stored batches (real offsets) as a magic 0 or 1 message set for old fetchers.

    A partial trailing batch (a fetch cut at max_bytes) is dropped.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"can only down-convert to magic 0 or 1, not {magic}")
    out: list[bytes] = []
    for entry in iter_entries(buf):
        raw = memoryview(buf)[entry.position : entry.position + entry.size]
        if entry.magic <= magic:
            out.append(bytes(raw))
            continue
        records: list[LegacyRecordInput]
        if entry.magic == 2:
            batch = decode_batch(buf, entry.position, max_output_size=max_output_size)
            if batch.is_control:
                continue
            codec = batch.compression
            ts_type = batch.timestamp_type
            append_time = batch.max_timestamp
            records = [
                (r.offset, r.timestamp, r.key, r.value)
                for r in batch.records
                if r.offset >= first_offset
            ]
        elif entry.magic == MAGIC_V1:
            wrapper = iter_messages(raw).__next__()
            codec = wrapper.compression
            ts_type = wrapper.timestamp_type
            append_time = wrapper.timestamp
            records = [
                (m.offset, m.timestamp, m.key, m.value)
                for m in inner_messages(wrapper, max_output_size=max_output_size)
                if m.offset >= first_offset
            ]
        else:
            raise CorruptRecordError(f"unknown magic {entry.magic} at position {entry.position}")
        if not records:
            continue
        if codec > Compression.LZ4:
            raise UnsupportedCodecError(
                f"{codec.name} batches cannot be down-converted to magic {magic}"
            )
        out.append(
            build_message_set(
                magic,
                records,
                compression=codec,
                timestamp_type=ts_type,
                log_append_time=append_time,
            )
        )
    return b"".join(out)
