"""The four record-batch codecs, as Kafka clients write and read them.

Formats (what travels inside a v2 batch's records section or a legacy wrapper's value):

- gzip: a gzip stream (RFC 1952); several concatenated members are read as one, as
  Java's ``GZIPInputStream`` does. Written with mtime 0 so output is deterministic.
- snappy: two framings exist. The Java client writes xerial's stream::

      magic  \\x82 S N A P P Y \\x00   (8 bytes)
      int32  version (1)              big-endian
      int32  compatible version (1)
      then blocks: int32 compressed length, raw snappy block (<= 32 KiB input each)

  librdkafka, Sarama and others may send one raw snappy block instead. Both are read
  (xerial detected by its magic; streams concatenated mid-way are accepted); xerial is
  written, since every client reads it.
- lz4: the LZ4 *frame* format, written as the Java client does (64 KiB independent
  blocks, no content size, no checksums). Kafka 0.8/0.9 wrote magic-0 frames with a
  wrong header checksum (xxh32 taken over the 4 magic bytes too, KAFKA-3160); reading
  tolerates it, and :func:`compress_lz4_kafka08` writes it for magic-0 message sets.
- zstd: plain zstd frames; frames without a content size are common (streaming
  writers), so decompression streams.

Every decompression is bounded by ``max_output_size`` (a compressed batch of a few KB
can expand to gigabytes); exceeding it, or any malformed input, raises
:class:`CorruptRecordError`. Pure functions, no I/O.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from odradek.records.batch import Buffer, Compression, CorruptRecordError, RecordsError

DEFAULT_MAX_OUTPUT_SIZE = 256 * 1024 * 1024

# Kafka's defaults (KIP-390): gzip uses Deflater's default, lz4 level 9 is only the
# high-compression mode's default, so we keep lz4's fast mode unless asked.
GZIP_DEFAULT_LEVEL = 6
ZSTD_DEFAULT_LEVEL = 3

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)  # 16
XERIAL_BLOCK_SIZE = 32 * 1024

LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01

_I = struct.Struct(">i")


class UnsupportedCodecError(RecordsError):
    """A codec id outside 0-4, or one the target format cannot carry (zstd in magic 0/1)."""

    kafka_error = "UNSUPPORTED_COMPRESSION_TYPE"


def compress(codec: Compression | int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` the way the Java client does."""
    codec = _codec(codec)
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return gzip.compress(
            data, compresslevel=GZIP_DEFAULT_LEVEL if level is None else level, mtime=0
        )
    if codec == Compression.SNAPPY:
        return snappy_xerial_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data, level)
    return zstandard.ZstdCompressor(level=ZSTD_DEFAULT_LEVEL if level is None else level).compress(
        data
    )


def decompress(
    codec: Compression | int, data: Buffer, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE
) -> bytes:
    """Inverse of :func:`compress`, tolerant of every framing real clients send."""
    codec = _codec(codec)
    if codec == Compression.NONE:
        out = bytes(data)
    elif codec == Compression.GZIP:
        out = _gzip_decompress(data, max_output_size)
    elif codec == Compression.SNAPPY:
        out = snappy_decompress(data, max_output_size)
    elif codec == Compression.LZ4:
        out = lz4_decompress(data, max_output_size)
    else:
        out = _zstd_decompress(data, max_output_size)
    if len(out) > max_output_size:
        raise CorruptRecordError(f"decompressed size exceeds the limit of {max_output_size} bytes")
    return out


