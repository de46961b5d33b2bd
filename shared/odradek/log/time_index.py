"""The ``.timeindex`` file: a sparse map from timestamps to offsets (Kafka's TimeIndex).

Byte layout, one 12-byte entry, big-endian::

    int64 timestamp        the segment's max timestamp so far when the entry was added
    int32 relativeOffset   offset (relative to the segment base) of the batch holding it

Invariants: timestamps and offsets both increase; an entry is appended only when the
max timestamp grows, so an entry ``(t, o)`` also says every record before the batch
ending at ``base + o`` has a timestamp < t. At roll the segment's final max timestamp
is appended (even to a "full" index), so the last entry is the segment's largest
timestamp, which retention reads.

Lookups: :meth:`TimeIndex.lookup` is Kafka's (largest entry with timestamp <= target,
the safe starting point for "first offset with timestamp >= target");
:meth:`TimeIndex.lookup_ceiling` is the seed article's step 2 (smallest entry >=
target), kept for the worked example.

Preallocation, trimming and crash behaviour: see :mod:`odradek.log.index_file`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.log.index_file import CorruptIndexError, IndexFile

ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(IndexFile):
    entry = ENTRY
    key = struct.Struct(">q")
    label = "time index file"

    def entry_at(self, slot: int) -> TimestampOffset:
        ts, rel = self.read_entry(slot)
        return TimestampOffset(ts, self.base_offset + rel)

    def last_entry(self) -> TimestampOffset:
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry_at(self._entries - 1)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append when ``timestamp`` exceeds the last entry's; returns whether it did."""
        if not skip_full_check and self.is_full:
            raise ValueError(f"attempt to append to a full time index (size = {self._entries})")
        last = self.last_entry()
        if self._entries and offset < last.offset:
            raise ValueError(
                f"attempt to append an offset ({offset}) to slot {self._entries} no larger than "
                f"the last offset appended ({last.offset}) to {self.path}"
            )
        if self._entries and timestamp < last.timestamp:
            raise ValueError(
                f"attempt to append a timestamp ({timestamp}) to slot {self._entries} no larger "
                f"than the last timestamp appended ({last.timestamp}) to {self.path}"
            )
        if timestamp > last.timestamp:
            self._append_raw(ENTRY.pack(timestamp, self.relative(offset)))
            return True
        return False

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= target, else (NO_TIMESTAMP, base offset)."""
        slot = self._floor_slot(target_timestamp)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry_at(slot)

    def lookup_ceiling(self, target_timestamp: int) -> TimestampOffset | None:
        """Smallest entry with timestamp >= target (the seed's step 2), or None."""
        slot = self._ceiling_slot(target_timestamp)
        return None if slot < 0 else self.entry_at(slot)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= ``offset`` (offsets increase with slots)."""
        n = self._entries
        lo, hi = 0, n  # first slot with offset >= target
        while lo < hi:
            mid = (lo + hi) // 2
            if self.entry_at(mid).offset < offset:
                lo = mid + 1
            else:
                hi = mid
        self._truncate_to_entries(lo)

    def sanity_check(self, next_offset: int | None = None) -> None:
        self._check_whole_entries()
        if not self._entries:
            return
        first = self.entry_at(0)
        last = self.last_entry()
        if last.timestamp < first.timestamp or last.offset < first.offset:
            raise CorruptIndexError(f"time index file {self.path} entries are not increasing")
        if not self.keys_strictly_increase():
            raise CorruptIndexError(f"time index file {self.path} timestamps are not increasing")
        if last.offset < self.base_offset:
            raise CorruptIndexError(f"time index file {self.path} offset below base")
        if next_offset is not None and last.offset >= next_offset:
            raise CorruptIndexError(
                f"time index file {self.path} last offset {last.offset} >= next offset {next_offset}"
            )
