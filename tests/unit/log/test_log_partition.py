"""PartitionLog: appends (leader/follower), whole-batch reads, lookups, rolls, truncation."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest
from helpers.batches import producer_batch
from log_testkit import (
    NOW,
    batch,
    batch_offsets,
    decode_all,
    fill,
    open_log,
    read_everything,
    small_config,
)

from odradek.log.errors import (
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from odradek.records.batch import BatchTooLargeError, BatchView, CorruptRecordError
from odradek.topic_config import LogConfig


def test_append_assigns_offsets_and_epoch_in_place(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    first = batch(3, NOW)
    r1 = log.append_as_leader(first, 7)
    assert (r1.first_offset, r1.last_offset, r1.record_count, r1.duplicate) == (0, 2, 3, False)
    assert r1.log_append_time == -1
    assert (r1.max_timestamp, r1.offset_of_max_timestamp) == (NOW + 2, 2)
    view = BatchView(first)
    assert (view.base_offset, view.partition_leader_epoch) == (0, 7)
    assert view.is_valid()
    two = batch(2, NOW) + batch(4, NOW + 50)
    r2 = log.append_as_leader(two, 7)
    assert (r2.first_offset, r2.last_offset, r2.record_count) == (3, 8, 6)
    assert r2.offset_of_max_timestamp == 8
    assert log.log_end_offset == 9
    assert [o for o, *_ in read_everything(log)] == list(range(9))
    log.close()


def test_read_returns_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20))
    sizes = []
    for i in range(10):
        b = batch(5, NOW + i)
        sizes.append(len(b))
        log.append_as_leader(b, 0)
    # An offset inside a batch returns that whole batch (the client skips earlier records).
    rr = log.read(12, 1)
    assert batch_offsets(rr.records) == [(10, 14)]  # larger than max_bytes: still returned
    assert rr.first_offset == 10 and rr.file_position == sum(sizes[:2])
    assert rr.segment_path == tmp_path / "t-0" / f"{0:020d}.log"
    # max_bytes stops at the last whole batch that fits.
    rr = log.read(0, sizes[0] * 3 + 10)
    assert batch_offsets(rr.records) == [(0, 4), (5, 9), (10, 14)]
    assert rr.size == len(rr.records) == sum(sizes[:3])
    # min_one_message=False: a first batch above max_bytes yields nothing.
    assert log.read(0, 10, min_one_message=False).size == 0
    # max_offset (e.g. the high watermark) excludes every batch holding an offset >= it.
    rr = log.read(0, 1 << 20, max_offset=22)
    assert batch_offsets(rr.records) == [(0, 4), (5, 9), (10, 14), (15, 19)]
    assert log.read(20, 1 << 20, max_offset=22).size == 0
    assert log.read(20, 1 << 20, max_offset=20).size == 0
    # At the log end: empty; beyond either end: OFFSET_OUT_OF_RANGE.
    assert log.read(50, 100).size == 0
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(51, 100)
    assert info.value.kafka_error == "OFFSET_OUT_OF_RANGE"
    log.high_watermark = 50
    log.delete_records_before(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert batch_offsets(log.read(10, 1).records) == [(10, 14)]
    log.close()


def test_reads_span_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1000))
    fill(log, 40, records=2)
    assert log.segment_count > 5
    got = read_everything(log)
    assert [o for o, *_ in got] == list(range(80))
    names = sorted(os.listdir(tmp_path / "t-0"))
    bases = [s.base_offset for s in log.segments]
    for b in bases:
        assert f"{b:020d}.log" in names
    log.close()


def test_seed_offset_lookup_through_segments(tmp_path: Path) -> None:
    """Segments based at 0 and 3257573: find the segment, the index entry <= target, scan."""
    src = open_log(
        tmp_path / "src-0", small_config(segment_bytes=1 << 20, index_interval_bytes=300)
    )
    fill(src, 30, records=4)
    first_part = src.read(0, 1 << 20).records
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20, index_interval_bytes=300))
    log.append_as_follower(first_part)
    log.roll(3257573)  # as a follower does when the leader's next batch starts there
    # Re-base the same batches at 3257573 (a follower may append after a gap).
    moved = bytearray(first_part)
    pos = 0
    off = 3257573
    while pos < len(moved):
        struct.pack_into(">q", moved, pos, off)
        view = BatchView(moved, pos)
        off = view.next_offset
        pos += view.size
    log.append_as_follower(moved)
    assert [s.base_offset for s in log.segments] == [0, 3257573]
    seg = log.segments[-1]
    assert seg.base_offset == 3257573
    target = 3257573 + 87
    entry = seg.offset_index.lookup(target)
    assert entry.offset <= target
    found = seg.translate_offset(target)
    assert found is not None
    h = found.header
    assert h.base_offset <= target <= h.last_offset
    rr = log.read(target, 1)
    assert rr.first_offset == h.base_offset and rr.file_position == found.position
    assert any(o == target for o, *_ in decode_all(rr.records))
    assert log.read(100, 1).first_offset == 100
    log.close()
    src.close()


def test_timestamp_lookup_through_both_indexes(tmp_path: Path) -> None:
    """Seed 2.2's flow: segment by largest timestamp, time index, offset index, scan."""
    cfg = small_config(segment_bytes=3000, index_interval_bytes=150)
    log = open_log(tmp_path / "t-0", cfg)
    base = 1570793423000
    expected: list[tuple[int, int]] = []
    offset = 0
    for i in range(60):
        ts = base + 3 * i
        log.append_as_leader(batch(2, ts, ts_step=1), 0)
        expected += [(offset, ts), (offset + 1, ts + 1)]
        offset += 2
    assert log.segment_count > 2
    for target in (base - 5, base + 1, base + 50, base + 101, 1570793423150, base + 178):
        want = next(((o, t) for o, t in expected if t >= target), None)
        got = log.offset_for_timestamp(target)
        assert got is not None
        assert (got[0], got[1]) == want, target
        assert got[2] == 0
    assert log.offset_for_timestamp(base + 10_000) is None
    assert log.offset_for_timestamp(-2) == (0, -1, 0)
    assert log.offset_for_timestamp(-1) == (120, -1, 0)
    # Hidden above the high watermark when asked.
    assert log.offset_for_timestamp(base + 101, max_offset=10) is None
    log.close()


