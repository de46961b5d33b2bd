"""Idempotent and transactional producer state of one partition, and its ``.snapshot`` files
(Kafka's ProducerStateManager, ProducerStateEntry, ProducerAppendInfo, VerificationStateEntry).

Per producer id: the current epoch, the last 5 appended batches (first/last sequence,
first/last offset, max timestamp) for duplicate detection, the coordinator epoch of
the last transaction marker and the first offset of the producer's ongoing
transaction. Per partition: the ongoing transactions by first offset, the completed
transactions whose marker is not yet below the high watermark ("unreplicated"), and
the KIP-890 verification state of producers about to start a transaction.

The first unstable offset is the smallest first offset over ongoing and unreplicated
transactions; the log's last stable offset is ``min(first unstable offset, high
watermark)``. An appended ABORT/COMMIT marker completes its producer's transaction
(:class:`CompletedTxn`); the log writes aborted ones to ``.txnindex``
(:mod:`odradek.log.transaction_index`) with the LSO of that moment
(:meth:`ProducerStateManager.last_stable_offset`), then calls
:meth:`ProducerStateManager.complete_txn`.

Appends are checked per origin (Kafka's AppendOrigin): a client's produce gets the
duplicate, epoch, sequence and transaction checks; a coordinator's append (markers,
transactional offset commits) the epoch and transaction checks; a replicated or
replayed batch none (it is applied as the leader wrote it).

Snapshot file ``<offset, 20 digits>.snapshot`` = state of the log below that offset,
big-endian::

    int16  version = 1
    uint32 crc              CRC-32C of every byte after this field
    int32  count
    count x (46 bytes):
      int64 producerId      int16 producerEpoch     int32 lastSequence
      int64 lastOffset      int32 offsetDelta (lastSequence - firstSequence of the last batch)
      int64 timestamp       int32 coordinatorEpoch  int64 currentTxnFirstOffset (-1: none)

An empty snapshot is exactly 10 bytes. Only each producer's last batch is stored (as
Kafka does), so after a reload duplicates of that batch are still detected, earlier
ones no longer. ``currentTxnFirstOffset`` keeps ongoing transactions across restarts:
loading a snapshot re-registers them, so the LSO after a restart still stops at a
transaction that was open when the snapshot was taken.

Invariants: snapshots are taken at segment rolls (at the new segment's base offset)
and on clean close (at the log end offset); a snapshot never describes offsets above
the log end. A producer with an ongoing transaction never expires. Crash behaviour:
snapshots are written to a temp file and renamed; a torn or corrupt one fails its CRC
and is deleted on load, and the state is rebuilt from an older snapshot (or the log
start) by replaying batches. Snapshots above a truncation point or below the log start
offset are deleted. Verification state lives in memory only (a restart forgets it; the
next transactional produce verifies again).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
import os
import struct
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import crc32c as _crc32c

from odradek.config_catalog.storage import STORAGE_CONFIGS
from odradek.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from odradek.records.control import ControlRecordType, EndTransactionMarker
from odradek.records.header import BatchHeader, Buffer

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5
NO_SEQUENCE = -1
NO_PRODUCER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF
DEFAULT_PRODUCER_ID_EXPIRATION_MS = STORAGE_CONFIGS.int("producer.id.expiration.ms")

_HEADER = struct.Struct(">hIi")  # version, crc, count
_ENTRY = struct.Struct(">qhiqiqiq")


class CorruptSnapshotError(ValueError):
    pass


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None

    def maybe_update_producer_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, ts: int
    ) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, ts))
        self.last_timestamp = ts

    def pending_copy(self) -> ProducerStateEntry:
        """Same epoch, coordinator epoch, transaction and timestamp, no batches yet
        (Kafka's withProducerIdAndBatchMetadata: what an append builds on)."""
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
            last_timestamp=self.last_timestamp,
        )

    def update_from(self, nxt: ProducerStateEntry) -> None:
        """Take what an append produced (Kafka's ProducerStateEntry.update)."""
        self.maybe_update_producer_epoch(nxt.producer_epoch)
        self.batches.extend(nxt.batches)  # the deque keeps the last 5
        self.coordinator_epoch = nxt.coordinator_epoch
        self.current_txn_first_offset = nxt.current_txn_first_offset
        self.last_timestamp = nxt.last_timestamp

    def end_transaction(self, epoch: int, coordinator_epoch: int, ts: int) -> None:
        """A marker ends the producer's transaction (Kafka's update(epoch, coordEpoch, ts))."""
        self.maybe_update_producer_epoch(epoch)
        self.coordinator_epoch = coordinator_epoch
        self.current_txn_first_offset = -1
        self.last_timestamp = ts


