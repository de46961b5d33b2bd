"""Varints as Kafka's record format v2 uses them (``ByteUtils`` in the Java client).

Encoding: little-endian base-128 groups, 7 bits each, the high bit set on every byte
but the last. Signed values are zigzag-mapped first (0, -1, 1, -2 ... -> 0, 1, 2, 3
...), so small negative numbers stay short. An int32 takes at most 5 bytes and an
int64 at most 10; anything longer, or a buffer that ends inside a varint, is corrupt.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)`` so a caller walks a
buffer without slicing it; encoders either return ``bytes`` or append to a
``bytearray`` (the ``write_*`` forms, used when building a batch).
"""

from __future__ import annotations

from odradek.records.batch import Buffer, CorruptRecordError

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

# One-byte encodings are by far the most common (lengths, deltas); precompute them.
_SMALL_UNSIGNED = [bytes((i,)) for i in range(0x80)]


def zigzag_encode32(value: int) -> int:
    return ((value << 1) ^ (value >> 31)) & UINT32_MAX


def zigzag_encode64(value: int) -> int:
    return ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)


def zigzag_decode(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def _encode_raw(raw: int) -> bytes:
    if raw < 0x80:
        return _SMALL_UNSIGNED[raw]
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned int32 varint (used by flexible protocol versions and tagged fields)."""
    if not 0 <= value <= UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {value}")
    return _encode_raw(value)


def encode_varint(value: int) -> bytes:
    """Zigzag int32 varint."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_raw(zigzag_encode32(value))


def encode_varlong(value: int) -> bytes:
    """Zigzag int64 varint."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_raw(zigzag_encode64(value))


def write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag int32 varint to ``out`` (builder fast path)."""
    if -64 <= value <= 63:
        out.append(((value << 1) ^ (value >> 31)) & 0xFF)
    else:
        out += encode_varint(value)


def write_varlong(out: bytearray, value: int) -> None:
    if -64 <= value <= 63:
        out.append(((value << 1) ^ (value >> 63)) & 0xFF)
    else:
        out += encode_varlong(value)


def write_unsigned_varint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)
    else:
        out += encode_unsigned_varint(value)


def _decode_raw(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos + i >= end:
            raise CorruptRecordError(f"truncated varint at position {pos}")
        b = buf[pos + i]
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return raw, pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint at position {pos} longer than {max_bytes} bytes")


def decode_unsigned_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    raw, new_pos = _decode_raw(buf, pos, MAX_VARINT_BYTES)
    if raw > UINT32_MAX:
        raise CorruptRecordError(f"unsigned varint at position {pos} overflows 32 bits")
    return raw, new_pos


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Zigzag int32 varint at ``pos`` -> ``(value, new_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, new_pos = _decode_raw(buf, pos, MAX_VARINT_BYTES)
    if raw > UINT32_MAX:
        raise CorruptRecordError(f"varint at position {pos} overflows 32 bits")
    return (raw >> 1) ^ -(raw & 1), new_pos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Zigzag int64 varint at ``pos`` -> ``(value, new_pos)``."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, new_pos = _decode_raw(buf, pos, MAX_VARLONG_BYTES)
    if raw >> 64:
        raise CorruptRecordError(f"varlong at position {pos} overflows 64 bits")
    return (raw >> 1) ^ -(raw & 1), new_pos


def _size_of_raw(raw: int) -> int:
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size


def size_of_unsigned_varint(value: int) -> int:
    return _size_of_raw(value)


def size_of_varint(value: int) -> int:
    return _size_of_raw(zigzag_encode32(value))


def size_of_varlong(value: int) -> int:
    return _size_of_raw(zigzag_encode64(value))
