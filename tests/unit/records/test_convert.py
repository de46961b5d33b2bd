"""Up-conversion (old producers) and down-conversion (old fetchers)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch, LegacyRecordBatchBuilder
from legacy_cases import LEGACY_CASES, LEGACY_CODECS

from odradek.records import (
    BatchBuilder,
    Compression,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    TimestampType,
    build_end_txn_marker_batch,
    build_message_set,
    decode_batches,
    downconvert,
    encode_message,
    iter_messages,
    iter_records,
    upconvert_legacy,
    validate_v2_batches,
)
from odradek.records.compression import UnsupportedCodecError

VALUES = [(None if i % 4 == 0 else b"k%d" % i, b"value %d " % i * 10) for i in range(6)]


# -- up ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("codec", "magic"), LEGACY_CASES)
def test_upconvert_a_kafka_python_produce(codec: Compression, magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    for i, (key, value) in enumerate(VALUES):
        builder.append(i, timestamp=1_600_000_000_000 + i, key=key, value=value)
    out = upconvert_legacy(bytes(builder.build()))
    summary = validate_v2_batches(out)  # what the broker's append path runs
    assert summary.producer_id == -1 and summary.first_sequence == -1
    assert summary.compression == codec
    batches = decode_batches(out)
    records = [r for b in batches for r in b.records]
    assert [(r.key, r.value) for r in records] == VALUES
    assert [r.offset for r in records] == list(range(len(VALUES)))
    if magic == 0:
        # v0 has no timestamps: NO_TIMESTAMP, CreateTime, as Kafka up-converts.
        assert all(r.timestamp == -1 for r in records)
        assert all(b.max_timestamp == -1 and b.base_timestamp == -1 for b in batches)
    else:
        assert [r.timestamp for r in records] == [1_600_000_000_000 + i for i in range(6)]
    assert all(b.timestamp_type == TimestampType.CREATE_TIME for b in batches)
    # One produced message set, one batch; a real client reads it back.
    assert len(batches) == 1
    theirs = DefaultRecordBatch(out)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (i, k, v) for i, (k, v) in enumerate(VALUES)
    ]


def test_upconvert_groups_wrappers_and_plain_runs() -> None:
    plain = build_message_set(1, [(0, 1, b"a", b"1"), (1, 2, b"b", b"2")])
    wrapped = build_message_set(
        1, [(2, 3, b"c", b"3"), (3, 4, b"d", b"4")], compression=Compression.LZ4
    )
    v0 = build_message_set(0, [(4, 0, b"e", b"5")])
    out = upconvert_legacy(plain + wrapped + v0)
    batches = decode_batches(out)
    assert [b.compression for b in batches] == [Compression.NONE, Compression.LZ4, Compression.NONE]
    assert [[r.offset for r in b.records] for b in batches] == [[0, 1], [2, 3], [4]]
    assert [r.timestamp for b in batches for r in b.records] == [1, 2, 3, 4, -1]
    assert [r.value for b in batches for r in b.records] == [b"1", b"2", b"3", b"4", b"5"]


def test_upconvert_keeps_log_append_time() -> None:
    wrapped = build_message_set(
        1,
        [(0, 1, b"a", b"1")],
        compression=Compression.GZIP,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=77,
    )
    (batch,) = decode_batches(upconvert_legacy(wrapped))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 77 and batch.records[0].timestamp == 77


def test_upconvert_refuses_bad_input() -> None:
    good = encode_message(1, 0, 1, b"k", b"v")
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        upconvert_legacy(bytes(bad))
    v2 = BatchBuilder()
    v2.append(1, None, b"x")
    with pytest.raises(InvalidRecordError):
        upconvert_legacy(good + v2.build())
    assert upconvert_legacy(b"") == b""


# -- down ----------------------------------------------------------------------------------
def _stored_batches(codec: Compression) -> bytes:
    first = BatchBuilder(base_offset=10, compression=codec, partition_leader_epoch=3)
    for i, (key, value) in enumerate(VALUES[:3]):
        first.append(1_600_000_000_000 + i, key, value, [("h", b"dropped")])
    second = BatchBuilder(
        base_offset=13, compression=codec, producer_id=8, producer_epoch=0, base_sequence=0
    )
    for i, (key, value) in enumerate(VALUES[3:]):
        second.append(1_600_000_000_010 + i, key, value)
    return first.build() + second.build()


@pytest.mark.parametrize(("codec", "magic"), LEGACY_CASES)
def test_downconvert_for_old_fetchers(codec: Compression, magic: int) -> None:
    out = downconvert(_stored_batches(codec), magic)
    entries = list(iter_messages(out))
    assert all(m.magic == magic and m.valid for m in entries)
    assert len(entries) == (2 if codec else len(VALUES))  # one wrapper per batch
    if codec and magic == 1:
        assert [m.offset for m in entries] == [12, 15]  # wrapper = last absolute offset
    ours = [(m.offset, m.timestamp, m.key, m.value) for m in iter_records(out)]
    stamps = [1_600_000_000_000 + i for i in range(3)] + [1_600_000_000_010 + i for i in range(3)]
    assert ours == [
        (10 + i, stamps[i] if magic else -1, key, value) for i, (key, value) in enumerate(VALUES)
    ]
    # kafka-python's old-format reader agrees (what a Fetch v0-v3 client runs).
    theirs = [
        (r.offset, r.key, r.value)
        for m in entries
        for r in LegacyRecordBatch(out[m.position : m.position + m.size], magic)
    ]
    assert theirs == [(o, k, v) for o, _, k, v in ours]


def test_downconvert_skips_control_batches_and_records_below_first_offset() -> None:
    data = _stored_batches(Compression.NONE) + build_end_txn_marker_batch(
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=0,
        producer_id=8,
        producer_epoch=0,
        timestamp=1,
        base_offset=16,
    )
    assert [m.offset for m in iter_records(downconvert(data, 1))] == list(range(10, 16))
    assert [m.offset for m in iter_records(downconvert(data, 1, first_offset=12))] == [
        12,
        13,
        14,
        15,
    ]
    # A fetch cut inside the last batch: the partial batch is dropped.
    assert [m.offset for m in iter_records(downconvert(data[:-10], 0))] == list(range(10, 16))


def test_downconvert_log_append_time() -> None:
    b = BatchBuilder(
        base_offset=4,
        compression=Compression.GZIP,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        log_append_time=5000,
    )
    b.append(1, b"k", b"v")
    (wrapper,) = list(iter_messages(downconvert(b.build(), 1)))
    assert wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME and wrapper.timestamp == 5000


def test_downconvert_zstd_is_unsupported_and_legacy_passes_through() -> None:
    with pytest.raises(UnsupportedCodecError) as exc:
        downconvert(_stored_batches(Compression.ZSTD), 1)
    assert exc.value.kafka_error == "UNSUPPORTED_COMPRESSION_TYPE"
    v0 = build_message_set(0, [(3, 0, b"a", b"b")])
    assert downconvert(v0, 1) == v0
    v1 = build_message_set(
        1, [(3, 9, b"a", b"b"), (4, 10, b"c", b"d")], compression=Compression.GZIP
    )
    assert downconvert(v1, 1) == v1
    to_v0 = downconvert(v1, 0)
    assert [(m.magic, m.offset, m.timestamp) for m in iter_records(to_v0)] == [
        (0, 3, -1),
        (0, 4, -1),
    ]
    with pytest.raises(ValueError):
        downconvert(v1, 2)


# -- both ways -----------------------------------------------------------------------------
nullable = st.none() | st.binary(max_size=20)


@settings(max_examples=50, deadline=None)
@given(
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from(LEGACY_CODECS),
    base=st.integers(0, 2**40),
    records=st.lists(
        st.tuples(st.integers(1, 3), st.integers(0, 2**41), nullable, nullable),
        min_size=1,
        max_size=8,
    ),
)
def test_down_then_up_preserves_offsets_keys_values_and_timestamps(
    magic: int,
    codec: Compression,
    base: int,
    records: list[tuple[int, int, bytes | None, bytes | None]],
) -> None:
    b = BatchBuilder(base_offset=base, compression=codec)
    delta = -1
    offsets = []
    for gap, ts, key, value in records:
        delta += gap
        b.append(ts, key, value, [("x", b"y")], offset_delta=delta)
        offsets.append(base + delta)
    legacy = downconvert(b.build(), magic)
    back = upconvert_legacy(legacy, keep_offsets=True)
    got = [
        (r.offset, r.timestamp, r.key, r.value, r.headers)
        for x in decode_batches(back)
        for r in x.records
    ]
    assert got == [
        (o, ts if magic else -1, key, value, [])
        for o, (_, ts, key, value) in zip(offsets, records, strict=True)
    ]
    assert decode_batches(back)[0].compression == codec