@dataclass(slots=True, frozen=True)
class DuplicateInfo:
    """The original placement of a retried batch: answer success with these, append nothing."""

    first_offset: int
    last_offset: int
    timestamp: int


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): decides which producer checks apply."""

    CLIENT = "client"  # a producer's Produce: every check
    COORDINATOR = "coordinator"  # markers, transactional offset commits: no sequence checks
    REPLICATION = "replication"  # follower appends and replay: no checks


@dataclass(slots=True)
class TxnMetadata:
    """A transaction of one producer in this partition; ``last_offset`` is its marker (-1: open)."""

    producer_id: int
    first_offset: int
    last_offset: int = -1


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker just ended (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class VerificationGuard:
    """A unique token for one KIP-890 verification (Kafka's VerificationGuard).

    Created when the leader asks the transaction coordinator whether a transaction is
    ongoing; the append must present the very same guard. Any transactional append
    (data or marker) of the producer drops it, so a verification answered before an
    ABORT marker landed can never open a new, hanging transaction after it.
    """

    __slots__ = ("value",)
    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.value = next(VerificationGuard._ids)

    def __repr__(self) -> str:
        return f"VerificationGuard(value={self.value})"


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer being verified (Kafka's VerificationStateEntry): the guard, and the lowest
    sequence seen meanwhile so a higher one cannot overtake a retried lower one."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


class ProducerAppendInfo:
    """Checks one producer's batches of one append against its state and accumulates the
    result without touching the stored state (Kafka's ProducerAppendInfo)."""

    __slots__ = (
        "current",
        "origin",
        "producer_id",
        "started",
        "topic_partition",
        "updated",
        "verification",
    )

    def __init__(
        self,
        topic_partition: str,
        producer_id: int,
        current: ProducerStateEntry | None,
        origin: AppendOrigin,
        verification: VerificationStateEntry | None,
    ) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current = current if current is not None else ProducerStateEntry(producer_id)
        self.origin = origin
        self.verification = verification
        self.updated = self.current.pending_copy()
        self.started: list[TxnMetadata] = []

    def _check_producer_epoch(self, epoch: int, offset: int) -> None:
        if epoch < self.updated.producer_epoch:
            message = (
                f"Epoch of producer {self.producer_id} at offset {offset} in "
                f"{self.topic_partition} is {epoch}, which is smaller than the last seen epoch "
                f"{self.updated.producer_epoch}"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.warning("%s", message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        pid, tp = self.producer_id, self.topic_partition
        v = self.verification
        if v is not None and first_seq > v.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {pid} at offset {offset} in "
                f"partition {tp}: {first_seq} (incoming seq. number), {v.lowest_sequence} "
                "(earliest seen sequence)"
            )
        updated = self.updated
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {pid} at offset {offset} "
                    f"in partition {tp}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)"
                )
            return
        if updated.batches:
            current_last = updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last = self.current.last_seq
        else:
            current_last = NO_SEQUENCE
        # No known epoch (e.g. everything of the producer was deleted): any sequence goes.
        if not (
            self.current.producer_epoch == NO_PRODUCER_EPOCH or in_sequence(current_last, first_seq)
        ):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {pid} at offset {offset} in "
                f"partition {tp}: {first_seq} (incoming seq. number), {current_last} (current "
                "end sequence number)"
            )

    def append_data_batch(self, h: BatchHeader) -> None:
        first_offset = h.base_offset
        self._check_producer_epoch(h.producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(h.producer_epoch, h.base_sequence, first_offset)
        updated = self.updated
        updated.add_batch(
            h.producer_epoch,
            h.last_sequence,
            first_offset + h.last_offset_delta,
            h.last_offset_delta,
            h.max_timestamp,
        )
        transactional = h.is_transactional
        if updated.current_txn_first_offset >= 0 and not transactional:
            message = (
                f"Expected transactional write from producer {self.producer_id} at offset "
                f"{first_offset} in partition {self.topic_partition}"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidTxnStateError(message)
            log.warning("%s", message)
        elif updated.current_txn_first_offset < 0 and transactional:
            updated.current_txn_first_offset = first_offset
            self.started.append(TxnMetadata(self.producer_id, first_offset))

    def _check_coordinator_epoch(self, marker: EndTransactionMarker, offset: int) -> None:
        known = self.updated.coordinator_epoch
        if known > marker.coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset} "
                f"in partition {self.topic_partition}: {marker.coordinator_epoch} (zombie), "
                f"{known} (current)"
            )
            if self.origin is AppendOrigin.REPLICATION:
                log.info("%s", message)
            else:
                raise TransactionCoordinatorFencedError(message)

    def append_end_txn_marker(
        self, marker: EndTransactionMarker, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """Apply a COMMIT/ABORT marker; returns the transaction it ends (None if it wrote
        no data here: such a marker moves neither the LSO nor the index)."""
        self._check_producer_epoch(epoch, offset)
        self._check_coordinator_epoch(marker, offset)
        updated = self.updated
        completed = None
        if updated.current_txn_first_offset >= 0:
            completed = CompletedTxn(
                self.producer_id,
                updated.current_txn_first_offset,
                offset,
                marker.control_type == ControlRecordType.ABORT,
            )
        updated.end_transaction(epoch, marker.coordinator_epoch, timestamp)
        return completed


@dataclass(slots=True)
class ProducerAppend:
    """What checking one append found: per-producer results and the transactions it ends."""

    infos: dict[int, ProducerAppendInfo]
    completed: list[CompletedTxn]
    transactional: bool  # a transactional batch: the producer's verification state goes


# -- snapshot codec (pure) ----------------------------------------------------------------
def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for e in entries:
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        count += 1
    payload = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", SNAPSHOT_VERSION, _crc32c.crc32c(payload)) + payload


def decode_snapshot(data: Buffer) -> list[ProducerStateEntry]:
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is shorter than its header")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot contained an unknown file version {version}")
    if _crc32c.crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshotError("snapshot is corrupt (CRC is no longer valid)")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"snapshot entry count {count} does not match its size")
    out: list[ProducerStateEntry] = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in _ENTRY.iter_unpack(
        memoryview(data)[_HEADER.size :]
    ):
        entry = ProducerStateEntry(
            pid, epoch, coordinator_epoch=coord, current_txn_first_offset=txn_first
        )
        entry.last_timestamp = ts
        if last_offset >= 0:
            entry.batches.append(BatchMetadata(last_seq, last_offset, delta, ts))
        out.append(entry)
    return out


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(log_dir: Path) -> list[tuple[int, Path]]:
    """``(offset, path)`` of every snapshot file, sorted by offset."""
    out = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(log_dir):
            if name.endswith(SNAPSHOT_SUFFIX) and name[: -len(SNAPSHOT_SUFFIX)].isdigit():
                out.append((int(name[: -len(SNAPSHOT_SUFFIX)]), Path(log_dir) / name))
    out.sort()
    return out


