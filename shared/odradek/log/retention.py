"""Retention: which of a log's oldest segments a deletion pass removes (Kafka's
``UnifiedLog.deleteOldSegments`` and its ``deleteRetentionMsBreachedSegments``,
``deleteRetentionSizeBreachedSegments``, ``deleteLogStartOffsetBreachedSegments``).

Pure decisions over segment metadata (base offset, size, largest timestamp); the
log applies them under its lock (:meth:`odradek.log.log.PartitionLog.delete_old_segments`).
Rules shared by every kind, as in Kafka:

* only a prefix of the segment list goes: the walk stops at the first segment that
  must stay;
* a segment goes only once all its offsets are below the high watermark (the next
  segment's base offset, or the log end offset for the last one, is at most the high
  watermark), so nothing a follower may still need is deleted;
* an empty last (active) segment never goes; a non-empty one may, and the log then
  rolls first so that one segment always remains.

By kind: ``retention.ms`` deletes segments whose largest timestamp (else mtime) is
older than ``now - retention.ms``; ``retention.bytes`` deletes the oldest segments
while the log stays at least ``retention.bytes`` large without them; the log start
offset deletes segments whose successor starts at or below it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar


class RetainedSegment(Protocol):
    """What retention reads of a segment."""

    @property
    def base_offset(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def largest_timestamp(self) -> int: ...


S = TypeVar("S", bound=RetainedSegment)


def deletable_segments(
    segments: Sequence[S],
    *,
    log_end_offset: int,
    high_watermark: int,
    breached: Callable[[S, S | None], bool],
) -> list[S]:
    """The oldest segments, in order, for which ``breached(segment, next_segment)`` holds
    and that the shared rules allow deleting. ``breached`` is called in order and not
    after the first segment that stays (it may keep state, as the size rule does)."""
    out: list[S] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        if nxt is not None:
            upper, last_and_empty = nxt.base_offset, False
        else:
            upper, last_and_empty = log_end_offset, seg.size == 0
        if high_watermark >= upper and not last_and_empty and breached(seg, nxt):
            out.append(seg)
        else:
            break
    return out


def retention_ms_breached(
    segments: Sequence[S],
    *,
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
    retention_ms: int,
) -> list[S]:
    """``retention.ms``: segments whose newest record is older than the retention time."""
    if retention_ms < 0:
        return []
    return deletable_segments(
        segments,
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        breached=lambda seg, _next: now_ms - seg.largest_timestamp > retention_ms,
    )


def retention_size_breached(
    segments: Sequence[S],
    *,
    log_end_offset: int,
    high_watermark: int,
    retention_bytes: int,
) -> list[S]:
    """``retention.bytes``: the oldest segments the log can lose and stay that large."""
    if retention_bytes < 0:
        return []
    excess = sum(s.size for s in segments) - retention_bytes
    if excess < 0:
        return []

    def breached(seg: S, _next: S | None) -> bool:
        nonlocal excess
        if excess - seg.size >= 0:
            excess -= seg.size
            return True
        return False

    return deletable_segments(
        segments, log_end_offset=log_end_offset, high_watermark=high_watermark, breached=breached
    )


def log_start_offset_breached(
    segments: Sequence[S],
    *,
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
) -> list[S]:
    """Segments wholly below the log start offset (DeleteRecords, or retention moved it)."""
    return deletable_segments(
        segments,
        log_end_offset=log_end_offset,
        high_watermark=high_watermark,
        breached=lambda _seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset,
    )
