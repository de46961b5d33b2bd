"""Compaction with transactions: aborted data goes whatever its keys, markers stay while
their transaction has data, then get a delete horizon, then go (Kafka's LogCleaner)."""

from __future__ import annotations

from pathlib import Path

from log_testkit import NOW, batch, open_log, small_config
from test_log_transactions import A, B, Producer, settle

from odradek.log.cleaned_transactions import CleanedTransactionMetadata
from odradek.log.cleaner import LogCleaner
from odradek.log.log import PartitionLog
from odradek.log.transaction_index import AbortedTxn
from odradek.records.control import ControlRecordType, EndTransactionMarker
from odradek.records.header import BatchHeader
from odradek.records.record import decode_batch

RETENTION = 5_000


def compact_log(path: Path) -> PartitionLog:
    return open_log(
        path,
        small_config(
            cleanup_policy=("compact",),
            segment_bytes=1 << 20,
            segment_index_bytes=4096,
            delete_retention_ms=RETENTION,
        ),
    )


def batches(log: PartitionLog) -> list[tuple[BatchHeader, list[tuple[bytes | None, bytes | None]]]]:
    out = []
    for seg in log.segments:
        for b, data in seg.iter_batches():
            recs = [(r.key, r.value) for r in decode_batch(data, 0).records]
            out.append((b.header, recs))
    return out


def markers(log: PartitionLog) -> list[tuple[int, int, bool]]:
    """(offset, producer id, has delete horizon) of each control batch still holding its record."""
    return [
        (h.base_offset, h.producer_id, h.has_delete_horizon)
        for h, recs in batches(log)
        if h.is_control and recs
    ]


def fresh_dirty_segment(log: PartitionLog, tag: str) -> None:
    log.roll()
    log.append_as_leader(batch(1, NOW, key=f"fresh-{tag}".encode()), 0)
    log.roll()
    settle(log)


def test_aborted_data_goes_and_markers_follow_after_the_delete_horizon(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    a, b = Producer(log, A), Producer(log, B)
    a_first = a.send(2)  # keys k0, k1: aborted
    a_abort = a.end(committed=False)
    b.send(1)  # key k0: committed, the latest k0
    b_commit = b.end(committed=True)
    a.send(1, key="x")  # A moves on, so its aborted batch is not its last
    a_commit = a.end(committed=True)
    fresh_dirty_segment(log, "0")
    assert [t.first_offset for s in log.segments for t in s.txn_index.all_aborted_txns()] == [
        a_first
    ]

    cleaner = LogCleaner()
    first = cleaner.clean(log, None, NOW)
    assert not first.aborted
    kept = [(h.producer_id, recs) for h, recs in batches(log) if not h.is_control]
    assert all(f"{A}-0".encode() not in [v for _k, v in recs] for _p, recs in kept)
    assert (B, [(b"k0", f"{B}-0".encode())]) in kept
    # Markers stay while data of their transaction was still there in this pass; the
    # abort stays indexed for read_committed consumers.
    assert [m[:2] for m in markers(log)] == [(a_abort, A), (b_commit, B), (a_commit, A)]
    assert [t for s in log.segments for t in s.txn_index.all_aborted_txns()] == [
        AbortedTxn(A, a_first, a_abort, a_abort + 1)
    ]

    # Next pass: the abort has no data left -> delete horizon, no index entry any more.
    fresh_dirty_segment(log, "1")
    second = cleaner.clean(log, first.end_offset, NOW)
    assert (a_abort, A, True) in markers(log)
    horizon = next(h for h, _ in batches(log) if h.base_offset == a_abort)
    assert horizon.base_timestamp == NOW + RETENTION
    assert (b_commit, B, False) in markers(log) and (a_commit, A, False) in markers(log)
    assert [t for s in log.segments for t in s.txn_index.all_aborted_txns()] == []

    # Before the horizon the marker survives another pass; after it, it is gone.
    fresh_dirty_segment(log, "2")
    third = cleaner.clean(log, second.end_offset, NOW + RETENTION - 1)
    assert (a_abort, A, True) in markers(log)
    fresh_dirty_segment(log, "3")
    cleaner.clean(log, third.end_offset, NOW + RETENTION)
    assert a_abort not in [m[0] for m in markers(log)]
    assert (b_commit, B, False) in markers(log)
    log.close()


def test_commit_marker_without_remaining_data_goes_too(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    a = Producer(log, A)
    a.send(1)  # key k0
    commit = a.end(committed=True)
    log.append_as_leader(batch(1, NOW, key=b"k0", value=b"newer"), 0)  # supersedes it
    a.send(1, key="x")  # A's later data keeps A alive
    a.end(committed=True)
    fresh_dirty_segment(log, "0")
    cleaner = LogCleaner()
    first = cleaner.clean(log, None, NOW)
    # The committed record lost to a newer value in this pass, but was seen: marker kept.
    assert (commit, A, False) in markers(log)
    fresh_dirty_segment(log, "1")
    second = cleaner.clean(log, first.end_offset, NOW)
    assert (commit, A, True) in markers(log)
    fresh_dirty_segment(log, "2")
    cleaner.clean(log, second.end_offset, NOW + RETENTION + 1)
    assert commit not in [m[0] for m in markers(log)]
    log.close()


def test_read_committed_after_compaction_still_hides_aborted_data(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    a = Producer(log, A)
    log.append_as_leader(batch(1, NOW, key=b"plain"), 0)
    aborted_first = a.send(2)
    a.end(committed=False)
    fresh_dirty_segment(log, "0")
    LogCleaner().clean(log, None, NOW)
    rr = log.read(0, 1 << 20, max_offset=log.last_stable_offset, include_aborted=True)
    # A's aborted batch is its last data batch: its header stays (producer state), empty.
    assert [(t.producer_id, t.first_offset) for t in rr.aborted or ()] == [(A, aborted_first)]
    values = [v for h, recs in batches(log) if not h.is_control for _k, v in recs]
    assert f"{A}-0".encode() not in values and b"v" * 50 in values
    log.close()


def test_cleaned_transaction_metadata_walk() -> None:
    def header(offset: int, pid: int, *, txn: bool = True, control: bool = False) -> BatchHeader:
        attrs = (0x10 if txn else 0) | (0x20 if control else 0)
        return BatchHeader(offset, 100, 0, 2, 0, attrs, 0, NOW, NOW, pid, 0, 0, 1)

    walk = CleanedTransactionMetadata()
    walk.add_aborted_transactions([AbortedTxn(A, 10, 12, 13)])
    abort = EndTransactionMarker(ControlRecordType.ABORT, 0)
    commit = EndTransactionMarker(ControlRecordType.COMMIT, 0)
    assert walk.on_batch_read(header(5, B)) is False  # B's committed data
    assert walk.on_batch_read(header(10, A)) is True  # inside A's aborted transaction
    assert walk.on_batch_read(header(11, B, txn=False)) is False
    assert walk.on_control_batch_read(header(12, A, control=True), abort) is False  # data seen
    assert walk.take_retained() == [AbortedTxn(A, 10, 12, 13)]
    assert walk.on_control_batch_read(header(14, B, control=True), commit) is False
    assert walk.on_control_batch_read(header(15, B, control=True), commit) is True  # no data
    assert walk.on_batch_read(header(16, A)) is False  # A's next transaction: not aborted
