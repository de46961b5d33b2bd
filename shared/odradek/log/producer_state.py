"""Idempotent-producer state of one partition and its ``.snapshot`` files (Kafka's ProducerStateManager).

Per producer id: the current epoch, the last 5 appended batches (first/last sequence,
first/last offset, max timestamp) for duplicate detection, the coordinator epoch and
the first offset of an ongoing transaction.

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
ones no longer.

Invariants: snapshots are taken at segment rolls (at the new segment's base offset)
and on clean close (at the log end offset); a snapshot never describes offsets above
the log end. Crash behaviour: snapshots are written to a temp file and renamed; a
torn or corrupt one fails its CRC and is deleted on load, and the state is rebuilt
from an older snapshot (or the log start) by replaying batches. Snapshots above a
truncation point or below the log start offset are deleted.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c as _crc32c

from odradek.config_catalog.storage import STORAGE_CONFIGS
from odradek.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.records.header import BatchHeader, Buffer

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
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, ts: int
    ) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, ts))
        self.last_timestamp = ts


@dataclass(slots=True, frozen=True)
class DuplicateInfo:
    """The original placement of a retried batch: answer success with these, append nothing."""

    first_offset: int
    last_offset: int
    timestamp: int


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
        self.map_end_offset = 0
        self._unsynced: list[Path] = []

    # -- produce path ---------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def check_and_prepare(
        self, headers: Iterable[BatchHeader], first_offset_hint: int = -1
    ) -> DuplicateInfo | None:
        """Kafka's client-append checks over every batch of one produce, in order.

        Returns the original offsets when a batch repeats one of the producer's last 5
        (the whole append is then a duplicate); raises InvalidProducerEpochError or
        OutOfOrderSequenceError; returns None when the batches may be appended.
        """
        stored: ProducerStateEntry | None = None
        cur_epoch = NO_PRODUCER_EPOCH
        cur_last_seq = NO_SEQUENCE
        pending = False  # batches of this append already accepted
        offset_hint = first_offset_hint
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                return None
            if stored is None and not pending:
                stored = self.producers.get(pid)
                if stored is not None:
                    cur_epoch = stored.producer_epoch
                    cur_last_seq = stored.last_seq
            epoch, first_seq, last_delta = h.producer_epoch, h.base_sequence, h.last_offset_delta
            is_control = h.is_control
            last_seq = NO_SEQUENCE if first_seq < 0 else (first_seq + last_delta) % (INT32_MAX + 1)
            if stored is not None and not is_control:
                dup = stored.find_duplicate(epoch, first_seq, last_seq)
                if dup is not None:
                    return DuplicateInfo(dup.first_offset, dup.last_offset, dup.timestamp)
            stored_epoch = stored.producer_epoch if stored is not None else NO_PRODUCER_EPOCH
            if epoch < cur_epoch:
                raise InvalidProducerEpochError(
                    f"Epoch of producer {pid} at offset {offset_hint} in {self.topic_partition} is "
                    f"{epoch}, which is smaller than the last seen epoch {cur_epoch}"
                )
            if first_seq >= 0 and not is_control:
                if epoch != cur_epoch:
                    if first_seq != 0 and cur_epoch != NO_PRODUCER_EPOCH:
                        raise OutOfOrderSequenceError(
                            f"Invalid sequence number for new epoch of producer {pid} at offset "
                            f"{offset_hint} in partition {self.topic_partition}: {epoch} (request "
                            f"epoch), {first_seq} (seq. number), {cur_epoch} (current producer epoch)"
                        )
                elif not (
                    stored_epoch == NO_PRODUCER_EPOCH or in_sequence(cur_last_seq, first_seq)
                ):
                    raise OutOfOrderSequenceError(
                        f"Out of order sequence number for producer {pid} at offset {offset_hint} "
                        f"in partition {self.topic_partition}: {first_seq} (incoming seq. number), "
                        f"{cur_last_seq} (current end sequence number)"
                    )
                cur_last_seq = last_seq
            cur_epoch = epoch
            pending = True
            if offset_hint >= 0:
                offset_hint += last_delta + 1
        return None

    def update_from_batch(self, h: BatchHeader) -> None:
        """Record one appended batch (offsets already assigned): leader, follower or replay."""
        if h.producer_id < 0:
            return
        self.update(
            producer_id=h.producer_id,
            producer_epoch=h.producer_epoch,
            first_seq=h.base_sequence,
            last_offset_delta=h.last_offset_delta,
            first_offset=h.base_offset,
            max_timestamp=h.max_timestamp,
            is_transactional=h.is_transactional,
            is_control=h.is_control,
        )

    def update(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        first_seq: int,
        last_offset_delta: int,
        first_offset: int,
        max_timestamp: int,
        is_transactional: bool = False,
        is_control: bool = False,
    ) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerStateEntry(producer_id)
            self.producers[producer_id] = entry
        last_offset = first_offset + last_offset_delta
        if is_control:
            if producer_epoch != entry.producer_epoch:
                entry.batches.clear()
                entry.producer_epoch = producer_epoch
            entry.current_txn_first_offset = -1
            entry.last_timestamp = max_timestamp
        else:
            last_seq = (
                NO_SEQUENCE if first_seq < 0 else (first_seq + last_offset_delta) % (INT32_MAX + 1)
            )
            entry.add_batch(producer_epoch, last_seq, last_offset, last_offset_delta, max_timestamp)
            if is_transactional and entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
        if last_offset + 1 > self.map_end_offset:
            self.map_end_offset = last_offset + 1

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
        return len(expired)

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
        self.producers.clear()
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
                self.producers[entry.producer_id] = entry
            self.map_end_offset = off
            return off
        return None

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        if self.log_dir is not None:
            for _, path in list_snapshots(self.log_dir):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        self.map_end_offset = offset

    def active_producers_last_offsets(self) -> dict[int, int]:
        """producer id -> last data offset (the cleaner keeps these batches' headers)."""
        return {pid: e.last_data_offset for pid, e in self.producers.items()}
