"""RecordBatch v2 header view: the seed's 76-byte batch and in-place patching."""

from helpers.batches import producer_batch

from odradek.records.batch import (
    BatchView,
    CorruptRecordError,
    assign_offsets,
    validate_v2_batches,
)


def _seed_batch() -> bytearray:
    return producer_batch([(1524709879130, b"key", b"value")])


def test_seed_batch_is_76_bytes_with_seed_crc() -> None:
    buf = _seed_batch()
    view = BatchView(buf)
    assert view.size == 76 == len(buf)
    assert view.crc == 2857248333  # kafka-dump-log output in the seed article
    assert view.is_valid()


def test_patching_offsets_keeps_crc_valid() -> None:
    buf = _seed_batch()
    summary = validate_v2_batches(buf)
    assert assign_offsets(buf, summary.positions, 1000, 7) == 1001
    view = BatchView(buf)
    assert (view.base_offset, view.partition_leader_epoch) == (1000, 7)
    assert view.is_valid()


def test_log_append_time_rewrites_crc() -> None:
    buf = _seed_batch()
    view = BatchView(buf)
    view.set_log_append_time(1_700_000_000_000)
    assert view.max_timestamp == 1_700_000_000_000
    assert view.timestamp_type == 1
    assert view.is_valid()


def test_flipped_bit_is_corrupt() -> None:
    buf = _seed_batch()
    buf[70] ^= 0x01
    try:
        validate_v2_batches(buf)
    except CorruptRecordError:
        pass
    else:
        raise AssertionError("corrupted batch accepted")
