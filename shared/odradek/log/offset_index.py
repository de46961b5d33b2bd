"""The ``.index`` file: a sparse map from offsets to byte positions in the segment's ``.log``.

Byte layout (Kafka's OffsetIndex), one 8-byte entry per indexed batch, big-endian::

    int32 relativeOffset   batch's last offset - segment base offset
    int32 position         byte position of that batch in the .log file

Invariants: relative offsets and positions strictly increase; every relative offset
fits an int32 (a segment rolls before it would not). An entry ``(o, p)`` says the
batch starting at ``p`` ends at offset ``base + o``; lookups take the largest entry
``<= target`` and scan batch headers forward from its position.

Preallocation, trimming and crash behaviour: see :mod:`odradek.log.index_file`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from odradek.log.index_file import CorruptIndexError, IndexFile

ENTRY = struct.Struct(">ii")


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(IndexFile):
    entry = ENTRY
    key = struct.Struct(">i")
    label = "index file"

    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        rel, pos = self.read_entry(self._entries - 1)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        return self.last_entry().offset

    def entry_at(self, slot: int) -> OffsetPosition:
        rel, pos = self.read_entry(slot)
        return OffsetPosition(self.base_offset + rel, pos)

    def append(self, offset: int, position: int) -> None:
        """Index the batch ending at ``offset`` that starts at ``position``."""
        if self.is_full:
            raise ValueError(f"attempt to append to a full index (size = {self._entries})")
        if self._entries and offset <= self.last_offset:
            raise ValueError(
                f"attempt to append an offset ({offset}) to position {self._entries} no larger "
                f"than the last offset appended ({self.last_offset}) to {self.path}"
            )
        self._append_raw(ENTRY.pack(self.relative(offset), position))

    def lookup(self, target: int) -> OffsetPosition:
        """Largest entry with offset <= target, else (base offset, 0)."""
        rel = target - self.base_offset
        if rel < 0:
            return OffsetPosition(self.base_offset, 0)
        slot = self._floor_slot(min(rel, 0x7FFFFFFF))
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry_at(slot)

    def lookup_position_floor(self, position: int) -> OffsetPosition | None:
        """Largest entry with position <= ``position`` (finding batch boundaries for reads)."""
        n = self._entries
        if n == 0:
            return None
        lo, hi = 0, n - 1
        if self.read_entry(0)[1] > position:
            return None
        if self.read_entry(hi)[1] <= position:
            return self.entry_at(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.read_entry(mid)[1] <= position:
                lo = mid
            else:
                hi = mid
        return self.entry_at(lo)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        rel = offset - self.base_offset
        if rel <= 0:
            self._truncate_to_entries(0)
            return
        slot = self._floor_slot(min(rel, 0x7FFFFFFF))
        if slot < 0:
            self._truncate_to_entries(0)
            return
        keep = slot + 1 if self.read_entry(slot)[0] < rel else slot
        self._truncate_to_entries(keep)

    def sanity_check(self, segment_size: int | None = None, next_offset: int | None = None) -> None:
        """Kafka's structural checks, plus full key order for small indexes.

        Each lookup also verifies its entry against the batch header it points at.
        """
        self._check_whole_entries()
        if not self._entries:
            return
        first_rel, first_pos = self.read_entry(0)
        last_rel, last_pos = self.read_entry(self._entries - 1)
        if first_rel < 0 or last_rel < first_rel or last_pos < first_pos:
            raise CorruptIndexError(f"index file {self.path} entries are not increasing")
        if self._entries > 1 and (last_rel == first_rel or last_pos == first_pos):
            raise CorruptIndexError(f"index file {self.path} entries are not increasing")
        if not self.keys_strictly_increase():
            raise CorruptIndexError(f"index file {self.path} entries are not increasing")
        if next_offset is not None and self.base_offset + last_rel >= next_offset:
            raise CorruptIndexError(
                f"index file {self.path} last offset {self.base_offset + last_rel} "
                f">= segment next offset {next_offset}"
            )
        if segment_size is not None and last_pos >= segment_size:
            raise CorruptIndexError(
                f"index file {self.path} position {last_pos} beyond log size {segment_size}"
            )
