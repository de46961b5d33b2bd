"""Record format v2: seed goldens, round trips, and interop with kafka-python."""

import struct
from collections.abc import Callable

import kafka.codec as kp_codec
import pytest
from helpers.batches import batch_builder
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from odradek.records import (
    BatchBuilder,
    BatchView,
    Compression,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    TimestampType,
    assign_offsets,
    build_empty_batch,
    build_end_txn_marker_batch,
    decode_batch,
    decode_batches,
    decode_record,
    encode_record,
    parse_control_key,
    parse_end_txn_marker,
    validate_v2_batches,
)
from odradek.records.control import encode_control_key, encode_end_txn_marker_value
from odradek.records.record import record_size

SEED_TS = 1524709879130
needs_snappy = pytest.mark.skipif(
    not kp_codec.has_snappy(), reason="kafka-python needs python-snappy for snappy"
)


def codec_param(codec: Compression) -> object:
    marks = [needs_snappy] if codec == Compression.SNAPPY else []
    return pytest.param(codec, marks=marks, id=codec.name)


ALL_CODECS = [codec_param(c) for c in Compression]

nullable = st.none() | st.binary(max_size=40)
headers_st = st.lists(st.tuples(st.text(max_size=8), nullable), max_size=3)
record_st = st.tuples(
    st.integers(-(10**6), 10**6),  # timestamp offset from a base
    nullable,
    nullable,
    headers_st,
)


# -- goldens of record batch v2 (KIP-98's format) ---------------------------------------------------
def test_seed_single_record_batch_is_76_bytes() -> None:
    b = BatchBuilder(partition_leader_epoch=0)
    b.append(SEED_TS, b"key", b"value")
    out = b.build()
    assert len(out) == 76  # 61-byte header + 15-byte record
    view = BatchView(out)
    assert view.crc == 2857248333
    assert record_size(0, 0, b"key", b"value") == 15
    batch = decode_batch(out)
    assert (batch.base_offset, batch.last_offset, batch.base_sequence) == (0, 0, -1)
    assert batch.records[0].key == b"key" and batch.records[0].value == b"value"
    assert batch.records[0].timestamp == SEED_TS


def test_seed_null_key_record_is_73_bytes() -> None:
    b = BatchBuilder(partition_leader_epoch=0)
    b.append(SEED_TS, None, b"value")
    assert len(b.build()) == 73


def test_seed_ten_records_of_six_bytes_is_191_bytes() -> None:
    b = BatchBuilder(partition_leader_epoch=0)
    for i in range(10):
        b.append(1524712213771 - 9 + i, None, b"value%d" % i)
    buf = bytearray(b.build())
    assert len(buf) == 191
    # The broker assigns offsets 2..11 (after the two single-record batches).
    assign_offsets(buf, validate_v2_batches(buf).positions, 2, 0)
    view = BatchView(buf)
    assert (view.base_offset, view.last_offset, view.max_timestamp) == (2, 11, 1524712213771)
    assert view.is_valid()
    assert [r.offset for r in decode_batch(buf).records] == list(range(2, 12))


# -- one record ---------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**62), 2**62),
    key=nullable,
    value=nullable,
    headers=headers_st,
)
def test_record_round_trip(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
) -> None:
    rec = Record(offset_delta, timestamp_delta, key, value, headers)
    encoded = encode_record(rec)
    assert decode_record(b"\x01" + encoded + b"\x02", 1) == (rec, 1 + len(encoded))
    assert record_size(offset_delta, timestamp_delta, key, value, headers) == len(encoded)


def test_header_keys_that_are_not_utf8_survive_a_round_trip() -> None:
    rec = Record(0, 0, b"k", b"v", [("ok", b"1")])
    raw = bytearray(encode_record(rec))
    raw[raw.index(b"ok")] = 0xFF  # invalid UTF-8 in the header key
    decoded, _ = decode_record(bytes(raw))
    assert encode_record(decoded) == bytes(raw)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda raw: raw[:-1],  # truncated
        lambda raw: bytes([raw[0] + 2]) + raw[1:] + b"\x00\x00",  # length too large for body
        lambda raw: bytes([raw[0] - 2]) + raw[1:],  # length too small
    ],
)
def test_record_with_inconsistent_sizes_is_corrupt(mutate: Callable[[bytes], bytes]) -> None:
    raw = encode_record(Record(0, 0, b"key", b"value", [("h", b"v")]))
    with pytest.raises(CorruptRecordError):
        decode_record(mutate(raw))


