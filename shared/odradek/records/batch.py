"""RecordBatch v2 in a buffer: an in-place view, CRC-32C validation and patching.

The header layout (byte offsets, attribute bits) is owned by
:mod:`odradek.records.header`; this module works on whole batches in memory: the
produce path's validation of a records blob, offset assignment in place, and the
view Kafka's ``DefaultRecordBatch`` is (getters plus the setters a broker uses).
Legacy message sets (magic 0/1) share the first 12 bytes and the magic at byte 16,
so :func:`iter_entries` walks either kind. Pure code, no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c as _crc32c

from odradek.records.errors import BatchTooLargeError as BatchTooLargeError
from odradek.records.errors import CorruptRecordError as CorruptRecordError
from odradek.records.errors import InvalidRecordError as InvalidRecordError
from odradek.records.errors import RecordsError as RecordsError
from odradek.records.header import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_OFFSET,
    BASE_TIMESTAMP_OFFSET,
    BATCH_LENGTH_MIN,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LAST_OFFSET_DELTA_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    LOG_OVERHEAD_STRUCT,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_EPOCH_OFFSET,
    PRODUCER_ID_OFFSET,
    RECORDS_COUNT_OFFSET,
    SEQUENCE_WRAP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Buffer,
    Compression,
    TimestampType,
    read_batch_header,
)
from odradek.records.header import NO_PARTITION_LEADER_EPOCH as NO_PARTITION_LEADER_EPOCH

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_UI = struct.Struct(">I")
_H = struct.Struct(">h")
_new = tuple.__new__


def crc32c(data: Buffer) -> int:
    return _crc32c.crc32c(data)


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """The CRC-32C a batch of ``size`` bytes at ``pos`` should carry (bytes 21..end)."""
    return _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def validate_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos`` once sizes, magic and CRC check out.

    Raises :class:`CorruptRecordError` (Kafka: CORRUPT_MESSAGE) otherwise.
    """
    h = read_batch_header(buf, pos)
    if h.magic != 2:
        raise CorruptRecordError(f"expected magic 2, found {h.magic}")
    length = h.batch_length
    if length < BATCH_LENGTH_MIN:
        raise CorruptRecordError(f"batchLength {length} below minimum {BATCH_LENGTH_MIN}")
    if pos + length + LOG_OVERHEAD > len(buf):
        raise CorruptRecordError("batch extends past the end of the buffer")
    if compute_crc(buf, pos, length + LOG_OVERHEAD) != h.crc:
        raise CorruptRecordError(f"CRC mismatch at position {pos}")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise CorruptRecordError("negative lastOffsetDelta or record count")
    return h


