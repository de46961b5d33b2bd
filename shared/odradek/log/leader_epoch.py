"""Leader epoch cache and its ``leader-epoch-checkpoint`` file (Kafka's LeaderEpochFileCache).

File layout (text, UTF-8, ``\\n`` line ends)::

    0                      version
    <count>                number of entries
    <epoch> <startOffset>  one line per entry, epochs and start offsets increasing

e.g. a partition led only in epoch 0 from offset 0 is the 8-byte file ``0\\n1\\n0 0\\n``.

Invariants: epochs strictly increase and so do start offsets; an entry ``(e, o)`` means
the batches from offset ``o`` up to the next entry's start were written in epoch ``e``.

Crash behaviour: every change is written to ``<file>.tmp``, fsynced, and renamed over
the checkpoint (then the directory is fsynced), so a crash leaves the old or the new
file, never a torn one. Entries beyond the log end offset that survive a crash are
removed by :meth:`LeaderEpochCache.truncate_from_end` during log recovery.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from odradek.log.checkpoints import CheckpointError, atomic_write_text, read_text_file

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
CHECKPOINT_FILE = "leader-epoch-checkpoint"
_VERSION = 0


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def format_checkpoint(entries: Iterable[EpochEntry]) -> str:
    items = list(entries)
    lines = [str(_VERSION), str(len(items))] + [f"{e.epoch} {e.start_offset}" for e in items]
    return "\n".join(lines) + "\n"


def parse_checkpoint(text: str, source: str = "leader-epoch-checkpoint") -> list[EpochEntry]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"Malformed leader epoch checkpoint {source}: missing header")
    try:
        version = int(lines[0])
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"Malformed leader epoch checkpoint {source}: bad header") from None
    if version != _VERSION:
        raise CheckpointError(f"Unrecognized version of the checkpoint file {source}: {version}")
    body = lines[2:]
    if count != len(body):
        raise CheckpointError(
            f"Expected {count} entries in checkpoint file {source}, but found {len(body)}"
        )
    out: list[EpochEntry] = []
    for line in body:
        parts = line.split(" ")
        if len(parts) != 2:
            raise CheckpointError(f"Malformed line in checkpoint file {source}: '{line}'")
        try:
            out.append(EpochEntry(int(parts[0]), int(parts[1])))
        except ValueError:
            raise CheckpointError(f"Malformed line in checkpoint file {source}: '{line}'") from None
    return out


class LeaderEpochCache:
    """``(leader epoch -> start offset)`` for one partition, persisted on every change.

    ``path=None`` keeps it in memory only (tests, or a log being rebuilt).
    """

    def __init__(self, path: Path | None, *, fsync: bool = True) -> None:
        self.path = path
        self._fsync = fsync
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        text = read_text_file(path) if path is not None else None
        if text is not None:
            for entry in parse_checkpoint(text, str(path)):
                self._assign(entry.epoch, entry.start_offset)

    # -- queries ------------------------------------------------------------------------
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return [EpochEntry(e, o) for e, o in zip(self._epochs, self._offsets, strict=True)]

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> int | None:
        epochs = self._epochs
        return epochs[-1] if epochs else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        with self._lock:
            if not self._epochs:
                return None
            return EpochEntry(self._epochs[-1], self._offsets[-1])

    @property
    def earliest_entry(self) -> EpochEntry | None:
        with self._lock:
            if not self._epochs:
                return None
            return EpochEntry(self._epochs[0], self._offsets[0])

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (ListOffsets answers with it)."""
        with self._lock:
            i = bisect.bisect_right(self._offsets, offset) - 1
            return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(largest epoch <= requested, end offset of that epoch)``.

        As Kafka's LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log
        end offset; an epoch between known ones answers the floor epoch and the start of
        the next higher one; an epoch below every known one answers itself with the start
        offset of the first known epoch (the data before it is gone); an undefined or a
        too-high epoch answers ``(-1, -1)``.
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._epochs[-1] == requested_epoch:
                return requested_epoch, log_end_offset
            higher = bisect.bisect_right(self._epochs, requested_epoch)
            if higher >= len(self._epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            floor = higher - 1
            if floor < 0:
                return requested_epoch, self._offsets[higher]
            return self._epochs[floor], self._offsets[higher]

    # -- updates ------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; returns whether anything changed.

        As Kafka: the same epoch at a later offset is a no-op; a lower start offset or
        epoch first removes the non-monotonic tail entries, then appends.
        """
        with self._lock:
            changed = self._assign(epoch, start_offset)
            if changed:
                self._write()
            return changed

    def assign_many(self, entries: Iterable[tuple[int, int]]) -> bool:
        """Assign several entries in order with one checkpoint write (log recovery)."""
        with self._lock:
            changed = False
            for epoch, start_offset in entries:
                changed = self._assign(epoch, start_offset) or changed
            if changed:
                self._write()
            return changed

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (log truncated to it)."""
        with self._lock:
            if not self._offsets or self._offsets[-1] < end_offset:
                return
            keep = bisect.bisect_left(self._offsets, end_offset)
            del self._epochs[keep:]
            del self._offsets[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the one covering it moves up to it."""
        with self._lock:
            if not self._offsets or self._offsets[0] >= start_offset:
                return
            i = bisect.bisect_right(self._offsets, start_offset) - 1  # entry covering it
            epoch = self._epochs[i]
            del self._epochs[:i]
            del self._offsets[:i]
            self._epochs[0] = epoch
            self._offsets[0] = start_offset
            self._write()

    def clear(self) -> None:
        with self._lock:
            self._epochs.clear()
            self._offsets.clear()
            self._write()

    def flush(self) -> None:
        with self._lock:
            self._write()

    def _write(self) -> None:
        if self.path is None:
            return
        text = format_checkpoint(
            EpochEntry(e, o) for e, o in zip(self._epochs, self._offsets, strict=True)
        )
        atomic_write_text(self.path, text, fsync=self._fsync)
