"""RecordBatch v2 header: a zero-copy view, CRC-32C validation and in-place patching.

Byte layout of one batch (all integers big-endian; Kafka's ``DefaultRecordBatch``)::

    offset  size  field
         0     8  baseOffset
         8     4  batchLength            bytes after this field (size - 12)
        12     4  partitionLeaderEpoch   \\ outside the CRC: the broker patches
        16     1  magic (= 2)            /  these two without re-checksumming
        17     4  crc                    CRC-32C (Castagnoli) over bytes 21..end
        21     2  attributes             bits 0-2 codec, 3 timestampType,
                                         4 isTransactional, 5 isControl,
                                         6 hasDeleteHorizonMs
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     -  records (compressed as a whole when codec != 0)

Legacy message sets (magic 0/1) share the first 12 bytes (offset, size) and keep
``magic`` at byte 16 too, so :func:`iter_entries` walks either kind.

Invariants: ``size == batchLength + 12``; ``batchLength >= 49`` for v2; the CRC
covers everything from ``attributes`` to the end, so patching ``baseOffset`` or
``partitionLeaderEpoch`` keeps the batch valid, while rewriting timestamps
(LogAppendTime) requires a new CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum

import crc32c as _crc32c

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12  # baseOffset + batchLength (or offset + size for v0/v1)
HEADER_SIZE = 61  # RECORD_BATCH_OVERHEAD
BATCH_LENGTH_MIN = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_UI = struct.Struct(">I")
_H = struct.Struct(">h")


class Compression(IntEnum):
    """Codec ids of the attributes' low 3 bits (``compression.type``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class RecordsError(ValueError):
    """Base of record-format failures; carries the Kafka error name to answer with."""

    kafka_error = "CORRUPT_MESSAGE"


class CorruptRecordError(RecordsError):
    """Sizes or CRC do not add up (Kafka: CORRUPT_MESSAGE)."""

    kafka_error = "CORRUPT_MESSAGE"


class InvalidRecordError(RecordsError):
    """Well-formed but not acceptable (Kafka: INVALID_RECORD)."""

    kafka_error = "INVALID_RECORD"


def crc32c(data: Buffer) -> int:
    return _crc32c.crc32c(data)


