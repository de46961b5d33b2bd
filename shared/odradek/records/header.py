"""The one owner of the record batch header layout: offsets, attribute bits, typed readers.

Every log entry, whatever its magic, starts with the same 12 bytes (Kafka's
``Records.LOG_OVERHEAD``) and keeps its magic byte at offset 16
(``Records.HEADER_SIZE_UP_TO_MAGIC`` = 17)::

    offset  size  v2 batch                     v0/v1 message
         0     8  baseOffset                   offset (of the last inner message)
         8     4  batchLength                  size
        12     4  partitionLeaderEpoch         crc (CRC-32 over bytes 16..end)
        16     1  magic (= 2)                  magic (0 or 1)

A v2 batch header is 61 bytes (all integers big-endian; Kafka's ``DefaultRecordBatch``)::

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

Invariants: ``size == batchLength + 12``; ``batchLength >= 49`` for v2; the CRC covers
everything from ``attributes`` to the end, so patching ``baseOffset`` or
``partitionLeaderEpoch`` keeps a batch valid while any other change needs a new CRC.
Crash behaviour: a torn or zeroed header shows as an implausible ``batchLength``, a
wrong magic or a CRC mismatch; the log's recovery truncates there (see
:mod:`odradek.log.segment`). Offsets and epochs, being outside the CRC, are checked
by recovery against their neighbours instead.

:class:`BatchHeader` and :class:`LogOverhead` are typed snapshots read with one
``struct.unpack_from`` each: they never copy the batch, and reading one costs about
as much as reading a single field, so hot loops read the whole header once per batch.
Reading does not validate (tools show invalid batches); see
:func:`odradek.records.batch.validate_batch`. Pure code, no I/O.
"""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum
from typing import NamedTuple

from odradek.records.errors import CorruptRecordError

Buffer = bytes | bytearray | memoryview
ReadBuffer = Buffer | mmap.mmap  # what the readers accept (dump-log maps segment files)

# Field offsets, named as in Kafka's Records and DefaultRecordBatch.
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12  # baseOffset + batchLength (or offset + size for v0/v1)
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1  # 17
HEADER_SIZE = RECORDS_OFFSET  # 61, Kafka's RECORD_BATCH_OVERHEAD
BATCH_LENGTH_MIN = HEADER_SIZE - LOG_OVERHEAD  # 49

# Attribute bits (DefaultRecordBatch's masks).
COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1
SEQUENCE_WRAP = 0x80000000  # Kafka wraps sequences at Int32.MAX_VALUE

# The whole header in layout order, and the 12-byte prefix.
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
LOG_OVERHEAD_STRUCT = struct.Struct(">qi")
_unpack_header = HEADER_STRUCT.unpack_from
_unpack_overhead = LOG_OVERHEAD_STRUCT.unpack_from
_new = tuple.__new__


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


class LogOverhead(NamedTuple):
    """The 12 bytes every log entry (v0, v1 or v2) starts with."""

    base_offset: int  # v0/v1: the message's offset
    batch_length: int  # bytes after this field; v0/v1: the message size

    @property
    def size(self) -> int:
        """Bytes the entry takes in the log."""
        return self.batch_length + LOG_OVERHEAD


class BatchHeader(NamedTuple):
    """The 61-byte v2 header, every field named, read with one unpack (no copy of the batch)."""

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
    records_count: int

    @property
    def size(self) -> int:
        """Bytes this batch takes in the log (``batchLength + 12``)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> Compression:
        """The codec; raises ValueError for the unassigned ids 5-7."""
        return Compression(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps at Int32.MAX_VALUE as in Kafka."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        return (base + self.last_offset_delta) % SEQUENCE_WRAP


class LocatedBatch(NamedTuple):
    """A batch's header and where the batch starts (in a records buffer or a segment file)."""

    position: int
    header: BatchHeader

    @property
    def size(self) -> int:
        return self.header.batch_length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        """Position just past the batch."""
        return self.position + self.header.batch_length + LOG_OVERHEAD


def read_batch_header(buf: ReadBuffer, pos: int = 0) -> BatchHeader:
    """The v2 header at ``pos``; CorruptRecordError when fewer than 61 bytes are left.

    Fields are returned as stored: nothing (magic, sizes, CRC) is checked.
    """
    try:
        return _new(BatchHeader, _unpack_header(buf, pos))  # type: ignore[no-any-return]
    except struct.error:
        raise CorruptRecordError(
            f"batch header needs {HEADER_SIZE} bytes, have {len(buf) - pos}"
        ) from None


def read_located_batch(buf: ReadBuffer, pos: int = 0, position: int | None = None) -> LocatedBatch:
    """The v2 header at ``pos`` of ``buf`` as a batch starting at ``position`` (default
    ``pos``; a segment passes the file position ``buf`` was read from plus ``pos``)."""
    try:
        header = _new(BatchHeader, _unpack_header(buf, pos))
    except struct.error:
        raise CorruptRecordError(
            f"batch header needs {HEADER_SIZE} bytes, have {len(buf) - pos}"
        ) from None
    return _new(LocatedBatch, (pos if position is None else position, header))  # type: ignore[no-any-return]


def read_log_overhead(buf: ReadBuffer, pos: int = 0) -> LogOverhead:
    """The 12-byte prefix at ``pos``; CorruptRecordError when fewer than 12 bytes are left."""
    try:
        return _new(LogOverhead, _unpack_overhead(buf, pos))  # type: ignore[no-any-return]
    except struct.error:
        raise CorruptRecordError(
            f"log entry needs {LOG_OVERHEAD} bytes, have {len(buf) - pos}"
        ) from None


def read_magic(buf: ReadBuffer, pos: int = 0) -> int:
    """The magic byte of the entry at ``pos`` (offset 16 for every version)."""
    if pos < 0 or len(buf) - pos < HEADER_SIZE_UP_TO_MAGIC:
        raise CorruptRecordError(
            f"log entry needs {HEADER_SIZE_UP_TO_MAGIC} bytes to show its magic, "
            f"have {len(buf) - pos}"
        )
    return int(buf[pos + MAGIC_OFFSET])
