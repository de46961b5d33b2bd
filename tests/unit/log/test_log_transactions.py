"""Transactions in one partition log: LSO, markers, producer state, .txnindex, snapshots,
recovery, followers, truncation and KIP-890 verification guards."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_testkit import NOW, batch, open_log, small_config

from odradek.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from odradek.log.log import PartitionLog
from odradek.log.producer_state import AppendOrigin, list_snapshots
from odradek.log.transaction_index import AbortedTxn
from odradek.records.control import ControlRecordType, build_end_txn_marker_batch
from odradek.records.record import BatchBuilder, decode_batches

A, B = 1001, 2002


def txn_batch(
    pid: int, seq: int, n: int = 2, *, epoch: int = 0, transactional: bool = True, key: str = "k"
) -> bytearray:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    for i in range(n):
        builder.append(NOW + i, f"{key}{i}".encode(), f"{pid}-{seq + i}".encode())
    return bytearray(builder.build())


class Producer:
    """A transactional producer's view of one partition: sequences and markers."""

    def __init__(self, log: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, n: int = 2, key: str = "k") -> int:
        batch = txn_batch(self.pid, self.seq, n, epoch=self.epoch, key=key)
        first = self.log.append_as_leader(batch, 0)
        self.seq += n
        return first.first_offset

    def end(self, committed: bool, coordinator_epoch: int = 0) -> int:
        return self.log.append_end_txn_marker(
            producer_id=self.pid,
            producer_epoch=self.epoch,
            coordinator_epoch=coordinator_epoch,
            committed=committed,
            leader_epoch=0,
        ).first_offset


def settle(log: PartitionLog) -> None:
    log.high_watermark = log.log_end_offset


def aborted_entries(log: PartitionLog) -> list[AbortedTxn]:
    return [t for seg in log.segments for t in seg.txn_index.all_aborted_txns()]


def test_lso_stops_at_the_earliest_open_transaction_until_its_marker_is_replicated(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, A), Producer(log, B)
    log.append_as_leader(batch(2, NOW), 0)  # plain data: decided at once
    a_first = a.send()
    b_first = b.send()
    settle(log)
    assert (log.high_watermark, log.last_stable_offset) == (log.log_end_offset, a_first)
    log.high_watermark = a_first - 1  # the LSO never passes the high watermark
    assert log.last_stable_offset == a_first - 1
    settle(log)
    marker = a.end(committed=True)
    # Decided but not replicated: still unstable until the HW passes the marker.
    assert log.last_stable_offset == a_first
    log.high_watermark = marker + 1
    assert log.last_stable_offset == b_first
    b.end(committed=False)
    settle(log)
    assert log.last_stable_offset == log.high_watermark == log.log_end_offset
    log.close()


def test_abort_writes_kafkas_txnindex_entry_with_the_lso_of_that_moment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, A), Producer(log, B)
    a_first = a.send()
    b_first = b.send()
    a.send()
    a_marker = a.end(committed=False)
    # The LSO recorded is B's still-open transaction.
    assert aborted_entries(log) == [AbortedTxn(A, a_first, a_marker, b_first)]
    b_marker = b.end(committed=False)
    assert aborted_entries(log)[1] == AbortedTxn(B, b_first, b_marker, b_marker + 1)
    # A commit or a marker of an empty transaction adds nothing.
    a.send()
    a.end(committed=True)
    a.end(committed=False)
    assert len(aborted_entries(log)) == 2
    path = log.active_segment.txn_index.path
    assert path.name == f"{log.active_segment.base_offset:020d}.txnindex"
    assert path.stat().st_size == 2 * 34
    log.close()


