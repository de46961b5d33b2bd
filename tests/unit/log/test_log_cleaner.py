"""Compaction: latest value per key, tombstones, empty producer batches, grouping, ratios,
and a real process killed at every step of the segment swap."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from log_testkit import (
    NOW,
    batch,
    batch_offsets,
    decode_all,
    open_log,
    read_everything,
    small_config,
)

from odradek.log.cleaner import (
    CRASH_ENV,
    CRASH_POINTS,
    LogCleaner,
    cleanable_logs,
    describe_cleanable,
    group_segments_by_size,
)
from odradek.log.log import PartitionLog
from odradek.records.batch import BatchView
from odradek.topic_config import LogConfig

COMPACT = dict(
    cleanup_policy=("compact",),
    segment_bytes=4096,
    index_interval_bytes=200,
    segment_index_bytes=4096,
)


def compact_config(**kw: object) -> LogConfig:
    return small_config(**{**COMPACT, **kw})


def latest_by_key(
    records: list[tuple[int, bytes | None, bytes | None, int]],
) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value, _ts in records:
        out[key] = (offset, value)
    return out


def write_keyed(
    log: PartitionLog, rounds: int, keys: int, *, roll_every: int = 0, codec: int = 0
) -> None:
    n = 0
    for r in range(rounds):
        for k in range(keys):
            log.append_as_leader(
                batch(
                    1, NOW + n, key=f"key-{k}".encode(), value=f"v{r}-{k}".encode() * 4, codec=codec
                ),
                0,
            )
            n += 1
            if roll_every and n % roll_every == 0:
                log.roll()
    log.high_watermark = log.log_end_offset


def test_compaction_keeps_the_latest_value_per_key_at_its_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config())
    write_keyed(log, rounds=6, keys=10, roll_every=15)
    before = read_everything(log)
    result = LogCleaner().clean(log, None, NOW)
    assert not result.aborted and result.records_removed > 0
    after = read_everything(log)
    # Everything below the cleaned end is the latest of its key; offsets kept (now sparse).
    latest = latest_by_key(before)
    for offset, key, value, _ts in after:
        if offset < result.end_offset:
            assert latest[key] == (offset, value)
    assert latest_by_key(after) == latest
    assert [r for r in after if r[0] >= result.end_offset] == [
        r for r in before if r[0] >= result.end_offset
    ]
    # The active segment is never cleaned.
    assert result.end_offset <= log.active_segment.base_offset
    # A fetch from an offset removed by compaction gets the next batch ending at or after it
    # (possibly an empty one that only carries offsets, which clients skip).
    gone = next(o for o, *_ in before if o not in {a[0] for a in after})
    rr = log.read(gone, 1 << 20)
    assert rr.size and batch_offsets(rr.records)[0][1] >= gone
    assert all(o > gone for o, *_ in decode_all(rr.records))
    log.close()
    reopened = open_log(tmp_path / "t-0", compact_config())
    assert read_everything(reopened) == after
    reopened.close()


def test_tombstones_survive_one_pass_then_go_after_the_delete_horizon(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config(delete_retention_ms=1000, segment_bytes=600))
    write_keyed(log, rounds=2, keys=5, roll_every=4)
    tombstone = log.append_as_leader(batch(1, NOW, key=b"key-1", value=None), 0).first_offset
    log.roll()
    for i in range(12):  # later data in later segments
        log.append_as_leader(batch(1, NOW, key=f"other-{i}".encode(), value=b"x" * 20), 0)
        if i % 3 == 2:
            log.roll()
    log.high_watermark = log.log_end_offset
    cleaner = LogCleaner()
    first = cleaner.clean(log, None, NOW)
    recs = read_everything(log)
    assert (tombstone, b"key-1", None) in [(o, k, v) for o, k, v, _t in recs]  # horizon 0: kept
    # The tombstone's segment ages past delete.retention.ms relative to the newest clean
    # segment; the next pass (over new dirty data) drops it.
    holder = next(s for s in reversed(log.segments) if s.base_offset <= tombstone)
    assert holder is not log.segments[-2]
    holder.set_last_modified(NOW - 10_000)
    for i in range(3):
        log.append_as_leader(batch(1, NOW, key=f"fresh-{i}".encode()), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    cleaner.clean(log, first.end_offset, NOW)
    recs = read_everything(log)
    assert b"key-1" not in [k for _o, k, _v, _t in recs]
    log.close()


def test_records_without_key_are_dropped(tmp_path: Path) -> None:
    # Keyless records reach a compacted log when cleanup.policy changes later (appends
    # to a compacted topic refuse them).
    log = open_log(tmp_path / "t-0", small_config())
    log.append_as_leader(batch(3, NOW, keys=[b"a", None, b"b"]), 0)
    log.update_config(compact_config())
    log.roll()
    log.append_as_leader(batch(1, NOW, key=b"c"), 0)
    log.high_watermark = log.log_end_offset
    LogCleaner().clean(log, None, NOW)
    assert [k for _o, k, _v, _t in read_everything(log)] == [b"a", b"b", b"c"]
    log.close()


def test_producers_last_batch_keeps_an_empty_header(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    log = open_log(d, compact_config())
    pid, epoch = 77, 3
    log.append_as_leader(batch(2, NOW, keys=[b"a", b"b"], pid=pid, epoch=epoch, seq=0), 0)
    log.append_as_leader(
        batch(2, NOW, keys=[b"a", b"b"], pid=pid, epoch=epoch, seq=2), 0
    )  # offsets 2-3
    log.roll()
    log.append_as_leader(
        batch(2, NOW, keys=[b"a", b"b"]), 0
    )  # non-idempotent overwrite, offsets 4-5
    log.roll()
    log.high_watermark = log.log_end_offset
    LogCleaner().clean(log, None, NOW)
    raw = log.read(0, 1 << 20).records
    views = []
    pos = 0
    while pos < len(raw):
        v = BatchView(raw, pos)
        views.append((v.base_offset, v.last_offset, v.record_count, v.producer_id, v.base_sequence))
        pos += v.size
    # The first producer batch is gone; the last one stays as an empty batch with its sequences.
    assert views == [(2, 3, 0, pid, 2), (4, 5, 2, -1, -1)]
    assert BatchView(raw, 0).is_valid()
    # After a crash without snapshots the state is rebuilt from that header.
    log.close_handles()
    for p in d.glob("*.snapshot"):
        p.unlink()
    log = open_log(d, compact_config())
    retry = batch(2, NOW, keys=[b"a", b"b"], pid=pid, epoch=epoch, seq=2)
    dup = log.append_as_leader(retry, 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (2, 3)
    assert not log.append_as_leader(
        batch(1, NOW, key=b"a", pid=pid, epoch=epoch, seq=4), 0
    ).duplicate
    log.close()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_rewritten_batches_keep_their_codec(tmp_path: Path, codec: int) -> None:
    log = open_log(tmp_path / "t-0", compact_config())
    for r in range(3):
        log.append_as_leader(
            batch(4, NOW, keys=[b"a", b"b", b"c", b"d"], value=f"{r}".encode() * 30, codec=codec), 0
        )
        log.append_as_leader(batch(1, NOW, key=b"a", value=b"z" * 40, codec=codec), 0)
    log.roll()
    log.append_as_leader(batch(1, NOW, key=b"e"), 0)
    log.high_watermark = log.log_end_offset
    LogCleaner().clean(log, None, NOW)
    raw = log.read(0, 1 << 20).records
    pos = 0
    while pos < len(raw):
        view = BatchView(raw, pos)
        if view.base_offset < log.active_segment.base_offset:
            assert int(view.compression) == codec
            assert view.is_valid()
            DefaultRecordBatch(bytes(view.raw())).validate_crc()
        pos += view.size
    assert latest_by_key(read_everything(log))[b"a"][1] == b"z" * 40
    log.close()


def test_grouping_merges_small_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config(segment_bytes=3000))
    write_keyed(log, rounds=4, keys=4, roll_every=2)
    groups = group_segments_by_size(log.segments[:-1], 3000, 4096, log.active_segment.base_offset)
    assert all(sum(s.size for s in g) <= 3000 for g in groups)
    assert any(len(g) > 1 for g in groups)
    before = log.segment_count
    LogCleaner().clean(log, None, NOW)
    assert log.segment_count < before
    log.close()


def test_dirty_ratio_lag_and_ordering(tmp_path: Path) -> None:
    a = open_log(tmp_path / "a-0", compact_config(min_cleanable_dirty_ratio=0.5))
    write_keyed(a, rounds=3, keys=4, roll_every=3)
    b = PartitionLog.open(tmp_path / "b-0", "b", 0, compact_config(min_cleanable_dirty_ratio=0.5))
    write_keyed(b, rounds=3, keys=4, roll_every=3)
    c = PartitionLog.open(tmp_path / "c-0", "c", 0, compact_config(min_compaction_lag_ms=3_600_000))
    write_keyed(c, rounds=3, keys=4, roll_every=3)
    res = LogCleaner().clean(b, None, NOW)
    # b's dirty section now starts at its checkpoint: nothing dirty, so not eligible.
    ratios = {
        "a": describe_cleanable(a, None, NOW).dirty_ratio,
        "b": describe_cleanable(b, res.end_offset, NOW).dirty_ratio,
    }
    assert ratios["a"] == 1.0 and ratios["b"] == 0.0
    chosen = cleanable_logs(
        [(("a", 0), a), (("b", 0), b), (("c", 0), c)], {("b", 0): res.end_offset}, NOW
    )
    # c is within min.compaction.lag.ms: nothing cleanable.
    assert [x.log.topic for x in chosen] == ["topic"]
    assert describe_cleanable(c, None, NOW).dirty_bytes == 0
    # Never past the high watermark's segment.
    a.high_watermark = a.segments[1].base_offset
    assert describe_cleanable(a, None, NOW).first_uncleanable_offset == a.segments[1].base_offset
    for log in (a, b, c):
        log.close()


def test_cleaning_on_a_worker_thread_while_appending_and_reading(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config(segment_bytes=1500))
    write_keyed(log, rounds=4, keys=8)
    errors: list[BaseException] = []
    done = threading.Event()
    cleaner = LogCleaner()

    def work() -> None:
        try:
            checkpoint = None
            for _ in range(5):
                checkpoint = cleaner.clean(log, checkpoint, NOW).end_offset
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    t = threading.Thread(target=work)
    t.start()
    i = 0
    while not done.is_set() or i < 50:
        log.append_as_leader(
            batch(1, NOW, key=f"key-{i % 8}".encode(), value=f"late-{i}".encode()), 0
        )
        log.high_watermark = log.log_end_offset
        decode_all(log.read(log.log_start_offset, 1 << 16).records)
        i += 1
    t.join()
    assert not errors
    final = latest_by_key(read_everything(log))
    for k in range(8):
        key = f"key-{k}".encode()
        last_i = max(j for j in range(i) if j % 8 == k)
        assert final[key][1] == f"late-{last_i}".encode()
    log.close()


def test_truncation_during_compaction_aborts_the_swap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config())
    write_keyed(log, rounds=4, keys=5, roll_every=6)
    before = read_everything(log)
    target = log.segments[1].base_offset + 1

    def truncate(the_log: PartitionLog) -> None:  # a follower truncating meanwhile
        the_log.truncate_to(target)

    result = LogCleaner(before_swap=truncate).clean(log, None, NOW)
    assert result.aborted
    assert read_everything(log) == [r for r in before if r[0] < target]
    assert [p.name for p in (tmp_path / "t-0").iterdir() if p.name.endswith(".cleaned")] == []
    log.close()


# -- crash safety: a real process killed at each step of the swap ------------------------
CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from odradek.log.cleaner import LogCleaner
    from odradek.log.log import PartitionLog
    from odradek.topic_config import LogConfig
    cfg = LogConfig(cleanup_policy=("compact",), segment_bytes=1200, index_interval_bytes=200,
                    segment_index_bytes=4096, file_delete_delay_ms=0)
    log = PartitionLog.open(Path(sys.argv[1]), "topic", 0, cfg, recovery_point=10**9, clean_shutdown=True)
    log.high_watermark = log.log_end_offset
    LogCleaner().clean(log, None, int(sys.argv[2]))
    print("finished without crashing")
    """
)


