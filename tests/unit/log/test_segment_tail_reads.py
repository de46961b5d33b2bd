"""Reads near the log end (followers, consumers, a consumer read's high watermark bound)
find their batch from the positions of the latest appends: one header read, not a scan
from the last index entry over up to ``index.interval.bytes`` of small batches (issue 18:
that scan was a large share of a leader's CPU per one-record acks=all produce)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testkit import batch, decode_all, open_log

from odradek.log import segment as segment_module
from odradek.log.log import PartitionLog
from odradek.records.header import read_located_batch
from odradek.topic_config import LogConfig


def _log_of_small_batches(path: Path, count: int) -> PartitionLog:
    log = open_log(path, LogConfig(segment_bytes=1 << 20, index_interval_bytes=4096))
    for _ in range(count):
        log.append_as_leader(batch(2, value=b"v"), 0)  # offsets 2i, 2i+1
    return log


@pytest.fixture
def headers_parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many batch headers the segment parses (a counting wrapper, same results)."""
    parsed = [0]

    def counting(*args: object, **kwargs: object) -> object:
        parsed[0] += 1
        return read_located_batch(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(segment_module, "read_located_batch", counting)
    return parsed


def test_tail_lookup_reads_one_header(tmp_path: Path, headers_parsed: list[int]) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 300)
    seg = log.active_segment
    # Batches of ~75 bytes: about 55 of them lie between two index entries.
    for offset in (598, 599, 560, 540):
        headers_parsed[0] = 0
        found = seg.translate_offset(offset)
        assert found is not None and found.header.base_offset == offset - offset % 2
        assert headers_parsed[0] <= 1, (offset, headers_parsed[0])
    # A follower's or consumer's read at a recent offset, with the HW as its bound.
    headers_parsed[0] = 0
    result = log.read(590, 1 << 20, max_offset=596)
    assert [r[0] for r in decode_all(result.records)] == list(range(590, 596))
    assert headers_parsed[0] <= 8, headers_parsed[0]


def test_every_offset_is_found_tail_or_not(tmp_path: Path) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 600)  # more than the tail keeps
    seg = log.active_segment
    for offset in range(log.log_end_offset):
        found = seg.translate_offset(offset)
        assert found is not None and found.header.base_offset == offset - offset % 2, offset
    assert seg.translate_offset(log.log_end_offset) is None
    for offset in range(0, log.log_end_offset, 7):
        got = decode_all(log.read(offset, 200).records)
        assert got and got[0][0] == offset - offset % 2


def test_tail_is_forgotten_on_truncation_and_recovery(tmp_path: Path) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 100)
    log.truncate_to(150)
    assert log.log_end_offset == 150
    assert log.active_segment.translate_offset(150) is None
    for _ in range(5):
        log.append_as_leader(batch(3, value=b"w"), 1)  # offsets 150..164, batches of 3
    seg = log.active_segment
    for offset in range(140, 165):
        found = seg.translate_offset(offset)
        expected = offset - offset % 2 if offset < 150 else 150 + (offset - 150) // 3 * 3
        assert found is not None and found.header.base_offset == expected, offset
    assert [r[0] for r in decode_all(log.read(151, 1 << 20).records)][:3] == [150, 151, 152]
    log.close()
    reopened = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20))
    assert reopened.log_end_offset == 165
    assert [r[0] for r in decode_all(reopened.read(160, 1 << 20).records)] == list(range(159, 165))


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the segment reads its file (a counting wrapper, same results)."""
    calls = [0]
    real = segment_module.os.pread

    def counting(fd: int, size: int, position: int) -> bytes:
        calls[0] += 1
        return real(fd, size, position)

    monkeypatch.setattr(segment_module.os, "pread", counting)
    return calls


def test_newest_appends_are_read_from_memory(tmp_path: Path, preads: list[int]) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 50)
    on_disk = (tmp_path / "t-0" / log.active_segment.log_path.name).read_bytes()
    # A follower at its log end and a consumer at the high watermark, one append later.
    log.append_as_leader(batch(1, value=b"new"), 0)
    preads[0] = 0
    follower = log.read(100, 1 << 20)
    consumer = log.read(98, 1 << 20, max_offset=101)
    assert preads[0] == 0
    assert [r[0] for r in decode_all(follower.records)] == [100]
    assert [r[0] for r in decode_all(consumer.records)] == [98, 99, 100]
    # The same bytes as the file holds.
    file_now = log.active_segment.log_path.read_bytes()
    assert file_now.startswith(on_disk)
    assert bytes(consumer.records) == file_now[-len(consumer.records) :]


def test_memory_and_file_agree_across_refills(tmp_path: Path) -> None:
    """The kept bytes stay the file's own: extended, restarted when an append does not
    fit, dropped for an append larger than they may hold, and after truncation."""
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 24, index_interval_bytes=4096))
    big = b"x" * (segment_module.RECENT_BYTES // 3)
    for i in range(40):
        value = (
            big if i % 7 == 3 else (b"y" * (segment_module.RECENT_BYTES + 10) if i == 20 else b"v")
        )
        log.append_as_leader(batch(1 + i % 3, value=value), 0)
        if i == 30:
            log.truncate_to(log.log_end_offset - 2)
        file_bytes = log.active_segment.log_path.read_bytes()
        for offset in range(max(0, log.log_end_offset - 12), log.log_end_offset):
            got = log.read(offset, 1 << 22)
            assert (
                bytes(got.records) == file_bytes[got.file_position : got.file_position + got.size]
            ), (
                i,
                offset,
            )


def test_nothing_is_read_from_memory_once_closed(tmp_path: Path) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 5)
    seg = log.active_segment
    log.close()
    with pytest.raises(OSError):
        seg.read_bytes(0, 10)


def test_readers_of_a_new_batch_share_one_answer(tmp_path: Path, preads: list[int]) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 20)  # offsets 0..39, batches of 2
    seg = log.active_segment
    log.append_as_leader(batch(1, value=b"new"), 0)  # offset 40
    preads[0] = 0
    first = seg.read(40, 1 << 20)
    # A second follower and a consumer whose bound is the log end: the same answer.
    assert seg.read(40, 1 << 20) is first
    assert seg.read(40, 500, max_position=seg.size) is first
    assert first is not None and [r[0] for r in decode_all(first.records)] == [40]
    # Asking for less than the batch without min_one_message: nothing, as before.
    nothing = seg.read(40, 10, min_one_message=False)
    assert nothing is not None and (nothing.records, nothing.size) == (b"", 0)
    # A bound below the new batch: the reader does not get it.
    bounded = seg.read(38, 1 << 20, max_position=first.position)
    assert bounded is not None and [r[0] for r in decode_all(bounded.records)] == [38, 39]
    # Appended since: the next reader sees the new batch too.
    log.append_as_leader(batch(1, value=b"next"), 0)  # offset 41
    again = seg.read(40, 1 << 20)
    assert again is not None and [r[0] for r in decode_all(again.records)] == [40, 41]
    assert preads[0] == 0


def test_a_shared_answer_does_not_outlive_truncation(tmp_path: Path) -> None:
    log = _log_of_small_batches(tmp_path / "t-0", 20)
    seg = log.active_segment
    log.append_as_leader(batch(1, value=b"aaa"), 0)  # offset 40
    before = seg.read(40, 1 << 20)
    assert before is not None
    log.truncate_to(40)
    log.append_as_leader(batch(1, value=b"bbb"), 1)  # offset 40 again, same size
    assert seg.size == before.position + before.size
    after = seg.read(40, 1 << 20)
    assert after is not None and after.records != before.records
    assert after.records == seg.log_path.read_bytes()[after.position :]
