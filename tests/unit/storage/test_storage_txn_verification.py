"""KIP-890 error mapping of the storage leader and the transactional-batch probe of Produce."""

from __future__ import annotations

import pytest

from odradek.protocol.errors import ErrorCode
from odradek.records.record import BatchBuilder
from odradek.storage.produce import TransactionalBatch, transactional_batch
from odradek.storage.txn_verification import produce_error_for


@pytest.mark.parametrize(
    ("coordinator", "version", "produce"),
    [
        (ErrorCode.PRODUCER_FENCED, 9, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.TRANSACTION_ABORTABLE, 10, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.TRANSACTION_ABORTABLE, 11, ErrorCode.TRANSACTION_ABORTABLE),
        (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, 11, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.CONCURRENT_TRANSACTIONS, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NETWORK_EXCEPTION, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.NOT_COORDINATOR, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.INVALID_PRODUCER_ID_MAPPING, 9, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (ErrorCode.INVALID_TXN_STATE, 9, ErrorCode.INVALID_TXN_STATE),
        (9999, 9, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_coordinator_errors_become_kafkas_produce_errors(
    coordinator: int, version: int, produce: ErrorCode
) -> None:
    assert produce_error_for(coordinator, version) == produce


def _batch(pid: int, *, transactional: bool, seq: int = 0, epoch: int = 0) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    builder.append(1, b"k", b"v")
    return builder.build()


def test_transactional_batch_finds_the_first_transactional_batch() -> None:
    plain = _batch(-1, transactional=False, seq=-1)
    idempotent = _batch(5, transactional=False)
    txn = _batch(7, transactional=True, seq=3, epoch=2)
    assert transactional_batch(plain + idempotent) is None
    assert transactional_batch(idempotent + txn) == TransactionalBatch(7, 2, 3)
    assert transactional_batch(b"") is None
    assert transactional_batch(b"\x00" * 20) is None  # malformed: the log rejects it later
