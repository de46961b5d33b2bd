"""Varints: known encodings, round trips, and rejection of overlong/truncated input."""

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from odradek.records.batch import CorruptRecordError
from odradek.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UINT32_MAX,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)

int32 = st.integers(INT32_MIN, INT32_MAX)
int64 = st.integers(INT64_MIN, INT64_MAX)
uint32 = st.integers(0, UINT32_MAX)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (-65, b"\x81\x01"),
        (300, b"\xd8\x04"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_known_zigzag_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    buf = bytearray()
    write_varint(buf, value)
    assert bytes(buf) == encoded


def test_seed_length_ranges() -> None:
    # Seed 004: 0-63 take one byte, 64-8191 two, 8192-1048575 three; 1000012 three.
    assert size_of_varint(63) == 1 and size_of_varint(64) == 2
    assert size_of_varint(8191) == 2 and size_of_varint(8192) == 3
    assert size_of_varint(1048575) == 3 and size_of_varint(1048576) == 4
    assert size_of_varint(1000012) == 3
    assert len(encode_varint(INT32_MIN)) == 5
    assert len(encode_varlong(INT64_MIN)) == 10


@given(int32)
def test_varint_round_trip_and_matches_kafka_python(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 5
    prefix = b"\xaa\xbb"
    assert decode_varint(prefix + encoded + b"\xff", 2) == (value, 2 + len(encoded))
    assert decode_varint(memoryview(encoded)) == (value, len(encoded))
    out = bytearray()
    kp_encode_varint(value, out.append)
    assert bytes(out) == encoded
    assert kp_decode_varint(encoded, 0) == (value, len(encoded))


@given(int64)
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert len(encoded) == size_of_varlong(value) <= 10
    assert decode_varlong(bytearray(encoded)) == (value, len(encoded))
    buf = bytearray(b"x")
    write_varlong(buf, value)
    assert bytes(buf[1:]) == encoded


@given(uint32)
def test_unsigned_varint_round_trip(value: int) -> None:
    encoded = encode_unsigned_varint(value)
    assert len(encoded) == size_of_unsigned_varint(value) <= 5
    assert decode_unsigned_varint(encoded) == (value, len(encoded))
    buf = bytearray()
    write_unsigned_varint(buf, value)
    assert bytes(buf) == encoded


def test_unsigned_known_values() -> None:
    assert encode_unsigned_varint(0) == b"\x00"
    assert encode_unsigned_varint(127) == b"\x7f"
    assert encode_unsigned_varint(128) == b"\x80\x01"
    assert encode_unsigned_varint(UINT32_MAX) == b"\xff\xff\xff\xff\x0f"


@pytest.mark.parametrize("decoder", [decode_varint, decode_unsigned_varint, decode_varlong])
def test_truncated_input_is_corrupt(decoder: Callable[[bytes, int], tuple[int, int]]) -> None:
    for data in (b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80"):
        with pytest.raises(CorruptRecordError):
            decoder(data, 0)
    with pytest.raises(CorruptRecordError):
        decoder(b"\x00", 1)  # position at the end


def test_overlong_input_is_corrupt() -> None:
    six = b"\x80\x80\x80\x80\x80\x00"
    with pytest.raises(CorruptRecordError):
        decode_varint(six)
    with pytest.raises(CorruptRecordError):
        decode_unsigned_varint(six)
    # Ten continuation bytes is too long even for a varlong.
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\x80" * 10 + b"\x00")
    # Five bytes whose value does not fit in 32 bits.
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\x1f")
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 9 + b"\x7f")
    # The longest legal encodings still decode.
    assert decode_varlong(b"\xff" * 9 + b"\x01") == (INT64_MIN, 10)
    assert decode_unsigned_varint(b"\xff\xff\xff\xff\x0f") == (UINT32_MAX, 5)


def test_out_of_range_values_are_refused() -> None:
    with pytest.raises(ValueError):
        encode_varint(INT32_MAX + 1)
    with pytest.raises(ValueError):
        encode_varint(INT32_MIN - 1)
    with pytest.raises(ValueError):
        encode_varlong(INT64_MAX + 1)
    with pytest.raises(ValueError):
        encode_unsigned_varint(-1)
    with pytest.raises(ValueError):
        encode_unsigned_varint(UINT32_MAX + 1)
