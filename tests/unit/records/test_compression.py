"""Codecs: round trips, every framing real clients send, bombs and garbage."""

import gzip
import os
import struct

import kafka.codec as kp_codec
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.records.batch import Compression, CorruptRecordError
from odradek.records.compression import (
    XERIAL_MAGIC,
    UnsupportedCodecError,
    compress,
    compress_lz4_kafka08,
    decompress,
    snappy_raw_compress,
    xxh32,
)

ALL_CODECS = list(Compression)
needs_snappy = pytest.mark.skipif(
    not kp_codec.has_snappy(), reason="kafka-python needs python-snappy for snappy"
)
needs_xxhash = pytest.mark.skipif(
    kp_codec.xxhash is None, reason="kafka-python needs xxhash for magic-0 lz4"
)
TEXT = b"".join(
    b"record %d: the quick brown fox jumps over the lazy dog\n" % i for i in range(5000)
)


@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(ALL_CODECS), data=st.binary(max_size=5000))
def test_round_trip(codec: Compression, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_large_and_levels(codec: Compression) -> None:
    assert decompress(codec, compress(codec, TEXT)) == TEXT
    level = {Compression.GZIP: 1, Compression.LZ4: 9, Compression.ZSTD: 10}.get(codec)
    assert decompress(codec, compress(codec, TEXT, level)) == TEXT
    assert decompress(int(codec), memoryview(compress(codec, TEXT))) == TEXT


def test_gzip_is_deterministic_and_reads_concatenated_members() -> None:
    assert compress(Compression.GZIP, TEXT) == compress(Compression.GZIP, TEXT)
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Compression.GZIP, two) == b"first second"
    # Like Java's GZIPInputStream, bytes after a member that are not a member are ignored.
    assert decompress(Compression.GZIP, gzip.compress(b"x") + b"\x00\x00") == b"x"
    assert decompress(Compression.GZIP, kp_codec.gzip_encode(TEXT)) == TEXT
    assert kp_codec.gzip_decode(compress(Compression.GZIP, TEXT)) == TEXT


