"""Retention by time, size and log start offset; delayed removal of `.deleted` files."""

from __future__ import annotations

import os
from pathlib import Path

from log_testkit import NOW, batch, open_log, read_everything, small_config

from odradek.log.log import PartitionLog

DAY = 86_400_000


def make(path: Path, **cfg: object) -> PartitionLog:
    log = open_log(path, small_config(segment_bytes=600, **cfg))
    return log


def fill_aged(log: PartitionLog, ages_ms: list[int], per_segment: int = 3) -> None:
    """One segment per age: ``per_segment`` batches stamped NOW - age, then a roll."""
    for age in ages_ms:
        for _ in range(per_segment):
            log.append_as_leader(batch(2, NOW - age), 0)
        log.roll()
    log.high_watermark = log.log_end_offset


def names(path: Path, suffix: str) -> list[str]:
    return sorted(p.name for p in path.iterdir() if p.name.endswith(suffix))


def test_retention_by_time(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_ms=DAY, file_delete_delay_ms=60_000)
    fill_aged(log, [3 * DAY, 2 * DAY, 0, 0])
    log.append_as_leader(batch(2, NOW), 0)
    log.high_watermark = log.log_end_offset
    assert log.segment_count == 5
    assert log.delete_retention_ms_breached_segments(NOW) == 2
    assert log.log_start_offset == 12 == log.segments[0].base_offset
    # Renamed first, removed after file.delete.delay.ms.
    assert names(d, ".log.deleted") == [f"{0:020d}.log.deleted", f"{6:020d}.log.deleted"]
    assert log.purge_deleted(NOW + 59_999) == 0
    assert log.purge_deleted(NOW + 60_000) == 2
    assert names(d, ".deleted") == []
    assert next(o for o, *_ in read_everything(log)) == 12
    log.close()


def test_all_expired_rolls_then_deletes_the_old_active_segment(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_ms=DAY)
    fill_aged(log, [5 * DAY])
    log.append_as_leader(batch(2, NOW - 4 * DAY), 0)  # the active segment is expired too
    log.high_watermark = log.log_end_offset
    leo = log.log_end_offset
    assert log.delete_retention_ms_breached_segments(NOW) == 2
    assert log.segment_count == 1
    assert log.active_segment.base_offset == leo == log.log_start_offset
    assert log.active_segment.size == 0
    assert log.append_as_leader(batch(1, NOW), 0).first_offset == leo
    log.close()


def test_time_falls_back_to_mtime_without_timestamps(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_ms=DAY)
    for _ in range(3):
        log.append_as_leader(batch(2, 0, ts_step=0), 0)  # timestamp 0: no usable max timestamp
    log.roll()
    log.append_as_leader(batch(2, NOW), 0)
    log.high_watermark = log.log_end_offset
    first = log.segments[0]
    assert first.largest_timestamp == first.last_modified_ms
    assert log.delete_retention_ms_breached_segments(NOW) == 0
    os.utime(first.log_path, ((NOW - 2 * DAY) / 1000, (NOW - 2 * DAY) / 1000))
    assert log.delete_retention_ms_breached_segments(NOW) == 1
    log.close()


def test_retention_by_size(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_bytes=1000, retention_ms=-1)
    fill_aged(log, [0, 0, 0, 0])
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    # Seed 2.3.2: diff = total - retention.bytes; delete from the oldest while diff - size >= 0.
    diff, expect = total - 1000, 0
    for s in sizes:
        if diff - s >= 0:
            diff -= s
            expect += 1
        else:
            break
    assert expect >= 2
    assert log.delete_retention_size_breached_segments() == expect
    assert log.size_bytes <= total - sum(sizes[:expect])
    assert log.delete_retention_size_breached_segments() == 0
    log.close()


def test_retention_by_log_start_offset(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_ms=-1)
    fill_aged(log, [0, 0, 0, 0])
    bases = [s.base_offset for s in log.segments]  # 0, 6, 12, 18, 24(active)
    log.delete_records_before(bases[2] + 1)  # inside the third segment
    # Seed 2.3.3: a segment goes when the NEXT segment's base offset <= log start offset.
    assert log.delete_log_start_offset_breached_segments() == 2
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == bases[2] + 1
    log.close()


def test_nothing_at_or_above_the_high_watermark_is_deleted(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_ms=DAY)
    fill_aged(log, [3 * DAY, 3 * DAY, 3 * DAY])
    log.high_watermark = log.segments[1].base_offset
    assert log.delete_retention_ms_breached_segments(NOW) == 1
    log.high_watermark = log.log_end_offset
    assert log.delete_retention_ms_breached_segments(NOW) == 2
    log.close()


def test_compact_only_topics_keep_old_segments(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = make(d, retention_ms=DAY, cleanup_policy=("compact",))
    fill_aged(log, [3 * DAY, 3 * DAY])
    assert log.delete_old_segments(NOW) == 0
    log.delete_records_before(log.segments[1].base_offset)
    assert log.delete_old_segments(NOW) == 1
    log.close()
