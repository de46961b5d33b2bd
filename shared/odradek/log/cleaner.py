"""Log compaction for ``cleanup.policy=compact`` (Kafka's LogCleaner), crash-safe at every step.

The log is split at the cleaner checkpoint (``cleaner-offset-checkpoint``): below it the
clean section, from it the dirty section up to the first uncleanable offset (the active
segment, the high watermark's segment, the last stable offset, or the first segment
younger than ``min.compaction.lag.ms``). A pass:

1. maps every key of the dirty section to its latest offset (records of aborted
   transactions are not mapped);
2. regroups the segments from the log start to the end of the mapped section
   (consecutive segments whose sizes sum to at most ``segment.bytes``, whose indexes fit
   ``segment.index.bytes`` and whose offsets fit int32 relative offsets);
3. writes each group into one ``<base>.log.cleaned`` segment keeping, batch by batch,
   the records that are the latest for their key. Tombstones (null values) go once their
   segment's mtime is older than the delete horizon (the last clean segment's mtime
   minus ``delete.retention.ms``). Records without a key are dropped (Kafka rejects
   them in compacted topics and its cleaner discards them). A rewritten batch keeps
   its baseOffset, lastOffsetDelta, producer fields, epoch and codec (recompressed);
   a batch whose records all go is dropped, unless it is its producer's last batch,
   whose header stays as an empty batch so the producer's sequence and epoch survive
   (Kafka's ``LogCleaner``: the last batch of each producer is kept, KIP-98).
   Transactions (:mod:`odradek.log.cleaned_transactions`): batches
   of aborted transactions lose all their records; COMMIT/ABORT markers stay while data
   of their transaction remains, then get a delete horizon (``delete.retention.ms``)
   and go in a pass after it, as in Kafka; the new segment's ``.txnindex`` keeps the
   aborted transactions whose markers stay. When the group's last batch went entirely,
   an empty batch spanning its offsets ends the new segment, so the segment ends at the
   same offset as the group it replaces;
4. fsyncs it (with its ``.txnindex``), renames it ``.cleaned`` -> ``.swap``, swaps it
   into the segment list, renames the old segments ``.deleted`` and the swap to its
   final name.

Crash safety: a crash before step 4's first rename leaves ``.cleaned`` files that
recovery deletes (old segments intact); from ``.log.swap`` on, recovery completes the
swap (deleting the old segments in the swap's offset range). The named crash points
(``CRASH_POINTS``) let tests kill a real process at each step via the
``ODRADEK_CLEANER_CRASH_AT`` environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.config_catalog.definition import LONG_MAX
from odradek.config_catalog.storage import STORAGE_CONFIGS
from odradek.log.checkpoints import fsync_dir
from odradek.log.cleaned_transactions import CleanedTransactionMetadata
from odradek.log.log import PartitionLog
from odradek.log.segment import CLEANED_SUFFIX, LogSegment
from odradek.records.batch import BatchView
from odradek.records.control import EndTransactionMarker, read_end_txn_marker
from odradek.records.errors import RecordsError
from odradek.records.header import BatchHeader, TimestampType, read_batch_header
from odradek.records.record import (
    BatchBuilder,
    DecodedBatch,
    DecodedRecord,
    build_empty_batch,
    decode_batch,
)

CRASH_ENV = "ODRADEK_CLEANER_CRASH_AT"
CRASH_POINTS = (
    "after_cleaned_written",
    "mid_swap_rename",
    "after_swap_rename",
    "after_segment_list_swap",
    "after_first_old_deleted",
    "after_old_deleted",
    "mid_swap_final",
    "after_swap_final",
)
DEFAULT_DEDUPE_BUFFER_SIZE = STORAGE_CONFIGS.int("log.cleaner.dedupe.buffer.size")
_ENTRY_BYTES = 24  # Kafka's SkimpyOffsetMap: 16-byte hash + 8-byte offset
_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor


def crash_point(name: str) -> None:
    """Kill the process here when the test harness asks for it."""
    if os.environ.get(CRASH_ENV) == name:
        os._exit(86)


@dataclass(frozen=True)
class CleanableLog:
    log: PartitionLog
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool = False

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(frozen=True)
class CleanResult:
    end_offset: int  # the new cleaner checkpoint
    groups: int
    bytes_read: int
    bytes_written: int
    records_removed: int
    aborted: bool = False


def cleanable_offsets(log: PartitionLog, checkpoint: int | None, now_ms: int) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) as Kafka's LogCleanerManager computes."""
    lso = log.log_start_offset
    first_dirty = lso if checkpoint is None else checkpoint
    if first_dirty < lso or first_dirty > log.log_end_offset:
        first_dirty = lso
    segs = log.segments
    bases = [s.base_offset for s in segs]
    candidates = [segs[-1].base_offset, log.last_stable_offset]
    hw = log.high_watermark
    hw_seg = max(i for i, b in enumerate(bases) if b <= hw) if bases[0] <= hw else 0
    candidates.append(bases[hw_seg])
    lag = max(log.config.min_compaction_lag_ms, 0)
    if lag > 0:
        for i, seg in enumerate(segs[:-1]):
            if bases[i + 1] <= first_dirty:
                continue
            if seg.largest_timestamp > now_ms - lag:
                candidates.append(seg.base_offset)
                break
    return first_dirty, min(candidates)


