"""The transaction coordinator's rules, sans-io: Kafka's state machine, error codes,
durability before answers, markers before completion, fencing, timeouts, expiry,
KIP-360 recovery and replay from the log."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from odradek.coordinator.timers import ManualScheduler
from odradek.protocol.errors import ErrorCode as E
from odradek.transaction_log.records import (
    TransactionLogValue,
    TransactionState,
    decode_value,
    encode_value,
)
from odradek.transactions.metadata import IllegalTransition, TransactionMetadata
from odradek.transactions.shard import (
    InitResult,
    LogWrite,
    MarkerJob,
    TransactionShard,
    TxnConfig,
)

S = TransactionState
TX = "tx-1"
T0 = ("topic", 0)
T1 = ("topic", 1)


@dataclass
class Harness:
    """A shard with its writes and marker jobs held for the test to complete."""

    config: TxnConfig = field(
        default_factory=lambda: TxnConfig(
            max_timeout_ms=60_000,
            abort_interval_ms=1_000,
            id_expiration_ms=100_000,
            expiration_interval_ms=10_000,
        )
    )
    scheduler: ManualScheduler = field(default_factory=ManualScheduler)
    writes: list[LogWrite] = field(default_factory=list)
    log: list[tuple[str, TransactionLogValue | None]] = field(default_factory=list)
    jobs: list[MarkerJob] = field(default_factory=list)
    epoch: int = 3
    shard: TransactionShard = field(init=False)

    def __post_init__(self) -> None:
        self.shard = TransactionShard(
            7, self.epoch, self.config, self.scheduler, self.writes.append, self.jobs.append
        )

    def flush(self, error: int = 0) -> int:
        """Complete every pending write (durable when ``error`` is 0)."""
        n = 0
        while self.writes:
            w = self.writes.pop(0)
            if not error:
                # What the log holds is exactly what decodes back.
                value = None if w.value is None else decode_value(encode_value(w.value))
                self.log.append((w.transactional_id, value))
            w.done(error)
            n += 1
        return n

    def init(
        self,
        txn: str = TX,
        timeout: int = 10_000,
        expected: tuple[int, int] | None = None,
        pid: int | None = 1000,
        *,
        durable: bool = True,
    ) -> InitResult:
        out: list[InitResult] = []
        self.shard.init_producer_id(txn, timeout, expected, None, out.append)
        if out and out[0].needs_producer_id:
            out.clear()
            self.shard.init_producer_id(txn, timeout, expected, pid, out.append)
        if durable:
            self.flush()
        assert len(out) == 1, out
        return out[0]

    def call(self, fn: str, *args: object, durable: bool = True) -> int:
        out: list[int] = []
        getattr(self.shard, fn)(*args, out.append)
        if durable:
            self.flush()
        assert len(out) == 1, out
        return out[0]

    def md(self, txn: str = TX) -> TransactionMetadata:
        return self.shard.txns[txn]

    def replayed(self) -> dict[str, TransactionLogValue]:
        state: dict[str, TransactionLogValue] = {}
        for txn, value in self.log:
            if value is None:
                state.pop(txn, None)
            else:
                state[txn] = value
        return state


def started(h: Harness) -> tuple[int, int]:
    """An Ongoing transaction over T0 and T1; returns (pid, epoch)."""
    r = h.init()
    assert r.error == E.NONE
    assert h.call("add_partitions", TX, r.producer_id, r.producer_epoch, [T0, T1]) == E.NONE
    return r.producer_id, r.producer_epoch


# -- InitProducerId ---------------------------------------------------------------------------
def test_new_transactional_id_gets_a_fresh_producer_id_and_epoch_0_once_durable() -> None:
    h = Harness()
    out: list[InitResult] = []
    h.shard.init_producer_id(TX, 10_000, None, None, out.append)
    assert out == [InitResult(E.NONE, needs_producer_id=True)] and not h.writes
    out.clear()
    h.shard.init_producer_id(TX, 10_000, None, 1000, out.append)
    assert out == [] and len(h.writes) == 1  # nobody hears before the write is durable
    h.flush()
    assert out == [InitResult(E.NONE, 1000, 0)]
    assert h.log == [(TX, h.log[0][1])] and h.log[0][1] is not None
    assert h.log[0][1].state is S.EMPTY and h.log[0][1].producer_epoch == 0
    # A new producer instance with the same id bumps the epoch (fencing the old one).
    assert h.init() == InitResult(E.NONE, 1000, 1)


@pytest.mark.parametrize(
    ("txn", "timeout", "error"),
    [
        ("", 1000, E.INVALID_REQUEST),
        (TX, 0, E.INVALID_TRANSACTION_TIMEOUT),
        (TX, 60_001, E.INVALID_TRANSACTION_TIMEOUT),
    ],
)
def test_init_rejects_bad_input(txn: str, timeout: int, error: int) -> None:
    h = Harness()
    assert h.init(txn, timeout) == InitResult(error)
    assert not h.log


def test_failed_write_answers_the_coordinator_error_and_changes_nothing() -> None:
    h = Harness()
    h.init()
    out: list[InitResult] = []
    h.shard.init_producer_id(TX, 10_000, None, None, out.append)
    h.flush(E.NOT_ENOUGH_REPLICAS)
    assert out == [InitResult(E.COORDINATOR_NOT_AVAILABLE)]
    assert h.md().producer_epoch == 0 and h.md().pending is None
    out.clear()
    h.shard.init_producer_id(TX, 10_000, None, None, out.append)
    h.flush(E.NOT_LEADER_OR_FOLLOWER)
    assert out == [InitResult(E.NOT_COORDINATOR)]
    assert h.init() == InitResult(E.NONE, 1000, 1)


def test_kip360_recovery_retry_and_fencing() -> None:
    h = Harness()
    h.init()  # epoch 0
    assert h.init(expected=(1000, 0)) == InitResult(E.NONE, 1000, 1)  # bump, last epoch 0
    # The response was lost; the producer retries with what it had: same answer.
    assert h.init(expected=(1000, 0)) == InitResult(E.NONE, 1000, 1)
    assert h.init(expected=(1000, 5)) == InitResult(E.PRODUCER_FENCED)
    assert h.init(expected=(999, 1)) == InitResult(E.PRODUCER_FENCED)
    # Another instance (no expected epoch) takes over; the old one is fenced.
    assert h.init() == InitResult(E.NONE, 1000, 2)
    assert h.init(expected=(1000, 1)) == InitResult(E.PRODUCER_FENCED)


def test_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    h = Harness()
    h.init()
    h.md().producer_epoch = 32766
    assert h.init(pid=2000) == InitResult(E.NONE, 2000, 0)
    md = h.md()
    assert (md.producer_id, md.previous_producer_id) == (2000, 1000)
    # A producer that held the exhausted epoch of the old id may still recover.
    md.producer_epoch = 32766
    assert h.init(expected=(1000, 32766), pid=3000) == InitResult(E.NONE, 3000, 0)


# -- a whole transaction ------------------------------------------------------------------------
def test_commit_persists_prepare_then_markers_then_complete() -> None:
    h = Harness()
    pid, epoch = started(h)
    assert h.md().state is S.ONGOING and h.md().partitions == {T0, T1}
    start = h.md().start_ms
    assert start == h.scheduler.now_ms()
    # Adding what is already there needs no write.
    assert h.call("add_partitions", TX, pid, epoch, [T1], durable=False) == E.NONE
    assert not h.writes
    out: list[int] = []
    h.shard.end_txn(TX, pid, epoch, True, out.append)
    assert out == [] and not h.jobs
    h.flush()
    assert out == [E.NONE] and h.md().state is S.PREPARE_COMMIT
    assert h.jobs == [MarkerJob(TX, pid, epoch, True, 3, frozenset({T0, T1}))]
    # Until the markers land the transaction is not over.
    assert h.init() == InitResult(E.CONCURRENT_TRANSACTIONS)
    assert h.call("end_txn", TX, pid, epoch, True) == E.CONCURRENT_TRANSACTIONS
    assert h.call("end_txn", TX, pid, epoch, False) == E.CONCURRENT_TRANSACTIONS
    assert h.call("add_partitions", TX, pid, epoch, [T0]) == E.CONCURRENT_TRANSACTIONS
    h.shard.markers_written(h.jobs[0])
    assert h.flush() == 1
    md = h.md()
    assert md.state is S.COMPLETE_COMMIT and not md.partitions and md.pending is None
    assert [v.state for _, v in h.log if v] == [
        S.EMPTY,
        S.ONGOING,
        S.PREPARE_COMMIT,
        S.COMPLETE_COMMIT,
    ]
    # A retried EndTxn(commit) succeeds; an abort now aborts nothing (see below).
    assert h.call("end_txn", TX, pid, epoch, True) == E.NONE
    assert h.call("end_txn", TX, pid, epoch, False) == E.NONE
    # The next transaction starts from CompleteCommit with a new start time.
    h.scheduler.advance(50)
    assert h.call("add_partitions", TX, pid, epoch, [T0]) == E.NONE
    assert h.md().start_ms == start + 50 and h.md().partitions == {T0}


def test_abort_completes_with_abort_markers() -> None:
    h = Harness()
    pid, epoch = started(h)
    assert h.call("end_txn", TX, pid, epoch, False) == E.NONE
    assert h.jobs[-1].committed is False
    h.shard.markers_written(h.jobs[-1])
    h.flush()
    assert h.md().state is S.COMPLETE_ABORT
    assert h.call("end_txn", TX, pid, epoch, False) == E.NONE
    assert h.call("end_txn", TX, pid, epoch, True) == E.INVALID_TXN_STATE


def test_abort_with_no_transaction_open_succeeds_and_writes_nothing() -> None:
    """librdkafka sends EndTxn(abort) when its AddPartitionsToTxn got
    CONCURRENT_TRANSACTIONS and the application aborts before the retry (#4849):
    after a commit completed, and right after InitProducerId, the abort is a no-op."""
    h = Harness()
    pid, epoch = started(h)
    h.call("end_txn", TX, pid, epoch, True)
    h.flush()
    h.shard.markers_written(h.jobs[-1])
    h.flush()
    assert h.md().state is S.COMPLETE_COMMIT
    before = list(h.log)
    assert h.call("end_txn", TX, pid, epoch, False) == E.NONE
    assert h.md().state is S.COMPLETE_COMMIT and h.log == before and h.md().pending is None
    assert h.call("end_txn", TX, pid, epoch + 1, False) == E.PRODUCER_FENCED
    fresh = Harness()
    fresh.init()
    assert fresh.call("end_txn", TX, 1000, 0, False) == E.NONE
    assert fresh.md().state is S.EMPTY


def test_completion_write_is_retried_until_durable() -> None:
    h = Harness()
    pid, epoch = started(h)
    h.call("end_txn", TX, pid, epoch, True)
    h.shard.markers_written(h.jobs[-1])
    h.flush(E.NOT_ENOUGH_REPLICAS)
    assert h.md().state is S.PREPARE_COMMIT and h.md().pending is S.COMPLETE_COMMIT
    h.scheduler.advance(1_000)
    assert h.flush() == 1 and h.md().state is S.COMPLETE_COMMIT


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (("end_txn", "nope", 1000, 0, True), E.INVALID_PRODUCER_ID_MAPPING),
        (("end_txn", "", 1000, 0, True), E.INVALID_REQUEST),
        (("end_txn", TX, 999, 0, True), E.INVALID_PRODUCER_ID_MAPPING),
        (("end_txn", TX, 1000, 1, True), E.PRODUCER_FENCED),
        (("end_txn", TX, 1000, 0, True), E.INVALID_TXN_STATE),  # Empty: nothing to end
        (("add_partitions", "nope", 1000, 0, [T0]), E.INVALID_PRODUCER_ID_MAPPING),
        (("add_partitions", TX, 999, 0, [T0]), E.INVALID_PRODUCER_ID_MAPPING),
        (("add_partitions", TX, 1000, 7, [T0]), E.PRODUCER_FENCED),
        (("add_partitions", "", 1000, 0, [T0]), E.INVALID_REQUEST),
    ],
)
def test_bad_requests_get_kafkas_errors(call: tuple[object, ...], error: int) -> None:
    h = Harness()
    h.init()
    before = list(h.log)
    assert h.call(*call) == error
    assert h.log == before


def test_verification_for_storage_leaders() -> None:
    h = Harness()
    pid, epoch = started(h)
    v = h.shard.verify_partitions(TX, pid, epoch, [T0, ("other", 0)])
    assert v.error == E.NONE
    assert v.partitions == {T0: E.NONE, ("other", 0): E.TRANSACTION_ABORTABLE}
    assert h.shard.verify_partitions(TX, pid, epoch + 1, [T0]).partitions == {T0: E.PRODUCER_FENCED}
    assert (
        h.shard.verify_partitions("nope", pid, epoch, [T0]).error == E.INVALID_PRODUCER_ID_MAPPING
    )
    assert h.shard.verify_partitions("", pid, epoch, [T0]).error == E.INVALID_REQUEST
    h.call("end_txn", TX, pid, epoch, False)
    assert h.shard.verify_partitions(TX, pid, epoch, [T0]).error == E.CONCURRENT_TRANSACTIONS
    assert not h.writes  # verification never writes


# -- fencing and timeouts -----------------------------------------------------------------------
def test_init_during_ongoing_transaction_fences_and_aborts_it() -> None:
    h = Harness()
    pid, epoch = started(h)
    assert h.init() == InitResult(E.CONCURRENT_TRANSACTIONS)
    md = h.md()
    assert md.state is S.PREPARE_ABORT and md.producer_epoch == epoch + 1
    assert h.log[-1][1] is not None and h.log[-1][1].producer_epoch == epoch + 1
    assert h.jobs[-1] == MarkerJob(TX, pid, epoch + 1, False, 3, frozenset({T0, T1}))
    # The zombie cannot commit or add partitions.
    assert h.call("end_txn", TX, pid, epoch, True) == E.PRODUCER_FENCED
    assert h.call("add_partitions", TX, pid, epoch, [T0]) == E.PRODUCER_FENCED
    h.shard.markers_written(h.jobs[-1])
    h.flush()
    assert h.init() == InitResult(E.NONE, pid, epoch + 2)


def test_failed_fence_write_does_not_bump_twice() -> None:
    h = Harness()
    pid, epoch = started(h)
    out: list[InitResult] = []
    h.shard.init_producer_id(TX, 10_000, None, None, out.append)
    h.flush(E.NOT_ENOUGH_REPLICAS)
    assert out == [InitResult(E.COORDINATOR_NOT_AVAILABLE)]
    md = h.md()
    assert md.state is S.ONGOING and md.has_failed_epoch_fence
    assert md.producer_epoch == epoch + 1  # in memory: the old producer stays fenced
    assert h.call("end_txn", TX, pid, epoch, True) == E.PRODUCER_FENCED
    assert h.init() == InitResult(E.CONCURRENT_TRANSACTIONS)
    assert h.md().producer_epoch == epoch + 1 and h.md().state is S.PREPARE_ABORT


def test_timed_out_transaction_is_aborted_and_its_producer_fenced() -> None:
    h = Harness()
    r = h.init(timeout=5_000)
    h.call("add_partitions", TX, r.producer_id, r.producer_epoch, [T0])
    h.shard.load({})  # arms the scans
    h.scheduler.advance(4_000)
    assert not h.writes
    h.scheduler.advance(2_000)
    assert len(h.writes) == 1
    h.flush()
    md = h.md()
    assert md.state is S.PREPARE_ABORT and md.producer_epoch == r.producer_epoch + 1
    assert h.shard.timed_out_aborts == 1
    assert h.call("add_partitions", TX, r.producer_id, r.producer_epoch, [T1]) == E.PRODUCER_FENCED
    assert h.call("end_txn", TX, r.producer_id, r.producer_epoch, True) == E.PRODUCER_FENCED
    h.shard.markers_written(h.jobs[-1])
    h.flush()
    assert h.md().state is S.COMPLETE_ABORT
    h.scheduler.advance(10_000)
    assert not h.writes  # nothing more to abort


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness()
    h.init()
    h.init("busy", pid=2000)
    h.shard.load({})
    h.scheduler.advance(60_000)
    r = h.init("busy", pid=2000)  # touched: not expired
    h.scheduler.advance(50_000)
    assert [w.transactional_id for w in h.writes] == [TX] and h.writes[0].value is None
    h.flush()
    assert TX not in h.shard.txns and "busy" in h.shard.txns
    assert h.shard.describe(TX).error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.replayed().keys() == {"busy"}
    assert r.error == E.NONE


# -- loading, describing, listing ---------------------------------------------------------------
def test_replay_rebuilds_the_same_state_and_finishes_prepared_transactions() -> None:
    h = Harness()
    pid, epoch = started(h)
    h.init("other")
    h.call("end_txn", TX, pid, epoch, True)
    # The coordinator dies before the markers landed; a new owner replays the log.
    successor = Harness(epoch=4)
    successor.shard.load(h.replayed())
    md = successor.md()
    assert md.state is S.PREPARE_COMMIT and md.partitions == {T0, T1}
    assert successor.jobs == [MarkerJob(TX, pid, epoch, True, 4, frozenset({T0, T1}))]
    assert successor.shard.describe("other").state == "Empty"
    successor.shard.markers_written(successor.jobs[0])
    successor.flush()
    assert successor.md().state is S.COMPLETE_COMMIT
    assert successor.call("end_txn", TX, pid, epoch, True) == E.NONE


def test_describe_and_list() -> None:
    h = Harness()
    pid, epoch = started(h)
    h.init("idle", pid=2000)
    d = h.shard.describe(TX)
    assert (d.error, d.state, d.producer_id, d.producer_epoch, d.partitions) == (
        E.NONE,
        "Ongoing",
        pid,
        epoch,
        [T0, T1],
    )
    assert d.timeout_ms == 10_000 and d.start_ms == h.scheduler.now_ms()
    assert h.shard.describe("nope").error == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.shard.describe("").error == E.INVALID_REQUEST
    names = lambda items: sorted(i.transactional_id for i in items)  # noqa: E731
    assert names(h.shard.list_transactions(set(), set(), -1)) == ["idle", TX]
    assert names(h.shard.list_transactions({S.ONGOING}, set(), -1)) == [TX]
    assert names(h.shard.list_transactions(set(), {2000}, -1)) == ["idle"]
    h.scheduler.advance(500)
    assert names(h.shard.list_transactions({S.ONGOING}, set(), 499)) == [TX]
    assert names(h.shard.list_transactions({S.ONGOING}, set(), 500)) == []


def test_metadata_refuses_illegal_transitions() -> None:
    md = TransactionMetadata(TX, 1, producer_epoch=0, timeout_ms=1000, update_ms=0)
    with pytest.raises(IllegalTransition):
        md.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)  # Empty -> PrepareCommit
    with pytest.raises(IllegalTransition):
        md.prepare_complete(1)  # Empty -> CompleteAbort
    t = md.prepare_add_partitions([T0], 1)
    with pytest.raises(IllegalTransition):
        md.prepare_add_partitions([T1], 2)  # one transition at a time
    md.complete_transition(t)
    assert md.state is S.ONGOING
    with pytest.raises(IllegalTransition):
        md.complete_transition(t)  # nothing pending
    with pytest.raises(IllegalTransition):
        md.prepare_producer_id_rotation(2, 1000, 3, False)  # a transaction is open