# -- whole batches ------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    codec=st.sampled_from(list(Compression)),
    base_offset=st.integers(0, 2**40),
    base_ts=st.integers(0, 2**41),
    records=st.lists(record_st, min_size=1, max_size=12),
    gaps=st.lists(st.integers(1, 5), min_size=12, max_size=12),
    producer=st.sampled_from([(-1, -1, -1), (7, 0, 0), (123456789, 3, 2**31 - 5)]),
)
def test_batch_round_trip_all_codecs(
    codec: Compression,
    base_offset: int,
    base_ts: int,
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    gaps: list[int],
    producer: tuple[int, int, int],
) -> None:
    pid, epoch, seq = producer
    b = BatchBuilder(
        base_offset=base_offset,
        compression=codec,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        partition_leader_epoch=5,
    )
    deltas = []
    delta = -1
    for (ts, key, value, headers), gap in zip(records, gaps, strict=False):
        delta += gap
        deltas.append(b.append(base_ts + ts, key, value, headers, offset_delta=delta))
    out = b.build()
    batch = decode_batch(out)
    assert batch.compression == codec
    assert batch.size == len(out)
    assert batch.record_count == len(records)
    assert batch.last_offset == base_offset + deltas[-1]
    assert batch.base_timestamp == base_ts + records[0][0]
    assert batch.max_timestamp == base_ts + max(r[0] for r in records)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == producer
    assert batch.partition_leader_epoch == 5
    for rec, (ts, key, value, headers), d in zip(batch.records, records, deltas, strict=True):
        assert (rec.offset, rec.timestamp, rec.key, rec.value) == (
            base_offset + d,
            base_ts + ts,
            key,
            value,
        )
        assert rec.headers == headers
        assert rec.sequence == (-1 if seq == -1 else (seq + d) % 2**31)
    validate_v2_batches(out)


@settings(max_examples=60, deadline=None)
@given(
    base_ts=st.integers(0, 2**41),
    records=st.lists(record_st, min_size=1, max_size=10),
    transactional=st.booleans(),
)
def test_uncompressed_batch_is_byte_identical_to_kafka_python(
    base_ts: int,
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    transactional: bool,
) -> None:
    pid, epoch, seq = (42, 1, 10) if transactional else (-1, -1, -1)
    theirs = batch_builder(
        transactional=transactional, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    ours = BatchBuilder(
        partition_leader_epoch=0,  # kafka-python leaves the broker's field at 0
        is_transactional=transactional,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    for i, (ts, key, value, headers) in enumerate(records):
        theirs.append(i, timestamp=base_ts + ts, key=key, value=value, headers=headers)
        ours.append(base_ts + ts, key, value, headers)
    assert ours.build() == bytes(theirs.build())


def _compressible_records() -> list[tuple[int, bytes | None, bytes | None, list]]:
    return [
        (SEED_TS + i, None if i % 3 == 0 else b"key-%d" % i, None if i == 5 else b"v" * 200, [])
        if i % 4
        else (SEED_TS + i, b"k", b"value" * 30, [("trace", b"abc"), ("empty", None)])
        for i in range(20)
    ]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_batches_decode_with_ours(codec: Compression) -> None:
    builder = batch_builder(int(codec), producer_id=99, producer_epoch=2, base_sequence=7)
    expected = _compressible_records()
    for i, (ts, key, value, headers) in enumerate(expected):
        builder.append(i, timestamp=ts, key=key, value=value, headers=headers)
    buf = bytes(builder.build())
    batch = decode_batch(buf)
    assert batch.compression == codec  # compression actually used
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(expected)
    ]
    assert [r.sequence for r in batch.records] == list(range(7, 27))


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_our_batches_decode_with_kafka_python(codec: Compression) -> None:
    ours = BatchBuilder(
        base_offset=1000, compression=codec, producer_id=5, producer_epoch=0, base_sequence=0
    )
    expected = _compressible_records()
    for ts, key, value, headers in expected:
        ours.append(ts, key, value, headers)
    theirs = DefaultRecordBatch(ours.build())
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert got == [(1000 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(expected)]


def test_log_append_time_batches() -> None:
    b = BatchBuilder(
        timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=1_700_000_000_000
    )
    b.append(5, b"a", b"1")
    b.append(9, b"b", b"2")
    out = b.build()
    batch = decode_batch(out)
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records] == [1_700_000_000_000] * 2
    theirs = DefaultRecordBatch(out)
    assert [r.timestamp for r in theirs] == [1_700_000_000_000] * 2
    with pytest.raises(ValueError):
        BatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)


def test_delete_horizon_is_the_base_timestamp() -> None:
    b = BatchBuilder(delete_horizon_ms=1_000_000)
    b.append(1_000_500, b"k", None)
    batch = decode_batch(b.build())
    assert batch.attributes & 0x40
    assert batch.delete_horizon_ms == batch.base_timestamp == 1_000_000
    assert batch.records[0].timestamp == 1_000_500
    plain = BatchBuilder()
    plain.append(1, b"k", b"v")
    assert decode_batch(plain.build()).delete_horizon_ms == -1


def test_sequences_wrap_at_int32_max() -> None:
    b = BatchBuilder(producer_id=1, producer_epoch=0, base_sequence=2**31 - 2)
    for i in range(4):
        b.append(i, None, b"x")
    batch = decode_batch(b.build())
    assert [r.sequence for r in batch.records] == [2**31 - 2, 2**31 - 1, 0, 1]
    assert batch.last_sequence == 1