def describe_cleanable(log: PartitionLog, checkpoint: int | None, now_ms: int) -> CleanableLog:
    first_dirty, uncleanable = cleanable_offsets(log, checkpoint, now_ms)
    segs = log.segments
    clean = dirty = 0
    earliest_dirty_ts: int | None = None
    for i, seg in enumerate(segs[:-1]):
        next_base = segs[i + 1].base_offset
        if next_base <= log.log_start_offset:
            continue
        if next_base <= first_dirty:
            clean += seg.size
        elif next_base <= uncleanable:
            dirty += seg.size
            ts = seg.rolling_based_timestamp()
            if ts is not None and ts >= 0 and earliest_dirty_ts is None:
                earliest_dirty_ts = ts
    max_lag = log.config.max_compaction_lag_ms
    must = (
        max_lag < LONG_MAX
        and dirty > 0
        and earliest_dirty_ts is not None
        and earliest_dirty_ts < now_ms - max_lag
    )
    return CleanableLog(log, first_dirty, uncleanable, clean, dirty, must)


def cleanable_logs(
    logs: Iterable[tuple[tuple[str, int], PartitionLog]],
    checkpoints: Mapping[tuple[str, int], int],
    now_ms: int,
) -> list[CleanableLog]:
    """Compacted logs worth cleaning, dirtiest first (``min.cleanable.dirty.ratio``)."""
    out = []
    for tp, log in logs:
        if not log.config.compact or log.closed:
            continue
        c = describe_cleanable(log, checkpoints.get(tp), now_ms)
        if c.dirty_bytes <= 0:
            continue
        if c.must_clean or c.dirty_ratio >= log.config.min_cleanable_dirty_ratio:
            out.append(c)
    out.sort(key=lambda c: (not c.must_clean, -c.dirty_ratio))
    return out


