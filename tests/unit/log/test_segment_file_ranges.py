"""Lazy reads (issue 18): a consumer read of at least LAZY_FROM_BYTES comes back as a
FileRange, the bytes an eager read returns, not read yet, so the data link can send
them with ``sendfile``; smaller reads stay bytes. A range keeps its own descriptor:
readable after the segment closes its handles (retention, a roll's close)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testkit import batch, decode_all, open_log

from odradek.log.file_range import FileRange
from odradek.log.log import PartitionLog
from odradek.log.segment import LAZY_FROM_BYTES
from odradek.topic_config import LogConfig


def _log(path: Path) -> PartitionLog:
    log = open_log(path, LogConfig(segment_bytes=8 << 20, index_interval_bytes=4096))
    for i in range(30):  # 30 batches of 10 x 1000-byte values: ~10 KB each
        log.append_as_leader(batch(10, value=bytes([65 + i % 26]) * 1000), 0)
    return log


def test_a_large_lazy_read_is_the_eager_reads_bytes_as_a_range(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    eager = log.read(0, 1 << 20, max_offset=250)
    lazy = log.read(0, 1 << 20, max_offset=250, lazy=True)
    assert isinstance(eager.records, bytes) and len(eager.records) >= LAZY_FROM_BYTES
    assert isinstance(lazy.records, FileRange)
    assert len(lazy.records) == len(eager.records)
    assert lazy.records.read() == eager.records
    assert lazy.records.read(1000) == eager.records[1000:]
    assert [r[0] for r in decode_all(lazy.records.read())] == list(range(250))
    lazy.records.close()
    assert lazy.records.fd == -1


def test_a_small_lazy_read_stays_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    small = log.read(0, 20_000, max_offset=250, lazy=True)
    assert isinstance(small.records, bytes) and 0 < len(small.records) < LAZY_FROM_BYTES
    assert small.records == log.read(0, 20_000, max_offset=250).records


def test_a_range_outlives_its_segments_descriptor(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    lazy = log.read(100, 1 << 20, lazy=True)
    expected = log.read(100, 1 << 20).records
    assert isinstance(lazy.records, FileRange)
    log.active_segment.close_handles()
    assert lazy.records.read() == expected


def test_a_range_of_a_shrunk_file_fails_its_read(tmp_path: Path) -> None:
    log = _log(tmp_path / "t-0")
    lazy = log.read(0, 1 << 20, lazy=True)
    assert isinstance(lazy.records, FileRange)
    with open(log.active_segment.log_path, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(OSError, match="shrank"):
        lazy.records.read()