def test_snappy_writes_xerial_frames_like_java() -> None:
    out = compress(Compression.SNAPPY, TEXT)
    assert out[:8] == XERIAL_MAGIC
    assert struct.unpack_from(">ii", out, 8) == (1, 1)
    # 32 KiB input per block: walk the block lengths to the exact end.
    pos, blocks = 16, 0
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        pos += 4 + length
        blocks += 1
    assert pos == len(out)
    assert blocks == -(-len(TEXT) // (32 * 1024))


def test_snappy_reads_raw_blocks_and_concatenated_xerial_streams() -> None:
    assert decompress(Compression.SNAPPY, snappy_raw_compress(TEXT)) == TEXT
    joined = compress(Compression.SNAPPY, b"abc" * 100) + compress(Compression.SNAPPY, b"xyz")
    assert decompress(Compression.SNAPPY, joined) == b"abc" * 100 + b"xyz"
    assert decompress(Compression.SNAPPY, compress(Compression.SNAPPY, b"")) == b""


@needs_snappy
def test_snappy_interop_with_kafka_python() -> None:
    xerial = kp_codec.snappy_encode(TEXT)  # the Java-compatible framing
    raw = kp_codec.snappy_encode(TEXT, xerial_compatible=False)
    assert xerial[:8] == XERIAL_MAGIC and raw[:8] != XERIAL_MAGIC
    assert decompress(Compression.SNAPPY, xerial) == TEXT
    assert decompress(Compression.SNAPPY, raw) == TEXT
    assert kp_codec.snappy_decode(compress(Compression.SNAPPY, TEXT)) == TEXT


def test_lz4_frames_are_written_like_java() -> None:
    out = compress(Compression.LZ4, TEXT)
    assert out[:4] == b"\x04\x22\x4d\x18"
    flg, bd = out[4], out[5]
    assert flg & 0x20  # independent blocks (Java rejects linked blocks)
    assert not flg & 0x08  # no content size
    assert not flg & 0x10 and not flg & 0x04  # no block or content checksum
    assert (bd >> 4) & 0x07 == 4  # 64 KiB blocks
    assert kp_codec.lz4_decode(out) == TEXT
    assert decompress(Compression.LZ4, kp_codec.lz4_encode(TEXT)) == TEXT
    # Frames with content size and checksums (other clients) are read too.
    assert decompress(Compression.LZ4, lz4.frame.compress(TEXT, content_checksum=True)) == TEXT


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_kafka08_broken_header_checksum() -> None:
    broken = compress_lz4_kafka08(TEXT)
    assert broken[6] == (xxh32(broken[0:6]) >> 8) & 0xFF
    assert broken[6] != (xxh32(broken[4:6]) >> 8) & 0xFF  # not the standard one
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(broken)  # a strict reader refuses it ...
    assert decompress(Compression.LZ4, broken) == TEXT  # ... Kafka's readers do not


@needs_xxhash
def test_lz4_kafka08_interop_with_kafka_python() -> None:
    assert kp_codec.lz4_decode_old_kafka(compress_lz4_kafka08(TEXT)) == TEXT
    assert decompress(Compression.LZ4, kp_codec.lz4_encode_old_kafka(TEXT)) == TEXT


def test_zstd_frames_without_content_size_and_concatenated() -> None:
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    assert zstandard.frame_content_size(no_size) == -1
    assert decompress(Compression.ZSTD, no_size) == TEXT
    streamed = zstandard.ZstdCompressor().compressobj()
    frame = streamed.compress(TEXT) + streamed.flush()
    assert decompress(Compression.ZSTD, frame) == TEXT
    two = compress(Compression.ZSTD, b"one ") + no_size
    assert decompress(Compression.ZSTD, two) == b"one " + TEXT
    assert kp_codec.zstd_decode(compress(Compression.ZSTD, TEXT)) == TEXT


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c != Compression.NONE])
def test_decompression_bomb_is_refused(codec: Compression) -> None:
    limit = 1 << 20
    bomb = compress(codec, bytes(16 << 20))
    assert len(bomb) < (16 << 20) // 16  # snappy expands ~21x at best, the others far more
    with pytest.raises(CorruptRecordError, match="limit"):
        decompress(codec, bomb, max_output_size=limit)
    exact = compress(codec, bytes(limit))
    assert len(decompress(codec, exact, max_output_size=limit)) == limit


def test_zstd_bomb_without_content_size_is_refused() -> None:
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(64 << 20))
    with pytest.raises(CorruptRecordError, match="limit"):
        decompress(Compression.ZSTD, bomb, max_output_size=1 << 20)


def test_none_codec_respects_limit() -> None:
    with pytest.raises(CorruptRecordError):
        decompress(Compression.NONE, b"12345", max_output_size=4)


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c != Compression.NONE])
def test_truncated_and_garbage_input_is_corrupt(codec: Compression) -> None:
    good = compress(codec, TEXT)
    for bad in (good[: len(good) // 2], good[:-1] if codec != Compression.SNAPPY else good[:-3]):
        with pytest.raises(CorruptRecordError):
            decompress(codec, bad)
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x00garbage that is not compressed data\xff" * 3)


@settings(max_examples=200, deadline=None)
@given(codec=st.sampled_from(ALL_CODECS[1:]), data=st.binary(max_size=200))
def test_random_input_never_escapes_as_another_exception(codec: Compression, data: bytes) -> None:
    try:
        decompress(codec, data, max_output_size=1 << 20)
    except CorruptRecordError:
        pass


def test_random_bytes_with_codec_headers_are_corrupt() -> None:
    noise = os.urandom(64)
    for codec, head in [
        (Compression.SNAPPY, XERIAL_MAGIC + struct.pack(">ii", 1, 1)),
        (Compression.LZ4, b"\x04\x22\x4d\x18"),
        (Compression.ZSTD, b"\x28\xb5\x2f\xfd"),
        (Compression.GZIP, b"\x1f\x8b\x08\x00"),
    ]:
        with pytest.raises(CorruptRecordError):
            decompress(codec, head + noise)


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCodecError):
        compress(5, b"x")
    with pytest.raises(UnsupportedCodecError):
        decompress(7, b"x")
    assert UnsupportedCodecError.kafka_error == "UNSUPPORTED_COMPRESSION_TYPE"
