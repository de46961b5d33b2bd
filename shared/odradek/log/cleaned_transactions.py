"""What compaction needs to know about transactions (Kafka's LogCleaner.CleanedTransactionMetadata).

The cleaner walks batches in offset order. Aborted transactions come from the
``.txnindex`` files (:mod:`odradek.log.transaction_index`), fed in with
:meth:`CleanedTransactionMetadata.add_aborted_transactions` ahead of the walk; a
transaction becomes "ongoing" for the walk once a batch at or after its first offset is
read. Then:

* a transactional data batch of a producer with an ongoing aborted transaction is
  aborted data: compaction removes all its records regardless of keys;
* an ABORT marker is kept (and its transaction written to the cleaned segment's
  ``.txnindex``) while the walk saw data of that transaction in this pass; a marker
  whose transaction has no data left may go;
* a COMMIT marker may go when the walk saw no data of its transaction;
* an empty control batch (an earlier pass removed its record) may go.

"May go" is Kafka's two-step marker removal: the first pass that finds a removable
marker rewrites its batch with a delete horizon (``now + delete.retention.ms``, KIP-534:
the base timestamp with the delete-horizon attribute bit); a pass after the horizon
removes the marker (keeping an empty header if it is its producer's last entry), so a
consumer that read the aborted data has ``delete.retention.ms`` to also read the marker.

Pure bookkeeping, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.log.transaction_index import AbortedTxn
from odradek.records.control import ControlRecordType, EndTransactionMarker
from odradek.records.header import BatchHeader


@dataclass(slots=True)
class _AbortedInWalk:
    txn: AbortedTxn
    last_observed_batch_offset: int = -1  # -1: no data of it seen in this pass


class CleanedTransactionMetadata:
    """Transaction state carried across the segments of one cleaning pass."""

    def __init__(self) -> None:
        self._committed_ongoing: set[int] = set()  # producers with committed data seen
        self._aborted_ongoing: dict[int, _AbortedInWalk] = {}
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self._seq = 0
        self.retained_aborted: list[AbortedTxn] = []  # for the cleaned segment's .txnindex

    def add_aborted_transactions(self, txns: Iterable[AbortedTxn]) -> None:
        for txn in txns:
            self._seq += 1
            heapq.heappush(self._pending, (txn.first_offset, self._seq, txn))

    def take_retained(self) -> list[AbortedTxn]:
        """The aborted transactions kept since the last call (one cleaned segment's index)."""
        out, self.retained_aborted = self.retained_aborted, []
        return out

    def _consume_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _, _, txn = heapq.heappop(pending)
            self._aborted_ongoing.setdefault(txn.producer_id, _AbortedInWalk(txn))

    def on_control_batch_read(self, h: BatchHeader, marker: EndTransactionMarker | None) -> bool:
        """Walk past a control batch; True when it may be removed (see the module doc).

        ``marker`` is None for an empty control batch or another control type.
        """
        self._consume_aborted_up_to(h.last_offset)
        if h.records_count == 0:
            return True
        if marker is None:
            return False
        pid = h.producer_id
        if marker.control_type == ControlRecordType.ABORT:
            walk = self._aborted_ongoing.pop(pid, None)
            if walk is not None and walk.last_observed_batch_offset >= 0:
                self.retained_aborted.append(walk.txn)
                return False
            return True
        if pid in self._committed_ongoing:
            self._committed_ongoing.discard(pid)
            return False
        return True

    def on_batch_read(self, h: BatchHeader) -> bool:
        """Walk past a data batch; True when it belongs to an aborted transaction."""
        self._consume_aborted_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        walk = self._aborted_ongoing.get(h.producer_id)
        if walk is not None:
            walk.last_observed_batch_offset = h.last_offset
            return True
        self._committed_ongoing.add(h.producer_id)
        return False


__all__ = ["CleanedTransactionMetadata"]