class BatchView:
    """A v2 batch header read in place from ``buf`` at ``pos``; no copy is made.

    Patching methods need a writable buffer (``bytearray`` or a writable view).
    """

    __slots__ = ("buf", "pos")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch header needs {HEADER_SIZE} bytes, have {len(buf) - pos}"
            )
        self.buf = buf
        self.pos = pos

    # -- fields -------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos)[0])

    @property
    def batch_length(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + 8)[0])

    @property
    def size(self) -> int:
        """Bytes this batch takes in the log (``batchLength + 12``)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + 12)[0])

    @property
    def magic(self) -> int:
        return int(self.buf[self.pos + MAGIC_OFFSET])

    @property
    def crc(self) -> int:
        return int(_UI.unpack_from(self.buf, self.pos + CRC_OFFSET)[0])

    @property
    def attributes(self) -> int:
        return int(_H.unpack_from(self.buf, self.pos + ATTRIBUTES_OFFSET)[0])

    @property
    def compression(self) -> Compression:
        return Compression(self.attributes & _COMPRESSION_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & _TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_MASK)

    @property
    def last_offset_delta(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + 23)[0])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos + 27)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos + 35)[0])

    @property
    def producer_id(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos + 43)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_H.unpack_from(self.buf, self.pos + 51)[0])

    @property
    def base_sequence(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + 53)[0])

    @property
    def last_sequence(self) -> int:
        """Kafka wraps sequences at Int32.MAX_VALUE."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) % 0x80000000

    @property
    def record_count(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + 57)[0])

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def fields(self) -> tuple[int, ...]:
        """All header fields in layout order, unpacked in one call (hot path)."""
        return tuple(_HEADER.unpack_from(self.buf, self.pos))

    def records(self) -> memoryview:
        """The (possibly compressed) records section."""
        return memoryview(self.buf)[self.pos + HEADER_SIZE : self.pos + self.size]

    def raw(self) -> memoryview:
        return memoryview(self.buf)[self.pos : self.pos + self.size]

    # -- integrity ----------------------------------------------------------------------
    def compute_crc(self) -> int:
        start = self.pos + ATTRIBUTES_OFFSET
        end = self.pos + self.size
        return crc32c(memoryview(self.buf)[start:end])

    def is_valid(self) -> bool:
        if self.magic != 2 or self.batch_length < BATCH_LENGTH_MIN:
            return False
        if self.pos + self.size > len(self.buf):
            return False
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        """Raise :class:`CorruptRecordError` unless sizes, magic and CRC are right."""
        if self.magic != 2:
            raise CorruptRecordError(f"expected magic 2, found {self.magic}")
        length = self.batch_length
        if length < BATCH_LENGTH_MIN:
            raise CorruptRecordError(f"batchLength {length} below minimum {BATCH_LENGTH_MIN}")
        if self.pos + length + LOG_OVERHEAD > len(self.buf):
            raise CorruptRecordError("batch extends past the end of the buffer")
        if self.compute_crc() != self.crc:
            raise CorruptRecordError(f"CRC mismatch at position {self.pos}")
        if self.last_offset_delta < 0 or self.record_count < 0:
            raise CorruptRecordError("negative lastOffsetDelta or record count")

    # -- patching -----------------------------------------------------------------------
    def set_base_offset(self, base_offset: int) -> None:
        _Q.pack_into(self.buf, self.pos, base_offset)  # type: ignore[arg-type]

    def set_partition_leader_epoch(self, epoch: int) -> None:
        _I.pack_into(self.buf, self.pos + 12, epoch)  # type: ignore[arg-type]

    def set_log_append_time(self, timestamp_ms: int) -> None:
        """Stamp LogAppendTime: sets the timestamp-type bit and maxTimestamp, then re-CRCs.

        As in Kafka, only the batch header changes; consumers read every record's
        timestamp as maxTimestamp when the bit is set.
        """
        attrs = self.attributes | _TIMESTAMP_TYPE_MASK
        _H.pack_into(self.buf, self.pos + ATTRIBUTES_OFFSET, attrs)  # type: ignore[arg-type]
        _Q.pack_into(self.buf, self.pos + 35, timestamp_ms)  # type: ignore[arg-type]
        self.update_crc()

    def update_crc(self) -> None:
        _UI.pack_into(self.buf, self.pos + CRC_OFFSET, self.compute_crc())  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry found by :func:`iter_entries`: a v2 batch or a legacy message."""

    position: int
    size: int
    magic: int
    base_offset: int


def iter_entries(buf: Buffer, start: int = 0) -> Iterator[Entry]:
    """Walk concatenated batches/messages; stop silently at a partial trailing entry.

    A fetch response may end in a truncated batch (Kafka clients skip it), and a log
    may end in a torn write; callers that must reject those compare the last
    entry's end with ``len(buf)``.
    """
    pos = start
    end = len(buf)
    while pos + LOG_OVERHEAD <= end:
        base_offset, length = struct.unpack_from(">qi", buf, pos)
        if length < 0 or pos + LOG_OVERHEAD + length > end or pos + MAGIC_OFFSET >= end:
            return
        size = LOG_OVERHEAD + length
        yield Entry(pos, size, int(buf[pos + MAGIC_OFFSET]), base_offset)
        pos += size


@dataclass(slots=True)
class BatchesSummary:
    """What the append path needs to know about a validated batch sequence."""

    batch_count: int = 0
    record_count: int = 0
    offset_count: int = 0  # sum of lastOffsetDelta + 1 over batches
    max_timestamp: int = NO_TIMESTAMP
    offset_of_max_timestamp_delta: int = -1  # relative to the first assigned offset
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    first_sequence: int = NO_SEQUENCE
    last_sequence: int = NO_SEQUENCE
    is_transactional: bool = False
    is_control: bool = False
    compression: Compression = Compression.NONE
    positions: tuple[int, ...] = ()


def validate_v2_batches(buf: Buffer, *, max_batch_bytes: int | None = None) -> BatchesSummary:
    """Check a produced records blob: only whole v2 batches, valid CRCs, one producer.

    Raises :class:`CorruptRecordError` (CORRUPT_MESSAGE) for bad sizes/CRCs and
    :class:`InvalidRecordError` (INVALID_RECORD) for acceptable-looking but illegal
    content. ``max_batch_bytes`` raises :class:`BatchTooLargeError`.
    """
    summary = BatchesSummary()
    positions: list[int] = []
    pos = 0
    end = len(buf)
    if end == 0:
        raise CorruptRecordError("empty records")
    offset_cursor = 0
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise CorruptRecordError("trailing bytes shorter than a batch header")
        (
            _base,
            length,
            _ple,
            magic,
            crc,
            attrs,
            last_delta,
            _base_ts,
            max_ts,
            pid,
            pepoch,
            base_seq,
            count,
        ) = _HEADER.unpack_from(buf, pos)
        if magic != 2:
            raise InvalidRecordError(f"magic {magic} batch where v2 was expected")
        if length < BATCH_LENGTH_MIN or pos + LOG_OVERHEAD + length > end:
            raise CorruptRecordError(f"batchLength {length} does not fit the request")
        size = LOG_OVERHEAD + length
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise BatchTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {max_batch_bytes}"
            )
        if crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]) != crc:
            raise CorruptRecordError(f"CRC mismatch in batch at position {pos}")
        if last_delta < 0 or count < 0:
            raise CorruptRecordError("negative lastOffsetDelta or record count")
        if count == 0 and not (attrs & _CONTROL_MASK):
            raise InvalidRecordError("batch with no records")
        if summary.batch_count == 0:
            summary.producer_id = pid
            summary.producer_epoch = pepoch
            summary.first_sequence = base_seq
            summary.is_transactional = bool(attrs & _TRANSACTIONAL_MASK)
            summary.is_control = bool(attrs & _CONTROL_MASK)
            summary.compression = (
                Compression(attrs & _COMPRESSION_MASK)
                if (attrs & _COMPRESSION_MASK) <= 4
                else Compression.NONE
            )
        elif pid != summary.producer_id or pepoch != summary.producer_epoch:
            raise InvalidRecordError("batches of one partition from different producers")
        if (attrs & _COMPRESSION_MASK) > 4:
            raise InvalidRecordError(f"unknown compression codec {attrs & _COMPRESSION_MASK}")
        summary.last_sequence = (
            NO_SEQUENCE if base_seq == NO_SEQUENCE else (base_seq + last_delta) % 0x80000000
        )
        if max_ts > summary.max_timestamp:
            summary.max_timestamp = max_ts
            summary.offset_of_max_timestamp_delta = offset_cursor + last_delta
        summary.batch_count += 1
        summary.record_count += count
        summary.offset_count += last_delta + 1
        offset_cursor += last_delta + 1
        positions.append(pos)
        pos += size
    summary.positions = tuple(positions)
    return summary


class BatchTooLargeError(RecordsError):
    """A batch larger than ``max.message.bytes`` (Kafka: MESSAGE_TOO_LARGE)."""

    kafka_error = "MESSAGE_TOO_LARGE"


def assign_offsets(
    buf: bytearray | memoryview,
    positions: tuple[int, ...] | list[int],
    first_offset: int,
    partition_leader_epoch: int,
) -> int:
    """Patch baseOffset and partitionLeaderEpoch of each batch; return the next offset.

    Both fields sit outside the CRC, so no checksum is recomputed.
    """
    next_offset = first_offset
    for pos in positions:
        _Q.pack_into(buf, pos, next_offset)
        _I.pack_into(buf, pos + 12, partition_leader_epoch)
        next_offset += int(_I.unpack_from(buf, pos + 23)[0]) + 1
    return next_offset
