"""The aborted transaction index ``<base offset, 20 digits>.txnindex`` (Kafka's TransactionIndex).

One file per segment, beside its ``.log``/``.index``/``.timeindex``, holding the
transactions whose ABORT marker was written into that segment (Kafka's ``AbortedTxn``).
Entries back to back, no header, each 34 bytes big-endian::

    int16  version            0
    int64  producerId
    int64  firstOffset        first offset of the transaction's data in this partition
    int64  lastOffset         offset of the ABORT marker
    int64  lastStableOffset   LSO right after the abort: the first offset of the next
                              undecided transaction of another producer, else lastOffset + 1

Only transactions that wrote data here get an entry (a marker for an empty transaction
changes neither the LSO nor what a read_committed consumer must skip). COMMITs never
appear. A read_committed Fetch returns the entries overlapping the fetched range
(:func:`collect_aborted_txns`); the cleaner rewrites the index of the segments it
cleans, keeping only transactions whose data it kept.

Invariants: ``lastOffset`` strictly increases within a file and is >= the segment's
base offset (``firstOffset`` may lie in an earlier segment); a partial trailing entry
is never an entry.

Crash behaviour: the file is created by the first entry and appended with one
``write`` per aborted transaction; it is fsynced with its segment (never on its own),
so after a crash it may lose or tear its tail. Every segment recovered after an
unclean shutdown (from the recovery point on) gets its index rebuilt from its ABORT
markers, replaying producer state from the segment's base offset (Kafka's
LogSegment.recover); an index failing :meth:`TransactionIndex.sanity_check` (torn
tail, entry below the base offset, unknown version) is rebuilt the same way.
Truncation cuts the entries whose marker lies at or above the truncation offset.

The codec (:func:`encode_aborted_txn`, :func:`decode_aborted_txns`,
:func:`collect_aborted_txns`) is pure; :class:`TransactionIndex` owns the file.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from odradek.log.index_file import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One entry (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = ABORTED_TXN_VERSION


class TxnIndexSearchResult(NamedTuple):
    """Entries overlapping a fetch range; ``complete`` means later segments cannot add any."""

    aborted: list[AbortedTxn]
    complete: bool


def txn_index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


def encode_aborted_txn(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(
        txn.version, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    )


def decode_aborted_txns(data: bytes | bytearray | memoryview) -> list[AbortedTxn]:
    """Every whole entry of ``data`` (a torn trailing entry is ignored, as Kafka's reader does)."""
    out = []
    for version, pid, first, last, lso in _ENTRY.iter_unpack(
        memoryview(data)[: len(data) - len(data) % ENTRY_SIZE]
    ):
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


def collect_aborted_txns(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    """Kafka's TransactionIndex.collectAbortedTxns over one segment's entries.

    Keeps entries with ``lastOffset >= fetch_offset`` and ``firstOffset <
    upper_bound_offset`` (exclusive); the search is complete once an entry's LSO
    reaches the upper bound (no later abort can start below it).
    """
    found = []
    for txn in entries:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            found.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)


class TransactionIndex:
    """One segment's ``.txnindex``: entries cached in memory, the file created on demand."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # loaded on first use
        self._torn = 0  # bytes of a partial trailing entry found on load
        self._fd = -1
        self._dirty = False

    # -- reading ------------------------------------------------------------------------
    def _load(self) -> list[AbortedTxn]:
        entries = self._entries
        if entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            entries = decode_aborted_txns(data)
            self._torn = len(data) % ENTRY_SIZE
            self._entries = entries
        return entries

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return list(self._load())

    def __len__(self) -> int:
        return len(self._load())

    @property
    def last_offset(self) -> int | None:
        entries = self._load()
        return entries[-1].last_offset if entries else None

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        return collect_aborted_txns(self._load(), fetch_offset, upper_bound_offset)

    def sanity_check(self) -> None:
        """Raise CorruptIndexError for a torn tail, an unknown version or an entry below the base."""
        entries = self._load()
        if self._torn:
            raise CorruptIndexError(
                f"Transaction index {self.path} ends in a partial entry of {self._torn} bytes"
            )
        for txn in entries:
            if txn.version > ABORTED_TXN_VERSION:
                raise CorruptIndexError(
                    f"Unexpected aborted transaction version {txn.version} in transaction index "
                    f"{self.path}, current version is {ABORTED_TXN_VERSION}"
                )
            if txn.last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self.path} is less than "
                    f"start offset {self.base_offset}"
                )

    # -- writing ------------------------------------------------------------------------
    def _open_for_append(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry; its ``lastOffset`` must exceed every earlier one."""
        entries = self._load()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                "The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset "
                f"{entries[-1].last_offset} of index {self.path}"
            )
        if self._torn:
            self._truncate_file(len(entries) * ENTRY_SIZE)
        data = encode_aborted_txn(txn)
        fd = self._open_for_append()
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        entries.append(txn)
        self._dirty = True

    def extend(self, txns: Sequence[AbortedTxn]) -> None:
        for txn in txns:
            self.append(txn)

    def _truncate_file(self, size: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, size)
        self._torn = 0
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker lies at or above ``offset``."""
        entries = self._load()
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep == len(entries) and not self._torn:
            return
        del entries[keep:]
        self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        """Remove every entry (the segment is being recovered and re-indexed)."""
        self._entries = []
        if self.path.exists():
            self._truncate_file(0)
        self._torn = 0

    def flush(self) -> None:
        if self._dirty:
            self._dirty = False
            if self._fd >= 0:
                os.fsync(self._fd)
            else:
                with contextlib.suppress(FileNotFoundError):
                    fd = os.open(self.path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

    def close_handle(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, new_path: Path) -> None:
        """Follow the segment's suffix change (the file may not exist yet)."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, new_path)
        self.path = Path(new_path)

    def delete(self) -> None:
        self.close_handle()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._entries = []
        self._torn = 0


__all__ = [
    "ABORTED_TXN_VERSION",
    "ENTRY_SIZE",
    "TXN_INDEX_SUFFIX",
    "AbortedTxn",
    "TransactionIndex",
    "TxnIndexSearchResult",
    "collect_aborted_txns",
    "decode_aborted_txns",
    "encode_aborted_txn",
    "txn_index_file_name",
]
