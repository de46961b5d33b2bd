"""One partition's log (Kafka's UnifiedLog): segments, offsets, appends, reads, retention.

What an append must satisfy lives in :mod:`odradek.log.validator`, which segments
retention deletes in :mod:`odradek.log.retention`, the batch header layout in
:mod:`odradek.records.header`; this module applies them to the segment list.

Directory ``<topic>-<partition>/`` holds the segments (``<base offset, 20 digits>.log``,
``.index``, ``.timeindex``, ``.txnindex``; :mod:`odradek.log.segment`), producer snapshots
(``<offset>.snapshot``; :mod:`odradek.log.producer_state`), ``leader-epoch-checkpoint``
(:mod:`odradek.log.leader_epoch`) and ``partition.metadata``
(:mod:`odradek.log.partition_metadata`).

Invariants: segments are sorted by base offset and never overlap; only the last one
(the active segment) is appended to; ``log_start_offset <= last_stable_offset <=
high_watermark <= log_end_offset``; every offset below ``recovery_point`` is fsynced.

Transactions (KIP-98): the last stable offset is the high watermark, or the first
offset of the earliest transaction that is undecided or whose marker the high
watermark has not passed yet (:mod:`odradek.log.producer_state`), whichever is lower.
Leader and follower appends apply COMMIT/ABORT control batches alike: the producer's
transaction ends, and an aborted one is written to the ``.txnindex`` of the segment
holding its marker. A read_committed read (``include_aborted``) returns the aborted
transactions overlapping the returned batches.

Threads: the storage service appends and reads on its event-loop thread. Readers
take one snapshot of the immutable segment list (copy-on-write) and never lock;
structural changes (roll, truncation, retention deletes, compaction swaps) replace
the list under ``self.lock``. Flush, recovery and compaction may run on a worker
thread (``asyncio.to_thread``) while the loop thread keeps appending and reading.

Crash behaviour: see :mod:`odradek.log.recovery`; deleted segments are renamed to
``.deleted`` and their files removed by :meth:`PartitionLog.purge_deleted` after
``file.delete.delay.ms`` (still-open readers keep working meanwhile).
"""

from __future__ import annotations

import bisect
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.config_catalog.definition import LONG_MAX
from odradek.log import retention
from odradek.log.checkpoints import fsync_dir
from odradek.log.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from odradek.log.file_range import FileRange
from odradek.log.leader_epoch import CHECKPOINT_FILE, LeaderEpochCache
from odradek.log.partition_metadata import read_topic_id, write_topic_id
from odradek.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    CompletedTxn,
    DuplicateInfo,
    ProducerAppend,
    ProducerStateManager,
    VerificationGuard,
)
from odradek.log.recovery import load_segments, rebuild_producer_state
from odradek.log.segment import DELETED_SUFFIX, SWAP_SUFFIX, LogSegment, SegmentSettings
from odradek.log.transaction_index import AbortedTxn
from odradek.log.validator import (
    analyze_replicated_records,
    check_client_batches,
    check_timestamps,
    validate_client_records,
    validate_leader_records,
)
from odradek.records.batch import BatchesSummary, BatchView, assign_offsets
from odradek.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    read_end_txn_marker,
)
from odradek.records.errors import RecordsError
from odradek.records.header import LOG_OVERHEAD, BatchHeader, Buffer, read_batch_header
from odradek.topic_config import LogConfig


def _marker_at(records: Buffer, position: int) -> EndTransactionMarker | None:
    """The marker of the control batch at ``position`` (None: empty or not a marker)."""
    try:
        return read_end_txn_marker(records, position)
    except RecordsError as exc:
        raise InvalidRecordError(f"unreadable control record: {exc}") from exc


def _replicated_marker_at(records: Buffer, position: int) -> EndTransactionMarker | None:
    """A replicated control batch is applied as the leader wrote it: one whose record
    cannot be read counts as empty (Kafka's replication origin does not validate)."""
    try:
        return read_end_txn_marker(records, position)
    except RecordsError:
        return None


