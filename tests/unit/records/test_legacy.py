"""Legacy message sets (magic 0/1): seed goldens, wrappers, round trips, kafka-python interop."""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from legacy_cases import LEGACY_CASES, LEGACY_CODECS

from odradek.records import (
    Compression,
    CorruptRecordError,
    TimestampType,
    build_message_set,
    decompress,
    encode_message,
    inner_messages,
    iter_messages,
    iter_records,
    read_message,
)
from odradek.records.compression import UnsupportedCodecError
from odradek.records.legacy import LegacyRecordInput


# -- goldens of the legacy message formats (magic 0 and 1) ---------------------------------------------
def test_seed_v0_message_is_34_bytes_with_seed_crc() -> None:
    out = encode_message(0, 0, -1, b"key", b"value")
    assert len(out) == 34
    msg = read_message(out)
    assert msg.crc == 592888119 and msg.valid
    assert msg.timestamp == -1 and msg.timestamp_type == TimestampType.NO_TIMESTAMP_TYPE
    builder = LegacyRecordBatchBuilder(magic=0, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=b"key", value=b"value")
    assert bytes(builder.build()) == out


def test_seed_v0_null_key_message_is_31_bytes() -> None:
    out = encode_message(0, 1, -1, None, b"value")
    assert len(out) == 31
    assert read_message(out).key is None


def test_seed_v1_message_is_42_bytes() -> None:
    out = encode_message(1, 0, 1524709879130, b"key", b"value")
    assert len(out) == 42
    msg = read_message(out)
    assert (msg.magic, msg.timestamp, msg.timestamp_type) == (1, 1524709879130, 0)
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1524709879130, key=b"key", value=b"value")
    assert bytes(builder.build()) == out


def test_crc_covers_magic_to_end() -> None:
    out = encode_message(1, 7, 99, b"k", b"v")
    assert struct.unpack_from(">I", out, 12)[0] == zlib.crc32(out[16:])


# -- compressed wrappers ------------------------------------------------------------------
def test_v1_wrapper_holds_relative_inner_offsets_and_last_absolute_offset() -> None:
    records: list[LegacyRecordInput] = [
        (1025, 10, b"a", b"1"),
        (1027, 30, b"b", b"2"),
        (1030, 20, None, b"3"),
    ]
    out = build_message_set(1, records, compression=Compression.GZIP)
    (wrapper,) = list(iter_messages(out))
    assert wrapper.offset == 1030 and wrapper.key is None
    assert wrapper.timestamp == 30  # the largest inner timestamp (CreateTime)
    assert wrapper.compression == Compression.GZIP
    assert wrapper.value is not None
    raw_inner = list(iter_messages(decompress(Compression.GZIP, wrapper.value)))
    assert [m.offset for m in raw_inner] == [0, 2, 5]
    # Seed formula: AO = AO_of_last + (IO - IO_of_last).
    assert [m.offset for m in iter_records(out)] == [1025, 1027, 1030]
    assert [m.timestamp for m in iter_records(out)] == [10, 30, 20]


def test_v0_wrapper_inner_offsets_are_absolute() -> None:
    records: list[LegacyRecordInput] = [(500, 0, b"a", b"1"), (501, 0, b"b", b"2")]
    out = build_message_set(0, records, compression=Compression.SNAPPY)
    (wrapper,) = list(iter_messages(out))
    assert wrapper.offset == 501
    assert wrapper.value is not None
    assert [m.offset for m in iter_messages(decompress(Compression.SNAPPY, wrapper.value))] == [
        500,
        501,
    ]
    assert [(m.offset, m.timestamp) for m in iter_records(out)] == [(500, -1), (501, -1)]


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    out = build_message_set(
        1,
        [(0, 5, b"a", b"1"), (1, 6, b"b", b"2")],
        compression=Compression.LZ4,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=999,
    )
    (wrapper,) = list(iter_messages(out))
    assert wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME and wrapper.timestamp == 999
    inner = list(iter_records(out))
    assert [m.timestamp for m in inner] == [999, 999]
    assert all(m.timestamp_type == TimestampType.LOG_APPEND_TIME for m in inner)
    with pytest.raises(ValueError):
        build_message_set(1, [(0, 5, b"a", b"1")], timestamp_type=TimestampType.LOG_APPEND_TIME)


def test_v0_lz4_uses_kafka08_header_checksum() -> None:
    out = build_message_set(0, [(0, 0, b"k", b"v" * 50)], compression=Compression.LZ4)
    (wrapper,) = list(iter_messages(out))
    assert wrapper.value is not None
    frame = wrapper.value
    from odradek.records.compression import xxh32

    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF
    assert [m.value for m in iter_records(out)] == [b"v" * 50]


