"""The mirror's batch copy (sans-io): what is copied byte for byte, what is rebuilt,
what is skipped, and the producer fields stamped on the way out."""

from __future__ import annotations

from odradek.mirror.batches import AbortedTransactions, mirror_batches, stamp_producer
from odradek.records.batch import BatchView
from odradek.records.control import ControlRecordType, build_end_txn_marker_batch
from odradek.records.header import Compression, TimestampType
from odradek.records.record import BatchBuilder, decode_batch


def batch(base: int, n: int, *, pid: int = -1, txn: bool = False, **kw: object) -> bytes:
    b = BatchBuilder(
        base_offset=base, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1, is_transactional=txn, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    for i in range(n):
        b.append(1_000 + base + i, b"k%d" % (base + i), b"v%d" % (base + i), [("h", b"x")])
    return b.build()


def records(data: bytes) -> list[tuple[int, bytes | None, bytes | None, list[object]]]:
    d = decode_batch(data)
    return [(r.timestamp, r.key, r.value, list(r.headers)) for r in d.records]


def test_whole_batches_are_copied_byte_for_byte_and_the_position_advances() -> None:
    first, second = batch(0, 3, compression=Compression.LZ4), batch(3, 2)
    out = mirror_batches(first + second, 0)
    assert [bytes(b.data or b"") for b in out] == [first, second]
    assert [(b.source_next, b.record_count, b.dense) for b in out] == [(3, 3, True), (5, 2, True)]
    assert out[0].max_timestamp == 1_002


def test_a_trailing_partial_batch_waits_for_the_next_fetch() -> None:
    whole, partial = batch(0, 2), batch(2, 2)
    out = mirror_batches(whole + partial[:-5], 0)
    assert [b.source_next for b in out] == [2]


def test_a_batch_starting_before_the_position_sends_only_the_rest() -> None:
    out = mirror_batches(batch(10, 5), 12)
    assert len(out) == 1 and out[0].source_next == 15 and not out[0].dense
    assert [r[2] for r in records(bytes(out[0].data or b""))] == [b"v12", b"v13", b"v14"]
    assert mirror_batches(batch(10, 5), 15) == []


def test_log_append_time_becomes_each_records_create_time() -> None:
    data = batch(0, 2, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=99_000)
    (out,) = mirror_batches(data, 0)
    rebuilt = decode_batch(bytes(out.data or b""))
    assert not rebuilt.attributes & 0x08
    assert [r.timestamp for r in rebuilt.records] == [99_000, 99_000]


def test_control_and_aborted_batches_are_skipped_but_move_the_position() -> None:
    committed = batch(0, 2, pid=7, txn=True)
    commit = build_end_txn_marker_batch(
        control_type=ControlRecordType.COMMIT, coordinator_epoch=0, producer_id=7,
        producer_epoch=0, timestamp=1, base_offset=2,
    )  # fmt: skip
    aborted_data = batch(3, 2, pid=8, txn=True)
    abort = build_end_txn_marker_batch(
        control_type=ControlRecordType.ABORT, coordinator_epoch=0, producer_id=8,
        producer_epoch=0, timestamp=1, base_offset=5,
    )  # fmt: skip
    later = batch(6, 1, pid=8, txn=True)  # pid 8's next transaction is not aborted
    aborted = AbortedTransactions()
    aborted.add([(8, 3)])
    out = mirror_batches(committed + commit + aborted_data + abort + later, 0, aborted)
    assert [(b.data is not None, b.source_next) for b in out] == [
        (True, 2), (False, 3), (False, 5), (False, 6), (True, 7),
    ]  # fmt: skip


def test_stamp_producer_rewrites_the_producer_fields_and_keeps_the_batch_valid() -> None:
    data = bytearray(batch(40, 3, pid=5, txn=True))
    stamp_producer(data, 1234, 3, 77, transactional=False)
    view = BatchView(data)
    assert view.is_valid()
    assert (view.base_offset, view.producer_id, view.producer_epoch, view.base_sequence) == (
        0, 1234, 3, 77,
    )  # fmt: skip
    assert not view.is_transactional
    stamp_producer(data, 1234, 3, 80, transactional=True)
    assert BatchView(data).is_transactional and BatchView(data).is_valid()
    assert records(bytes(data)) == records(batch(40, 3))


def test_small_batches_are_merged_into_one_with_every_record_unchanged() -> None:
    from odradek.mirror.batches import merge_batches

    parts = [
        batch(0, 3, compression=Compression.LZ4),
        batch(3, 1, compression=Compression.LZ4),
        batch(4, 5, compression=Compression.LZ4),
    ]
    fetched = mirror_batches(b"".join(parts), 0)
    merged = merge_batches(fetched)
    assert len(merged) == 1
    one = merged[0]
    assert (one.source_next, one.record_count, one.dense) == (9, 9, True)
    assert one.max_timestamp == 1_008
    assert one.data is not None
    view = BatchView(one.data)
    assert view.is_valid() and view.compression == Compression.LZ4
    assert records(bytes(one.data)) == [r for p in parts for r in records(p)]
    # Stamped as the mirror's producer, it is still a valid batch.
    stamp_producer(one.data, 7, 0, 0, transactional=False)
    assert BatchView(one.data).is_valid()


def test_merging_stops_at_placeholders_big_batches_codec_changes_and_the_limit() -> None:
    from odradek.mirror.batches import merge_batches

    marker = build_end_txn_marker_batch(
        base_offset=5, producer_id=9, producer_epoch=0, control_type=ControlRecordType.COMMIT,
        coordinator_epoch=0,
        timestamp=1_000,
    )  # fmt: skip
    parts = [batch(0, 2), batch(2, 3, pid=9, txn=True), marker, batch(6, 2), batch(8, 2)]
    parts.append(batch(10, 2, compression=Compression.GZIP))
    fetched = mirror_batches(b"".join(parts), 0)
    merged = merge_batches(fetched)
    assert [(b.source_next, b.record_count, b.data is None) for b in merged] == [
        (5, 5, False),  # 0-1 and the transaction's 2-4
        (6, 0, True),  # the commit marker: only moves the position
        (10, 4, False),  # 6-9
        (12, 2, False),  # gzip: a codec of its own
    ]
    one_by_one = merge_batches(fetched, limit=1)
    assert len(one_by_one) == len(fetched)
    assert merge_batches(fetched, small=1) == fetched
