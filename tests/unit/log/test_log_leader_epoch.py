"""leader-epoch-checkpoint format, OffsetForLeaderEpoch answers, truncation in step with the log."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testkit import NOW, batch, open_log

from odradek.log.checkpoints import CheckpointError
from odradek.log.leader_epoch import LeaderEpochCache


def test_checkpoint_file_is_kafkas_text_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    # The seed's listing shows this file at 8 bytes: "0\n1\n0 0\n".
    assert path.read_bytes() == b"0\n1\n0 0\n"
    cache.assign(0, 5)  # same epoch, later offset: nothing to record
    cache.assign(3, 100)
    cache.assign(4, 250)
    assert path.read_text() == "0\n3\n0 0\n3 100\n4 250\n"
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()
    assert LeaderEpochCache(path).entries() == cache.entries()


def test_end_offset_for_matches_kafka() -> None:
    cache = LeaderEpochCache(None)
    for epoch, start in [(2, 10), (4, 30), (7, 90)]:
        cache.assign(epoch, start)
    leo = 120
    assert cache.end_offset_for(7, leo) == (7, 120)  # latest epoch ends at the log end
    assert cache.end_offset_for(4, leo) == (4, 90)  # known epoch: start of the next one
    assert cache.end_offset_for(5, leo) == (4, 90)  # unknown, between: floor epoch
    assert cache.end_offset_for(2, leo) == (2, 30)
    # Below every known epoch: itself with the first epoch's start (Kafka's code).
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # UNDEFINED_EPOCH
    assert cache.end_offset_for(9, leo) == (-1, -1)  # above every known epoch
    assert LeaderEpochCache(None).end_offset_for(3, leo) == (-1, -1)
    assert cache.epoch_for_offset(29) == 2
    assert cache.epoch_for_offset(30) == 4
    assert cache.epoch_for_offset(9) is None


def test_assign_replaces_non_monotonic_tail_like_kafka() -> None:
    cache = LeaderEpochCache(None)
    cache.assign(1, 0)
    cache.assign(3, 50)
    assert not cache.assign(3, 60)
    assert cache.assign(3, 40)  # same epoch, earlier start: the entry moves down
    assert cache.entries() == [(1, 0), (3, 40)]
    assert cache.assign(2, 80)  # lower epoch: later entries that conflict are dropped
    assert cache.entries() == [(1, 0), (2, 80)]
    with pytest.raises(ValueError):
        cache.assign(-1, 5)


def test_truncation_from_both_ends() -> None:
    cache = LeaderEpochCache(None)
    for epoch, start in [(0, 0), (1, 10), (2, 20), (3, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(0, 0), (1, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(1, 15)]
    cache.truncate_from_start(5)
    assert cache.entries() == [(1, 15)]


def test_corrupt_checkpoint_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n0 0\n")
    with pytest.raises(CheckpointError, match="Expected 2 entries"):
        LeaderEpochCache(path)
    path.write_text("0\n1\nzero 0\n")
    with pytest.raises(CheckpointError, match="Malformed line"):
        LeaderEpochCache(path)
    path.write_text("7\n0\n")
    with pytest.raises(CheckpointError, match="version"):
        LeaderEpochCache(path)


def test_log_keeps_epoch_cache_in_step(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for epoch in (0, 0, 1, 1, 3):
        log.append_as_leader(batch(2, NOW), epoch)
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 4), (3, 8)]
    assert log.end_offset_for_epoch(1) == (1, 8)
    assert log.end_offset_for_epoch(3) == (3, 10)
    # Follower truncation drops the epochs that start at or after the new end.
    log.truncate_to(6)
    assert log.leader_epoch_cache.entries() == [(0, 0), (1, 4)]
    assert log.end_offset_for_epoch(1) == (1, 6)
    # Follower appends record the epochs carried by the batches.
    replica = open_log(tmp_path / "r-0")
    rr = log.read(0, 1 << 20)
    replica.append_as_follower(rr.records)
    assert replica.leader_epoch_cache.entries() == [(0, 0), (1, 4)]
    assert (tmp_path / "r-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 4\n"
    log.close()
    replica.close()
    reopened = open_log(tmp_path / "t-0")
    assert reopened.leader_epoch_cache.entries() == [(0, 0), (1, 4)]
    reopened.close()