# -- round trips --------------------------------------------------------------------------
nullable = st.none() | st.binary(max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    first=st.integers(0, 2**40),
    gaps=st.lists(st.integers(1, 4), min_size=1, max_size=10),
    data=st.data(),
)
def test_message_set_round_trip(
    magic: int, codec: Compression, first: int, gaps: list[int], data: st.DataObject
) -> None:
    offsets = []
    offset = first
    for gap in gaps:
        offsets.append(offset)
        offset += gap
    records: list[LegacyRecordInput] = [
        (o, data.draw(st.integers(0, 2**41)), data.draw(nullable), data.draw(nullable))
        for o in offsets
    ]
    out = build_message_set(magic, records, compression=codec)
    got = [(m.offset, m.timestamp, m.key, m.value) for m in iter_records(out)]
    expected = [(o, ts if magic else -1, k, v) for o, ts, k, v in records]
    assert got == expected
    shallow = list(iter_messages(out))
    assert len(shallow) == (1 if codec else len(records))
    assert all(m.valid and m.magic == magic for m in shallow)


# -- interop with kafka-python --------------------------------------------------------------
def _entries(buf: bytes) -> list[bytes]:
    return [buf[m.position : m.position + m.size] for m in iter_messages(buf)]


VALUES = [(b"key-%d" % i if i % 3 else None, (b"payload %d " % i) * 20) for i in range(8)]


@pytest.mark.parametrize(("codec", "magic"), LEGACY_CASES)
def test_kafka_python_message_sets_decode_with_ours(codec: Compression, magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i, (key, value) in enumerate(VALUES):
        builder.append(i, timestamp=1_600_000_000_000 + i, key=key, value=value)
    buf = bytes(builder.build())
    theirs = [
        (r.offset, r.timestamp if magic else -1, r.key, r.value)
        for entry in _entries(buf)
        for r in LegacyRecordBatch(entry, magic)
    ]
    ours = [(m.offset, m.timestamp, m.key, m.value) for m in iter_records(buf)]
    assert ours == theirs
    assert [(m.key, m.value) for m in iter_records(buf)] == VALUES


@pytest.mark.parametrize(("codec", "magic"), LEGACY_CASES)
def test_our_message_sets_decode_with_kafka_python(codec: Compression, magic: int) -> None:
    records: list[LegacyRecordInput] = [
        (100 + i, 1_600_000_000_000 + i, key, value) for i, (key, value) in enumerate(VALUES)
    ]
    buf = build_message_set(magic, records, compression=codec)
    got = []
    for entry in _entries(buf):
        batch = LegacyRecordBatch(entry, magic)
        assert batch.validate_crc()
        for r in batch:
            assert r.validate_crc()
            got.append((r.offset, r.timestamp, r.key, r.value))
    assert got == [(o, ts if magic else None, k, v) for o, ts, k, v in records]


# -- corrupt input --------------------------------------------------------------------------
def test_crc_mismatch() -> None:
    out = bytearray(encode_message(1, 0, 1, b"key", b"value"))
    out[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        read_message(out)
    assert read_message(out, verify_crc=False).valid is False


def test_bad_sizes_and_magic() -> None:
    good = encode_message(0, 0, -1, b"key", b"value")
    with pytest.raises(CorruptRecordError):
        read_message(good[:-1])
    shrunk = bytearray(good)
    struct.pack_into(">i", shrunk, 8, 13)  # below the 14-byte minimum
    with pytest.raises(CorruptRecordError):
        read_message(shrunk)
    bad_key = bytearray(good)
    struct.pack_into(">i", bad_key, 18, 100)  # key longer than the message
    with pytest.raises(CorruptRecordError):
        read_message(bad_key, verify_crc=False)
    wrong = bytearray(good)
    wrong[16] = 2
    with pytest.raises(CorruptRecordError, match="magic"):
        read_message(wrong)


def test_partial_trailing_message_is_ignored() -> None:
    one = encode_message(1, 0, 1, b"a", b"b")
    two = encode_message(1, 1, 2, b"c", b"d")
    assert [m.offset for m in iter_messages(one + two[:-3])] == [0]


def test_double_compression_and_mixed_magic_are_corrupt() -> None:
    inner = build_message_set(1, [(0, 1, b"a", b"b")], compression=Compression.GZIP)
    nested = encode_message(1, 0, 1, None, zlib_gzip(inner), attributes=Compression.GZIP)
    with pytest.raises(CorruptRecordError, match="double"):
        list(iter_records(nested))
    v0_inner = encode_message(0, 0, -1, b"a", b"b")
    mixed = encode_message(1, 0, 1, None, zlib_gzip(v0_inner), attributes=Compression.GZIP)
    with pytest.raises(CorruptRecordError, match="magic"):
        list(iter_records(mixed))
    null_value = encode_message(1, 0, 1, None, None, attributes=Compression.GZIP)
    with pytest.raises(CorruptRecordError, match="null"):
        inner_messages(read_message(null_value))


def zlib_gzip(data: bytes) -> bytes:
    from odradek.records import compress

    return compress(Compression.GZIP, data)


def test_zstd_cannot_be_written_in_legacy_formats() -> None:
    with pytest.raises(UnsupportedCodecError):
        build_message_set(1, [(0, 0, None, b"x")], compression=Compression.ZSTD)
    msg = read_message(encode_message(1, 0, 0, None, b"x", attributes=4))
    with pytest.raises(UnsupportedCodecError):
        _ = msg.compression
