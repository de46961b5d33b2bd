"""Idempotent producer state: duplicates, sequence/epoch errors, snapshots, rebuild after a crash."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from log_testkit import NOW, batch, open_log, read_everything

from odradek.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from odradek.log.producer_state import (
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
)

PID = 4242


def produce(log, seq: int, n: int = 2, epoch: int = 0, pid: int = PID):  # type: ignore[no-untyped-def]
    return log.append_as_leader(batch(n, NOW, pid=pid, epoch=epoch, seq=seq), 0)


def test_duplicates_of_each_of_the_last_five_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    originals = [produce(log, seq=2 * i) for i in range(7)]
    leo = log.log_end_offset
    for i in range(2, 7):  # the last five
        dup = produce(log, seq=2 * i)
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (
            originals[i].first_offset,
            originals[i].last_offset,
        )
        assert log.log_end_offset == leo
    # Older than the last five: no longer recognised, and out of sequence.
    with pytest.raises(OutOfOrderSequenceError) as info:
        produce(log, seq=2)
    assert info.value.kafka_error == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert produce(log, seq=14).first_offset == leo
    log.close()


def test_sequence_gap_and_fenced_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, seq=0, epoch=3)
    produce(log, seq=2, epoch=3)
    with pytest.raises(OutOfOrderSequenceError, match="Out of order sequence number"):
        produce(log, seq=5, epoch=3)
    with pytest.raises(InvalidProducerEpochError) as info:
        produce(log, seq=4, epoch=2)
    assert info.value.kafka_error == "INVALID_PRODUCER_EPOCH"
    # A bumped epoch must restart at sequence 0.
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        produce(log, seq=4, epoch=4)
    assert not produce(log, seq=0, epoch=4).duplicate
    # Nothing of the rejected appends reached the log.
    assert log.log_end_offset == 6
    log.close()


def test_unknown_producer_accepts_any_sequence_and_sequences_wrap(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    produce(log, seq=0x7FFFFFFF - 1, n=2, pid=7)  # e.g. state lost to retention (KIP-360)
    produce(log, seq=0, n=1, pid=7)  # wraps after Int32.MAX_VALUE
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, seq=5, n=1, pid=7)
    log.close()


def test_state_survives_clean_close_and_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(4):
        produce(log, seq=2 * i, epoch=1)
    last = produce(log, seq=8, epoch=1)
    log.close()
    snaps = list_snapshots(tmp_path / "t-0")
    assert snaps[-1][0] == 10  # taken at the log end offset on close
    log = open_log(tmp_path / "t-0", recovery_point=10, clean_shutdown=True)
    dup = produce(log, seq=8, epoch=1)
    assert dup.duplicate and dup.first_offset == last.first_offset
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, seq=11, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, seq=10, epoch=0)
    assert produce(log, seq=10, epoch=1).first_offset == 10
    log.close()


def test_state_rebuilt_from_log_after_unclean_shutdown(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    originals = [produce(log, seq=2 * i, epoch=2) for i in range(8)]
    assert log.segment_count >= 1
    log.close_handles()  # crash: no final snapshot
    for _off, path in list_snapshots(tmp_path / "t-0"):
        path.unlink()
    log = open_log(tmp_path / "t-0")
    for i in range(3, 8):
        dup = produce(log, seq=2 * i, epoch=2)
        assert dup.duplicate and dup.first_offset == originals[i].first_offset
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, seq=20, epoch=2)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, seq=16, epoch=1)
    assert produce(log, seq=16, epoch=2).first_offset == 16
    log.close()


def test_empty_snapshot_is_ten_bytes_and_written_at_roll(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(batch(3, NOW), 0)
    log.roll()
    snap = tmp_path / "t-0" / f"{3:020d}.snapshot"
    data = snap.read_bytes()
    assert len(data) == 10  # as the seed's 00000000000012999310.snapshot
    version, crc, count = struct.unpack(">hIi", data)
    assert (version, count) == (1, 0)
    assert crc == crc32c.crc32c(data[6:])
    log.close()


def test_snapshot_layout_byte_for_byte() -> None:
    e = ProducerStateEntry(1001, 5, coordinator_epoch=-1, current_txn_first_offset=-1)
    e.add_batch(5, last_seq=9, last_offset=120, offset_delta=4, ts=NOW)
    data = encode_snapshot([e])
    assert len(data) == 10 + 46
    fields = struct.unpack_from(">qhiqiqiq", data, 10)
    assert fields == (1001, 5, 9, 120, 4, NOW, -1, -1)
    (back,) = decode_snapshot(data)
    assert (back.producer_id, back.producer_epoch, back.last_seq, back.first_seq) == (1001, 5, 9, 5)
    assert back.batches[-1].first_offset == 116


def test_corrupt_snapshot_falls_back_to_replay(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(3):
        produce(log, seq=2 * i)
    log.close()
    (off, path), *_ = reversed(list_snapshots(tmp_path / "t-0"))
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    log = open_log(tmp_path / "t-0", recovery_point=off, clean_shutdown=True)
    assert produce(log, seq=4).duplicate
    assert produce(log, seq=6).first_offset == 6
    log.close()


def test_truncation_reloads_state_and_drops_later_snapshots(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(30):
        produce(log, seq=2 * i)
    snaps_before = [o for o, _ in list_snapshots(tmp_path / "t-0")]
    assert any(o > 20 for o in snaps_before)
    log.truncate_to(20)
    assert all(o <= 20 for o, _ in list_snapshots(tmp_path / "t-0"))
    # Producer state now ends with the batch at offsets 18-19 (sequences 18-19).
    assert produce(log, seq=18).duplicate
    assert produce(log, seq=20).first_offset == 20
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, seq=40)
    log.close()


def test_follower_appends_update_state_without_checks(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l-0")
    for i in range(3):
        produce(leader, seq=2 * i)
    follower = open_log(tmp_path / "f-0")
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    entry = follower.producer_state.last_entry(PID)
    assert entry is not None and entry.last_seq == 5 and entry.last_data_offset == 5
    assert read_everything(follower) == read_everything(leader)
    leader.close()
    follower.close()
    assert os.path.exists(tmp_path / "f-0" / f"{6:020d}.snapshot")