def _markers(
    records: Buffer, positions: Sequence[int], headers: Sequence[BatchHeader]
) -> dict[int, EndTransactionMarker | None]:
    return {i: _marker_at(records, positions[i]) for i, h in enumerate(headers) if h.is_control}


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """``<topic>-<partition>`` -> (topic, partition); None for other directories."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)


@dataclass(slots=True)
class AppendResult:
    """One append's outcome. Not frozen: a frozen dataclass sets each field through
    ``object.__setattr__`` (about 2 us for these eight, 0.7 us plain), and one is built
    per append on the leader and on every follower (issue 18)."""

    first_offset: int
    last_offset: int
    log_append_time: int  # -1 unless message.timestamp.type=LogAppendTime
    max_timestamp: int
    offset_of_max_timestamp: int
    duplicate: bool
    log_start_offset: int
    record_count: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches as stored; ``segment_path``/``file_position`` allow a sendfile.

    ``aborted`` (read_committed reads only): the aborted transactions overlapping the
    returned batches, in index order.
    """

    records: bytes | FileRange  # a FileRange only for a lazy read
    first_offset: int
    segment_path: Path | None
    file_position: int
    size: int
    aborted: tuple[AbortedTxn, ...] | None = None


def _with_aborted(result: ReadResult, aborted: tuple[AbortedTxn, ...]) -> ReadResult:
    """``result`` with its aborted transactions: built directly, since
    ``dataclasses.replace`` costs several times as much, once per read_committed read
    (issue 18)."""
    return ReadResult(
        result.records,
        result.first_offset,
        result.segment_path,
        result.file_position,
        result.size,
        aborted,
    )


@dataclass(frozen=True, slots=True)
class _SegmentList:
    """Immutable snapshot of the segments, replaced as a whole (copy-on-write)."""

    bases: tuple[int, ...]
    segments: tuple[LogSegment, ...]

    @staticmethod
    def of(segments: Iterable[LogSegment]) -> _SegmentList:
        segs = tuple(segments)
        return _SegmentList(tuple(s.base_offset for s in segs), segs)

    def floor_index(self, offset: int) -> int:
        return bisect.bisect_right(self.bases, offset) - 1


