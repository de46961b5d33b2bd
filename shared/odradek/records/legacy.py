"""Legacy message sets, magic 0 (Kafka 0.8-0.9) and magic 1 (0.10): read and write.

One entry of a message set (big-endian)::

    offset      int64
    size        int32    bytes after this field
    crc         uint32   CRC-32 (zlib.crc32) over magic .. end of value
    magic       int8     0 or 1
    attributes  int8     bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
                         bit 3 timestamp type (magic 1: 0 CreateTime, 1 LogAppendTime)
    timestamp   int64    magic 1 only
    keyLength   int32    -1 for a null key
    key         bytes
    valueLength int32    -1 for a null value
    value       bytes

So a message takes 12 (log overhead) + 14 (magic 0) or 22 (magic 1) bytes plus key and
value: key "key" and value "value" take 34 bytes in magic 0 and 42 in magic 1
(Kafka's ``LegacyRecord``; magic 1 adds the timestamp, KIP-32).

A compressed *wrapper* message has a null key and, as value, a whole inner message set
compressed with the codec of its attributes. Inner messages are never compressed and
share the wrapper's magic. Offsets:

- magic 0: inner messages carry absolute offsets (the broker rewrote them);
- magic 1: inner offsets are relative (0..n-1, or with gaps after compaction) and the
  wrapper carries the absolute offset of the LAST inner message, so
  ``absolute = wrapper_offset + (inner_offset - last_inner_offset)`` (Java's
  ``AbstractLegacyRecordBatch``, KIP-31);
  when that base would be negative (a producer's wrapper, offset 0) the inner offsets
  are taken as they are, as Java's reader does.

Wrapper timestamp (magic 1): the largest inner timestamp for CreateTime, the broker's
append time for LogAppendTime, in which case inner timestamps are ignored on read.
Magic-0 LZ4 uses Kafka 0.8's broken frame-header checksum
(:func:`odradek.records.compression.compress_lz4_kafka08`). Pure code, no I/O.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from odradek.records.batch import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    Buffer,
    Compression,
    CorruptRecordError,
    TimestampType,
)
from odradek.records.compression import (
    DEFAULT_MAX_OUTPUT_SIZE,
    UnsupportedCodecError,
    compress,
    compress_lz4_kafka08,
    decompress,
)
from odradek.records.header import read_log_overhead

MAGIC_V0 = 0
MAGIC_V1 = 1
RECORD_OVERHEAD_V0 = 14  # crc + magic + attributes + key length + value length
RECORD_OVERHEAD_V1 = 22  # ... + timestamp
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1 = struct.Struct(">qiIbbq")  # ... timestamp
_I = struct.Struct(">i")
_UI = struct.Struct(">I")
_CRC_START = LOG_OVERHEAD + 4  # magic byte

# One legacy record to write: (offset, timestamp, key, value).
LegacyRecordInput = tuple[int, int, bytes | None, bytes | None]


@dataclass(slots=True)
class LegacyMessage:
    """One message read from a message set.

    ``timestamp`` is -1 for magic 0. ``valid`` says whether the stored CRC matched.
    For messages taken out of a wrapper, ``offset`` is absolute, ``timestamp`` is the
    wrapper's under LogAppendTime, and ``position``/``size`` are the wrapper's.
    """

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc: int
    valid: bool = True
    position: int = 0
    size: int = 0

    @property
    def compression(self) -> Compression:
        codec = self.attributes & CODEC_MASK
        if codec > Compression.LZ4:
            raise UnsupportedCodecError(f"codec {codec} is not valid in magic {self.magic}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_compressed(self) -> bool:
        return bool(self.attributes & CODEC_MASK)


def record_overhead(magic: int) -> int:
    if magic == MAGIC_V0:
        return RECORD_OVERHEAD_V0
    if magic == MAGIC_V1:
        return RECORD_OVERHEAD_V1
    raise ValueError(f"not a legacy magic: {magic}")


# -- reading ------------------------------------------------------------------------------
def read_message(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> LegacyMessage:
    """The message at ``pos`` (shallow: a wrapper's value stays compressed)."""
    end = len(buf)
    if end - pos < LOG_OVERHEAD + RECORD_OVERHEAD_V0:
        raise CorruptRecordError(f"truncated legacy message at position {pos}")
    offset, size, crc, magic, attributes = _V0.unpack_from(buf, pos)
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise CorruptRecordError(f"expected magic 0 or 1 at position {pos}, found {magic}")
    msg_end = pos + LOG_OVERHEAD + size
    if size < record_overhead(magic) or msg_end > end:
        raise CorruptRecordError(f"invalid legacy message size {size} at position {pos}")
    if magic == MAGIC_V1:
        timestamp = _V1.unpack_from(buf, pos)[5]
        p = pos + _V1.size
    else:
        timestamp = NO_TIMESTAMP
        p = pos + _V0.size
    key, p = _read_bytes(buf, p, msg_end)
    value, p = _read_bytes(buf, p, msg_end)
    if p != msg_end:
        raise CorruptRecordError(f"legacy message at position {pos} has {msg_end - p} extra bytes")
    valid = zlib.crc32(memoryview(buf)[pos + _CRC_START : msg_end]) == crc
    if verify_crc and not valid:
        raise CorruptRecordError(f"CRC mismatch in legacy message at position {pos}")
    return LegacyMessage(
        offset, magic, attributes, timestamp, key, value, crc, valid, pos, LOG_OVERHEAD + size
    )


def _read_bytes(buf: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("legacy message ends inside a length field")
    (length,) = _I.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError(f"legacy key/value of {length} bytes runs past the message")
    return bytes(buf[pos : pos + length]), pos + length


def iter_messages(buf: Buffer, *, verify_crc: bool = True) -> Iterator[LegacyMessage]:
    """Shallow walk; stops silently at a partial trailing message (fetch tails)."""
    pos = 0
    end = len(buf)
    while pos + LOG_OVERHEAD <= end:
        size = read_log_overhead(buf, pos).batch_length
        if size >= 0 and pos + LOG_OVERHEAD + size > end:
            return
        msg = read_message(buf, pos, verify_crc=verify_crc)
        yield msg
        pos += msg.size


def inner_messages(
    wrapper: LegacyMessage,
    *,
    verify_crc: bool = True,
    max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> list[LegacyMessage]:
    """Decompress a wrapper and give its messages absolute offsets and timestamps."""
    codec = wrapper.compression
    if codec == Compression.NONE:
        return [wrapper]
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed wrapper at offset {wrapper.offset} has a null value")
    data = decompress(codec, wrapper.value, max_output_size)
    inner: list[LegacyMessage] = []
    pos = 0
    end = len(data)
    while pos < end:
        msg = read_message(data, pos, verify_crc=verify_crc)
        if msg.magic != wrapper.magic:
            raise CorruptRecordError(
                f"inner message magic {msg.magic} differs from wrapper magic {wrapper.magic}"
            )
        if msg.is_compressed:
            raise CorruptRecordError(f"message set at offset {wrapper.offset} is double-compressed")
        inner.append(msg)
        pos += msg.size
    if not inner:
        raise CorruptRecordError(f"compressed wrapper at offset {wrapper.offset} is empty")
    # Java's DeepRecordsIterator: a negative base (a producer's wrapper still at
    # offset 0) leaves the inner offsets as they are.
    shift = wrapper.offset - inner[-1].offset if wrapper.magic == MAGIC_V1 else 0
    if shift < 0:
        shift = 0
    log_append = wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME
    for msg in inner:
        msg.offset += shift
        if log_append:
            msg.timestamp = wrapper.timestamp
            msg.attributes |= TIMESTAMP_TYPE_MASK
        msg.position = wrapper.position
        msg.size = wrapper.size
    return inner


def iter_records(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> Iterator[LegacyMessage]:
    """Deep walk: every logical record, wrappers expanded, offsets absolute."""
    for msg in iter_messages(buf, verify_crc=verify_crc):
        if msg.is_compressed:
            yield from inner_messages(msg, verify_crc=verify_crc, max_output_size=max_output_size)
        else:
            yield msg


# -- writing ------------------------------------------------------------------------------
def encode_message(
    magic: int,
    offset: int,
    timestamp: int,
    key: Buffer | None,
    value: Buffer | None,
    attributes: int = 0,
) -> bytes:
    """One message with its log overhead and CRC."""
    key_len = -1 if key is None else len(key)
    value_len = -1 if value is None else len(value)
    size = record_overhead(magic) + max(key_len, 0) + max(value_len, 0)
    out = bytearray()
    if magic == MAGIC_V0:
        out += _V0.pack(offset, size, 0, magic, attributes)
    else:
        out += _V1.pack(offset, size, 0, magic, attributes, timestamp)
    out += _I.pack(key_len)
    if key is not None:
        out += key
    out += _I.pack(value_len)
    if value is not None:
        out += value
    _UI.pack_into(out, LOG_OVERHEAD, zlib.crc32(memoryview(out)[_CRC_START:]))
    return bytes(out)


def build_message_set(
    magic: int,
    records: Sequence[LegacyRecordInput],
    *,
    compression: Compression | int = Compression.NONE,
    timestamp_type: TimestampType | int = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """A message set of ``(offset, timestamp, key, value)`` records, as a broker stores it.

    Uncompressed: one message per record. Compressed: one wrapper holding them all,
    with magic-1 relative inner offsets and the last absolute offset on the wrapper.
    Magic 0 drops timestamps; LogAppendTime (magic 1) stamps ``log_append_time``.
    """
    if magic not in (MAGIC_V0, MAGIC_V1):
        raise ValueError(f"not a legacy magic: {magic}")
    codec = Compression(compression)
    if codec > Compression.LZ4:
        raise UnsupportedCodecError(f"{codec.name} cannot be written in magic {magic}")
    if not records:
        return b""
    log_append = magic == MAGIC_V1 and timestamp_type == TimestampType.LOG_APPEND_TIME
    if log_append and log_append_time is None:
        raise ValueError("LogAppendTime needs log_append_time")
    ts_bit = TIMESTAMP_TYPE_MASK if log_append else 0

    def stamp(ts: int) -> int:
        if magic == MAGIC_V0:
            return NO_TIMESTAMP
        if log_append:
            assert log_append_time is not None
            return log_append_time
        return ts

    if codec == Compression.NONE:
        return b"".join(
            encode_message(magic, offset, stamp(ts), key, value, ts_bit)
            for offset, ts, key, value in records
        )
    first_offset = records[0][0]
    inner = b"".join(
        encode_message(
            magic,
            offset - first_offset if magic == MAGIC_V1 else offset,
            stamp(ts),
            key,
            value,
        )
        for offset, ts, key, value in records
    )
    if codec == Compression.LZ4 and magic == MAGIC_V0:
        compressed = compress_lz4_kafka08(inner, compression_level)
    else:
        compressed = compress(codec, inner, compression_level)
    wrapper_ts = stamp(max(ts for _, ts, _, _ in records))
    return encode_message(magic, records[-1][0], wrapper_ts, None, compressed, int(codec) | ts_bit)