class BatchView:
    """A v2 batch read and patched in place in ``buf`` at ``pos`` (Kafka's DefaultRecordBatch).

    Single fields are read on demand; :meth:`header` reads all of them in one call
    (loops over many batches use it). Patching needs a writable buffer (``bytearray``
    or a writable view).
    """

    __slots__ = ("buf", "pos")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch header needs {HEADER_SIZE} bytes, have {len(buf) - pos}"
            )
        self.buf = buf
        self.pos = pos

    def header(self) -> BatchHeader:
        """Every header field, unpacked in one call."""
        return _new(BatchHeader, HEADER_STRUCT.unpack_from(self.buf, self.pos))  # type: ignore[no-any-return]

    # -- fields -------------------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos)[0])

    @property
    def batch_length(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + LENGTH_OFFSET)[0])

    @property
    def size(self) -> int:
        """Bytes this batch takes in the log (``batchLength + 12``)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + PARTITION_LEADER_EPOCH_OFFSET)[0])

    @property
    def magic(self) -> int:
        return int(self.buf[self.pos + MAGIC_OFFSET])

    @property
    def crc(self) -> int:
        return int(_UI.unpack_from(self.buf, self.pos + CRC_OFFSET)[0])

    @property
    def attributes(self) -> int:
        return int(_H.unpack_from(self.buf, self.pos + ATTRIBUTES_OFFSET)[0])

    # What the attribute bits mean is the header's to say.
    @property
    def compression(self) -> Compression:
        return self.header().compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header().timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header().is_transactional

    @property
    def is_control(self) -> bool:
        return self.header().is_control

    @property
    def has_delete_horizon(self) -> bool:
        return self.header().has_delete_horizon

    @property
    def last_offset_delta(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + LAST_OFFSET_DELTA_OFFSET)[0])

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_timestamp(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos + BASE_TIMESTAMP_OFFSET)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos + MAX_TIMESTAMP_OFFSET)[0])

    @property
    def producer_id(self) -> int:
        return int(_Q.unpack_from(self.buf, self.pos + PRODUCER_ID_OFFSET)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_H.unpack_from(self.buf, self.pos + PRODUCER_EPOCH_OFFSET)[0])

    @property
    def base_sequence(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + BASE_SEQUENCE_OFFSET)[0])

    @property
    def last_sequence(self) -> int:
        """Kafka wraps sequences at Int32.MAX_VALUE."""
        return self.header().last_sequence

    @property
    def record_count(self) -> int:
        return int(_I.unpack_from(self.buf, self.pos + RECORDS_COUNT_OFFSET)[0])

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def records(self) -> memoryview:
        """The (possibly compressed) records section."""
        return memoryview(self.buf)[self.pos + HEADER_SIZE : self.pos + self.size]

    def raw(self) -> memoryview:
        return memoryview(self.buf)[self.pos : self.pos + self.size]

    # -- integrity ----------------------------------------------------------------------
    def compute_crc(self) -> int:
        return compute_crc(self.buf, self.pos, self.size)

    def is_valid(self) -> bool:
        if self.magic != 2 or self.batch_length < BATCH_LENGTH_MIN:
            return False
        if self.pos + self.size > len(self.buf):
            return False
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        """Raise :class:`CorruptRecordError` unless sizes, magic and CRC are right."""
        validate_batch(self.buf, self.pos)

    # -- patching -----------------------------------------------------------------------
    def set_base_offset(self, base_offset: int) -> None:
        """Outside the CRC: the batch stays valid."""
        _Q.pack_into(self.buf, self.pos, base_offset)  # type: ignore[arg-type]

    def set_partition_leader_epoch(self, epoch: int) -> None:
        """Outside the CRC: the batch stays valid."""
        _I.pack_into(self.buf, self.pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)  # type: ignore[arg-type]

    def set_last_offset_delta(self, delta: int) -> None:
        """Rewrite lastOffsetDelta (compaction keeps a batch's last offset), then re-CRC."""
        _I.pack_into(self.buf, self.pos + LAST_OFFSET_DELTA_OFFSET, delta)  # type: ignore[arg-type]
        self.update_crc()

    def set_log_append_time(self, timestamp_ms: int) -> None:
        """Stamp LogAppendTime: sets the timestamp-type bit and maxTimestamp, then re-CRCs.

        As in Kafka, only the batch header changes; consumers read every record's
        timestamp as maxTimestamp when the bit is set.
        """
        attrs = self.attributes | TIMESTAMP_TYPE_MASK
        _H.pack_into(self.buf, self.pos + ATTRIBUTES_OFFSET, attrs)  # type: ignore[arg-type]
        _Q.pack_into(self.buf, self.pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)  # type: ignore[arg-type]
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
    unpack = LOG_OVERHEAD_STRUCT.unpack_from
    while pos + LOG_OVERHEAD <= end:
        base_offset, length = unpack(buf, pos)
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
        ) = HEADER_STRUCT.unpack_from(buf, pos)
        if magic != 2:
            raise InvalidRecordError(f"magic {magic} batch where v2 was expected")
        if length < BATCH_LENGTH_MIN or pos + LOG_OVERHEAD + length > end:
            raise CorruptRecordError(f"batchLength {length} does not fit the request")
        size = LOG_OVERHEAD + length
        if max_batch_bytes is not None and size > max_batch_bytes:
            raise BatchTooLargeError(
                f"batch of {size} bytes exceeds max.message.bytes {max_batch_bytes}"
            )
        if _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]) != crc:
            raise CorruptRecordError(f"CRC mismatch in batch at position {pos}")
        if last_delta < 0 or count < 0:
            raise CorruptRecordError("negative lastOffsetDelta or record count")
        if count == 0 and not (attrs & CONTROL_FLAG_MASK):
            raise InvalidRecordError("batch with no records")
        codec = attrs & COMPRESSION_CODEC_MASK
        if summary.batch_count == 0:
            summary.producer_id = pid
            summary.producer_epoch = pepoch
            summary.first_sequence = base_seq
            summary.is_transactional = bool(attrs & TRANSACTIONAL_FLAG_MASK)
            summary.is_control = bool(attrs & CONTROL_FLAG_MASK)
            summary.compression = Compression(codec) if codec <= 4 else Compression.NONE
        elif pid != summary.producer_id or pepoch != summary.producer_epoch:
            raise InvalidRecordError("batches of one partition from different producers")
        if codec > 4:
            raise InvalidRecordError(f"unknown compression codec {codec}")
        summary.last_sequence = (
            NO_SEQUENCE if base_seq == NO_SEQUENCE else (base_seq + last_delta) % SEQUENCE_WRAP
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
        _I.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        next_offset += int(_I.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)[0]) + 1
    return next_offset