class PartitionLog:
    """A partition's log. Create with :meth:`open`."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        clock_ms: Callable[[], int],
        producer_id_expiration_ms: int,
    ) -> None:
        self.dir = Path(directory)
        self.topic = topic
        self.partition = partition
        self._name = f"{topic}-{partition}"
        self.config = config
        self.clock_ms = clock_ms
        self.lock = threading.RLock()
        self._segments = _SegmentList((), ())
        self._log_end_offset = 0
        self._log_start_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._last_flush_ms = clock_ms()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._dir_dirty = False
        self._rolled_unsynced: list[LogSegment] = []  # rolled since the last flush
        self.truncations = 0  # bumped by every truncation (a running compaction aborts)
        self._closed = False
        self.leader_epoch_cache = LeaderEpochCache(self.dir / CHECKPOINT_FILE)
        self.producer_state = ProducerStateManager(
            self.dir,
            topic_partition=f"{topic}-{partition}",
            producer_id_expiration_ms=producer_id_expiration_ms,
        )
        self.last_recovery_truncated_bytes = 0

    # -- open ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        clean_shutdown: bool = False,
        high_watermark: int | None = None,
        topic_id: str | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> PartitionLog:
        """Open (creating if needed) and recover the log in ``directory``.

        Without ``clean_shutdown`` every segment from ``recovery_point`` on is validated.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        log = cls(directory, topic, partition, config, clock_ms, producer_id_expiration_ms)
        if topic_id is not None:
            write_topic_id(directory, topic_id, log.name)
        loaded = load_segments(
            directory,
            lambda _base: log.segment_settings(),
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
            max_message_size=log._max_batch_size(),
            epoch_cache=log.leader_epoch_cache,
            jitter_for=log._roll_jitter,
            producer_state=log.producer_state,
        )
        log._segments = _SegmentList.of(loaded.segments)
        log._log_end_offset = loaded.log_end_offset
        log._log_start_offset = loaded.log_start_offset
        log._recovery_point = loaded.recovery_point
        log.last_recovery_truncated_bytes = loaded.truncated_bytes
        if log._log_start_offset > log._log_end_offset:
            log.truncate_fully_and_start_at(log._log_start_offset)
        log.leader_epoch_cache.truncate_from_end(log._log_end_offset)
        log.leader_epoch_cache.truncate_from_start(log._log_start_offset)
        log.producer_state.delete_snapshots_below(log._segments.bases[0])
        rebuild_producer_state(
            log.producer_state,
            log._segments.segments,
            log_start_offset=log._log_start_offset,
            log_end_offset=log._log_end_offset,
            now_ms=clock_ms(),
        )
        hw = log._log_start_offset if high_watermark is None else high_watermark
        log.high_watermark = hw
        return log

    def segment_settings(self) -> SegmentSettings:
        c = self.config
        return SegmentSettings(
            index_interval_bytes=c.index_interval_bytes,
            max_index_size=c.segment_index_bytes,
            segment_bytes=c.segment_bytes,
            preallocate=c.preallocate,
        )

    def _roll_jitter(self) -> int:
        j = self.config.segment_jitter_ms
        if j <= 0:
            return 0
        return random.randrange(min(j, self.config.segment_ms))

    def _max_batch_size(self) -> int:
        return max(self.config.max_message_bytes, self.config.segment_bytes) + LOG_OVERHEAD

    @property
    def topic_id(self) -> str | None:
        """From ``partition.metadata`` (:mod:`odradek.log.partition_metadata`)."""
        return read_topic_id(self.dir)

    # -- offsets ------------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        hw = min(max(value, self._log_start_offset), self._log_end_offset)
        self._high_watermark = hw
        self.producer_state.on_high_watermark_updated(hw)

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction not yet decided and replicated (None: none)."""
        fuo = self.producer_state.first_unstable_offset()
        if fuo is not None and fuo < self._log_start_offset:
            return self._log_start_offset
        return fuo

    @property
    def last_stable_offset(self) -> int:
        """Kafka's UnifiedLog.lastStableOffset: what read_committed consumers may read up to."""
        fuo = self.first_unstable_offset
        hw = self._high_watermark
        return fuo if fuo is not None and fuo < hw else hw

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments.segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments.segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segments.segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments.segments[-1]

    def earliest(self) -> int:
        return self._log_start_offset

    def latest(self) -> int:
        return self._log_end_offset

    @property
    def name(self) -> str:
        return self._name

    # -- append -------------------------------------------------------------------------
    def validate_records(
        self,
        records: bytearray | memoryview,
        *,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> BatchesSummary:
        """The checks of :meth:`append_as_leader` that read only the records (batches,
        then every record, decompressed): no lock and no log state, so a caller may run
        them in a worker thread for a large compressed blob and hand the summary to
        :meth:`append_as_leader` as ``validated``."""
        summary = validate_leader_records(records, self.config, self.name)
        if origin is AppendOrigin.CLIENT:
            validate_client_records(records, summary, self.config, now_ms, self.name)
        return summary

    def append_as_leader(
        self,
        records: bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
        verification_required: bool = False,
        validated: BatchesSummary | None = None,
    ) -> AppendResult:
        """Validate, dedupe, assign offsets (in place) and append a produced records blob.

        ``origin`` COORDINATOR skips the sequence checks and duplicate detection (markers,
        transactional offset commits). With ``verification_required`` a transactional
        batch that does not continue an ongoing transaction must present the guard of a
        verification this log handed out (KIP-890, :meth:`maybe_start_transaction_verification`).

        Raises BatchTooLargeError (MESSAGE_TOO_LARGE), CorruptRecordError,
        InvalidRecordError, InvalidTimestampError, RecordBatchTooLargeError,
        InvalidProducerEpochError, OutOfOrderSequenceError, InvalidTxnStateError,
        TransactionCoordinatorFencedError.
        """
        cfg = self.config
        now = self.clock_ms() if now_ms is None else now_ms
        summary = (
            self.validate_records(records, now_ms=now, origin=origin)
            if validated is None
            else validated
        )
        total = len(records)
        positions = summary.positions
        log_append = cfg.log_append_time
        with self.lock:
            self._check_open()
            first = self._log_end_offset
            # As Kafka's UnifiedLog.append: assign offsets and check timestamps, then
            # look for duplicates (a duplicate's patched buffer is simply dropped).
            next_offset = assign_offsets(records, positions, first, leader_epoch)
            headers = [read_batch_header(records, pos) for pos in positions]
            if origin is AppendOrigin.CLIENT:
                check_client_batches(headers, self.name)
            check_timestamps(positions, headers, now, cfg, self.name)
            prepared: ProducerAppend | DuplicateInfo | None = None
            if summary.producer_id >= 0:
                prepared = self.producer_state.check_and_prepare(
                    headers,
                    origin=origin,
                    markers=None
                    if origin is AppendOrigin.CLIENT
                    else _markers(records, positions, headers),
                    verification_guard=verification_guard,
                    verification_required=verification_required,
                )
            if isinstance(prepared, DuplicateInfo):
                dup = prepared
                return AppendResult(
                    dup.first_offset,
                    dup.last_offset,
                    -1,
                    dup.timestamp,
                    dup.last_offset,
                    True,
                    self._log_start_offset,
                    summary.record_count,
                )
            last = next_offset - 1
            if log_append:
                for pos in positions:
                    BatchView(records, pos).set_log_append_time(now)
                headers = [read_batch_header(records, pos) for pos in positions]
                max_timestamp = now
                offset_of_max = first
            else:
                max_timestamp = summary.max_timestamp
                offset_of_max = (
                    first + summary.offset_of_max_timestamp_delta if max_timestamp >= 0 else -1
                )
            if leader_epoch >= 0 and leader_epoch != self.leader_epoch_cache.latest_epoch:
                self.leader_epoch_cache.assign(leader_epoch, first)
            segment = self._maybe_roll(total, max_timestamp, last, first, now)
            segment.append(records, headers)
            self._log_end_offset = next_offset
            ps = self.producer_state
            if prepared is not None:
                for done in ps.apply(prepared):
                    self._complete_txn(segment, done)
            ps.map_end_offset = next_offset
        self._maybe_flush_on_messages()
        return AppendResult(
            first,
            last,
            now if log_append else -1,
            max_timestamp,
            offset_of_max,
            False,
            self._log_start_offset,
            summary.record_count,
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append replicated batches whose offsets and epochs the leader assigned."""
        buf = records
        total = len(buf)
        if total == 0:
            return AppendResult(
                self._log_end_offset,
                self._log_end_offset - 1,
                -1,
                -1,
                -1,
                False,
                self._log_start_offset,
                0,
            )
        rr = analyze_replicated_records(buf, self.config, self.name)
        first, next_offset = rr.first_offset, rr.next_offset
        markers: dict[int, EndTransactionMarker | None] = {}
        pos = 0
        for i, h in enumerate(rr.headers):
            if h.is_control and h.producer_id >= 0:
                markers[i] = _replicated_marker_at(buf, pos)
            pos += h.size
        with self.lock:
            self._check_open()
            if first < self._log_end_offset:
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.name}. First offset {first} is less than "
                    f"the next offset {self._log_end_offset}.",
                    first,
                    next_offset - 1,
                )
            for epoch, start in rr.epochs:
                latest = self.leader_epoch_cache.latest_epoch
                if latest is None or epoch > latest:
                    self.leader_epoch_cache.assign(epoch, start)
            now = self.clock_ms()
            segment = self._maybe_roll(total, rr.max_timestamp, next_offset - 1, first, now)
            segment.append(buf, rr.headers)
            self._log_end_offset = next_offset
            ps = self.producer_state
            for i, h in enumerate(rr.headers):
                done = ps.replay(h, markers.get(i))
                if done is not None:
                    self._complete_txn(segment, done)
            ps.map_end_offset = next_offset
        self._maybe_flush_on_messages()
        return AppendResult(
            first,
            next_offset - 1,
            -1,
            rr.max_timestamp,
            rr.offset_of_max_timestamp,
            False,
            self._log_start_offset,
            rr.record_count,
        )

    def append_end_txn_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int,
        now_ms: int | None = None,
    ) -> AppendResult:
        """Append one COMMIT/ABORT control batch as the partition leader (Kafka's
        WriteTxnMarkers append, origin COORDINATOR).

        Raises InvalidProducerEpochError when the producer already has a newer epoch
        here and TransactionCoordinatorFencedError for an older coordinator epoch.
        """
        now = self.clock_ms() if now_ms is None else now_ms
        batch = build_end_txn_marker_batch(
            control_type=ControlRecordType.COMMIT if committed else ControlRecordType.ABORT,
            coordinator_epoch=coordinator_epoch,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            timestamp=now,
        )
        return self.append_as_leader(
            bytearray(batch), leader_epoch, now_ms=now, origin=AppendOrigin.COORDINATOR
        )

    def _complete_txn(self, segment: LogSegment, done: CompletedTxn) -> None:
        """A marker ended ``done``: index it if aborted (with the LSO of this moment)."""
        ps = self.producer_state
        if done.is_aborted:
            segment.update_txn_index(
                AbortedTxn(
                    done.producer_id,
                    done.first_offset,
                    done.last_offset,
                    ps.last_stable_offset(done),
                )
            )
        ps.complete_txn(done)

    # -- transactions -------------------------------------------------------------------
    def has_ongoing_transaction(self, producer_id: int) -> bool:
        return self.producer_state.has_ongoing_transaction(producer_id)

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard | None:
        """KIP-890: the guard a transactional produce must present after the coordinator
        confirmed the transaction; None when the producer's transaction is already
        ongoing here (no verification needed)."""
        with self.lock:
            ps = self.producer_state
            if ps.has_ongoing_transaction(producer_id):
                return None
            return ps.maybe_create_verification_state(
                producer_id, sequence, epoch, self.clock_ms()
            ).guard

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[AbortedTxn]:
        """Aborted transactions with a marker at or after ``start_offset`` whose data starts
        below ``upper_bound_offset``, from the segment holding ``start_offset`` on."""
        sl = self._segments
        i = max(sl.floor_index(start_offset), 0)
        found: list[AbortedTxn] = []
        for seg in sl.segments[i:]:
            result = seg.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted)
            if result.complete:
                break
        return found

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.name} is closed")

    def _maybe_flush_on_messages(self) -> None:
        if self._log_end_offset - self._recovery_point >= self.config.flush_messages:
            self.flush()

    # -- roll ---------------------------------------------------------------------------
    def _maybe_roll(
        self, size: int, max_timestamp: int, max_offset: int, first_offset: int, now: int
    ) -> LogSegment:
        seg = self._segments.segments[-1]
        if seg.should_roll(
            messages_size=size,
            max_timestamp=max_timestamp,
            max_offset=max_offset,
            now_ms=now,
            segment_ms=self.config.segment_ms,
        ):
            return self._roll(first_offset)
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(``expected_next_offset``, log end offset)."""
        return self._roll(
            self._log_end_offset if expected_next_offset is None else expected_next_offset
        )

    def _roll(self, expected_next_offset: int) -> LogSegment:
        with self.lock:
            self._check_open()
            new_base = max(expected_next_offset, self._log_end_offset)
            segs = self._segments.segments
            active = segs[-1]
            if active.base_offset == new_base:
                if active.size == 0:
                    return active
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for {self.name} with start offset {new_base} "
                    "while it already exists"
                )
            if active.base_offset > new_base:
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for {self.name} with start offset {new_base} "
                    f"lower than the active segment's base offset {active.base_offset}"
                )
            active.on_become_inactive()
            self._rolled_unsynced.append(active)
            self.producer_state.map_end_offset = new_base
            self.producer_state.take_snapshot()
            # A stale file of the same name can only be a leftover from truncation.
            new = LogSegment(
                self.dir,
                new_base,
                self.segment_settings(),
                active=True,
                create=True,
                roll_jitter_ms=self._roll_jitter(),
                created_ms=self.clock_ms(),
            )
            self._segments = _SegmentList.of((*segs, new))
            self._dir_dirty = True
            return new

    # -- read ---------------------------------------------------------------------------
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_message: bool = True,
        include_aborted: bool = False,
        lazy: bool = False,
    ) -> ReadResult:
        """Whole batches starting with the one holding ``offset``.

        ``max_offset`` (exclusive, e.g. the high watermark or the LSO) excludes every
        batch that holds an offset >= it. ``include_aborted`` (read_committed) adds the
        aborted transactions overlapping the returned batches (Kafka's
        LocalLog.addAbortedTransactions). Raises OffsetOutOfRangeError outside [log
        start, log end]. ``lazy``: large records as a FileRange (LogSegment.read).
        """
        sl = self._segments
        result, index, next_offset = self._read(
            sl, offset, max_bytes, max_offset, min_one_message, lazy
        )
        if not include_aborted:
            return result
        if not result.size:
            return _with_aborted(result, ())
        # Kafka bounds the search by the offset index entry past the read; the exact
        # offset after the returned batches is tighter and as correct.
        found: list[AbortedTxn] = []
        for seg in sl.segments[index:]:
            search = seg.collect_aborted_txns(offset, next_offset)
            found.extend(search.aborted)
            if search.complete:
                break
        return _with_aborted(result, tuple(found))

    def _read(
        self,
        sl: _SegmentList,
        offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_message: bool,
        lazy: bool = False,
    ) -> tuple[ReadResult, int, int]:
        """The read, the index of the segment it came from and the offset after it."""
        leo = self._log_end_offset
        lso = self._log_start_offset
        if offset < lso or offset > leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {offset} for partition {self.name}, but we only have "
                f"log segments in the range {lso} to {leo}."
            )
        segs = sl.segments
        if max_offset is not None and max_offset >= leo:
            max_offset = None  # nothing to hide beyond the log end
        if offset == leo or (max_offset is not None and offset >= max_offset):
            last = segs[-1]
            return ReadResult(b"", offset, last.log_path, last.size, 0), len(segs) - 1, offset
        i = max(sl.floor_index(offset), 0)
        while i < len(segs):
            seg = segs[i]
            max_position = None
            if max_offset is not None:
                next_base = sl.bases[i + 1] if i + 1 < len(segs) else None
                if next_base is None or max_offset < next_base:
                    bound = seg.translate_offset(max_offset)
                    if bound is not None:
                        max_position = bound.position
            fetched = seg.read(offset, max_bytes, max_position, min_one_message, lazy)
            if fetched is not None:
                result = ReadResult(
                    fetched.records,
                    fetched.first_offset,
                    seg.log_path,
                    fetched.position,
                    fetched.size,
                )
                return result, i, fetched.next_offset
            i += 1
        last = segs[-1]
        return ReadResult(b"", offset, last.log_path, last.size, 0), len(segs) - 1, offset

    # -- lookups ------------------------------------------------------------------------
    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int, int] | None:
        """ListOffsets by time: (offset, timestamp, leader epoch) of the first record >= ts.

        Special timestamps: -1 latest, -2 earliest, -3 max timestamp (as Kafka).
        ``max_offset`` (e.g. the high watermark) hides records at or above it.
        """
        if timestamp == -2:
            return self._log_start_offset, -1, self._epoch_or_minus1(self._log_start_offset)
        if timestamp == -1:
            return self._log_end_offset, -1, self._latest_epoch_or_minus1()
        if timestamp == -3:
            return self.max_timestamp_offset()
        segs = self._segments.segments
        for seg in segs:
            if seg.largest_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self._log_start_offset)
                if found is not None:
                    ts, off, epoch = found
                    limit = (
                        self._log_end_offset
                        if max_offset is None
                        else min(max_offset, self._log_end_offset)
                    )
                    if off >= limit:
                        return None
                    return off, ts, epoch
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """ListOffsets -3: (offset, timestamp, epoch) of the first record with the max timestamp."""
        segs = self._segments.segments
        best: LogSegment | None = None
        for seg in segs:
            if best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        if best is None or best.max_timestamp_so_far < 0:
            return None
        target = best.max_timestamp_so_far
        found = best.find_offset_by_timestamp(target, max(self._log_start_offset, best.base_offset))
        if found is None:
            return None
        ts, off, epoch = found
        return off, ts, epoch

    def _epoch_or_minus1(self, offset: int) -> int:
        e = self.leader_epoch_cache.epoch_for_offset(offset)
        return -1 if e is None else e

    def _latest_epoch_or_minus1(self) -> int:
        e = self.leader_epoch_cache.latest_epoch
        return -1 if e is None else e

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch on this replica."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    # -- truncation ---------------------------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: drop everything at or above ``offset``. Returns whether it did."""
        if offset < 0:
            raise ValueError(
                f"cannot truncate partition {self.name} to a negative offset ({offset})"
            )
        with self.lock:
            self._check_open()
            if offset >= self._log_end_offset:
                return False
            segs = self._segments.segments
            if offset < segs[0].base_offset:
                self.truncate_fully_and_start_at(offset)
                return True
            self.truncations += 1
            keep = [s for s in segs if s.base_offset <= offset]
            drop = [s for s in segs if s.base_offset > offset]
            target = keep[-1]
            removed_base = target.first_removed_base_offset(offset)
            new_leo = (
                offset
                if removed_base is None
                else min(offset, max(removed_base, target.base_offset))
            )
            if drop:
                self._segments = _SegmentList.of(keep)
                self._schedule_delete(drop)
            target.truncate_to(offset)
            self._log_end_offset = new_leo
            self._recovery_point = min(self._recovery_point, new_leo)
            if self._log_start_offset > new_leo:
                self._log_start_offset = new_leo
            self.leader_epoch_cache.truncate_from_end(new_leo)
            rebuild_producer_state(
                self.producer_state,
                self._segments.segments,
                log_start_offset=self._log_start_offset,
                log_end_offset=new_leo,
                now_ms=self.clock_ms(),
                take_snapshot=False,
            )
            self.high_watermark = min(self._high_watermark, new_leo)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at ``offset``."""
        with self.lock:
            self._check_open()
            self.truncations += 1
            old = list(self._segments.segments)
            for seg in old:
                if seg.base_offset == offset:
                    # The new segment takes this name; move the old files away first.
                    seg.change_suffix(DELETED_SUFFIX)
            new = LogSegment(
                self.dir,
                offset,
                self.segment_settings(),
                active=True,
                create=True,
                roll_jitter_ms=self._roll_jitter(),
                created_ms=self.clock_ms(),
            )
            self._segments = _SegmentList.of([new])
            self._schedule_delete(old)
            self._log_end_offset = offset
            self._log_start_offset = offset
            self._recovery_point = offset
            self._high_watermark = offset
            self._dir_dirty = True
            self.leader_epoch_cache.clear()
            self.producer_state.truncate_fully_and_start_at(offset)

    # -- log start / retention ----------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up (``-1`` means the high watermark)."""
        target = self._high_watermark if offset == -1 else offset
        if target < 0 or target > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {target} of partition {self.name} since "
                f"it is larger than the high watermark {self._high_watermark}"
            )
        with self.lock:
            self._maybe_increment_log_start_offset(target)
        return self._log_start_offset

    def _maybe_increment_log_start_offset(self, new_start: int) -> None:
        if new_start > self._log_start_offset:
            self._log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
            self.producer_state.on_log_start_offset_incremented(new_start)

    def _delete_old_segments(
        self,
        select: Callable[[Sequence[LogSegment]], list[LogSegment]],
        now_ms: int | None = None,
    ) -> int:
        """Delete the oldest segments ``select`` picks (a :mod:`odradek.log.retention` rule)."""
        with self.lock:
            self._check_open()
            deletable = select(self._segments.segments)
            if not deletable:
                return 0
            if len(deletable) == len(self._segments.segments):
                # Always keep one segment: roll first, then delete the old active one.
                self.roll()
            gone = {id(s) for s in deletable}
            remaining = [s for s in self._segments.segments if id(s) not in gone]
            self._segments = _SegmentList.of(remaining)
            self._schedule_delete(deletable, now_ms)
            self._maybe_increment_log_start_offset(remaining[0].base_offset)
            self.producer_state.delete_snapshots_below(remaining[0].base_offset)
            return len(deletable)

    def delete_retention_ms_breached_segments(self, now_ms: int | None = None) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        now = self.clock_ms() if now_ms is None else now_ms
        return self._delete_old_segments(
            lambda segs: retention.retention_ms_breached(
                segs,
                log_end_offset=self._log_end_offset,
                high_watermark=self._high_watermark,
                now_ms=now,
                retention_ms=retention_ms,
            ),
            now,
        )

    def delete_retention_size_breached_segments(self, now_ms: int | None = None) -> int:
        retention_bytes = self.config.retention_bytes
        if retention_bytes < 0:
            return 0
        return self._delete_old_segments(
            lambda segs: retention.retention_size_breached(
                segs,
                log_end_offset=self._log_end_offset,
                high_watermark=self._high_watermark,
                retention_bytes=retention_bytes,
            ),
            now_ms,
        )

    def delete_log_start_offset_breached_segments(self, now_ms: int | None = None) -> int:
        return self._delete_old_segments(
            lambda segs: retention.log_start_offset_breached(
                segs,
                log_end_offset=self._log_end_offset,
                high_watermark=self._high_watermark,
                log_start_offset=self._log_start_offset,
            ),
            now_ms,
        )

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention pass per cleanup.policy (Kafka's UnifiedLog.deleteOldSegments)."""
        now = self.clock_ms() if now_ms is None else now_ms
        if self.config.delete:
            return (
                self.delete_log_start_offset_breached_segments(now)
                + self.delete_retention_size_breached_segments(now)
                + self.delete_retention_ms_breached_segments(now)
            )
        return self.delete_log_start_offset_breached_segments(now)

    def _schedule_delete(self, segments: Iterable[LogSegment], now_ms: int | None = None) -> None:
        due = (self.clock_ms() if now_ms is None else now_ms) + self.config.file_delete_delay_ms
        for seg in segments:
            if seg.suffix != DELETED_SUFFIX:
                seg.change_suffix(DELETED_SUFFIX)
            self._pending_deletes.append((due, seg))

    def purge_deleted(self, now_ms: int | None = None) -> int:
        """Remove ``.deleted`` files whose ``file.delete.delay.ms`` has passed."""
        now = self.clock_ms() if now_ms is None else now_ms
        with self.lock:
            due = [(d, s) for d, s in self._pending_deletes if d <= now]
            self._pending_deletes = [(d, s) for d, s in self._pending_deletes if d > now]
        for _, seg in due:
            seg.delete_files()
        return len(due)

    @property
    def pending_deletes(self) -> int:
        return len(self._pending_deletes)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        with self.lock:
            return self.producer_state.remove_expired_producers(
                self.clock_ms() if now_ms is None else now_ms
            )

    # -- compaction support -------------------------------------------------------------
    def replace_segments(
        self,
        new_segment: LogSegment,
        old: list[LogSegment],
        crash_hook: Callable[[str], None],
        truncations: int | None = None,
    ) -> bool:
        """Swap a compacted segment in for ``old``; False when ``old`` is no longer all there
        or the log was truncated since ``truncations`` was read (the compaction is stale).

        Order (Kafka's LocalLog.replaceSegments): ``.cleaned`` -> ``.swap``; the
        in-memory list; old segments -> ``.deleted``; ``.swap`` -> final names.
        """
        with self.lock:
            if self._closed or (truncations is not None and truncations != self.truncations):
                return False
            segs = self._segments.segments
            ids = {id(s) for s in segs}
            if any(id(s) not in ids for s in old):
                return False
            new_segment.change_suffix(SWAP_SUFFIX, after_log=lambda: crash_hook("mid_swap_rename"))
            crash_hook("after_swap_rename")
            old_ids = {id(s) for s in old}
            replaced: list[LogSegment] = []
            inserted = False
            for s in segs:
                if id(s) in old_ids:
                    if not inserted:
                        replaced.append(new_segment)
                        inserted = True
                else:
                    replaced.append(s)
            self._segments = _SegmentList.of(replaced)
            crash_hook("after_segment_list_swap")
            for n, seg in enumerate(old):
                seg.change_suffix(DELETED_SUFFIX)
                if n == 0:
                    crash_hook("after_first_old_deleted")
            self._pending_deletes.extend(
                (self.clock_ms() + self.config.file_delete_delay_ms, s) for s in old
            )
            crash_hook("after_old_deleted")
            new_segment.change_suffix("", after_log=lambda: crash_hook("mid_swap_final"))
            crash_hook("after_swap_final")
            self._dir_dirty = True
            return True

    # -- flush / close ------------------------------------------------------------------
    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below ``up_to`` (default: everything) and advance
        the recovery point; safe to call from a worker thread."""
        offset = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        if offset <= self._recovery_point:
            return
        sl = self._segments
        start = self._recovery_point
        for i, seg in enumerate(sl.segments):
            next_base = sl.bases[i + 1] if i + 1 < len(sl.bases) else None
            if next_base is not None and next_base <= start:
                continue
            if seg.base_offset >= offset:
                break
            try:
                seg.flush()
            except OSError:
                if not seg.closed:
                    raise
        with self.lock:
            rolled, self._rolled_unsynced = self._rolled_unsynced, []
        for seg in rolled:
            try:
                seg.flush()  # a rolled segment's trimmed indexes and final time index entry
            except OSError:
                if not seg.closed:
                    raise
        if self._dir_dirty:
            self._dir_dirty = False
            fsync_dir(self.dir)
        self.producer_state.flush_snapshots()
        with self.lock:
            if offset > self._recovery_point:
                self._recovery_point = offset
        self._last_flush_ms = self.clock_ms()

    def flush_rolled_segments(self) -> None:
        """Flush everything below the active segment (Kafka schedules this at each roll)."""
        active_base = self._segments.segments[-1].base_offset
        if active_base > self._recovery_point:
            self.flush(active_base)

    def flush_due(self, now_ms: int) -> bool:
        """Whether :meth:`flush_rolled_segments` or :meth:`maybe_flush_for_time` would
        flush now: a cheap look, no I/O, no lock (the storage node asks it on its event
        loop before handing the flush job to a thread)."""
        if self._segments.segments[-1].base_offset > self._recovery_point:
            return True
        return (
            self.config.flush_ms < LONG_MAX and now_ms - self._last_flush_ms >= self.config.flush_ms
        )

    def maybe_flush_for_time(self, now_ms: int | None = None) -> bool:
        """Apply ``flush.ms``: flush when the last flush is older than it."""
        now = self.clock_ms() if now_ms is None else now_ms
        if self.config.flush_ms < LONG_MAX and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    @property
    def last_flush_ms(self) -> int:
        return self._last_flush_ms

    def update_config(self, config: LogConfig) -> None:
        """New topic configs apply to the next append/roll/retention pass."""
        self.config = config

    def close(self, *, flush: bool = True) -> None:
        """Clean close: flush, producer snapshot at the log end, trimmed indexes."""
        with self.lock:
            if self._closed:
                return
            if flush:
                self.flush()
            self.producer_state.map_end_offset = self._log_end_offset
            self.producer_state.take_snapshot(sync=flush)
            for seg in self._segments.segments:
                seg.close(sync=flush)
            if flush:
                fsync_dir(self.dir)
            self._closed = True
            pending = self._pending_deletes
            self._pending_deletes = []
        for _, seg in pending:
            seg.delete_files()

    def close_handles(self) -> None:
        """Close every descriptor without flushing or writing (the directory is going away)."""
        with self.lock:
            for seg in self._segments.segments:
                seg.close_handles()
            for _, seg in self._pending_deletes:
                seg.close_handles()
            self._pending_deletes = []
            self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def delete(self) -> None:
        """Remove the whole partition directory."""
        self.close_handles()
        shutil.rmtree(self.dir, ignore_errors=True)
