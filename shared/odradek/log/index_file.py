"""Fixed-size-entry index files shared by ``.index`` and ``.timeindex`` (Kafka's AbstractIndex).

File layout: ``entries * entry_size`` bytes of big-endian entries, no header. The
active segment's index is preallocated to ``segment.index.bytes`` rounded down to a
multiple of the entry size (a sparse file: the tail reads as zeros); rolling or
closing the segment trims the file to exactly its entries, so a closed index's
length gives its entry count.

Invariants: entry keys (relative offset, timestamp) strictly increase; the first
entry is never all-zero in practice (the first batch of a segment is not indexed),
so a preallocated file's entry count is the number of slots before the first
all-zero slot after slot 0.

Crash behaviour: entries are written with ``pwrite`` and never fsynced on their own;
an index can lose its tail or keep a stale one after a crash. Truncation re-zeroes the
removed slots (ftruncate down and back up) so a later crash cannot resurrect them.
Segments above the recovery point have their indexes rebuilt from the log on an
unclean start, and any index failing :meth:`IndexFile.sanity_check` is rebuilt too.

Concurrency: the writable (active) index keeps its entries in a ``bytearray`` mirror
for lookups; a closed index is searched with ``pread`` probes, so nothing is
memory-mapped and trimming can never fault a concurrent reader.
"""

from __future__ import annotations

import operator
import os
import struct
from pathlib import Path

from odradek.config_catalog.topic import TOPIC_CONFIGS

FULL_CHECK_MAX_ENTRIES = 65_536  # indexes up to this size get a full monotonicity check


class CorruptIndexError(Exception):
    """An index fails its sanity check; the caller rebuilds it from the log."""


