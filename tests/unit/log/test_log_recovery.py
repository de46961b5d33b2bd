"""Crash recovery: torn tails, garbage, zeros, lost/corrupt indexes; every valid batch survives."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

from log_testkit import (
    NOW,
    batch,
    decode_all,
    open_log,
    read_everything,
    read_index,
    read_time_index,
    small_config,
)

from odradek.log.log import PartitionLog

CFG = small_config(segment_bytes=1500, index_interval_bytes=100)


def build(
    path: Path, batches: int = 30
) -> tuple[PartitionLog, list[tuple[int, bytes | None, bytes | None, int]]]:
    log = open_log(path, CFG)
    for i in range(batches):
        log.append_as_leader(batch(3, NOW + i, value=f"value-{i}".encode() * 3), i // 10)
    return log, read_everything(log)


def crash(log: PartitionLog) -> None:
    """Drop the process state without any of the clean-close work."""
    log.close_handles()


def seg_files(path: Path, suffix: str = ".log") -> list[Path]:
    return sorted(p for p in path.iterdir() if p.name.endswith(suffix))


def batch_starts(log_file: Path) -> list[int]:
    data = log_file.read_bytes()
    pos, out = 0, []
    while pos + 12 <= len(data):
        out.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return out


def test_torn_last_batch_is_cut(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    crash(log)
    last = seg_files(d)[-1]
    starts = batch_starts(last)
    cut = starts[-1] + 30  # mid-way through the last batch's header
    os.truncate(last, cut)
    log = open_log(d, CFG)
    assert log.last_recovery_truncated_bytes == 30
    assert read_everything(log) == records[:-3]
    assert log.log_end_offset == records[-3][0]
    assert log.append_as_leader(batch(1, NOW), 3).first_offset == records[-3][0]
    log.close()


def test_garbage_appended_after_a_crash_is_removed(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    crash(log)
    last = seg_files(d)[-1]
    size = last.stat().st_size
    rnd = random.Random(7)
    with open(last, "ab") as f:
        f.write(bytes(rnd.getrandbits(8) for _ in range(777)))
    log = open_log(d, CFG)
    assert last.stat().st_size == size
    assert read_everything(log) == records
    log.close()


def test_garbage_that_looks_like_a_header_is_removed(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    leo = log.log_end_offset
    crash(log)
    last = seg_files(d)[-1]
    fake = bytearray(batch(2, NOW))
    struct.pack_into(">q", fake, 0, leo)
    fake[-3] ^= 0x40  # plausible sizes and offsets, wrong CRC
    with open(last, "ab") as f:
        f.write(fake)
    log = open_log(d, CFG)
    assert read_everything(log) == records
    assert log.log_end_offset == leo
    log.close()


def test_zero_filled_tail_is_removed(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    crash(log)
    last = seg_files(d)[-1]
    size = last.stat().st_size
    os.truncate(last, size + 4096)  # the inode grew, the blocks never made it
    log = open_log(d, CFG)
    assert last.stat().st_size == size
    assert read_everything(log) == records
    log.close()


def test_corruption_in_an_older_segment_drops_it_and_everything_after(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    assert log.segment_count >= 4
    crash(log)
    files = seg_files(d)
    victim = files[1]
    starts = batch_starts(victim)
    data = bytearray(victim.read_bytes())
    data[starts[2] + 70] ^= 0xFF  # inside the third batch's records
    victim.write_bytes(bytes(data))
    first_bad = struct.unpack_from(">q", data, starts[2])[0]
    log = open_log(d, CFG)
    kept = [r for r in records if r[0] < first_bad]
    assert read_everything(log) == kept
    assert log.log_end_offset == first_bad
    assert [p.name for p in seg_files(d)] == [f.name for f in files[:2]]
    # The leader epoch cache forgets epochs that began in the lost part.
    assert all(e.start_offset < first_bad for e in log.leader_epoch_cache.entries())
    log.close()


def test_deleted_index_is_rebuilt_identically(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    log.close()
    first = seg_files(d, ".index")[0]
    tfirst = seg_files(d, ".timeindex")[0]
    original, toriginal = read_index(first), read_time_index(tfirst)
    assert original
    first.unlink()
    tfirst.unlink()
    log = open_log(d, CFG, recovery_point=10**9, clean_shutdown=True)
    assert read_index(first) == original
    assert read_time_index(tfirst) == toriginal
    assert read_everything(log) == records
    log.close()


def test_corrupt_index_is_detected_and_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    log.close()
    idx = seg_files(d, ".index")[1]
    original = read_index(idx)
    raw = bytearray(idx.read_bytes())
    struct.pack_into(">ii", raw, len(raw) - 8, 0x7FFFFFF0, 5)  # last entry: absurd offset
    idx.write_bytes(bytes(raw))
    log = open_log(d, CFG, recovery_point=10**9, clean_shutdown=True)
    assert read_index(idx) == original
    assert read_everything(log) == records
    log.close()


def test_subtly_corrupt_index_entry_never_returns_wrong_bytes(tmp_path: Path) -> None:
    """An entry that passes the cheap checks but points mid-batch: reads fall back to a scan."""
    d = tmp_path / "t-0"
    log, records = build(d)
    log.close()
    idx = seg_files(d, ".index")[0]
    raw = bytearray(idx.read_bytes())
    assert len(raw) >= 16
    rel, pos = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">ii", raw, 0, rel, pos + 7)
    idx.write_bytes(bytes(raw))
    log = open_log(d, CFG, recovery_point=10**9, clean_shutdown=True)
    assert read_everything(log) == records
    for offset, key, value, ts in records:
        got = decode_all(log.read(offset, 1).records)
        assert (offset, key, value, ts) in got
    assert log.segments[0].index_corrupt
    log.close()


def test_stray_temporary_files_are_removed(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    log.close()
    base = seg_files(d)[0].name.split(".")[0]
    for name in (
        f"{base}.log.deleted",
        f"{base}.index.deleted",
        f"{base}.log.cleaned",
        f"{base}.index.swap",
    ):
        (d / name).write_bytes(b"junk")
    log = open_log(d, CFG)
    leftovers = [p.name for p in d.iterdir() if p.name.endswith((".deleted", ".cleaned", ".swap"))]
    assert leftovers == []
    assert read_everything(log) == records
    log.close()


def test_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    log.flush()
    rp = log.recovery_point
    assert rp == log.log_end_offset
    log.append_as_leader(batch(2, NOW), 5)
    crash(log)
    log = open_log(d, CFG, recovery_point=rp)
    assert read_everything(log)[: len(records)] == records
    assert log.log_end_offset == rp + 2
    assert log.recovery_point == rp  # only a flush moves it forward
    log.close()


def test_out_of_order_index_entries_are_detected_at_load(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log, records = build(d)
    log.close()
    idx = next(p for p in seg_files(d, ".index") if len(read_index(p)) >= 3)
    original = read_index(idx)
    raw = bytearray(idx.read_bytes())
    raw[0:8], raw[8:16] = raw[8:16], raw[0:8]  # swap the first two entries
    idx.write_bytes(bytes(raw))
    log = open_log(d, CFG, recovery_point=10**9, clean_shutdown=True)
    assert read_index(idx) == original
    assert read_everything(log) == records
    log.close()