def test_read_committed_returns_the_overlapping_aborted_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, A), Producer(log, B)
    a_first = a.send()
    a.end(committed=False)
    b_first = b.send()
    b.end(committed=True)
    c_first = a.send()
    a.end(committed=False)
    settle(log)
    rr = log.read(0, 1 << 20, max_offset=log.last_stable_offset, include_aborted=True)
    assert [(t.producer_id, t.first_offset) for t in rr.aborted or ()] == [
        (A, a_first),
        (A, c_first),
    ]
    # From B's data on only the second abort overlaps; a read_uncommitted read has no list.
    rr = log.read(b_first, 1 << 20, include_aborted=True)
    assert [(t.producer_id, t.first_offset) for t in rr.aborted or ()] == [(A, c_first)]
    assert log.read(0, 1 << 20).aborted is None
    # A read of only the first batch: the second abort starts after it.
    one = log.read(0, 1, include_aborted=True)
    assert [t.first_offset for t in one.aborted or ()] == [a_first]
    # Nothing to return: an empty list.
    assert log.read(log.log_end_offset, 100, include_aborted=True).aborted == ()
    log.close()


def test_transactional_produce_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(log, A, epoch=3)
    a.send()
    # A non-transactional batch of the same producer inside its transaction.
    with pytest.raises(InvalidTxnStateError, match="Expected transactional write"):
        log.append_as_leader(txn_batch(A, a.seq, epoch=3, transactional=False), 0)
    # An older epoch is fenced (INVALID_PRODUCER_EPOCH), for data and markers alike.
    with pytest.raises(InvalidProducerEpochError) as info:
        log.append_as_leader(txn_batch(A, 0, epoch=2), 0)
    assert info.value.kafka_error == "INVALID_PRODUCER_EPOCH"
    with pytest.raises(InvalidProducerEpochError):
        log.append_end_txn_marker(
            producer_id=A, producer_epoch=2, coordinator_epoch=0, committed=False, leader_epoch=0
        )
    # A marker from an older coordinator epoch than the last one is fenced.
    a.end(committed=True, coordinator_epoch=5)
    a.send()
    with pytest.raises(TransactionCoordinatorFencedError) as fenced:
        a.end(committed=False, coordinator_epoch=4)
    assert fenced.value.kafka_error == "TRANSACTION_COORDINATOR_FENCED"
    # A newer producer epoch (the coordinator aborting with a bump) is accepted and
    # fences the old epoch's data afterwards.
    log.append_end_txn_marker(
        producer_id=A, producer_epoch=4, coordinator_epoch=5, committed=False, leader_epoch=0
    )
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(A, a.seq, epoch=3), 0)
    # Clients may not write control batches; a producer id needs a sequence.
    marker = build_end_txn_marker_batch(
        control_type=ControlRecordType.COMMIT,
        coordinator_epoch=9,
        producer_id=B,
        producer_epoch=0,
        timestamp=NOW,
    )
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(bytearray(marker), 0)
    with pytest.raises(InvalidRecordError, match="Invalid sequence number"):
        log.append_as_leader(txn_batch(B, -1), 0)
    log.close()


def test_coordinator_origin_skips_sequences_but_not_epochs(tmp_path: Path) -> None:
    """Transactional offset commits (the offset store's appends) carry no real sequences."""
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        log.append_as_leader(txn_batch(A, 0, 1, epoch=2), 0, origin=AppendOrigin.COORDINATOR)
    assert log.log_end_offset == 3  # no duplicate detection, no sequence error
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn_batch(A, 0, 1, epoch=1), 0, origin=AppendOrigin.COORDINATOR)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(txn_batch(A, 5, 1, epoch=2), 0)  # a client's append is checked
    log.close()


def test_verification_guard_is_needed_to_open_a_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")

    def send(seq: int, guard: object = None) -> None:
        log.append_as_leader(
            txn_batch(A, seq),
            0,
            verification_guard=guard,  # type: ignore[arg-type]
            verification_required=True,
        )

    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        send(0)
    guard = log.maybe_start_transaction_verification(A, 0, 0)
    assert guard is not None
    send(0, guard)  # verified: the transaction opens
    assert log.maybe_start_transaction_verification(A, 2, 0) is None  # ongoing: no check
    send(2)
    Producer(log, A).end(committed=False)
    # A verification started before the abort landed is void afterwards (KIP-890: the
    # late produce must not open a hanging transaction).
    stale = log.maybe_start_transaction_verification(A, 4, 0)
    log.append_end_txn_marker(
        producer_id=A, producer_epoch=0, coordinator_epoch=0, committed=False, leader_epoch=0
    )
    with pytest.raises(InvalidTxnStateError):
        send(4, stale)
    # A guard is only good for the entry it came from.
    first = log.maybe_start_transaction_verification(A, 4, 0)
    assert log.maybe_start_transaction_verification(A, 4, 0) is first
    log.producer_state.clear_verification_state(A)
    with pytest.raises(InvalidTxnStateError):
        send(4, first)
    # A higher sequence may not overtake the lowest one seen while verifying.
    guard = log.maybe_start_transaction_verification(A, 4, 0)
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen sequence"):
        send(6, guard)
    send(4, guard)
    settle(log)
    assert log.last_stable_offset < log.log_end_offset
    log.close()