def _codec(codec: Compression | int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise UnsupportedCodecError(f"unknown compression codec {codec}") from None


# -- gzip ---------------------------------------------------------------------------------
def _gzip_decompress(data: Buffer, max_output_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: Buffer = data
    try:
        while True:
            d = zlib.decompressobj(wbits=31)
            parts.append(d.decompress(rest, max_output_size - total + 1))
            total += len(parts[-1])
            if total > max_output_size:
                raise CorruptRecordError(
                    f"gzip output exceeds the limit of {max_output_size} bytes"
                )
            if not d.eof:
                if d.unconsumed_tail:
                    raise CorruptRecordError(
                        f"gzip output exceeds the limit of {max_output_size} bytes"
                    )
                raise CorruptRecordError("truncated gzip stream")
            rest = d.unused_data
            # Java's GZIPInputStream reads a following member and ignores anything
            # else after the first one (some writers pad); do the same.
            if not rest.startswith(b"\x1f\x8b"):
                break
    except zlib.error as exc:
        raise CorruptRecordError(f"invalid gzip data: {exc}") from None
    return b"".join(parts)


# -- snappy -------------------------------------------------------------------------------
def snappy_xerial_compress(data: Buffer, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """xerial-framed snappy, byte-compatible with Java's ``SnappyOutputStream``."""
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), block_size):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + block_size]))
        parts.append(_I.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def snappy_raw_compress(data: Buffer) -> bytes:
    """One raw snappy block, as librdkafka writes it (tests and tools)."""
    return bytes(cramjam.snappy.compress_raw(data))


def _snappy_block(block: Buffer, budget: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(block)
        if size > budget:
            raise CorruptRecordError(
                f"snappy block of {size} bytes exceeds the decompression limit"
            )
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(f"invalid snappy data: {exc}") from None


def snappy_decompress(data: Buffer, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE) -> bytes:
    view = memoryview(data)
    if view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        return _snappy_block(view, max_output_size)
    parts: list[bytes] = []
    total = 0
    pos = 0
    end = len(view)
    while pos < end:
        # A header can start the stream or follow a block (concatenated streams).
        if view[pos : pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            if end - pos < XERIAL_HEADER_SIZE:
                raise CorruptRecordError("truncated xerial snappy header")
            pos += XERIAL_HEADER_SIZE
            continue
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _I.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError("xerial snappy block runs past the end of the data")
        block = _snappy_block(view[pos : pos + length], max_output_size - total)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


# -- lz4 ----------------------------------------------------------------------------------
def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    return lz4.frame.compress(
        data,
        compression_level=0 if level is None else level,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def compress_lz4_kafka08(data: Buffer, level: int | None = None) -> bytes:
    """LZ4 frame with the header checksum Kafka 0.8/0.9 used for magic-0 messages.

    Java's ``KafkaLZ4BlockOutputStream(useBrokenFlagDescriptorChecksum=true)`` hashes
    the frame magic too; kafka-python and Java readers of magic 0 expect exactly that.
    """
    frame = bytearray(_lz4_compress(data, level))
    hc_pos = _lz4_header_checksum_pos(frame)
    frame[hc_pos] = (xxh32(frame[0:hc_pos]) >> 8) & 0xFF
    return bytes(frame)


def _lz4_header_checksum_pos(frame: Buffer) -> int:
    if len(frame) < 7 or bytes(frame[0:4]) != LZ4_FRAME_MAGIC:
        raise CorruptRecordError("not an LZ4 frame")
    flg = frame[4]
    pos = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        pos += 8
    if flg & _LZ4_FLG_DICT_ID:
        pos += 4
    if pos >= len(frame):
        raise CorruptRecordError("truncated LZ4 frame header")
    return pos


def _lz4_frames(data: Buffer, max_output_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: Buffer = data
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        parts.append(d.decompress(rest, max_length=max_output_size - total + 1))
        total += len(parts[-1])
        if total > max_output_size:
            raise CorruptRecordError(f"lz4 output exceeds the limit of {max_output_size} bytes")
        if not d.eof:
            raise CorruptRecordError("truncated LZ4 frame")
        rest = d.unused_data
        if not rest:
            return b"".join(parts)


def lz4_decompress(data: Buffer, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE) -> bytes:
    try:
        return _lz4_frames(data, max_output_size)
    except RuntimeError as exc:
        first_error = exc
    # Kafka 0.8/0.9 magic-0 frames carry a header checksum over the wrong bytes:
    # put the right one in and try once more.
    frame = bytearray(data)
    try:
        hc_pos = _lz4_header_checksum_pos(frame)
    except CorruptRecordError:
        raise CorruptRecordError(f"invalid LZ4 data: {first_error}") from None
    good = (xxh32(frame[4:hc_pos]) >> 8) & 0xFF
    if frame[hc_pos] == good:
        raise CorruptRecordError(f"invalid LZ4 data: {first_error}") from None
    frame[hc_pos] = good
    try:
        return _lz4_frames(frame, max_output_size)
    except RuntimeError as exc:
        raise CorruptRecordError(f"invalid LZ4 data: {exc}") from None


_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: Buffer, seed: int = 0) -> int:
    """XXH32 (seed 0 by default); only used on LZ4 frame headers of a few bytes."""
    buf = bytes(data)
    n = len(buf)
    pos = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while pos + 16 <= n:
            a, b, c, d = struct.unpack_from("<IIII", buf, pos)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (k,) = struct.unpack_from("<I", buf, pos)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + buf[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- zstd ---------------------------------------------------------------------------------
# Input is fed in small slices so a bomb overshoots the limit by at most
# _ZSTD_FEED / 4 RLE blocks of 128 KiB (16 MiB) before it is caught.
_ZSTD_FEED = 512


def _zstd_decompress(data: Buffer, max_output_size: int) -> bytes:
    view = memoryview(data).cast("B")
    if not len(view):
        raise CorruptRecordError("empty zstd data")
    parts: list[bytes] = []
    total = 0
    dctx = zstandard.ZstdDecompressor()
    try:
        declared = zstandard.frame_content_size(view)
        if declared > max_output_size:
            raise CorruptRecordError(
                f"zstd frame declares {declared} bytes, over the limit of {max_output_size}"
            )
        d = dctx.decompressobj()
        pos = 0
        end = len(view)
        while pos < end:
            out = d.decompress(view[pos : pos + _ZSTD_FEED])
            pos += _ZSTD_FEED
            if out:
                total += len(out)
                if total > max_output_size:
                    raise CorruptRecordError(
                        f"zstd output exceeds the limit of {max_output_size} bytes"
                    )
                parts.append(out)
            if d.eof:
                # Another frame may follow (several writers' output concatenated).
                rest = d.unused_data + view[min(pos, end) :].tobytes()
                if not rest:
                    break
                view = memoryview(rest)
                pos = 0
                end = len(view)
                d = dctx.decompressobj()
        if not d.eof:
            raise CorruptRecordError("truncated zstd frame")
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"invalid zstd data: {exc}") from None
    return b"".join(parts)