def test_timestamp_lookup_with_out_of_order_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20, index_interval_bytes=1))
    stamps = [100, 500, 200, 300, 900, 400, 950, 50]
    for ts in stamps:
        log.append_as_leader(batch(1, ts), 0)
    for target in (150, 250, 450, 600, 920):
        want = next(i for i, t in enumerate(stamps) if t >= target)
        got = log.offset_for_timestamp(target)
        assert got is not None and got[0] == want, target
    log.close()


def test_max_timestamp_offset_finds_the_exact_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3, NOW), 0)
    b = producer_batch(((ts, b"k", b"v") for ts in [NOW + 5, NOW + 90, NOW + 20]), codec=1)
    log.append_as_leader(b, 4)
    log.append_as_leader(batch(2, NOW + 30), 4)
    assert log.max_timestamp_offset() == (4, NOW + 90, 4)
    assert log.offset_for_timestamp(-3) == (4, NOW + 90, 4)
    assert open_log(tmp_path / "e-0").max_timestamp_offset() is None
    log.close()


def test_log_append_time_is_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(message_timestamp_type="LogAppendTime"))
    b = batch(3, 1000)
    r = log.append_as_leader(b, 0, now_ms=NOW)
    assert r.log_append_time == NOW == r.max_timestamp
    view = BatchView(b)
    assert view.timestamp_type == 1 and view.max_timestamp == NOW and view.is_valid()
    got = decode_all(log.read(0, 1 << 20).records)
    assert [t for *_, t in got] == [NOW] * 3
    assert log.offset_for_timestamp(NOW) == (0, NOW, 0)
    log.close()


def test_create_time_bounds_and_client_log_append_time(tmp_path: Path) -> None:
    cfg = small_config(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    log = open_log(tmp_path / "t-0", cfg)
    log.append_as_leader(batch(1, NOW - 900), 0, now_ms=NOW)
    for ts in (NOW - 1001, NOW + 501):
        with pytest.raises(InvalidTimestampError) as info:
            log.append_as_leader(batch(1, ts), 0, now_ms=NOW)
        assert info.value.kafka_error == "INVALID_TIMESTAMP"
    b = batch(1, NOW)
    BatchView(b).set_log_append_time(NOW)
    with pytest.raises(InvalidTimestampError, match="LogAppendTime"):
        log.append_as_leader(b, 0, now_ms=NOW)
    assert log.log_end_offset == 1
    log.close()


def test_size_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(max_message_bytes=500, segment_bytes=2000))
    with pytest.raises(BatchTooLargeError) as info:
        log.append_as_leader(batch(1, NOW, value=b"x" * 600), 0)
    assert info.value.kafka_error == "MESSAGE_TOO_LARGE"
    many = bytearray().join(batch(1, NOW, value=b"x" * 300) for _ in range(7))
    with pytest.raises(RecordBatchTooLargeError) as info2:
        log.append_as_leader(many, 0)
    assert info2.value.kafka_error == "RECORD_LIST_TOO_LARGE"
    bad = batch(2, NOW)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad, 0)
    assert log.log_end_offset == 0
    log.close()


