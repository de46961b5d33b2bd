"""``segment.ms`` counts from the first batch's timestamp, as Kafka's LogSegment does
(``rollingBasedTimestamp`` is set by the append at position 0), also when the roll check
looked at the segment while it was still empty."""

from __future__ import annotations

from pathlib import Path

from log_testkit import NOW, batch, open_log

from odradek.topic_config import LogConfig

HOUR_MS = 3_600_000


def test_roll_time_counts_from_the_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=HOUR_MS, segment_jitter_ms=0))
    # The first append's roll check reads the empty segment's rolling timestamp.
    log.append_as_leader(batch(1, ts=NOW - 2 * HOUR_MS), 0)
    # Two hours after the first batch's timestamp: past segment.ms, a new segment
    # (Kafka's shouldRoll: max timestamp minus rollingBasedTimestamp > segment.ms).
    log.append_as_leader(batch(1, ts=NOW), 0)
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_no_roll_within_segment_ms_of_the_first_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=HOUR_MS, segment_jitter_ms=0))
    log.append_as_leader(batch(1, ts=NOW), 0)
    log.append_as_leader(batch(1, ts=NOW + 1000), 0)
    assert [s.base_offset for s in log.segments] == [0]