def test_snapshot_keeps_ongoing_transactions_across_a_clean_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a, b = Producer(log, A), Producer(log, B)
    log.append_as_leader(batch(3, NOW), 0)
    a_first = a.send()
    b.send()
    b.end(committed=True)
    settle(log)
    hw = log.high_watermark
    log.close()
    assert list_snapshots(tmp_path / "t-0")[-1][0] == hw
    log = open_log(tmp_path / "t-0", clean_shutdown=True, high_watermark=hw)
    entry = log.producer_state.last_entry(A)
    assert entry is not None and entry.current_txn_first_offset == a_first
    assert log.last_stable_offset == a_first
    # The reopened state can still end the transaction and index it.
    a.log = log
    a.seq = 2
    a.send()
    marker = a.end(committed=False)
    settle(log)
    assert aborted_entries(log)[-1] == AbortedTxn(A, a_first, marker, marker + 1)
    assert log.last_stable_offset == log.log_end_offset
    log.close()


def test_unclean_restart_rebuilds_txnindex_and_lso(tmp_path: Path) -> None:
    config = small_config(segment_bytes=1024)
    log = open_log(tmp_path / "t-0", config)
    a, b = Producer(log, A), Producer(log, B)
    for round_ in range(6):
        a.send(3)
        b.send(2)
        a.end(committed=round_ % 2 == 0)
        if round_ < 5:
            b.end(committed=round_ % 3 == 0)
    open_b = b.log.producer_state.last_entry(B)
    assert open_b is not None
    b_first = open_b.current_txn_first_offset
    settle(log)
    assert log.segment_count > 2
    before = {
        seg.base_offset: seg.txn_index.path.read_bytes()
        for seg in log.segments
        if seg.txn_index.path.exists()
    }
    assert len(before) >= 2
    leo = log.log_end_offset
    log.close_handles()  # crash: no snapshot at the end, nothing flushed in order
    for seg_base, _ in before.items():
        (tmp_path / "t-0" / f"{seg_base:020d}.txnindex").write_bytes(b"\x00\x01torn")
    for _off, path in list_snapshots(tmp_path / "t-0"):
        path.unlink()
    log = open_log(tmp_path / "t-0", config, recovery_point=0, high_watermark=leo)
    after = {
        seg.base_offset: seg.txn_index.path.read_bytes()
        for seg in log.segments
        if seg.txn_index.path.exists() and seg.txn_index.path.stat().st_size
    }
    assert after == before
    assert log.last_stable_offset == b_first
    log.close()


def test_corrupt_txnindex_below_the_recovery_point_is_rebuilt(tmp_path: Path) -> None:
    config = small_config(segment_bytes=1024)
    log = open_log(tmp_path / "t-0", config)
    a = Producer(log, A)
    for _ in range(8):
        a.send(3)
        a.end(committed=False)
    settle(log)
    entries = aborted_entries(log)
    first = log.segments[0]
    assert first.txn_index.path.exists()
    good = first.txn_index.path.read_bytes()
    log.close()
    first.txn_index.path.write_bytes(good + b"\x00")  # torn tail after a clean shutdown
    log = open_log(tmp_path / "t-0", config, clean_shutdown=True, high_watermark=0)
    assert log.segments[0].txn_index.path.read_bytes() == good
    assert aborted_entries(log) == entries
    log.close()


