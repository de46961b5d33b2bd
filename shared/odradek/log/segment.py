"""One log segment: the ``.log`` file of record batches plus its ``.index``, ``.timeindex``
and ``.txnindex``.

Files, named by the segment's base offset zero-padded to 20 digits::

    00000000000003257573.log        v2 record batches exactly as on the wire
    00000000000003257573.index      offset -> position  (see offset_index)
    00000000000003257573.timeindex  timestamp -> offset (see time_index)
    00000000000003257573.txnindex   aborted transactions whose ABORT marker is in this
                                    segment (see transaction_index; only once one exists)

``.log`` byte layout: batches back to back, no header or padding. Each batch starts
with ``int64 baseOffset, int32 batchLength`` (layout in :mod:`odradek.records.header`),
so the file is walked by sizes alone; ``baseOffset`` holds absolute offsets. Headers
are read only through :mod:`odradek.records.header`: appends take the typed
``BatchHeader`` of each batch, scans yield ``LocatedBatch`` (file position plus
header); no byte offsets into a header appear here.

Invariants: the first batch's baseOffset >= the segment base offset; batch offsets
strictly increase (gaps only after compaction); every offset in the segment fits an
int32 relative to the base; ``size`` is the byte length of the valid batches. The
offset index gets an entry ``(batch last offset, batch position)`` whenever more
than ``index.interval.bytes`` were appended since the previous entry; the time index
gets ``(max timestamp so far, last offset of the batch holding it)`` at the same
moments, and once more when the segment stops being active.

Crash behaviour: appends are one ``pwrite`` per produce at the tracked end position
and are durable only after :meth:`LogSegment.flush`. After a crash the file may end
in a partial batch, garbage, or zeros (a preallocated or grown-but-unwritten tail);
:meth:`LogSegment.recover` validates every batch (size bounds, magic, CRC-32C,
increasing offsets), truncates at the first invalid byte and rebuilds both indexes;
given the producer state at the segment's base offset it also rebuilds ``.txnindex``.

Tail reads: followers, consumers and the high watermark bound of a consumer read ask
for offsets near the end of the active segment, up to ``index.interval.bytes`` past
the last index entry (about fifty headers with one-record batches). The positions of
the latest appended batches are kept in memory, so such a lookup reads one header
instead of scanning; truncation and recovery forget them. The bytes of the latest
appends (up to ``RECENT_BYTES``, contiguous up to the end of the file) are kept too:
with one-record acks=all requests each append is read right away by every follower
and by the consumers, a header and then the batch each, and those reads are served
from memory instead of two ``pread`` calls per reader (issue 18). Those readers all
ask for the same bytes (from the new batch to the log end or the high watermark), so
the latest small read that ran to its limit is kept and handed to the next reader
asking the same while nothing was appended. Both are dropped with the positions
(truncation, recovery), at roll and at close.

Concurrency: readers use ``pread`` only (no shared file position), so a worker
thread may read, recover or flush a segment that the loop thread does not append to.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from odradek.config_catalog.topic import TOPIC_CONFIGS
from odradek.log.file_range import FileRange
from odradek.log.index_file import CorruptIndexError, IndexFile
from odradek.log.leader_epoch import LeaderEpochCache
from odradek.log.offset_index import OffsetIndex
from odradek.log.producer_state import ProducerStateManager
from odradek.log.time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset
from odradek.log.transaction_index import (
    TXN_INDEX_SUFFIX,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
)
from odradek.records.batch import compute_crc
from odradek.records.control import read_end_txn_marker
from odradek.records.errors import CorruptRecordError as _BatchCorrupt
from odradek.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Buffer,
    LocatedBatch,
    read_located_batch,
)
from odradek.records.record import decode_batch

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

IndexT = TypeVar("IndexT", bound=IndexFile)
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
INT32_MAX = 0x7FFFFFFF

_MIN_BATCH = HEADER_SIZE  # 61: a v2 batch with no records
_SCAN_CHUNK = 64 * 1024
_FIRST_CHUNK = 4 * 1024
_RECOVER_CHUNK = 4 * 1024 * 1024
_TAIL_BATCHES = 256  # latest batch positions kept for tail reads (see the module docstring)
# Bytes of the latest appends kept for tail reads, and the largest read answer kept to
# be shared (see the module docstring): small, since every active partition holds them.
RECENT_BYTES = 16 * 1024
# A lazy read (LogSegment.read) at least this large is a FileRange: below it the
# descriptor's dup and close cost more than the copies saved.
LAZY_FROM_BYTES = 64 * 1024


def log_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{LOG_SUFFIX}"


def txn_index_path(directory: Path, base_offset: int, suffix: str = "") -> Path:
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}{suffix}"


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> tuple[Path, Path, Path]:
    stem = f"{base_offset:020d}"
    return (
        directory / f"{stem}{LOG_SUFFIX}{suffix}",
        directory / f"{stem}{INDEX_SUFFIX}{suffix}",
        directory / f"{stem}{TIME_INDEX_SUFFIX}{suffix}",
    )


class FetchSlice(NamedTuple):
    """Whole batches read from one segment: bytes plus where they lie in the file."""

    records: bytes | FileRange  # a FileRange only for a lazy read (LogSegment.read)
    first_offset: int  # base offset of the first returned batch
    position: int
    size: int
    next_offset: int = -1  # the offset after the last returned batch (-1: nothing returned)


@dataclass(frozen=True)
class SegmentSettings:
    """The topic configs a segment needs (taken from LogConfig when created)."""

    index_interval_bytes: int = TOPIC_CONFIGS.int("index.interval.bytes")
    max_index_size: int = TOPIC_CONFIGS.int("segment.index.bytes")
    segment_bytes: int = TOPIC_CONFIGS.int("segment.bytes")
    preallocate: bool = TOPIC_CONFIGS.bool("preallocate")


class LogSegment:
    """A segment's files and the in-memory facts about them."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        settings: SegmentSettings,
        *,
        active: bool,
        suffix: str = "",
        roll_jitter_ms: int = 0,
        created_ms: int | None = None,
        create: bool = False,
    ) -> None:
        self.dir = Path(directory)
        self.base_offset = base_offset
        self.settings = settings
        self.suffix = suffix
        self.roll_jitter_ms = roll_jitter_ms
        self.log_path, self.index_path, self.time_index_path = segment_paths(
            self.dir, base_offset, suffix
        )
        self.txn_index = TransactionIndex(
            txn_index_path(self.dir, base_offset, suffix), base_offset
        )
        flags = os.O_RDWR | (os.O_CREAT | os.O_TRUNC if create else 0)
        if create:
            for stale in (self.index_path, self.time_index_path, self.txn_index.path):
                with contextlib.suppress(FileNotFoundError):
                    stale.unlink()
        self._fd = os.open(self.log_path, flags, 0o644)
        self._size = os.fstat(self._fd).st_size
        if create and settings.preallocate and self._size == 0:
            with contextlib.suppress(OSError):
                os.posix_fallocate(self._fd, 0, settings.segment_bytes)
        self._active = active
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._max_ts = NO_TIMESTAMP  # max timestamp so far and the batch offset holding it
        self._offset_of_max_ts = -1
        self._max_ts_loaded = False
        self._bytes_since_index = 0
        self._rolling_ts: int | None = None  # first batch's max timestamp (segment.ms)
        self._rolling_ts_loaded = False
        self.created_ms = created_ms if created_ms is not None else int(time.time() * 1000)
        self._unflushed = False
        self.index_corrupt = False
        self._next_fetch: tuple[int, int] | None = None  # (offset, position) after the last read
        # base offset and position of the latest appended batches (ascending)
        self._tail_offsets: list[int] = []
        self._tail_positions: list[int] = []
        # (file position, the bytes from there to the end of the file): the latest
        # appends. One tuple, replaced or extended, so that a reader in another thread
        # sees a position and bytes that belong together.
        self._recent: tuple[int, bytearray] | None = None
        # The latest read that ran to its limit: (start offset, limit position, segment
        # size, first batch size, answer). Each new batch is read by every follower and
        # by the consumers at the log end, all asking the same; they share one answer
        # (issue 18).
        self._last_read: tuple[int, int, int, int, FetchSlice] | None = None
        if active:
            self.offset_index  # noqa: B018 - open (and preallocate) now
            self.time_index  # noqa: B018

    # -- files --------------------------------------------------------------------------
    def _open_index(self, kind: type[IndexT], path: Path) -> IndexT:
        """Open one of the segment's indexes, writable while the segment is active."""
        return kind(path, self.base_offset, self.settings.max_index_size, writable=self._active)

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:  # opened lazily: most closed segments are never read
            self._offset_index = self._open_index(OffsetIndex, self.index_path)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = self._open_index(TimeIndex, self.time_index_path)
        return self._time_index

    @property
    def size(self) -> int:
        return self._size

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    def set_last_modified(self, ms: int) -> None:
        os.utime(self.log_path, (ms / 1000, ms / 1000))

    def indexes_exist(self) -> bool:
        return self.index_path.exists() and self.time_index_path.exists()

    def sanity_check(self, next_offset: int | None = None) -> None:
        """Raise CorruptIndexError (or FileNotFoundError) when the indexes cannot be trusted."""
        if not self.index_path.exists() or not self.time_index_path.exists():
            raise FileNotFoundError(f"index files of segment {self.base_offset} are missing")
        self.offset_index.sanity_check(self._size, next_offset)
        self.time_index.sanity_check(next_offset)
        self.txn_index.sanity_check()

    # -- aborted transactions -----------------------------------------------------------
    def update_txn_index(self, txn: AbortedTxn) -> None:
        """Record an aborted transaction whose marker was just appended here."""
        self.txn_index.append(txn)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # -- timestamps ---------------------------------------------------------------------
    def _load_max_timestamp(self) -> None:
        if self._max_ts_loaded:
            return
        last = self.time_index.last_entry()
        max_ts, max_off = last.timestamp, last.offset
        if self._active:
            # Batches after the last indexed one are not in the time index yet; a closed
            # segment's last time index entry is its final maximum (appended at roll).
            start = self._checked_index_position(self.offset_index.last_entry().offset)
            for b in self.iter_headers(start):
                h = b.header
                if h.max_timestamp > max_ts:
                    max_ts, max_off = h.max_timestamp, h.last_offset
        self._max_ts, self._offset_of_max_ts = max_ts, max_off
        self._max_ts_loaded = True

    @property
    def max_timestamp_so_far(self) -> int:
        self._load_max_timestamp()
        return self._max_ts

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        self._load_max_timestamp()
        return self._offset_of_max_ts

    @property
    def largest_timestamp(self) -> int:
        """The max timestamp of the segment, else its mtime (retention by time)."""
        ts = self.max_timestamp_so_far
        return ts if ts > 0 else self.last_modified_ms

    def rolling_based_timestamp(self) -> int | None:
        if not self._rolling_ts_loaded:
            self._rolling_ts = None
            for b in self.iter_headers(0):
                self._rolling_ts = b.header.max_timestamp
                break
            self._rolling_ts_loaded = True
        return self._rolling_ts

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        ts = self.rolling_based_timestamp()
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def should_roll(
        self,
        *,
        messages_size: int,
        max_timestamp: int,
        max_offset: int,
        now_ms: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's LogSegment.shouldRoll."""
        reached_roll_ms = (
            self.time_waited_for_roll(now_ms, max_timestamp) > segment_ms - self.roll_jitter_ms
        )
        return (
            self._size > self.settings.segment_bytes - messages_size
            or (self._size > 0 and reached_roll_ms)
            or self.offset_index.is_full
            or self.time_index.is_full
            or not self.can_convert_to_relative_offset(max_offset)
        )

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- append -------------------------------------------------------------------------
    def append(self, records: Buffer, headers: Sequence[BatchHeader]) -> int:
        """Append whole batches: ``records`` and the headers of the batches it holds, in
        order (offsets already assigned); like Kafka's ``LogSegment.append`` of a
        ``MemoryRecords``. Batches lie back to back, so their sizes give their positions.

        Returns the file position the records were written at.
        """
        if not self._active:
            raise ValueError(f"append to inactive segment {self.base_offset}")
        self._load_max_timestamp()  # before the write: the scan need not cover new batches
        position = self._size
        view = memoryview(records)
        written = 0
        total = len(view)
        while written < total:
            written += os.pwrite(self._fd, view[written:], position + written)
        self._size = position + total
        self._unflushed = True
        self._keep_recent(position, view)
        if position == 0 and headers:
            # Whatever a roll check read of the empty segment before (Kafka's
            # LogSegment.append sets rollingBasedTimestamp at position 0).
            self._rolling_ts = headers[0].max_timestamp
            self._rolling_ts_loaded = True
        oi = self.offset_index
        ti = self.time_index
        interval = self.settings.index_interval_bytes
        since = self._bytes_since_index
        batch_position = position
        tail_offsets, tail_positions = self._tail_offsets, self._tail_positions
        for h in headers:
            tail_offsets.append(h.base_offset)
            tail_positions.append(batch_position)
            max_ts = h.max_timestamp
            if max_ts > self._max_ts:
                self._max_ts = max_ts
                self._offset_of_max_ts = h.base_offset + h.last_offset_delta
            if since > interval and not oi.is_full and not ti.is_full:
                oi.append(h.base_offset + h.last_offset_delta, batch_position)
                ti.maybe_append(self._max_ts, self._offset_of_max_ts)
                since = 0
            size = h.batch_length + LOG_OVERHEAD
            since += size
            batch_position += size
        self._bytes_since_index = since
        if len(tail_offsets) > 2 * _TAIL_BATCHES:
            del tail_offsets[:-_TAIL_BATCHES]
            del tail_positions[:-_TAIL_BATCHES]
        return position

    def _keep_recent(self, position: int, written: memoryview) -> None:
        """Keep the bytes just written at ``position`` for tail reads (module docstring)."""
        size = len(written)
        recent = self._recent
        if size > RECENT_BYTES:
            self._recent = None
        elif (
            recent is not None
            and recent[0] + len(recent[1]) == position
            and len(recent[1]) + size <= RECENT_BYTES
        ):
            recent[1].extend(written)
        else:
            self._recent = (position, bytearray(written))

    def _forget_tail(self) -> None:
        self._next_fetch = None
        self._last_read = None
        self._tail_offsets = []
        self._tail_positions = []
        self._recent = None

    def _pread(self, size: int, position: int) -> bytes:
        """``os.pread`` of the log file, from the latest appends' bytes when they hold
        ``position`` (they run to the end of the file, so a read past it is short in
        the same way)."""
        recent = self._recent
        if recent is not None and position >= recent[0]:
            start = position - recent[0]
            return bytes(recent[1][start : start + size])
        return os.pread(self._fd, size, position)

    # -- reading ------------------------------------------------------------------------
    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[LocatedBatch]:
        """Batch headers from ``start`` (a batch boundary); stops at a partial/invalid entry."""
        limit = self._size if end is None else min(end, self._size)
        pos = start
        buf = b""
        buf_start = start
        chunk = _FIRST_CHUNK
        while pos + HEADER_SIZE <= limit:
            off = pos - buf_start
            if off < 0 or off + HEADER_SIZE > len(buf):
                buf = self._pread(max(HEADER_SIZE, min(chunk, limit - pos)), pos)
                buf_start = pos
                off = 0
                if len(buf) < HEADER_SIZE:
                    return
                chunk = min(chunk * 2, _SCAN_CHUNK)
            b = read_located_batch(buf, off, pos)
            size = b.header.batch_length + LOG_OVERHEAD
            if size < _MIN_BATCH or pos + size > limit:
                return
            yield b
            if size >= _SCAN_CHUNK // 4:
                chunk = HEADER_SIZE  # big batches: read just the next header
            pos += size

    def header_at(self, position: int) -> LocatedBatch | None:
        """The batch header at ``position``; None unless a whole batch can start there."""
        if position + HEADER_SIZE > self._size:
            return None
        buf = self._pread(HEADER_SIZE, position)
        if len(buf) < HEADER_SIZE:
            return None
        b = read_located_batch(buf, 0, position)
        size = b.header.batch_length + LOG_OVERHEAD
        if size < _MIN_BATCH or position + size > self._size:
            return None
        return b

    def _checked_index_entry(self, offset: int) -> tuple[int, LocatedBatch | None]:
        """Index lookup whose entry is verified against the batch it points at.

        Returns the position to scan from and the batch header found there. A corrupt
        entry (not a batch boundary ending at the entry's offset) falls back to
        position 0 and marks the index for rebuilding.
        """
        entry = self.offset_index.lookup(offset)
        if entry.position == 0:
            return 0, None
        b = self.header_at(entry.position)
        if b is None or b.header.last_offset != entry.offset:
            self.index_corrupt = True
            return 0, None
        return entry.position, b

    def _checked_index_position(self, offset: int) -> int:
        return self._checked_index_entry(offset)[0]

    def translate_offset(self, offset: int, starting_position: int = 0) -> LocatedBatch | None:
        """The first batch whose last offset >= ``offset``, via the index then a header scan.

        A consumer's next fetch usually starts where the previous read of this segment
        ended; that position is remembered and checked against the batch header first.
        """
        cached = self._next_fetch
        if cached is not None and cached[0] == offset and cached[1] >= starting_position:
            b = self.header_at(cached[1])
            if b is not None and b.header.last_offset >= offset:
                return b
        tail = self._tail_offsets
        if tail and offset >= tail[0]:
            i = bisect.bisect_right(tail, offset) - 1
            position = self._tail_positions[i]
            if position >= starting_position:
                b = self.header_at(position)
                if b is not None and b.header.base_offset == tail[i]:
                    if b.header.last_offset >= offset:
                        return b
                    # the batch after it, if any, is the first one ending at or past offset
                    return next(self.iter_headers(position + b.size), None)
        position, b = self._checked_index_entry(offset)
        if b is not None and position >= starting_position:
            if b.header.last_offset >= offset:
                return b
            position += b.size
        for b in self.iter_headers(max(position, starting_position)):
            if b.header.last_offset >= offset:
                return b
        return None

    def _batch_end_at_or_before(self, first: LocatedBatch, limit: int) -> tuple[int, int]:
        """Largest batch boundary <= ``limit`` after ``first`` (at least its end), and the
        offset a fetch continuing from there asks for."""
        end = first.end
        next_offset = first.header.next_offset
        if end >= limit:
            return end, next_offset
        start = end
        jump = self.offset_index.lookup_position_floor(limit)
        if jump is not None and jump.position > start:
            b = self.header_at(jump.position)
            if b is not None and b.header.last_offset == jump.offset:
                start = end = jump.position
                next_offset = b.header.base_offset
            else:
                self.index_corrupt = True
        for b in self.iter_headers(start, limit):
            end = b.end
            next_offset = b.header.next_offset
        return end, next_offset

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = True,
        lazy: bool = False,
    ) -> FetchSlice | None:
        """Whole batches from the one holding ``start_offset``, within ``max_size`` bytes.

        ``min_one_message`` returns the first batch even when larger than ``max_size``;
        ``max_position`` (exclusive) bounds the bytes (e.g. the high watermark's position).
        ``lazy``: a read of at least :data:`LAZY_FROM_BYTES` is a :class:`FileRange`,
        not read yet (sent with ``sendfile``). None when no batch in this segment
        reaches ``start_offset``.
        """
        limit_pos = self._size if max_position is None else min(max_position, self._size)
        shared = self._last_read
        if (
            shared is not None
            and shared[0] == start_offset
            and shared[1] == limit_pos
            and shared[2] == self._size
        ):
            # The previous read began here and ran to the same limit with nothing
            # appended since: the same answer whenever this one may take as much.
            found = shared[4]
            first_size = shared[3]
            allowed = max(max_size, first_size) if min_one_message else max_size
            if first_size <= allowed and found.position + allowed >= limit_pos:
                return found
        first = self.translate_offset(start_offset)
        if first is None:
            return None
        base = first.header.base_offset
        if first.position >= limit_pos:
            return FetchSlice(b"", base, first.position, 0)
        size = first.size
        adjusted = max(max_size, size) if min_one_message else max_size
        if size > adjusted or first.position + size > limit_pos:
            return FetchSlice(b"", base, first.position, 0)
        limit = min(limit_pos, first.position + adjusted)
        end, next_offset = self._batch_end_at_or_before(first, limit)
        size_read = end - first.position
        data: bytes | FileRange
        if lazy and size_read >= LAZY_FROM_BYTES and self._fd >= 0:
            data = FileRange(self._fd, first.position, size_read)
        else:
            data = self._pread(size_read, first.position)
        self._next_fetch = (next_offset, end)
        found = FetchSlice(data, base, first.position, len(data), next_offset)
        if end == limit_pos and len(data) <= RECENT_BYTES:
            self._last_read = (start_offset, limit_pos, self._size, size, found)
        return found

    def read_bytes(self, position: int, size: int) -> bytes:
        return self._pread(size, position)

    def iter_batches(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[LocatedBatch, bytes]]:
        """Each whole batch's header and bytes (compaction, replay)."""
        limit = self._size if end is None else min(end, self._size)
        pos = start
        while pos < limit:
            want = min(_RECOVER_CHUNK, limit - pos)
            buf = os.pread(self._fd, want, pos)
            off = 0
            while off + HEADER_SIZE <= len(buf):
                b = read_located_batch(buf, off, pos + off)
                size = b.header.batch_length + LOG_OVERHEAD
                if size < _MIN_BATCH or b.end > limit:
                    return
                if off + size > len(buf):
                    if off == 0:
                        buf = os.pread(self._fd, size, b.position)
                        if len(buf) < size:
                            return
                        yield b, buf
                        off = size
                    break
                yield b, buf[off : off + size]
                off += size
            if off == 0:
                return
            pos += off

    def read_next_offset(self) -> int:
        """Next offset after the last batch (Kafka scans from the last index entry)."""
        last = None
        start = self._checked_index_position(self.offset_index.last_entry().offset)
        for b in self.iter_headers(start):
            last = b
        if last is None:
            # The index's last entry may be stale or absent; fall back to a full scan.
            for b in self.iter_headers(0):
                last = b
        return self.base_offset if last is None else last.header.next_offset

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``.

        Time index (largest entry <= target) -> offset index -> scan batches whose max
        timestamp reaches the target -> records. Returns (timestamp, offset, leader epoch).
        """
        entry: TimestampOffset = self.time_index.lookup(timestamp)
        position = self._checked_index_position(max(entry.offset, starting_offset))
        for b in self.iter_headers(position):
            h = b.header
            if h.last_offset < starting_offset or h.max_timestamp < timestamp:
                continue
            data = self.read_bytes(b.position, b.size)
            epoch = h.partition_leader_epoch if h.partition_leader_epoch >= 0 else -1
            for offset, ts in record_offsets_and_timestamps(data):
                if ts >= timestamp and offset >= starting_offset:
                    return ts, offset, epoch
        return None

    # -- truncation / recovery ----------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Drop batches ending at or after ``offset``; returns bytes removed.

        The segment becomes the active one (its indexes writable and preallocated).
        """
        mapping = self.translate_offset(offset)
        self._forget_tail()
        self.make_active()
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if mapping is None:
            return 0
        removed = self._size - mapping.position
        os.ftruncate(self._fd, mapping.position)
        self._size = mapping.position
        self._bytes_since_index = 0
        self._max_ts_loaded = False
        self._rolling_ts_loaded = False
        if self._size == 0:
            self.created_ms = int(time.time() * 1000)
        self._unflushed = True
        return removed

    def first_removed_base_offset(self, offset: int) -> int | None:
        b = self.translate_offset(offset)
        return None if b is None else b.header.base_offset

    def recover(
        self,
        max_message_size: int,
        producer_state: ProducerStateManager | None = None,
        epoch_cache: LeaderEpochCache | None = None,
        *,
        expected_start_offset: int | None = None,
        offset_limit: int | None = None,
    ) -> int:
        """Validate every batch, rebuild both indexes, truncate at the first bad byte.

        ``offset_limit`` is the next segment's base offset: a batch reaching it is bad.
        The CRC does not cover a batch's base offset, so a flipped bit there is only
        visible as an offset out of order or beyond the segment.

        Also replays batches into the leader epoch cache and into ``producer_state``,
        which must then describe the log below this segment's base offset: the
        transactions its markers end rebuild ``.txnindex`` (Kafka's LogSegment.recover).
        Without ``producer_state`` the transaction index is left as it is. Returns the
        number of bytes truncated.
        """
        oi = self.offset_index
        ti = self.time_index
        self._forget_tail()
        oi.make_writable()
        ti.make_writable()
        oi.reset()
        ti.reset()
        if producer_state is not None:
            self.txn_index.reset()
        file_size = os.fstat(self._fd).st_size
        self._size = file_size
        valid = 0
        last_index_pos = 0
        max_ts, max_off = NO_TIMESTAMP, -1
        next_expected = self.base_offset if expected_start_offset is None else expected_start_offset
        interval = self.settings.index_interval_bytes
        epochs: list[tuple[int, int]] = []
        latest_epoch = epoch_cache.latest_epoch if epoch_cache is not None else None
        for b, data in self._iter_for_recovery(file_size, max_message_size):
            h = b.header
            last_offset = h.base_offset + h.last_offset_delta
            if not _batch_is_valid(h, data, last_offset, next_expected, self.base_offset):
                break
            if offset_limit is not None and last_offset >= offset_limit:
                break
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, last_offset
            if valid - last_index_pos > interval:
                oi.append(last_offset, valid)
                ti.maybe_append(max_ts, max_off)
                last_index_pos = valid
            valid += len(data)  # == the batch size (checked)
            next_expected = last_offset + 1
            epoch = h.partition_leader_epoch
            if epoch >= 0 and (latest_epoch is None or epoch > latest_epoch):
                epochs.append((epoch, h.base_offset))
                latest_epoch = epoch
            if producer_state is not None:
                self._replay_into(producer_state, h, data)
        if epoch_cache is not None and epochs:
            epoch_cache.assign_many(epochs)
        truncated = file_size - valid
        if truncated:
            os.ftruncate(self._fd, valid)
        self._size = valid
        self.index_corrupt = False
        self._max_ts, self._offset_of_max_ts = max_ts, max_off
        self._max_ts_loaded = True
        self._rolling_ts_loaded = False
        self._bytes_since_index = valid - last_index_pos
        if not self._active:
            if max_ts >= 0:
                ti.maybe_append(max_ts, max_off, skip_full_check=True)
            oi.trim()
            ti.trim()
        self._unflushed = True
        return truncated

    def _replay_into(
        self, producer_state: ProducerStateManager, h: BatchHeader, data: bytes
    ) -> None:
        marker = None
        if h.is_control and h.producer_id >= 0:
            try:
                marker = read_end_txn_marker(data)
            except (_BatchCorrupt, ValueError):
                marker = None
        done = producer_state.replay(h, marker)
        if done is not None:
            if done.is_aborted:
                self.txn_index.append(
                    AbortedTxn(
                        done.producer_id,
                        done.first_offset,
                        done.last_offset,
                        producer_state.last_stable_offset(done),
                    )
                )
            producer_state.complete_txn(done)

    def _iter_for_recovery(
        self, file_size: int, max_message_size: int
    ) -> Iterator[tuple[LocatedBatch, bytes]]:
        pos = 0
        while pos < file_size:
            buf = os.pread(self._fd, min(_RECOVER_CHUNK, file_size - pos), pos)
            off = 0
            while True:
                if off + HEADER_SIZE > len(buf):
                    break
                b = read_located_batch(buf, off, pos + off)
                size = b.header.batch_length + LOG_OVERHEAD
                if size < _MIN_BATCH or size > max_message_size or pos + off + size > file_size:
                    return
                if off + size > len(buf):
                    if off == 0:
                        buf = os.pread(self._fd, size, b.position)
                        yield b, buf
                        off = size
                    break
                yield b, buf[off : off + size]
                off += size
            if off == 0:
                return  # fewer bytes left than a header: a torn tail
            pos += off

    # -- lifecycle ----------------------------------------------------------------------
    def make_active(self) -> None:
        if self._active:
            return
        self._active = True
        if self._offset_index is not None:
            self._offset_index.make_writable()
        if self._time_index is not None:
            self._time_index.make_writable()
        self.offset_index  # noqa: B018
        self.time_index  # noqa: B018
        self._bytes_since_index = 0

    def on_become_inactive(self) -> None:
        """At roll: final time index entry, trim indexes (and a preallocated log)."""
        if not self._active:
            return
        self._load_max_timestamp()
        if self._max_ts >= 0:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()
        if self.settings.preallocate:
            os.ftruncate(self._fd, self._size)
        self._active = False
        self._recent = None  # no more appends here: the tail reads move on
        self._last_read = None

    def flush(self) -> None:
        """fsync the log and, once the segment is no longer active, its indexes.

        An active segment's indexes are never trusted after a crash (the segment holding
        the recovery point is always recovered, which rebuilds them), so syncing them
        would only double the cost of ``flush.messages=1``.
        """
        if self._fd < 0:
            return  # deleted meanwhile: nothing left to make durable
        os.fsync(self._fd)
        if not self._active:
            self.flush_indexes()
        self._unflushed = False

    def flush_indexes(self) -> None:
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.flush()
        self.txn_index.flush()

    @property
    def unflushed(self) -> bool:
        return self._unflushed

    def close(self, *, sync: bool = False) -> None:
        """Clean close: final time index entry, trimmed indexes and log file (fsynced if ``sync``)."""
        if self._fd < 0:
            return
        try:
            if self._active:
                self._load_max_timestamp()
                if self._max_ts >= 0:
                    self.time_index.maybe_append(
                        self._max_ts, self._offset_of_max_ts, skip_full_check=True
                    )
            if self.settings.preallocate or os.fstat(self._fd).st_size != self._size:
                os.ftruncate(self._fd, self._size)
                if sync:
                    os.fsync(self._fd)
        finally:
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close(sync=sync)
            if sync:
                self.txn_index.flush()
            self.txn_index.close_handle()
            os.close(self._fd)
            self._fd = -1
            self._recent = None  # a closed segment reads nothing, from memory neither
            self._last_read = None

    def close_handles_of_indexes(self) -> None:
        """Release a closed segment's index descriptors; they reopen lazily on use."""
        if self._active:
            return
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handle()
        self._offset_index = None
        self._time_index = None
        self.txn_index.close_handle()

    def close_handles(self) -> None:
        """Close file descriptors without trimming (files are deleted or renamed away)."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handle()
        self._offset_index = None
        self._time_index = None
        self.txn_index.close_handle()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._recent = None
        self._last_read = None

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def change_suffix(self, new_suffix: str, after_log: Callable[[], None] | None = None) -> None:
        """Rename all three files (log first, as Kafka) to ``new_suffix``; fds stay valid."""
        new_log, new_index, new_time = segment_paths(self.dir, self.base_offset, new_suffix)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        if after_log is not None:
            after_log()
        for old, new in ((self.index_path, new_index), (self.time_index_path, new_time)):
            with contextlib.suppress(FileNotFoundError):
                os.replace(old, new)
        self.index_path, self.time_index_path = new_index, new_time
        if self._offset_index is not None:
            self._offset_index.path = new_index
        if self._time_index is not None:
            self._time_index.path = new_time
        self.txn_index.rename(txn_index_path(self.dir, self.base_offset, new_suffix))
        self.suffix = new_suffix

    def delete_files(self) -> None:
        self.close_handles()
        for p in (self.log_path, self.index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        self.txn_index.delete()

    def rebuild_indexes(
        self, max_message_size: int, producer_state: ProducerStateManager | None = None
    ) -> int:
        """Rebuild indexes (missing or corrupt) by recovering the segment; ``.txnindex`` too
        when given the producer state at the segment's base offset."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close_handle()
        self._offset_index = self._time_index = None
        for p in (self.index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
        return self.recover(max_message_size, producer_state)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self._size}, active={self._active})"


def _batch_is_valid(
    h: BatchHeader, data: bytes, last_offset: int, next_expected: int, base_offset: int
) -> bool:
    """Recovery's check of one batch: magic, size, offsets after the previous batch, CRC."""
    size = len(data)
    if h.magic != 2 or size != h.batch_length + LOG_OVERHEAD:
        return False
    if h.base_offset < next_expected or last_offset < h.base_offset:
        return False
    if last_offset - base_offset > INT32_MAX:
        return False
    return compute_crc(data, 0, size) == h.crc


def record_offsets_and_timestamps(batch: bytes) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of one v2 batch (decompressing if needed)."""
    try:
        decoded = decode_batch(batch, 0, verify_crc=False)
    except (_BatchCorrupt, ValueError):
        return []
    return [(r.offset, r.timestamp) for r in decoded.records]


__all__ = [
    "CLEANED_SUFFIX",
    "DELETED_SUFFIX",
    "SWAP_SUFFIX",
    "CorruptIndexError",
    "FetchSlice",
    "LogSegment",
    "SegmentSettings",
    "log_file_name",
    "segment_paths",
    "txn_index_path",
]
