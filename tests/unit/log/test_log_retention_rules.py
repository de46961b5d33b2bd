"""Retention decisions as pure functions over segment metadata (no files involved)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.log.retention import (
    deletable_segments,
    log_start_offset_breached,
    retention_ms_breached,
    retention_size_breached,
)

NOW = 1_700_000_000_000


@dataclass(frozen=True)
class Meta:
    base_offset: int
    size: int
    largest_timestamp: int


# Four segments of 100 bytes: offsets [0,10) [10,20) [20,30) [30,40), timestamps rising.
SEGS = [Meta(10 * i, 100, NOW - 1000 * (4 - i)) for i in range(4)]
LEO = 40


def _bases(segs: list[Meta]) -> list[int]:
    return [s.base_offset for s in segs]


def test_only_a_prefix_goes_and_the_walk_stops_at_the_first_kept_segment() -> None:
    calls: list[int] = []

    def breached(seg: Meta, _next: Meta | None) -> bool:
        calls.append(seg.base_offset)
        return seg.base_offset != 10  # segment 20 would qualify but follows a kept one

    out = deletable_segments(SEGS, log_end_offset=LEO, high_watermark=LEO, breached=breached)
    assert _bases(out) == [0]
    assert calls == [0, 10]


def test_nothing_at_or_above_the_high_watermark_goes() -> None:
    def always(_seg: Meta, _next: Meta | None) -> bool:
        return True

    for hw, expect in ((0, []), (9, []), (10, [0]), (25, [0, 10]), (LEO, [0, 10, 20, 30])):
        out = deletable_segments(SEGS, log_end_offset=LEO, high_watermark=hw, breached=always)
        assert _bases(out) == expect, hw


def test_an_empty_active_segment_never_goes() -> None:
    segs = [*SEGS, Meta(LEO, 0, -1)]
    out = retention_ms_breached(
        segs, log_end_offset=LEO, high_watermark=LEO, now_ms=NOW + 10**9, retention_ms=0
    )
    assert _bases(out) == [0, 10, 20, 30]


def test_retention_ms() -> None:
    def older_than(ms: int) -> list[int]:
        return _bases(
            retention_ms_breached(
                SEGS, log_end_offset=LEO, high_watermark=LEO, now_ms=NOW, retention_ms=ms
            )
        )

    assert older_than(-1) == []  # unlimited
    assert older_than(2500) == [0, 10]  # 4000 and 3000 ms old
    assert older_than(3000) == [0]  # strictly older only
    assert older_than(0) == [0, 10, 20, 30]


def test_retention_bytes_keeps_the_log_at_least_that_large() -> None:
    def over(limit: int) -> list[int]:
        return _bases(
            retention_size_breached(
                SEGS, log_end_offset=LEO, high_watermark=LEO, retention_bytes=limit
            )
        )

    assert over(-1) == []
    assert over(400) == []
    assert over(399) == []  # dropping a 100-byte segment would leave 300 < 399
    assert over(300) == [0]
    assert over(150) == [0, 10]
    assert over(0) == [0, 10, 20, 30]


def test_log_start_offset_deletes_segments_wholly_below_it() -> None:
    def below(lso: int) -> list[int]:
        return _bases(
            log_start_offset_breached(
                SEGS, log_end_offset=LEO, high_watermark=LEO, log_start_offset=lso
            )
        )

    assert below(0) == []
    assert below(15) == [0]  # segment 10 still holds offsets 15..19
    assert below(20) == [0, 10]
    assert below(LEO) == [0, 10, 20]  # the last segment has no successor: it stays