class ProducerStateManager:
    """Producer ids -> state for one partition, kept in step with the log up to ``map_end_offset``."""

    def __init__(
        self,
        log_dir: Path | None,
        *,
        topic_partition: str = "",
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ) -> None:
        self.log_dir = log_dir
        self.topic_partition = topic_partition
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        # Transactions by first offset: undecided, and decided but marker not yet replicated.
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        self.verification_states: dict[int, VerificationStateEntry] = {}
        self.map_end_offset = 0
        self._unsynced: list[Path] = []

    # -- produce path ---------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def check_and_prepare(
        self,
        headers: Sequence[BatchHeader],
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        markers: Mapping[int, EndTransactionMarker | None] | None = None,
        verification_guard: VerificationGuard | None = None,
        verification_required: bool = False,
    ) -> ProducerAppend | DuplicateInfo | None:
        """Check one append's batches (offsets assigned) in order, without changing state
        (Kafka's UnifiedLog.analyzeAndValidateProducerState).

        Returns the original placement when a client's batch repeats one of the
        producer's last 5 (the whole append is then a duplicate), None when no batch has
        a producer id, else the :class:`ProducerAppend` to :meth:`apply` once the
        batches are written. ``markers`` gives the parsed marker of each control batch by
        index (None: an empty control batch). Raises InvalidProducerEpochError,
        OutOfOrderSequenceError, InvalidTxnStateError (a non-transactional batch inside
        a transaction, or a transaction this leader did not verify when
        ``verification_required``) and TransactionCoordinatorFencedError.
        """
        infos: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        transactional = False
        checks = origin is not AppendOrigin.REPLICATION
        for i, h in enumerate(headers):
            pid = h.producer_id
            if pid < 0:
                continue
            stored = self.producers.get(pid)
            is_control = h.is_control
            if origin is AppendOrigin.CLIENT and stored is not None and not is_control:
                dup = stored.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence)
                if dup is not None:
                    return DuplicateInfo(dup.first_offset, dup.last_offset, dup.timestamp)
            is_txn = h.is_transactional
            if (
                checks
                and verification_required
                and is_txn
                and not is_control
                and not (stored is not None and stored.current_txn_first_offset >= 0)
            ):
                state = self.verification_states.get(pid)
                if (
                    verification_guard is None
                    or state is None
                    or state.guard is not verification_guard
                ):
                    raise InvalidTxnStateError("Record was not part of an ongoing transaction")
            info = infos.get(pid)
            if info is None:
                info = ProducerAppendInfo(
                    self.topic_partition, pid, stored, origin, self.verification_states.get(pid)
                )
                infos[pid] = info
            if is_control:
                marker = markers.get(i) if markers is not None else None
                if marker is not None:
                    done = info.append_end_txn_marker(
                        marker, h.producer_epoch, h.base_offset, h.max_timestamp
                    )
                    if done is not None:
                        completed.append(done)
            else:
                info.append_data_batch(h)
            transactional = transactional or is_txn
        if not infos:
            return None
        return ProducerAppend(infos, completed, transactional)

    def apply(self, append: ProducerAppend) -> list[CompletedTxn]:
        """Store what :meth:`check_and_prepare` found (the batches are in the log now).

        Returns the transactions the append ended; for each, the log writes the index
        entry (aborts) with :meth:`last_stable_offset`, then calls :meth:`complete_txn`.
        """
        for pid, info in append.infos.items():
            current = self.producers.get(pid)
            if current is None:
                self.producers[pid] = info.updated
            else:
                current.update_from(info.updated)
            for txn in info.started:
                self.ongoing_txns[txn.first_offset] = txn
            if append.transactional:
                # Written data or a marker: verification is done (or void) either way.
                self.verification_states.pop(pid, None)
        return append.completed

    def replay(
        self, h: BatchHeader, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Apply one batch as written (follower, recovery, replay); returns the transaction a
        marker ended, already completed here, for a caller that writes the index."""
        if h.producer_id >= 0:
            append = self.check_and_prepare(
                (h,), origin=AppendOrigin.REPLICATION, markers={0: marker} if h.is_control else None
            )
            done = None
            if isinstance(append, ProducerAppend):
                completed = self.apply(append)
                done = completed[0] if completed else None
        else:
            done = None
        if h.next_offset > self.map_end_offset:
            self.map_end_offset = h.next_offset
        return done

    def update_from_batch(self, h: BatchHeader, marker: EndTransactionMarker | None = None) -> None:
        """Replay one batch and complete any transaction it ends (no index is written)."""
        done = self.replay(h, marker)
        if done is not None:
            self.complete_txn(done)

    # -- transactions ---------------------------------------------------------------------
    def maybe_create_verification_state(
        self, producer_id: int, sequence: int, epoch: int, now_ms: int
    ) -> VerificationStateEntry:
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = VerificationStateEntry(now_ms, sequence, epoch)
            self.verification_states[producer_id] = entry
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state(self, producer_id: int) -> VerificationStateEntry | None:
        return self.verification_states.get(producer_id)

    def clear_verification_state(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def first_undecided_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def first_unstable_offset(self) -> int | None:
        """Smallest first offset of an undecided transaction or of a decided one whose marker
        is not below the high watermark yet (Kafka's firstUnstableOffset)."""
        ongoing = min(self.ongoing_txns) if self.ongoing_txns else None
        unreplicated = min(self.unreplicated_txns) if self.unreplicated_txns else None
        if ongoing is None:
            return unreplicated
        if unreplicated is None:
            return ongoing
        return min(ongoing, unreplicated)

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction: the next undecided transaction of
        another producer, else just past the marker."""
        for first in sorted(self.ongoing_txns):
            txn = self.ongoing_txns[first]
            if txn.producer_id != completed.producer_id:
                return first
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """Move the transaction to the unreplicated ones until the high watermark passes its marker."""
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            txn = TxnMetadata(completed.producer_id, completed.first_offset)
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def _remove_unreplicated_below(self, offset: int) -> None:
        if self.unreplicated_txns:
            gone = [f for f, t in self.unreplicated_txns.items() if t.last_offset < offset]
            for first in gone:
                del self.unreplicated_txns[first]

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_below(high_watermark)

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_below(log_start_offset)
        if self.map_end_offset < log_start_offset:
            self.map_end_offset = log_start_offset

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # -- expiration ---------------------------------------------------------------------
    def _expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset < 0
            and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> int:
        expired = [pid for pid, e in self.producers.items() if self._expired(e, now_ms)]
        for pid in expired:
            del self.producers[pid]
        stale = [
            pid
            for pid, v in self.verification_states.items()
            if now_ms - v.timestamp >= self.producer_id_expiration_ms
        ]
        for pid in stale:
            del self.verification_states[pid]
        return len(expired)

    def clear_state(self) -> None:
        """Forget every producer and transaction (snapshots stay)."""
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            first = entry.current_txn_first_offset
            self.ongoing_txns[first] = TxnMetadata(entry.producer_id, first)

    # -- snapshots ----------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        if self.log_dir is None:
            return []
        return [o for o, _ in list_snapshots(self.log_dir)]

    def latest_snapshot_offset(self) -> int | None:
        offs = self.snapshot_offsets()
        return offs[-1] if offs else None

    def take_snapshot(self, *, sync: bool = False) -> Path | None:
        """Write the state at ``map_end_offset`` (unsynced ones are fsynced by the next flush)."""
        if self.log_dir is None:
            return None
        path = self.log_dir / snapshot_file_name(self.map_end_offset)
        data = encode_snapshot(self.producers.values())
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if not sync:
            self._unsynced.append(path)
        return path

    def flush_snapshots(self) -> None:
        """fsync the snapshots written since the last flush (their offsets are now durable)."""
        pending, self._unsynced = self._unsynced, []
        for path in pending:
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)

    def delete_snapshots_above(self, offset: int) -> None:
        """Remove snapshots taken beyond ``offset`` (the log was truncated to it)."""
        if self.log_dir is None:
            return
        for off, path in list_snapshots(self.log_dir):
            if off > offset:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def delete_snapshots_below(self, offset: int) -> None:
        """Remove snapshots older than ``offset`` (the log start moved past them)."""
        if self.log_dir is None:
            return
        for off, path in list_snapshots(self.log_dir):
            if off < offset:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def delete_snapshot(self, offset: int) -> None:
        if self.log_dir is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.log_dir / snapshot_file_name(offset)).unlink()

    def load_latest_snapshot(self, max_offset: int, now_ms: int | None = None) -> int | None:
        """Replace the state with the newest valid snapshot at or below ``max_offset``.

        Corrupt snapshots are deleted and older ones tried; returns the loaded snapshot's
        offset (now ``map_end_offset``), or None when there is none (state emptied).
        """
        self.clear_state()
        if self.log_dir is None:
            return None
        for off, path in reversed(list_snapshots(self.log_dir)):
            if off > max_offset:
                continue
            try:
                entries = decode_snapshot(path.read_bytes())
            except (CorruptSnapshotError, OSError):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            for entry in entries:
                if now_ms is not None and self._expired(entry, now_ms):
                    continue
                self._load_entry(entry)
            self.map_end_offset = off
            return off
        return None

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.clear_state()
        if self.log_dir is not None:
            for _, path in list_snapshots(self.log_dir):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self.map_end_offset = offset

    def active_producers_last_records(self) -> dict[int, tuple[int, int]]:
        """producer id -> (last data offset or -1, epoch): the batch compaction must keep for
        each live producer (Kafka's lastRecordsOfActiveProducers): its last data batch, or
        with none left, a marker of its current epoch."""
        return {pid: (e.last_data_offset, e.producer_epoch) for pid, e in self.producers.items()}