class IndexFile:
    """Base class: one index file, either writable (active segment) or closed (read-only)."""

    entry: struct.Struct  # set by subclasses
    key: struct.Struct  # the sort key at the start of each entry
    label: str  # how error messages name the file ("index file", "time index file")

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = TOPIC_CONFIGS.int("segment.index.bytes"),
        *,
        writable: bool = True,
    ) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.entry_size = self.entry.size
        self.max_index_size = max(
            self.entry_size, max_index_size - max_index_size % self.entry_size
        )
        self.max_entries = self.max_index_size // self.entry_size
        self._fd = -1
        self._entries = 0
        self._buf: bytearray | None = None  # mirror of the entries while writable
        self._dirty = False  # written since the last fsync
        self._open(writable)

    # -- lifecycle --------------------------------------------------------------------
    def _open(self, writable: bool) -> None:
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        if not writable and not self.path.exists():
            flags = os.O_RDWR | os.O_CREAT
        self._fd = os.open(self.path, flags, 0o644)
        length = os.fstat(self._fd).st_size
        self._entries = self._count_entries(length)
        if writable:
            self._buf = bytearray(os.pread(self._fd, self._entries * self.entry_size, 0))
            if length != self.max_index_size and self._entries <= self.max_entries:
                self._preallocate()

    def _preallocate(self) -> None:
        self._dirty = True
        used = self._entries * self.entry_size
        os.ftruncate(self._fd, used)  # drops any stale tail beyond the entries
        os.ftruncate(self._fd, max(self.max_index_size, used))

    def _count_entries(self, length: int) -> int:
        n = length // self.entry_size
        if n == 0 or length < self.max_index_size:
            return n
        # Possibly a preallocated (untrimmed) file: find the first all-zero slot after slot 0.
        zero = bytes(self.entry_size)
        if os.pread(self._fd, self.entry_size, (n - 1) * self.entry_size) != zero:
            return n
        lo, hi = 1, n - 1  # slot hi is zero; find the first zero slot in [1, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if os.pread(self._fd, self.entry_size, mid * self.entry_size) == zero:
                hi = mid
            else:
                lo = mid + 1
        if lo == 1 and os.pread(self._fd, self.entry_size, 0) == zero:
            return 0
        return lo

    @property
    def writable(self) -> bool:
        return self._buf is not None

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def size_in_bytes(self) -> int:
        return self._entries * self.entry_size

    def file_size(self) -> int:
        return os.fstat(self._fd).st_size

    def trim(self) -> None:
        """Shrink the file to its entries and make the index read-only (segment rolled)."""
        if self._fd < 0:
            return
        os.ftruncate(self._fd, self._entries * self.entry_size)
        self._buf = None
        self._dirty = True

    def make_writable(self) -> None:
        """Re-extend a trimmed index to ``segment.index.bytes`` (it became the active one)."""
        if self._buf is not None:
            return
        os.close(self._fd)
        self._open(writable=True)

    def resize(self, max_index_size: int) -> None:
        self.max_index_size = max(
            self.entry_size, max_index_size - max_index_size % self.entry_size
        )
        self.max_entries = self.max_index_size // self.entry_size
        if self._buf is not None:
            self._preallocate()

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self, *, sync: bool = False) -> None:
        """Trim and close; a closed index's length is exactly its entries."""
        if self._fd < 0:
            return
        try:
            if self._buf is not None:
                os.ftruncate(self._fd, self._entries * self.entry_size)
                self._dirty = True
            if sync and self._dirty:
                os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
            self._buf = None

    def close_handle(self) -> None:
        """Close without trimming (the file is being deleted or renamed away)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._buf = None

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def delete_file(self) -> None:
        self.close_handle()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    # -- entries ----------------------------------------------------------------------
    def read_entry(self, slot: int) -> tuple[int, ...]:
        buf = self._buf
        if buf is not None:
            return self.entry.unpack_from(buf, slot * self.entry_size)
        return self.entry.unpack(os.pread(self._fd, self.entry_size, slot * self.entry_size))

    def relative(self, offset: int) -> int:
        """``offset`` relative to the segment base; it must fit an entry's int32."""
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise ValueError(f"offset {offset} does not fit segment based at {self.base_offset}")
        return rel

    def _key_at(self, slot: int) -> int:
        buf = self._buf
        if buf is not None:
            return int(self.key.unpack_from(buf, slot * self.entry_size)[0])
        return int(self.key.unpack(os.pread(self._fd, self.key.size, slot * self.entry_size))[0])

    def _floor_slot(self, key: int) -> int:
        """Largest slot whose key <= ``key``, or -1."""
        n = self._entries
        if n == 0 or self._key_at(0) > key:
            return -1
        if self._key_at(n - 1) <= key:  # the common case: lookups near the tail
            return n - 1
        lo, hi = 0, n - 1  # key(lo) <= key < key(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._key_at(mid) <= key:
                lo = mid
            else:
                hi = mid
        return lo

    def _ceiling_slot(self, key: int) -> int:
        """Smallest slot whose key >= ``key``, or -1."""
        floor = self._floor_slot(key)
        if floor >= 0 and self._key_at(floor) == key:
            return floor
        nxt = floor + 1
        return nxt if nxt < self._entries else -1

    def _append_raw(self, data: bytes) -> None:
        pos = self._entries * self.entry_size
        assert self._buf is not None, "append to a closed index"
        self._buf += data
        os.pwrite(self._fd, data, pos)
        self._entries += 1
        self._dirty = True

    def _truncate_to_entries(self, n: int) -> None:
        if n >= self._entries:
            return
        self._entries = n
        self._dirty = True
        used = n * self.entry_size
        if self._buf is not None:
            del self._buf[used:]
            os.ftruncate(self._fd, used)
            os.ftruncate(self._fd, self.max_index_size)
        else:
            os.ftruncate(self._fd, used)

    def reset(self) -> None:
        """Drop every entry (the index is about to be rebuilt)."""
        self._truncate_to_entries(0)

    def _check_whole_entries(self) -> None:
        """Kafka's first sanity check: the file holds whole entries (trimmed or mirrored)."""
        length = self._entries * self.entry_size if self.writable else self.file_size()
        if length % self.entry_size:
            raise CorruptIndexError(f"{self.label} {self.path} has non-multiple size {length}")

    def keys_strictly_increase(self, limit: int = FULL_CHECK_MAX_ENTRIES) -> bool:
        """Whether every entry's key exceeds the previous one (checked for small indexes only).

        Keys are non-negative big-endian integers at the start of each entry, so comparing
        the raw key bytes orders them like the numbers; the loop runs in C.
        """
        n = self._entries
        if n < 2 or n > limit:
            return True
        size = self.entry_size
        data = bytes(self._buf) if self._buf is not None else os.pread(self._fd, n * size, 0)
        k = self.key.size
        keys = [data[i : i + k] for i in range(0, n * size, size)]
        return all(map(operator.lt, keys, keys[1:]))

    def entries_list(self) -> list[tuple[int, ...]]:
        data = (
            bytes(self._buf)
            if self._buf is not None
            else os.pread(self._fd, self._entries * self.entry_size, 0)
        )
        return [t for t in self.entry.iter_unpack(data)]