def test_follower_applies_markers_like_the_leader(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader-0")
    follower = open_log(tmp_path / "follower-0")
    a, b = Producer(leader, A), Producer(leader, B)
    a.send()
    b_first = b.send()
    a.end(committed=False)
    a.send()
    a.end(committed=True, coordinator_epoch=2)
    settle(leader)
    offset = 0
    while offset < leader.log_end_offset:
        rr = leader.read(offset, 300)
        follower.append_as_follower(rr.records)
        offset = follower.log_end_offset
    follower.high_watermark = leader.high_watermark
    assert aborted_entries(follower) == aborted_entries(leader)
    assert follower.last_stable_offset == leader.last_stable_offset == b_first
    entry = follower.producer_state.last_entry(A)
    assert entry is not None and entry.coordinator_epoch == 2
    # Promoted, the follower fences the older coordinator epoch as the leader would.
    with pytest.raises(TransactionCoordinatorFencedError):
        Producer(follower, A).end(committed=False, coordinator_epoch=1)
    leader.close()
    follower.close()


def test_truncation_drops_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(log, A)
    a_first = a.send()
    marker = a.end(committed=False)
    assert aborted_entries(log)
    log.truncate_to(marker)  # the marker is gone: the transaction is open again
    assert aborted_entries(log) == []
    settle(log)
    assert log.last_stable_offset == a_first
    assert log.producer_state.has_ongoing_transaction(A)
    log.close()


def test_delete_records_past_an_open_transaction_moves_the_lso_up(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(log, A)
    a_first = a.send(4)
    log.append_as_leader(batch(2, NOW), 0)
    settle(log)
    assert log.last_stable_offset == a_first
    log.delete_records_before(2)
    assert log.last_stable_offset == 2  # never below the log start offset
    log.close()


def test_marker_batches_are_kafkas_control_layout(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    a = Producer(log, A, epoch=7)
    a.send()
    offset = a.end(committed=True, coordinator_epoch=3)
    rr = log.read(offset, 1 << 20)
    (decoded,) = decode_batches(rr.records)
    assert decoded.is_control and decoded.is_transactional
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (A, 7, -1)
    (record,) = decoded.records
    assert record.key == b"\x00\x00\x00\x01"  # version 0, COMMIT
    assert record.value == b"\x00\x00\x00\x00\x00\x03"  # version 0, coordinator epoch 3
    log.close()


def test_txnindex_of_an_interrupted_cleaner_swap_is_kept(tmp_path: Path) -> None:
    """The cleaner renames .txnindex with its segment (.cleaned -> .swap -> final); the
    index cannot be rebuilt after a clean shutdown, so recovery finishes the rename."""
    log = open_log(tmp_path / "t-0")
    a = Producer(log, A)
    a.send()
    a.end(committed=False)
    entries = aborted_entries(log)
    log.close()
    d = tmp_path / "t-0"
    base = f"{0:020d}"
    good = (d / f"{base}.txnindex").read_bytes()
    # Stopped after the .log reached its final name, before the index did.
    (d / f"{base}.txnindex").rename(d / f"{base}.txnindex.swap")
    log = open_log(d, clean_shutdown=True, high_watermark=0)
    assert (d / f"{base}.txnindex").read_bytes() == good
    assert not (d / f"{base}.txnindex.swap").exists()
    assert aborted_entries(log) == entries
    log.close()
    # A whole swap (log and index) replaces the segment, index included.
    (d / f"{base}.log").rename(d / f"{base}.log.swap")
    (d / f"{base}.txnindex").rename(d / f"{base}.txnindex.swap")
    log = open_log(d, clean_shutdown=True, high_watermark=0)
    assert (d / f"{base}.txnindex").read_bytes() == good
    assert aborted_entries(log) == entries
    log.close()
    # A swap whose compaction had not finished (.cleaned left) is dropped with its index.
    (d / f"{base}.txnindex").rename(d / f"{base}.txnindex.swap")
    (d / f"{base}.log").rename(d / f"{base}.log.swap")
    (d / f"{base}.index.cleaned").write_bytes(b"")
    log = open_log(d, clean_shutdown=True, high_watermark=0)
    assert not [p.name for p in d.iterdir() if p.name.endswith((".swap", ".cleaned"))]
    assert log.log_end_offset == 0  # the only segment was the unfinished swap
    log.close()
