"""Records of format v2: encode/decode one record, decode a whole batch, build a batch.

One record inside a v2 batch's (possibly compressed) records section (Kafka's
``DefaultRecord``; varints are zigzag, see :mod:`odradek.records.varint`)::

    length          varint   bytes after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  timestamp - batch baseTimestamp
    offsetDelta     varint   offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value (a tombstone)
    value           bytes
    headersCount    varint
    headers         [headerKeyLength varint, headerKey utf-8,
                     headerValueLength varint (-1 null), headerValue]

Invariants checked when decoding: each record ends exactly ``length`` bytes after its
length field, the batch holds exactly ``recordsCount`` records and nothing after them,
and the CRC-32C of the batch matches (batch layout: :mod:`odradek.records.header`).
Header keys are decoded with ``surrogateescape`` so keys that are not valid UTF-8 still
re-encode to the same bytes (compaction rewrites records).

:class:`BatchBuilder` writes what the Java producer's ``MemoryRecordsBuilder`` writes:
baseTimestamp is the first record's timestamp (or the delete horizon, KIP-534),
maxTimestamp the largest record timestamp (or the LogAppendTime), lastOffsetDelta the
last record's offset delta; an uncompressed batch is byte-identical to the Java
client's and to kafka-python's ``DefaultRecordBatchBuilder`` for the same input.
Pure code, no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from odradek.records.batch import crc32c, iter_entries, validate_batch
from odradek.records.compression import DEFAULT_MAX_OUTPUT_SIZE, compress, decompress
from odradek.records.errors import CorruptRecordError
from odradek.records.header import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    SEQUENCE_WRAP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Buffer,
    Compression,
    TimestampType,
    read_batch_header,
)
from odradek.records.varint import decode_varint, decode_varlong, write_varint, write_varlong

Header = tuple[str, bytes | None]

_UI = struct.Struct(">I")
# length(1) + attributes + timestampDelta(1) + offsetDelta(1) + key(1) + value(1) + headers(1)
MIN_RECORD_SIZE = 7


@dataclass(slots=True)
class Record:
    """One record as stored: offsets and timestamps relative to its batch."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[Header] = field(default_factory=list)
    attributes: int = 0


@dataclass(slots=True)
class DecodedRecord:
    """One record of a decoded batch with its absolute offset and timestamp.

    For a LogAppendTime batch ``timestamp`` is the batch's maxTimestamp, as consumers
    see it; ``sequence`` is -1 unless the batch carries producer sequences.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    sequence: int = NO_SEQUENCE
    offset_delta: int = 0
    timestamp_delta: int = 0
    attributes: int = 0


@dataclass(slots=True)
class DecodedBatch:
    """Every header field of a v2 batch plus its records, decompressed."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    records: list[DecodedRecord]

    @property
    def header(self) -> BatchHeader:
        """The header fields as the typed view that owns their meaning."""
        return BatchHeader(
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        )

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    @property
    def delete_horizon_ms(self) -> int:
        """KIP-534: the baseTimestamp doubles as the tombstone delete horizon."""
        return self.base_timestamp if self.header.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        return self.header.last_sequence


# -- one record ---------------------------------------------------------------------------
def write_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Iterable[Header] = (),
    attributes: int = 0,
) -> int:
    """Append one encoded record to ``out``; return the bytes written."""
    body = bytearray()
    body.append(attributes & 0xFF)
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    if key is None:
        body.append(1)  # varint -1
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        body.append(1)
    else:
        write_varint(body, len(value))
        body += value
    headers = headers if isinstance(headers, Sequence) else list(headers)
    write_varint(body, len(headers))
    for h_key, h_value in headers:
        raw_key = h_key.encode("utf-8", "surrogateescape")
        write_varint(body, len(raw_key))
        body += raw_key
        if h_value is None:
            body.append(1)
        else:
            write_varint(body, len(h_value))
            body += h_value
    start = len(out)
    write_varint(out, len(body))
    out += body
    return len(out) - start


def encode_record(record: Record) -> bytes:
    out = bytearray()
    write_record(
        out,
        record.offset_delta,
        record.timestamp_delta,
        record.key,
        record.value,
        record.headers,
        record.attributes,
    )
    return bytes(out)


def record_size(
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Iterable[Header] = (),
) -> int:
    """Encoded size of a record, length prefix included (batch size estimates)."""
    out = bytearray()
    return write_record(out, offset_delta, timestamp_delta, key, value, headers)


