"""`.index` / `.timeindex`: byte formats, preallocation and trimming, the seed's worked lookups."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from log_testkit import NOW, batch, open_log, read_index, read_time_index, small_config

from odradek.log.offset_index import OffsetIndex
from odradek.log.time_index import TimeIndex
from odradek.topic_config import LogConfig

SEED_BASE = 3257573
# kafka-dump-log output of 00000000000003257573.index in the seed (first 9 + last 10 entries).
SEED_INDEX = [
    (3257687, 17413),
    (3257743, 33770),
    (3257799, 50127),
    (3257818, 66484),
    (3257819, 72074),
    (3257871, 87281),
    (3257884, 91444),
    (3257896, 95884),
    (3257917, 100845),
    (6506124, 1073698512),
    (6506137, 1073702918),
    (6506150, 1073707263),
    (6506162, 1073711499),
    (6506176, 1073716197),
    (6506188, 1073720433),
    (6506205, 1073725654),
    (6506217, 1073730060),
    (6506229, 1073734174),
    (6506243, 1073738288),
]
# ... and of 00000000000003257573.timeindex (first 9 + last 10).
SEED_TIME_INDEX = [
    (1570792689308, 3257685),
    (1570792689324, 3257742),
    (1570792689345, 3257795),
    (1570792689348, 3257813),
    (1570792689357, 3257867),
    (1570792689361, 3257881),
    (1570792689364, 3257896),
    (1570792689368, 3257915),
    (1570792689369, 3257927),
    (1570793423474, 6506136),
    (1570793423477, 6506150),
    (1570793423481, 6506159),
    (1570793423485, 6506176),
    (1570793423489, 6506188),
    (1570793423493, 6506204),
    (1570793423496, 6506214),
    (1570793423500, 6506228),
    (1570793423503, 6506240),
    (1570793423505, 6506248),
]


def test_seed_offset_lookup_finds_largest_entry_not_above_target(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / f"{SEED_BASE:020d}.index", SEED_BASE, 10_485_760)
    for offset, position in SEED_INDEX:
        idx.append(offset, position)
    # Seed 2.2: offset 6506155 -> binary search -> <offset: 6506150, position: 1073707263>.
    assert idx.lookup(6506155) == (6506150, 1073707263)
    assert idx.lookup(6506150) == (6506150, 1073707263)
    assert idx.lookup(6506149) == (6506137, 1073702918)
    assert idx.lookup(SEED_BASE + 5) == (SEED_BASE, 0)  # below the first entry: scan from 0
    assert idx.lookup(9_999_999) == (6506243, 1073738288)
    idx.close()
    # The closed file is exactly the entries: relative offset and position, big-endian int32s.
    raw = (tmp_path / f"{SEED_BASE:020d}.index").read_bytes()
    assert len(raw) == 8 * len(SEED_INDEX)
    assert (
        raw[:8]
        == struct.pack(">ii", 3257687 - SEED_BASE, 17413)
        == bytes.fromhex("0000007200004405")
    )
    # Reopened read-only (a closed segment), lookups are served by pread probes.
    ro = OffsetIndex(tmp_path / f"{SEED_BASE:020d}.index", SEED_BASE, 10_485_760, writable=False)
    assert ro.entries == len(SEED_INDEX)
    assert ro.lookup(6506155) == (6506150, 1073707263)
    ro.close()


def test_seed_timestamp_lookup_both_directions(tmp_path: Path) -> None:
    ti = TimeIndex(tmp_path / f"{SEED_BASE:020d}.timeindex", SEED_BASE, 10_485_760)
    for ts, offset in SEED_TIME_INDEX:
        assert ti.maybe_append(ts, offset)
    target = 1570793423501
    # The seed's step 2: the smallest entry >= target is <1570793423503, 6506240> ...
    assert ti.lookup_ceiling(target) == (1570793423503, 6506240)
    # ... Kafka's TimeIndex.lookup starts from the largest entry <= target, which can never
    # skip an earlier record with a timestamp >= target.
    assert ti.lookup(target) == (1570793423500, 6506228)
    assert ti.lookup(1) == (-1, SEED_BASE)
    assert ti.last_entry() == (1570793423505, 6506248)
    # Appends only when the timestamp grows.
    assert not ti.maybe_append(1570793423505, 6506300)
    ti.close()
    raw = (tmp_path / f"{SEED_BASE:020d}.timeindex").read_bytes()
    assert len(raw) == 12 * len(SEED_TIME_INDEX)
    assert struct.unpack(">qi", raw[:12]) == (1570792689308, 3257685 - SEED_BASE)


def test_active_indexes_are_preallocated_and_trimmed_on_roll(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=20_000, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", cfg)
    d = tmp_path / "t-0"
    assert (d / f"{0:020d}.index").stat().st_size == 10_485_760
    assert (d / f"{0:020d}.timeindex").stat().st_size == 10_485_756  # 873813 * 12, as in the seed
    for i in range(5):
        log.append_as_leader(batch(2, NOW + i), 0)
    log.roll()
    idx = d / f"{0:020d}.index"
    tidx = d / f"{0:020d}.timeindex"
    entries = read_index(idx)
    assert idx.stat().st_size == 8 * len(entries) > 0
    assert tidx.stat().st_size % 12 == 0 and tidx.stat().st_size < 10_485_756
    new = d / f"{10:020d}.index"
    assert new.stat().st_size == 10_485_760
    log.close()


def test_index_entries_byte_for_byte(tmp_path: Path) -> None:
    """Every index entry = (batch last offset - base, batch position); time index = (max ts so far, ...)."""
    log = open_log(tmp_path / "t-0", small_config(segment_bytes=1 << 20, index_interval_bytes=150))
    sizes = []
    for i in range(8):
        b = batch(3, NOW + 100 * i)
        sizes.append(len(b))
        log.append_as_leader(b, 0)
    log.close()
    d = tmp_path / "t-0"
    positions = [sum(sizes[:i]) for i in range(8)]
    # Kafka indexes a batch when more than index.interval.bytes were written since the last entry.
    expected = []
    since = 0
    for i in range(8):
        if since > 150:
            expected.append((3 * i + 2, positions[i]))
            since = 0
        since += sizes[i]
    assert read_index(d / f"{0:020d}.index") == expected
    times = read_time_index(d / f"{0:020d}.timeindex")
    # Same moments (max timestamp so far, its batch's last offset); closing the segment
    # appends its final max timestamp unless the last entry already holds it.
    expected_times = [(NOW + 100 * (rel // 3) + 2, rel) for rel, _pos in expected]
    if expected_times[-1][1] != 23:
        expected_times.append((NOW + 100 * 7 + 2, 23))
    assert times == expected_times


def test_truncation_zeroes_removed_entries(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    idx = OffsetIndex(path, 100, 800)
    for i in range(1, 9):
        idx.append(100 + 10 * i, 1000 * i)
    idx.truncate_to(145)
    assert idx.entries == 4
    assert idx.lookup(1000) == (140, 4000)
    # The file keeps its preallocated size, but removed slots read as zeros again.
    data = path.read_bytes()
    assert len(data) == 800
    assert data[32:64] == bytes(32)
    idx.append(150, 4500)
    idx.close_handle()  # a crash: untrimmed file
    again = OffsetIndex(path, 100, 800)
    assert again.entries == 5
    assert again.last_entry() == (150, 4500)
    again.close()


def test_untrimmed_index_counts_entries_before_zero_tail(tmp_path: Path) -> None:
    path = tmp_path / "y.timeindex"
    ti = TimeIndex(path, 0, 1200)
    for i in range(1, 6):
        ti.maybe_append(1000 * i, 10 * i)
    ti.close_handle()
    assert os.path.getsize(path) == 1200
    ro = TimeIndex(path, 0, 1200, writable=False)
    assert ro.entries == 5
    assert ro.lookup(3500) == (3000, 30)
    ro.close()


def test_full_index_rolls_segment(tmp_path: Path) -> None:
    cfg = small_config(
        segment_bytes=1 << 20, index_interval_bytes=1, segment_index_bytes=32
    )  # 4 entries
    log = open_log(tmp_path / "t-0", cfg)
    for i in range(12):
        log.append_as_leader(batch(1, NOW + i), 0)
    assert log.segment_count > 1
    for seg in log.segments[:-1]:
        assert seg.offset_index.entries <= 4
    log.close()