def group_segments_by_size(
    segments: Sequence[LogSegment],
    max_size: int,
    max_index_size: int,
    first_uncleanable_offset: int,
) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments that fit one new segment."""
    groups: list[list[LogSegment]] = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_size = segs[i].size
        index_size = segs[i].offset_index.size_in_bytes()
        time_size = segs[i].time_index.size_in_bytes()
        i += 1
        while i < len(segs):
            s = segs[i]
            last_offset = (
                segs[i + 1].base_offset if i + 1 < len(segs) else first_uncleanable_offset
            ) - 1
            if (
                log_size + s.size <= max_size
                and index_size + s.offset_index.size_in_bytes() <= max_index_size
                and time_size + s.time_index.size_in_bytes() <= max_index_size
                and (s.size == 0 or last_offset - group[0].base_offset <= 0x7FFFFFFF)
            ):
                group.append(s)
                log_size += s.size
                index_size += s.offset_index.size_in_bytes()
                time_size += s.time_index.size_in_bytes()
                i += 1
            else:
                break
        groups.append(group)
    return groups


class LogCleaner:
    """Cleans one log at a time; safe to run on a worker thread next to appends/reads."""

    def __init__(
        self,
        dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
        *,
        before_swap: Callable[[PartitionLog], None] | None = None,
    ) -> None:
        self.max_map_entries = max(1, int(dedupe_buffer_size // _ENTRY_BYTES * _LOAD_FACTOR))
        self.before_swap = before_swap  # observes the moment between writing and swapping

    def clean(self, log: PartitionLog, checkpoint: int | None, now_ms: int) -> CleanResult:
        truncations = log.truncations
        first_dirty, uncleanable = cleanable_offsets(log, checkpoint, now_ms)
        segs = log.segments
        if uncleanable <= first_dirty:
            return CleanResult(first_dirty, 0, 0, 0, 0)
        key_map, end_offset, bytes_read = self._build_offset_map(
            log, segs, first_dirty, uncleanable
        )
        if end_offset <= first_dirty:
            return CleanResult(first_dirty, 0, bytes_read, 0, 0)
        clean_section = [
            s for i, s in enumerate(segs[:-1]) if segs[i + 1].base_offset <= first_dirty
        ]
        if clean_section:
            delete_horizon = clean_section[-1].last_modified_ms - log.config.delete_retention_ms
        else:
            delete_horizon = 0
        to_clean = [
            s
            for i, s in enumerate(segs[:-1])
            if segs[i + 1].base_offset <= end_offset
            and segs[i + 1].base_offset > log.log_start_offset
        ]
        groups = group_segments_by_size(
            to_clean, log.config.segment_bytes, log.config.segment_index_bytes, end_offset
        )
        last_records = log.producer_state.active_producers_last_records()
        txns = CleanedTransactionMetadata()
        written = removed = 0
        for group in groups:
            result = self._clean_segments(
                log, group, key_map, delete_horizon, last_records, truncations, txns, now_ms
            )
            if result is None:
                return CleanResult(
                    first_dirty, len(groups), bytes_read, written, removed, aborted=True
                )
            w, r = result
            written += w
            removed += r
        return CleanResult(end_offset, len(groups), bytes_read, written, removed)

    def _build_offset_map(
        self, log: PartitionLog, segs: Sequence[LogSegment], first_dirty: int, uncleanable: int
    ) -> tuple[dict[bytes, int], int, int]:
        key_map: dict[bytes, int] = {}
        end = first_dirty
        read = 0
        txns = CleanedTransactionMetadata()
        txns.add_aborted_transactions(log.collect_aborted_transactions(first_dirty, uncleanable))
        for i, seg in enumerate(segs[:-1]):
            next_base = segs[i + 1].base_offset
            if next_base <= first_dirty:
                continue
            if next_base > uncleanable:
                break
            seg_map: dict[bytes, int] = {}
            for b, data in seg.iter_batches():
                read += b.size
                h = b.header
                if h.is_control:
                    txns.on_control_batch_read(h, _marker(data))
                    continue
                if txns.on_batch_read(h) or h.last_offset < first_dirty:
                    continue  # aborted records are removed whatever their keys
                for rec in decode_batch(data, 0, verify_crc=False).records:
                    if rec.key is not None and rec.offset >= first_dirty:
                        seg_map[rec.key] = rec.offset
            if key_map and len(key_map) + len(seg_map) > self.max_map_entries:
                break  # the map is full: stop at this segment boundary
            key_map.update(seg_map)
            end = next_base
        return key_map, end, read

    def _clean_segments(
        self,
        log: PartitionLog,
        group: list[LogSegment],
        key_map: dict[bytes, int],
        delete_horizon_ms: int,
        last_records: dict[int, tuple[int, int]],
        truncations: int,
        txns: CleanedTransactionMetadata,
        now_ms: int,
    ) -> tuple[int, int] | None:
        first = group[0]
        cleaned = LogSegment(
            log.dir,
            first.base_offset,
            log.segment_settings(),
            active=True,
            suffix=CLEANED_SUFFIX,
            create=True,
        )
        removed = 0
        last_written = -1
        last_seen: BatchHeader | None = None
        try:
            segs = log.segments
            for n, seg in enumerate(group):
                # The whole segment's aborted transactions: the new index must hold them all.
                if n + 1 < len(group):
                    upper = group[n + 1].base_offset
                else:
                    later = [s.base_offset for s in segs if s.base_offset > seg.base_offset]
                    upper = later[0] if later else seg.read_next_offset()
                txns.add_aborted_transactions(
                    log.collect_aborted_transactions(seg.base_offset, upper)
                )
                retain_deletes = seg.last_modified_ms > delete_horizon_ms
                for b, data in seg.iter_batches():
                    h = last_seen = b.header
                    out, dropped = filter_batch(
                        h,
                        data,
                        key_map,
                        retain_deletes,
                        last_records,
                        txns,
                        now_ms=now_ms,
                        delete_retention_ms=log.config.delete_retention_ms,
                    )
                    removed += dropped
                    if out is None:
                        continue
                    cleaned.append(out, [read_batch_header(out)])
                    last_written = h.last_offset
                cleaned.txn_index.extend(txns.take_retained())
            if last_seen is not None and last_seen.last_offset > last_written:
                # Keep the group's end offset in the new segment (see end_marker_batch).
                marker = end_marker_batch(last_seen)
                cleaned.append(marker, [read_batch_header(marker)])
            cleaned.on_become_inactive()
            cleaned.set_last_modified(max(s.last_modified_ms for s in group))
            cleaned.flush()
            fsync_dir(log.dir)
            crash_point("after_cleaned_written")
            if self.before_swap is not None:
                self.before_swap(log)
            size = cleaned.size
            cleaned.close_handles_of_indexes()
            if not log.replace_segments(cleaned, group, crash_point, truncations):
                cleaned.delete_files()
                return None
        except BaseException:
            if cleaned.suffix == CLEANED_SUFFIX:
                cleaned.delete_files()
            raise
        fsync_dir(log.dir)
        return size, removed


def end_marker_batch(h: BatchHeader) -> bytes:
    """An empty batch (no records, no producer) spanning the removed last batch's offsets.

    It makes a cleaned segment end exactly where its group ended, so a crash between
    the swap and the deletion of the old segments recovers by deleting exactly the
    segments within ``[swap base, swap next offset)``; without it a group whose last
    batches all went would leave old segments behind. Consumers skip empty batches
    (Kafka's cleaner writes them too, for producer state).
    """
    return build_empty_batch(
        base_offset=h.base_offset,
        last_offset=h.last_offset,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        timestamp=h.max_timestamp,
        partition_leader_epoch=h.partition_leader_epoch,
        timestamp_type=h.timestamp_type,
    )


def _marker(data: bytes) -> EndTransactionMarker | None:
    try:
        return read_end_txn_marker(data)
    except RecordsError:
        return None


def _is_last_record_of_producer(h: BatchHeader, last_records: dict[int, tuple[int, int]]) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch holding a live producer's last data
    offset, or (no data left) a marker of its current epoch."""
    last = last_records.get(h.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset >= 0:
        return h.last_offset == last_data_offset
    return h.is_control and h.producer_epoch == epoch


def _empty_header(h: BatchHeader) -> bytes:
    return build_empty_batch(
        base_offset=h.base_offset,
        last_offset=h.last_offset,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        timestamp=h.max_timestamp,
        partition_leader_epoch=h.partition_leader_epoch,
        timestamp_type=h.timestamp_type,
        is_transactional=h.is_transactional,
        is_control=h.is_control,
    )


def _rebuilt(
    decoded: DecodedBatch,
    records: Iterable[DecodedRecord],
    *,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """The batch re-encoded holding ``records`` (all or some of its own), its header
    fields kept, its last offset delta too (and so its last sequence), as Kafka's
    cleaner keeps them."""
    log_append = decoded.timestamp_type == TimestampType.LOG_APPEND_TIME
    builder = BatchBuilder(
        base_offset=decoded.base_offset,
        compression=decoded.compression,
        timestamp_type=decoded.timestamp_type,
        log_append_time=decoded.max_timestamp if log_append else None,
        producer_id=decoded.producer_id,
        producer_epoch=decoded.producer_epoch,
        base_sequence=decoded.base_sequence,
        is_transactional=decoded.is_transactional,
        is_control=decoded.is_control,
        partition_leader_epoch=decoded.partition_leader_epoch,
        delete_horizon_ms=delete_horizon_ms,
    )
    for rec in records:
        builder.append(
            rec.timestamp, rec.key, rec.value, rec.headers, offset_delta=rec.offset_delta
        )
    out = bytearray(builder.build())
    BatchView(out).set_last_offset_delta(decoded.last_offset_delta)
    return bytes(out)


def _with_delete_horizon(decoded: DecodedBatch, horizon_ms: int) -> bytes:
    """The batch rewritten with a KIP-534 delete horizon (records, offsets, producer kept)."""
    return _rebuilt(decoded, decoded.records, delete_horizon_ms=horizon_ms)


def _filter_control_batch(
    h: BatchHeader,
    data: bytes,
    last_records: dict[int, tuple[int, int]],
    txns: CleanedTransactionMetadata,
    now_ms: int,
    delete_retention_ms: int,
) -> tuple[bytes | None, int]:
    """Markers stay while their transaction has data; then a delete horizon; then they go."""
    can_discard = txns.on_control_batch_read(h, _marker(data) if h.records_count else None)
    if h.records_count == 0 or (
        can_discard and h.has_delete_horizon and h.base_timestamp <= now_ms
    ):
        if h.producer_id >= 0 and _is_last_record_of_producer(h, last_records):
            return (data if h.records_count == 0 else _empty_header(h)), h.records_count
        return None, h.records_count
    if can_discard and not h.has_delete_horizon:
        decoded = decode_batch(data, 0, verify_crc=False)
        return _with_delete_horizon(decoded, now_ms + delete_retention_ms), 0
    return data, 0


def filter_batch(
    h: BatchHeader,
    data: bytes,
    key_map: dict[bytes, int],
    retain_deletes: bool,
    last_records: dict[int, tuple[int, int]],
    txns: CleanedTransactionMetadata | None = None,
    *,
    now_ms: int = 0,
    delete_retention_ms: int = 0,
) -> tuple[bytes | None, int]:
    """The batch as compaction leaves it (None: dropped) and how many records went."""
    if txns is None:
        txns = CleanedTransactionMetadata()
    if h.is_control:
        return _filter_control_batch(h, data, last_records, txns, now_ms, delete_retention_ms)
    aborted = txns.on_batch_read(h)
    decoded = decode_batch(data, 0, verify_crc=False)
    pid = decoded.producer_id
    is_last = pid >= 0 and _is_last_record_of_producer(h, last_records)
    if decoded.record_count == 0:
        # An empty header survives only while it is its producer's last batch; the
        # offset-keeping markers of earlier passes are re-added where still needed.
        if is_last:
            return data, 0
        return None, 0
    retained = []
    if not aborted:  # records of an aborted transaction go whatever their keys
        for rec in decoded.records:
            if rec.key is None:
                continue
            latest = key_map.get(rec.key)
            if latest is not None and rec.offset < latest:
                continue
            if rec.value is None and not retain_deletes:
                continue
            retained.append(rec)
    dropped = decoded.record_count - len(retained)
    if not dropped:
        return data, 0
    if retained:
        return _rebuilt(decoded, retained), dropped
    if is_last:
        return _empty_header(h), dropped
    return None, dropped
