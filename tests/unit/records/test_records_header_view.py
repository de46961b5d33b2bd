"""The batch header view: field values against built batches, the log-overhead prefix of
v0/v1/v2 entries, the layout offsets, patching, and errors on malformed buffers."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.records import header as layout
from odradek.records.batch import (
    BatchView,
    CorruptRecordError,
    RecordsError,
    assign_offsets,
    iter_entries,
    validate_batch,
    validate_v2_batches,
)
from odradek.records.control import ControlRecordType, build_end_txn_marker_batch
from odradek.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    LocatedBatch,
    TimestampType,
    read_batch_header,
    read_located_batch,
    read_log_overhead,
    read_magic,
)
from odradek.records.legacy import build_message_set
from odradek.records.record import BatchBuilder, decode_batch

TS = 1_700_000_000_000


def _built(**kwargs: object) -> bytes:
    builder = BatchBuilder(**kwargs)  # type: ignore[arg-type]
    for i in range(3):
        builder.append(TS + 10 * i, f"k{i}".encode(), b"v" * (i + 1))
    return builder.build()


def test_offsets_follow_the_struct_layout() -> None:
    """Every named offset is where the one-shot struct puts its field."""
    fmt = layout.HEADER_STRUCT.format.lstrip(">")
    offsets = [struct.calcsize(">" + fmt[:i]) for i in range(len(fmt))]
    assert offsets == [
        layout.BASE_OFFSET_OFFSET,
        layout.LENGTH_OFFSET,
        layout.PARTITION_LEADER_EPOCH_OFFSET,
        layout.MAGIC_OFFSET,
        layout.CRC_OFFSET,
        layout.ATTRIBUTES_OFFSET,
        layout.LAST_OFFSET_DELTA_OFFSET,
        layout.BASE_TIMESTAMP_OFFSET,
        layout.MAX_TIMESTAMP_OFFSET,
        layout.PRODUCER_ID_OFFSET,
        layout.PRODUCER_EPOCH_OFFSET,
        layout.BASE_SEQUENCE_OFFSET,
        layout.RECORDS_COUNT_OFFSET,
    ]
    assert layout.HEADER_STRUCT.size == HEADER_SIZE == layout.RECORDS_OFFSET == 61
    assert len(BatchHeader._fields) == len(fmt)


def test_fields_of_an_idempotent_compressed_batch() -> None:
    raw = _built(
        base_offset=1000,
        compression=Compression.GZIP,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
        partition_leader_epoch=9,
    )
    h = read_batch_header(raw)
    assert h.base_offset == 1000
    assert h.batch_length == len(raw) - LOG_OVERHEAD and h.size == len(raw)
    assert h.partition_leader_epoch == 9
    assert h.magic == 2
    assert h.crc == struct.unpack_from(">I", raw, 17)[0]
    assert h.compression == Compression.GZIP
    assert h.timestamp_type == TimestampType.CREATE_TIME
    assert not h.is_transactional and not h.is_control and not h.has_delete_horizon
    assert (h.last_offset_delta, h.last_offset, h.next_offset) == (2, 1002, 1003)
    assert (h.base_timestamp, h.max_timestamp) == (TS, TS + 20)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4242, 3, 17)
    assert h.has_producer_id and h.last_sequence == 19
    assert h.records_count == 3
    # The same values the full decoder and the in-place view see.
    d = decode_batch(raw)
    assert tuple(h) == (
        d.base_offset,
        d.batch_length,
        d.partition_leader_epoch,
        d.magic,
        d.crc,
        d.attributes,
        d.last_offset_delta,
        d.base_timestamp,
        d.max_timestamp,
        d.producer_id,
        d.producer_epoch,
        d.base_sequence,
        d.record_count,
    )
    assert BatchView(raw).header() == h == validate_batch(raw)


def test_attribute_bits_of_control_and_log_append_time_batches() -> None:
    marker = build_end_txn_marker_batch(
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=1,
        producer_id=7,
        producer_epoch=2,
        timestamp=TS,
    )
    h = read_batch_header(marker)
    assert h.is_control and h.is_transactional
    assert h.last_sequence == layout.NO_SEQUENCE
    stamped = read_batch_header(
        _built(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=TS + 99)
    )
    assert stamped.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stamped.max_timestamp == TS + 99
    assert not stamped.has_producer_id
    horizon = read_batch_header(_built(delete_horizon_ms=TS - 5))
    assert horizon.has_delete_horizon and horizon.base_timestamp == TS - 5


def test_sequences_wrap_at_int32_max() -> None:
    h = read_batch_header(_built(producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF))
    assert h.last_sequence == 1  # MAX, then 0, then 1


def test_reads_in_place_at_any_position_of_any_buffer(tmp_path: Path) -> None:
    first, second = _built(base_offset=0), _built(base_offset=3, partition_leader_epoch=5)
    blob = first + second
    want = read_batch_header(second)
    assert read_batch_header(blob, len(first)) == want
    assert read_batch_header(memoryview(bytearray(blob)), len(first)) == want
    path = tmp_path / "segment.log"
    path.write_bytes(blob)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        assert read_batch_header(mapped, len(first)) == want
    summary = validate_v2_batches(blob)
    assert [read_batch_header(blob, p) for p in summary.positions] == [
        read_batch_header(first),
        want,
    ]


def test_log_overhead_and_magic_of_v0_v1_and_v2_entries() -> None:
    records = [(5, TS, b"key", b"value"), (6, TS + 1, None, b"v")]
    v0 = build_message_set(0, records)
    v1 = build_message_set(1, records)
    v2 = _built(base_offset=7)
    blob = v0 + v1 + v2
    entries = list(iter_entries(blob))
    assert [e.magic for e in entries] == [0, 0, 1, 1, 2]
    for e in entries:
        prefix = read_log_overhead(blob, e.position)
        assert (prefix.base_offset, prefix.size) == (e.base_offset, e.size)
        assert prefix.batch_length == e.size - LOG_OVERHEAD
        assert read_magic(blob, e.position) == e.magic
    assert read_log_overhead(v0) == (5, 34 - LOG_OVERHEAD)  # seed: "key"/"value" is 34 bytes
    assert read_log_overhead(v1).size == 42
    assert read_log_overhead(v2) == (7, len(v2) - LOG_OVERHEAD)


def test_located_batch_knows_where_it_starts_and_ends() -> None:
    first, second = _built(), _built(base_offset=3)
    blob = first + second
    b = read_located_batch(blob, len(first))
    assert b == LocatedBatch(len(first), read_batch_header(second))
    assert (b.size, b.end) == (len(second), len(blob))
    # A segment reads a chunk of its file: the header at 0 of the chunk read at 4096.
    in_file = read_located_batch(second, 0, 4096)
    assert (in_file.position, in_file.end) == (4096, 4096 + len(second))
    with pytest.raises(CorruptRecordError):
        read_located_batch(blob, len(blob) - 10)


@pytest.mark.parametrize("length", [0, 1, 11, 16, 60])
def test_short_buffers_raise_corrupt_record(length: int) -> None:
    raw = _built()[:length]
    with pytest.raises(CorruptRecordError):
        read_batch_header(raw)
    with pytest.raises(CorruptRecordError):
        BatchView(raw)
    if length < LOG_OVERHEAD:
        with pytest.raises(CorruptRecordError):
            read_log_overhead(raw)
    if length <= layout.MAGIC_OFFSET:
        with pytest.raises(CorruptRecordError):
            read_magic(raw)


def test_reading_past_the_end_raises_corrupt_record() -> None:
    raw = _built()
    with pytest.raises(CorruptRecordError) as err:
        read_batch_header(raw, len(raw) - HEADER_SIZE + 1)
    assert isinstance(err.value, RecordsError) and err.value.kafka_error == "CORRUPT_MESSAGE"
    with pytest.raises(CorruptRecordError):
        read_log_overhead(raw, len(raw) - 11)
    with pytest.raises(CorruptRecordError):
        read_magic(raw, -1)


def _patched(raw: bytes, offset: int, fmt: str, value: int) -> bytearray:
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, value)
    return out


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda raw: _patched(raw, layout.MAGIC_OFFSET, ">b", 1), "magic"),
        (lambda raw: _patched(raw, layout.LENGTH_OFFSET, ">i", 48), "below minimum"),
        (lambda raw: _patched(raw, layout.LENGTH_OFFSET, ">i", len(raw)), "past the end"),
        (lambda raw: _patched(raw, len(raw) - 1, ">B", raw[-1] ^ 1), "CRC"),
        (lambda raw: bytearray(raw[:-1]), "past the end"),
    ],
)
def test_validation_names_what_is_wrong(mangle: Callable[[bytes], bytearray], message: str) -> None:
    bad = mangle(_built())
    read_batch_header(bad)  # reading never validates
    with pytest.raises(CorruptRecordError, match=message):
        validate_batch(bad)


def test_negative_last_offset_delta_is_corrupt_even_with_a_valid_crc() -> None:
    out = bytearray(_built())
    BatchView(out).set_last_offset_delta(-1)
    with pytest.raises(CorruptRecordError, match="negative"):
        validate_batch(out)


def test_patching_outside_the_crc_keeps_the_batch_valid() -> None:
    first, second = _built(), _built()
    buf = bytearray(first + second)
    summary = validate_v2_batches(buf)
    assert assign_offsets(buf, summary.positions, 500, 4) == 506
    heads = [validate_batch(buf, pos) for pos in summary.positions]
    assert [(h.base_offset, h.partition_leader_epoch) for h in heads] == [(500, 4), (503, 4)]
    view = BatchView(buf, len(first))
    view.set_base_offset(900)
    view.set_partition_leader_epoch(11)
    assert validate_batch(buf, len(first))[:3] == (900, len(second) - LOG_OVERHEAD, 11)


def test_patching_inside_the_crc_rewrites_it() -> None:
    out = bytearray(_built())
    before = read_batch_header(out)
    BatchView(out).set_last_offset_delta(9)
    after = validate_batch(out)
    assert after.last_offset_delta == 9 and after.crc != before.crc
    BatchView(out).set_log_append_time(TS + 5)
    stamped = validate_batch(out)
    assert stamped.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert stamped.max_timestamp == TS + 5
