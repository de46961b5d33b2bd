"""The ``.txnindex`` format (Kafka's TransactionIndex/AbortedTxn): bytes, search, file life."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from odradek.log.index_file import CorruptIndexError
from odradek.log.transaction_index import (
    ENTRY_SIZE,
    AbortedTxn,
    TransactionIndex,
    collect_aborted_txns,
    decode_aborted_txns,
    encode_aborted_txn,
    txn_index_file_name,
)


def test_entry_is_kafkas_34_bytes() -> None:
    txn = AbortedTxn(producer_id=7, first_offset=100, last_offset=150, last_stable_offset=151)
    data = encode_aborted_txn(txn)
    assert ENTRY_SIZE == 34 and len(data) == 34
    # int16 version, int64 producerId, firstOffset, lastOffset, lastStableOffset (big-endian)
    assert data == struct.pack(">hqqqq", 0, 7, 100, 150, 151)
    assert decode_aborted_txns(data) == [txn]
    assert txn_index_file_name(5) == "00000000000000000005.txnindex"


def test_decoding_ignores_a_torn_tail() -> None:
    a = AbortedTxn(1, 0, 5, 6)
    b = AbortedTxn(2, 3, 9, 10)
    data = encode_aborted_txn(a) + encode_aborted_txn(b)
    assert decode_aborted_txns(data + b"\x00" * 10) == [a, b]
    assert decode_aborted_txns(data[:40]) == [a]


def test_collect_keeps_overlapping_entries_and_stops_at_the_upper_bound() -> None:
    entries = [
        AbortedTxn(1, 0, 10, 11),  # ends before the fetch
        AbortedTxn(2, 5, 20, 21),  # overlaps [15, 40)
        AbortedTxn(3, 30, 35, 36),  # inside
        AbortedTxn(4, 38, 45, 46),  # starts before the bound: overlaps; its LSO passes it
        AbortedTxn(5, 41, 50, 51),  # never reached
    ]
    result = collect_aborted_txns(entries, 15, 40)
    assert [t.producer_id for t in result.aborted] == [2, 3, 4]
    assert result.complete
    # No entry reaches the bound: the search must go on in the next segment.
    result = collect_aborted_txns(entries[:3], 15, 40)
    assert [t.producer_id for t in result.aborted] == [2, 3] and not result.complete


def test_index_file_append_truncate_reset(tmp_path: Path) -> None:
    path = tmp_path / txn_index_file_name(100)
    index = TransactionIndex(path, 100)
    assert not path.exists() and len(index) == 0  # created on the first entry
    index.append(AbortedTxn(1, 90, 100, 101))
    index.append(AbortedTxn(2, 95, 120, 121))
    index.append(AbortedTxn(3, 110, 130, 131))
    with pytest.raises(ValueError, match="must increase"):
        index.append(AbortedTxn(4, 100, 130, 131))
    assert path.stat().st_size == 3 * ENTRY_SIZE
    index.flush()
    index.close_handle()
    again = TransactionIndex(path, 100)
    assert [t.producer_id for t in again.all_aborted_txns()] == [1, 2, 3]
    again.sanity_check()
    again.truncate_to(120)  # markers at or above 120 go
    assert [t.producer_id for t in again.all_aborted_txns()] == [1]
    assert path.stat().st_size == ENTRY_SIZE
    again.reset()
    assert path.stat().st_size == 0 and again.all_aborted_txns() == []


def test_sanity_check_catches_torn_tails_old_entries_and_unknown_versions(tmp_path: Path) -> None:
    path = tmp_path / txn_index_file_name(100)
    path.write_bytes(encode_aborted_txn(AbortedTxn(1, 90, 100, 101)) + b"\x01\x02")
    with pytest.raises(CorruptIndexError, match="partial entry"):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(encode_aborted_txn(AbortedTxn(1, 10, 50, 51)))
    with pytest.raises(CorruptIndexError, match="less than start offset"):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(encode_aborted_txn(AbortedTxn(1, 100, 150, 151, version=1)))
    with pytest.raises(CorruptIndexError, match="version"):
        TransactionIndex(path, 100).sanity_check()
    # An append after a torn tail first cuts the tail: the file stays a whole number of entries.
    path.write_bytes(encode_aborted_txn(AbortedTxn(1, 100, 150, 151)) + b"\x07")
    index = TransactionIndex(path, 100)
    index.append(AbortedTxn(2, 151, 160, 161))
    assert path.stat().st_size == 2 * ENTRY_SIZE
    index.close_handle()
    assert [t.producer_id for t in TransactionIndex(path, 100).all_aborted_txns()] == [1, 2]