def test_builder_rules() -> None:
    b = BatchBuilder()
    with pytest.raises(ValueError):
        b.build()  # no records
    b.append(1, None, b"a", offset_delta=3)
    with pytest.raises(ValueError):
        b.append(1, None, b"b", offset_delta=3)  # offsets must increase
    assert b.append(0, None, b"c") == 4
    assert len(b) == 2
    with pytest.raises(ValueError):
        BatchBuilder(is_transactional=True)  # needs a producer id


def test_empty_batch_keeps_producer_state() -> None:
    out = build_empty_batch(
        base_offset=10,
        last_offset=14,
        producer_id=77,
        producer_epoch=3,
        base_sequence=20,
        timestamp=123,
    )
    view = BatchView(out)
    assert view.is_valid() and len(out) == 61
    assert (view.record_count, view.last_offset, view.last_sequence) == (0, 14, 24)
    batch = decode_batch(out)
    assert batch.records == [] and batch.producer_id == 77


def test_control_batches() -> None:
    out = build_end_txn_marker_batch(
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=9,
        producer_id=4000,
        producer_epoch=2,
        timestamp=SEED_TS,
        base_offset=50,
    )
    batch = decode_batch(out)
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4000, 2, -1)
    rec = batch.records[0]
    assert rec.key == b"\x00\x00\x00\x01" and rec.value == b"\x00\x00\x00\x00\x00\x09"
    marker = parse_end_txn_marker(rec.key, rec.value)
    assert marker.control_type == ControlRecordType.COMMIT and marker.coordinator_epoch == 9
    theirs = list(DefaultRecordBatch(out))
    assert theirs[0].commit and not theirs[0].abort and theirs[0].offset == 50
    abort = decode_batch(
        build_end_txn_marker_batch(
            control_type=ControlRecordType.ABORT,
            coordinator_epoch=0,
            producer_id=1,
            producer_epoch=0,
            timestamp=0,
        )
    )
    assert parse_end_txn_marker(abort.records[0].key, abort.records[0].value).control_type == 0


def test_control_schemas_are_forward_compatible_and_checked() -> None:
    # A newer version may append fields; only the leading ones are read.
    key = encode_control_key(ControlRecordType.ABORT, version=1) + b"\x00\x00"
    value = encode_end_txn_marker_value(5, version=1) + b"extra"
    assert parse_control_key(key) == (1, 0)
    assert parse_end_txn_marker(key, value).coordinator_epoch == 5
    with pytest.raises(InvalidRecordError):
        parse_control_key(b"\xff\xff\x00\x01")  # negative version
    with pytest.raises(InvalidRecordError):
        parse_control_key(b"\x00")
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(encode_control_key(ControlRecordType.LEADER_CHANGE), value)
    with pytest.raises(InvalidRecordError):
        parse_end_txn_marker(key, b"\x00")
    with pytest.raises(ValueError):
        build_end_txn_marker_batch(
            control_type=ControlRecordType.LEADER_CHANGE,
            coordinator_epoch=0,
            producer_id=1,
            producer_epoch=0,
            timestamp=0,
        )


def _rechecksummed(buf: bytearray) -> bytes:
    BatchView(buf).update_crc()
    return bytes(buf)


def test_corrupt_batches_are_refused() -> None:
    b = BatchBuilder()
    b.append(1, b"k", b"value")
    b.append(2, b"k", b"value")
    good = b.build()
    flipped = bytearray(good)
    flipped[-2] ^= 0x40
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(flipped)
    # Valid CRC but a record count that does not match the records section.
    more = bytearray(good)
    struct.pack_into(">i", more, 57, 3)
    with pytest.raises(CorruptRecordError):
        decode_batch(_rechecksummed(more))
    fewer = bytearray(good)
    struct.pack_into(">i", fewer, 57, 1)
    with pytest.raises(CorruptRecordError, match="unconsumed"):
        decode_batch(_rechecksummed(fewer))
    huge = bytearray(good)
    struct.pack_into(">i", huge, 57, 2**31 - 1)
    with pytest.raises(CorruptRecordError):
        decode_batch(_rechecksummed(huge))
    wrong_magic = bytearray(good)
    wrong_magic[16] = 1
    with pytest.raises(CorruptRecordError):
        decode_batch(wrong_magic)
    with pytest.raises(CorruptRecordError):
        decode_batch(good[:-1])
    # A compressed section that does not decompress.
    z = BatchBuilder(compression=Compression.GZIP)
    z.append(1, b"k", b"v" * 100)
    broken = bytearray(z.build())
    broken[-6] ^= 0xFF  # inside the gzip trailer (CRC-32 / ISIZE)
    with pytest.raises(CorruptRecordError):
        decode_batch(_rechecksummed(broken))


def test_decode_batches_ignores_a_partial_tail() -> None:
    parts = []
    for base in (0, 3):
        b = BatchBuilder(base_offset=base, compression=Compression.LZ4)
        for i in range(3):
            b.append(i, None, b"v%d" % i)
        parts.append(b.build())
    whole = b"".join(parts)
    assert [b.base_offset for b in decode_batches(whole)] == [0, 3]
    assert [b.base_offset for b in decode_batches(whole + parts[0][:30])] == [0, 3]