def test_roll_on_size_time_and_offset_overflow(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=600, segment_ms=1000))
    b = batch(1, NOW)
    for _ in range(600 // len(b) + 1):
        log.append_as_leader(batch(1, NOW), 0)
    assert log.segment_count == 2  # segment.bytes
    n = log.segment_count
    log.append_as_leader(batch(1, NOW + 999), 0)
    assert log.segment_count == n
    log.append_as_leader(batch(1, NOW + 1001), 0)  # segment.ms since the first batch's timestamp
    assert log.segment_count == n + 1
    # Offsets that no longer fit an int32 relative to the base force a roll (followers).
    far = batch(1, NOW + 1001)
    struct.pack_into(">q", far, 0, log.active_segment.base_offset + 0x80000000)
    log.append_as_follower(far)
    assert log.active_segment.base_offset == log.log_end_offset - 1
    log.close()


def test_follower_append_rules(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0")
    fill(leader, 5, records=2)
    data = leader.read(0, 1 << 20).records
    follower = open_log(tmp_path / "f-0")
    r = follower.append_as_follower(data)
    assert (r.first_offset, r.last_offset, r.record_count) == (0, 9, 10)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    gap = bytearray(batch(1, NOW))
    struct.pack_into(">q", gap, 0, 20)  # compacted leaders replicate with gaps
    follower.append_as_follower(bytes(gap))
    assert follower.log_end_offset == 21
    corrupt = bytearray(batch(1, NOW))
    struct.pack_into(">q", corrupt, 0, 21)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytes(corrupt))
    assert follower.log_end_offset == 21
    leader.close()
    follower.close()


def test_truncate_to_and_fully(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=800))
    fill(log, 30, records=3)
    log.high_watermark = 90
    assert log.segment_count > 3
    assert log.truncate_to(40)  # inside the batch 39-41: the whole batch goes
    assert log.log_end_offset == 39
    assert log.high_watermark == 39
    assert [o for o, *_ in read_everything(log)] == list(range(39))
    assert all(s.base_offset <= 39 for s in log.segments)
    assert not log.truncate_to(100)
    r = log.append_as_leader(batch(1, NOW), 1)
    assert r.first_offset == 39
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (500, 500, 1)
    assert log.leader_epoch_cache.entries() == []
    assert log.append_as_leader(batch(2, NOW), 2).first_offset == 500
    log.close()
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=800))
    assert (log.log_start_offset, log.log_end_offset) == (500, 502)
    log.close()


def test_delete_records_before(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 10, records=2)
    log.high_watermark = 15
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(16)
    assert log.delete_records_before(7) == 7
    assert log.delete_records_before(3) == 7  # never moves back
    assert log.delete_records_before(-1) == 15  # -1: up to the high watermark
    assert log.earliest() == 15
    log.high_watermark = 3  # clamped to [log start, log end]
    assert log.high_watermark == 15
    log.close()


def test_partition_metadata_file(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", topic_id="Nwj0sDdnS5i9AxhS9bBe2g")
    assert (
        tmp_path / "t-0" / "partition.metadata"
    ).read_text() == "version: 0\ntopic_id: Nwj0sDdnS5i9AxhS9bBe2g"
    assert log.topic_id == "Nwj0sDdnS5i9AxhS9bBe2g"
    log.close()


def test_readers_see_consistent_segments_while_a_worker_flushes_and_deletes(tmp_path: Path) -> None:
    cfg = small_config(segment_bytes=700, retention_bytes=3000, file_delete_delay_ms=60_000)
    log = open_log(tmp_path / "t-0", cfg)
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while not stop.is_set():
                log.flush()
                log.delete_old_segments(NOW)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=worker)
    t.start()
    try:
        for i in range(300):
            log.append_as_leader(batch(2, NOW + i), 0)
            log.high_watermark = log.log_end_offset
            start = log.log_start_offset
            try:
                got = decode_all(log.read(start, 1 << 16).records)
            except OffsetOutOfRangeError:
                continue  # retention moved the start between the two calls
            assert got and got[0][0] <= max(start, got[0][0])
    finally:
        stop.set()
        t.join()
    assert not errors
    assert log.size_bytes <= 3000 + 700
    log.close()


def test_default_config_is_kafkas(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(batch(1, NOW), 0)
    assert log.config.segment_bytes == 1 << 30
    log.close()