def _read_bytes(buf: Buffer, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"record {what} of {length} bytes runs past the record end")
    return bytes(buf[pos : pos + length]), pos + length


def decode_record(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[Record, int]:
    """Decode the record at ``pos`` -> ``(record, position after it)``."""
    if end is None:
        end = len(buf)
    length, pos = decode_varint(buf, pos)
    body_end = pos + length
    if length < MIN_RECORD_SIZE - 1 or body_end > end:
        raise CorruptRecordError(f"invalid record length {length} at position {pos}")
    attributes = buf[pos]
    timestamp_delta, p = decode_varlong(buf, pos + 1)
    offset_delta, p = decode_varint(buf, p)
    key, p = _read_bytes(buf, p, body_end, "key")
    value, p = _read_bytes(buf, p, body_end, "value")
    count, p = decode_varint(buf, p)
    if count < 0:
        raise CorruptRecordError(f"invalid number of record headers {count}")
    headers: list[Header] = []
    for _ in range(count):
        key_len, p = decode_varint(buf, p)
        if key_len < 0 or p + key_len > body_end:
            raise CorruptRecordError(f"invalid record header key size {key_len}")
        h_key = bytes(buf[p : p + key_len]).decode("utf-8", "surrogateescape")
        p += key_len
        h_value, p = _read_bytes(buf, p, body_end, "header value")
        headers.append((h_key, h_value))
    if p != body_end:
        raise CorruptRecordError(
            f"invalid record size: expected {length} bytes in record payload, read {p - pos}"
        )
    return Record(offset_delta, timestamp_delta, key, value, headers, attributes), body_end


# -- one batch ----------------------------------------------------------------------------
def decode_batch(
    buf: Buffer,
    pos: int = 0,
    *,
    verify_crc: bool = True,
    max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> DecodedBatch:
    """Decode the v2 batch at ``pos``: header, CRC check, decompression, every record."""
    header = read_batch_header(buf, pos)
    if header.magic != 2:
        raise CorruptRecordError(f"expected a magic 2 batch, found magic {header.magic}")
    if verify_crc:
        validate_batch(buf, pos)
    elif header.batch_length < BATCH_LENGTH_MIN or pos + header.size > len(buf):
        raise CorruptRecordError("batch length does not fit the buffer")
    # Locals for the record loop, the hot path of every decode.
    base_offset, base_timestamp, max_timestamp = (
        header.base_offset,
        header.base_timestamp,
        header.max_timestamp,
    )
    attributes, base_sequence, count = header.attributes, header.base_sequence, header.records_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    section: Buffer = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    codec = attributes & COMPRESSION_CODEC_MASK
    if codec and (count or len(section)):
        section = decompress(codec, section, max_output_size)
    if count * MIN_RECORD_SIZE > len(section):
        raise CorruptRecordError(f"{count} records cannot fit in {len(section)} bytes")
    log_append = bool(attributes & TIMESTAMP_TYPE_MASK)
    records: list[DecodedRecord] = []
    p = 0
    end = len(section)
    append = records.append
    for _ in range(count):
        rec, p = decode_record(section, p, end)
        if base_sequence == NO_SEQUENCE:
            sequence = NO_SEQUENCE
        else:
            sequence = (base_sequence + rec.offset_delta) % SEQUENCE_WRAP
        append(
            DecodedRecord(
                base_offset + rec.offset_delta,
                max_timestamp if log_append else base_timestamp + rec.timestamp_delta,
                rec.key,
                rec.value,
                rec.headers,
                sequence,
                rec.offset_delta,
                rec.timestamp_delta,
                rec.attributes,
            )
        )
    if p != end:
        raise CorruptRecordError(f"{end - p} unconsumed bytes after all {count} records")
    return DecodedBatch(*header, records)


def decode_batches(
    buf: Buffer, *, verify_crc: bool = True, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE
) -> list[DecodedBatch]:
    """Decode concatenated v2 batches; a partial trailing batch is ignored (fetch tails)."""
    return [
        decode_batch(buf, entry.position, verify_crc=verify_crc, max_output_size=max_output_size)
        for entry in iter_entries(buf)
    ]


class BatchBuilder:
    """Build one v2 batch the way the Java producer's ``MemoryRecordsBuilder`` does.

    Records are encoded as they are appended; :meth:`build` compresses the records
    section (always, with the chosen codec, as Java does) and writes header and CRC.
    ``partition_leader_epoch`` defaults to -1 like the Java producer's batches;
    kafka-python writes 0 there (pass 0 to reproduce its bytes). The broker overwrites
    the field on append anyway.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_buffer",
        "_compression",
        "_compression_level",
        "_count",
        "_delete_horizon_ms",
        "_is_control",
        "_is_transactional",
        "_last_offset_delta",
        "_log_append_time",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_producer_epoch",
        "_producer_id",
        "_timestamp_type",
    )

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: Compression | int = Compression.NONE,
        compression_level: int | None = None,
        timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
        log_append_time: int | None = None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        delete_horizon_ms: int | None = None,
    ) -> None:
        if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time is None:
            raise ValueError("LogAppendTime batches need log_append_time")
        if is_transactional and producer_id < 0:
            raise ValueError("transactional batches need a producer id")
        self._base_offset = base_offset
        self._compression = Compression(compression)
        self._compression_level = compression_level
        self._timestamp_type = TimestampType(timestamp_type)
        self._log_append_time = log_append_time
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._is_control = is_control
        self._partition_leader_epoch = partition_leader_epoch
        self._delete_horizon_ms = delete_horizon_ms
        self._base_timestamp: int | None = delete_horizon_ms
        self._max_timestamp = NO_TIMESTAMP
        self._last_offset_delta = -1
        self._count = 0
        self._buffer = bytearray()

    def __len__(self) -> int:
        return self._count

    @property
    def size_estimate(self) -> int:
        """Uncompressed size of the batch so far (header included)."""
        return HEADER_SIZE + len(self._buffer)

    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[Header] = (),
        *,
        offset_delta: int | None = None,
    ) -> int:
        """Add a record; offsets default to consecutive. Returns its offset delta."""
        if offset_delta is None:
            offset_delta = self._last_offset_delta + 1
        elif offset_delta <= self._last_offset_delta:
            raise ValueError(
                f"offset delta {offset_delta} does not follow {self._last_offset_delta}"
            )
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if self._count == 0 or timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        write_record(
            self._buffer, offset_delta, timestamp - self._base_timestamp, key, value, headers
        )
        self._last_offset_delta = offset_delta
        self._count += 1
        return offset_delta

    def _attributes(self) -> int:
        attributes = int(self._compression)
        if self._timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_MASK
        if self._is_transactional:
            attributes |= TRANSACTIONAL_FLAG_MASK
        if self._is_control:
            attributes |= CONTROL_FLAG_MASK
        if self._delete_horizon_ms is not None:
            attributes |= DELETE_HORIZON_FLAG_MASK
        return attributes

    def build(self) -> bytes:
        if self._count == 0:
            raise ValueError("a batch needs at least one record (see build_empty_batch)")
        if self._compression == Compression.NONE:
            section: Buffer = self._buffer
        else:
            section = compress(self._compression, self._buffer, self._compression_level)
        if self._timestamp_type == TimestampType.LOG_APPEND_TIME:
            assert self._log_append_time is not None
            max_timestamp = self._log_append_time
        else:
            max_timestamp = self._max_timestamp
        assert self._base_timestamp is not None
        return assemble_batch(
            section,
            base_offset=self._base_offset,
            partition_leader_epoch=self._partition_leader_epoch,
            attributes=self._attributes(),
            last_offset_delta=self._last_offset_delta,
            base_timestamp=self._base_timestamp,
            max_timestamp=max_timestamp,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
            base_sequence=self._base_sequence,
            count=self._count,
        )


def assemble_batch(
    section: Buffer,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
) -> bytes:
    """One v2 batch from its (already compressed) records section and header fields,
    with the CRC-32C computed (what a producer sends; also used to merge batches)."""
    out = bytearray(HEADER_SIZE)
    out += section
    HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    _UI.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_empty_batch(
    *,
    base_offset: int,
    last_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """A batch header with no records (Java's ``writeEmptyHeader``).

    Compaction keeps such a header when it removed every record of a producer's last
    batch, so the producer's sequence and epoch survive (the "Record Batch" section of
    Kafka's documentation).
    """
    attributes = 0
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    return assemble_batch(
        b"",
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=last_offset - base_offset,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        count=0,
    )


__all__ = [
    "BatchBuilder",
    "DecodedBatch",
    "DecodedRecord",
    "Header",
    "Record",
    "assemble_batch",
    "build_empty_batch",
    "decode_batch",
    "decode_batches",
    "decode_record",
    "encode_record",
    "record_size",
    "write_record",
]