def _crash_config() -> LogConfig:
    return LogConfig(
        cleanup_policy=("compact",),
        segment_bytes=1200,
        index_interval_bytes=200,
        segment_index_bytes=4096,
        file_delete_delay_ms=0,
    )


def test_killed_at_every_step_of_compaction_recovers_a_valid_log(tmp_path: Path) -> None:
    src = tmp_path / "src" / "topic-0"
    log = PartitionLog.open(src, "topic", 0, _crash_config())
    write_keyed(log, rounds=5, keys=6, roll_every=4)  # small segments: multi-segment groups
    log.close()
    original = _contents(src)

    # The fully compacted state, and where its groups begin.
    full = tmp_path / "full" / "topic-0"
    shutil.copytree(src, full)
    done = PartitionLog.open(
        full, "topic", 0, _crash_config(), recovery_point=10**9, clean_shutdown=True
    )
    done.high_watermark = done.log_end_offset
    result = LogCleaner().clean(done, None, NOW)
    compacted = read_everything(done)
    group_bases = [s.base_offset for s in done.segments if s.base_offset < result.end_offset]
    done.close()
    assert len(group_bases) >= 2
    boundaries = [*group_bases[1:], result.end_offset]
    states = [original] + [
        [r for r in compacted if r[0] < b] + [r for r in original if r[0] >= b] for b in boundaries
    ]

    env = dict(os.environ)
    procs = {}
    for point in CRASH_POINTS:
        d = tmp_path / point / "topic-0"
        shutil.copytree(src, d)
        procs[point] = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(d), str(NOW)],
            env={**env, CRASH_ENV: point},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    for point, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 86, (point, out, err)
        d = tmp_path / point / "topic-0"
        log = PartitionLog.open(d, "topic", 0, _crash_config())  # unclean: full recovery
        got = read_everything(log)
        assert got in states, point
        assert latest_by_key(got) == latest_by_key(original), point
        leftovers = [
            p.name for p in d.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted"))
        ]
        assert leftovers == [], point
        # And the log stays usable: a new pass completes the compaction.
        log.high_watermark = log.log_end_offset
        LogCleaner().clean(log, None, NOW)
        assert latest_by_key(read_everything(log)) == latest_by_key(original), point
        log.close()


def _contents(path: Path) -> list[tuple[int, bytes | None, bytes | None, int]]:
    log = PartitionLog.open(
        path, "topic", 0, _crash_config(), recovery_point=10**9, clean_shutdown=True
    )
    try:
        return read_everything(log)
    finally:
        log.close()


def test_repeated_passes_do_not_accumulate_empty_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compact_config(segment_bytes=1500))
    checkpoint = None
    cleaner = LogCleaner()
    for _r in range(6):
        write_keyed(log, rounds=2, keys=4, roll_every=3)
        log.roll()
        log.high_watermark = log.log_end_offset
        checkpoint = cleaner.clean(log, checkpoint, NOW).end_offset
    raw = log.read(0, 1 << 20).records
    empties = 0
    for seg in log.segments:
        for b in seg.iter_headers():
            empties += b.header.records_count == 0
    assert empties <= len(log.segments)
    assert len(latest_by_key(read_everything(log))) == 4
    assert raw
    log.close()
