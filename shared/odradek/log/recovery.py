"""Loading a partition directory into segments, recovering it after a crash (Kafka's LogLoader).

Steps, in order:

1. Stray files: ``*.deleted`` (a deletion in progress) are removed; ``*.cleaned``
   (a compaction that had not finished writing) are removed; ``*.swap`` files are
   completed when no ``.cleaned`` file at or below their base offset remains (the
   compaction had reached its swap phase): the old segments the swap replaces are
   removed and the swap renamed into place; otherwise they are removed, leaving the
   original segments. Index ``.swap`` files are dropped (indexes are rebuilt).
2. Every ``.log`` becomes a segment; missing or implausible indexes (``.index``,
   ``.timeindex``, ``.txnindex``) are rebuilt.
3. Without a clean shutdown, every segment from the one holding the recovery point
   on is re-validated batch by batch (sizes, magic, CRC-32C, increasing offsets);
   the first bad byte truncates that segment, and every later segment is deleted.
   A batch reaching the next segment's base offset is bad too (the CRC does not
   cover the base offset, Kafka's DefaultRecordBatch).
   No batch before the first corruption is ever dropped.
4. The leader epoch cache loses entries above the log end offset; producer state is
   reloaded from the newest snapshot at or below the log end offset and brought
   forward by replaying batch headers (and the markers of control batches), which
   re-registers ongoing transactions for the last stable offset.

Rebuilding a segment's ``.txnindex`` (steps 2 and 3) needs the producer state at the
segment's base offset (which transaction each ABORT marker ends, and the LSO of that
moment): as Kafka's LogLoader.recoverSegment, the state is rebuilt up to the segment
(newest snapshot at or below its base, then replay), the segment is recovered with it,
and a snapshot at the segment's end saves the next segment the replay.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.log.index_file import CorruptIndexError
from odradek.log.leader_epoch import LeaderEpochCache
from odradek.log.producer_state import ProducerStateManager
from odradek.log.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    SegmentSettings,
    segment_paths,
    txn_index_path,
)
from odradek.log.transaction_index import TXN_INDEX_SUFFIX
from odradek.records.control import read_end_txn_marker
from odradek.records.errors import RecordsError


@dataclass
class LoadResult:
    segments: list[LogSegment]
    log_end_offset: int
    log_start_offset: int
    recovery_point: int
    truncated_bytes: int
    recovered_segments: int


def _base_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def remove_temp_files_and_complete_swaps(
    directory: Path, settings: SegmentSettings, max_message_size: int
) -> None:
    """Step 1: make the directory hold only final segment files."""
    min_cleaned = None
    swaps: list[int] = []
    txn_swaps: list[int] = []
    for name in sorted(os.listdir(directory)):
        path = directory / name
        if name.endswith(DELETED_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        elif name.endswith(CLEANED_SUFFIX):
            base = _base_of(name)
            if base is not None:
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        elif name.endswith(SWAP_SUFFIX):
            base = _base_of(name)
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and base is not None:
                swaps.append(base)
            elif name.endswith(TXN_INDEX_SUFFIX + SWAP_SUFFIX) and base is not None:
                txn_swaps.append(base)  # cannot be rebuilt without producer state: kept
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        elif name.endswith(".tmp") and (
            name.endswith(".snapshot.tmp") or name.startswith("leader-epoch")
        ):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    for base in swaps:
        log_swap = segment_paths(directory, base, SWAP_SUFFIX)[0]
        if min_cleaned is not None and base >= min_cleaned:
            # The compaction that wrote it had not finished renaming .cleaned -> .swap.
            log_swap.unlink()
            with contextlib.suppress(FileNotFoundError):
                txn_index_path(directory, base, SWAP_SUFFIX).unlink()
            continue
        swap = LogSegment(directory, base, settings, active=False, suffix=SWAP_SUFFIX)
        try:
            swap.rebuild_indexes(max_message_size)
            next_offset = swap.read_next_offset()
        finally:
            swap.close_handles()
        for p in segment_paths(directory, base, SWAP_SUFFIX)[1:]:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        # Remove every segment the swap replaces: bases in [swap base, swap next offset).
        for name in os.listdir(directory):
            b = _base_of(name)
            if b is None or not (base <= b < max(next_offset, base + 1)):
                continue
            if name.endswith((LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                with contextlib.suppress(FileNotFoundError):
                    (directory / name).unlink()
        os.replace(log_swap, segment_paths(directory, base)[0])
    for base in txn_swaps:
        # Completed swaps renamed theirs above; one left behind belongs to a swap whose
        # final rename stopped after the log (keep it), or to a discarded one (drop it).
        swap_path = txn_index_path(directory, base, SWAP_SUFFIX)
        if not swap_path.exists():
            continue
        if segment_paths(directory, base)[0].exists():
            os.replace(swap_path, txn_index_path(directory, base))
        else:
            swap_path.unlink()


def _delete_orphan_indexes(directory: Path, bases: set[int]) -> None:
    for name in os.listdir(directory):
        if name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            b = _base_of(name)
            if b is not None and b not in bases:
                with contextlib.suppress(FileNotFoundError):
                    (directory / name).unlink()


def load_segments(
    directory: Path,
    settings_for: Callable[[int], SegmentSettings],
    *,
    recovery_point: int,
    log_start_offset: int,
    clean_shutdown: bool,
    max_message_size: int,
    epoch_cache: LeaderEpochCache | None,
    jitter_for: Callable[[], int] = lambda: 0,
    producer_state: ProducerStateManager | None = None,
) -> LoadResult:
    """Steps 1-3: returns the segments (the last one active) and the recovered log end.

    ``producer_state`` (the log's, reloaded afterwards anyway) lets recovered segments
    rebuild their ``.txnindex``; without it transaction indexes are left as found.
    """

    def recover(
        seg: LogSegment,
        before: Sequence[LogSegment],
        *,
        epochs: bool,
        snapshot: bool = True,
        offset_limit: int | None = None,
    ) -> int:
        if producer_state is not None:
            rebuild_producer_state(
                producer_state,
                before,
                log_start_offset=min(max(log_start_offset, 0), seg.base_offset),
                log_end_offset=seg.base_offset,
                now_ms=None,
                take_snapshot=False,
            )
        if epochs:
            truncated = seg.recover(
                max_message_size, producer_state, epoch_cache, offset_limit=offset_limit
            )
        else:
            truncated = seg.rebuild_indexes(max_message_size, producer_state)
        if producer_state is not None and snapshot:
            producer_state.take_snapshot()
        return truncated

    settings = settings_for(0)
    remove_temp_files_and_complete_swaps(directory, settings, max_message_size)
    bases = sorted(
        b
        for name in os.listdir(directory)
        if name.endswith(LOG_SUFFIX) and (b := _base_of(name)) is not None
    )
    _delete_orphan_indexes(directory, set(bases))
    segments: list[LogSegment] = []
    recovered = 0
    for i, base in enumerate(bases):
        seg = LogSegment(directory, base, settings, active=False, roll_jitter_ms=jitter_for())
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        try:
            seg.sanity_check(next_base)
        except (FileNotFoundError, CorruptIndexError):
            recover(seg, segments, epochs=False)
            recovered += 1
        seg.close_handles_of_indexes()
        segments.append(seg)

    truncated_total = 0
    if not segments:
        start = max(log_start_offset, 0)
        segments.append(
            LogSegment(
                directory, start, settings, active=True, create=True, roll_jitter_ms=jitter_for()
            )
        )
    elif not clean_shutdown:
        # Recover from the segment holding the recovery point through the end.
        first = 0
        for i, seg in enumerate(segments):
            if seg.base_offset <= recovery_point:
                first = i
        i = first
        while i < len(segments):
            seg = segments[i]
            # No snapshot after the last one: the final replay then keeps its producers'
            # last 5 batches for duplicate detection, not just the last.
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            truncated = recover(
                seg,
                segments[:i],
                epochs=True,
                snapshot=next_base is not None,
                offset_limit=next_base,
            )
            recovered += 1
            truncated_total += truncated
            if truncated > 0 and i + 1 < len(segments):
                for later in segments[i + 1 :]:
                    later.delete_files()
                del segments[i + 1 :]
            i += 1

    # A recovered segment can end up empty; only the last one may be (the active one).
    while len(segments) > 1 and segments[-1].size == 0 and segments[-2].size == 0:
        segments.pop().delete_files()
    active = segments[-1]
    active.make_active()
    log_end = active.read_next_offset() if active.size else active.base_offset
    if len(segments) > 1 and active.size == 0:
        log_end = max(log_end, segments[-2].read_next_offset())
    start = max(log_start_offset, segments[0].base_offset)
    rp = log_end if clean_shutdown else min(recovery_point, log_end)
    return LoadResult(segments, log_end, start, rp, truncated_total, recovered)


def rebuild_producer_state(
    producer_state: ProducerStateManager,
    segments: Sequence[LogSegment],
    *,
    log_start_offset: int,
    log_end_offset: int,
    now_ms: int | None,
    take_snapshot: bool = True,
) -> int:
    """Step 4: newest snapshot <= log end, then replay headers up to the log end.

    Returns the number of batches replayed.
    """
    producer_state.delete_snapshots_above(log_end_offset)
    loaded = producer_state.load_latest_snapshot(log_end_offset, now_ms)
    start = max(loaded if loaded is not None else log_start_offset, log_start_offset)
    if loaded is None or loaded < log_start_offset:
        producer_state.clear_state()
    replayed = 0
    if start < log_end_offset:
        for i, seg in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if next_base is not None and next_base <= start:
                continue
            if seg.base_offset >= log_end_offset:
                break
            begin = 0
            if seg.base_offset < start:
                found = seg.translate_offset(start)
                if found is None:
                    continue
                begin = found.position
            for b in seg.iter_headers(begin):
                h = b.header
                if h.base_offset >= log_end_offset:
                    break
                if h.last_offset < start:
                    continue
                marker = None
                if h.is_control and h.producer_id >= 0:
                    try:
                        marker = read_end_txn_marker(seg.read_bytes(b.position, b.size))
                    except RecordsError:
                        marker = None
                producer_state.update_from_batch(h, marker)
                replayed += 1
    producer_state.update_map_end_offset(log_end_offset)
    if take_snapshot and replayed:
        producer_state.take_snapshot()
    return replayed
