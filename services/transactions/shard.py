"""The transactional ids of one ``__transaction_state`` shard: Kafka's transaction
coordinator rules (``TransactionCoordinator``, ``TransactionStateManager``), sans-io.

:class:`TransactionShard` is driven by one caller at a time (the shard's task in
:mod:`odradek.shard_runtime`, or a test), each operation running to completion. What it
needs from outside comes through small interfaces:

- a :class:`Scheduler` for time and the two periodic scans (abort of timed-out
  transactions, removal of expired transactional ids);
- ``on_write``: a :class:`LogWrite` to persist with acks=all; its ``done(error)``
  comes back later as another operation. Every transition is durable before anyone
  is answered or anything acts on it (Kafka's ``appendTransactionToLog``);
- ``send_markers``: a :class:`MarkerJob` to deliver (COMMIT/ABORT markers to every
  partition of the transaction); :meth:`TransactionShard.markers_written` is called
  when they all landed, and only then is CompleteCommit/CompleteAbort persisted.

Responses that wait for a write are callbacks. Error codes are Kafka's; PRODUCER_FENCED
is answered where Kafka's coordinator answers it (the gateway maps it to
INVALID_PRODUCER_EPOCH for request versions that predate it, as KafkaApis does).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from odradek.config_catalog.broker import BROKER_CONFIGS
from odradek.protocol.errors import ErrorCode
from odradek.transaction_log.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionLogValue,
    TransactionState,
)
from odradek.transactions.metadata import (
    EXPIRABLE,
    PREPARED,
    SHORT_MAX,
    IllegalTransition,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)

log = logging.getLogger(__name__)

S = TransactionState
E = ErrorCode

ABORT_SCAN = "abort-timed-out-transactions"
EXPIRE_SCAN = "remove-expired-transactional-ids"
RETRY_COMPLETION = "retry-completion"
COMPLETION_RETRY_MS = 200


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        """Run ``action`` after ``delay_ms``, replacing any timer under ``key``."""
        ...

    def cancel(self, key: Hashable) -> None: ...


@dataclass(slots=True)
class TxnConfig:
    """Kafka's ``TransactionStateManagerConfig`` settings."""

    max_timeout_ms: int = BROKER_CONFIGS.int("transaction.max.timeout.ms")
    abort_interval_ms: int = BROKER_CONFIGS.int(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )
    id_expiration_ms: int = BROKER_CONFIGS.int("transactional.id.expiration.ms")
    expiration_interval_ms: int = BROKER_CONFIGS.int(
        "transaction.remove.expired.transaction.cleanup.interval.ms"
    )


@dataclass(slots=True)
class LogWrite:
    """A record for ``__transaction_state``: a new state, or None (tombstone)."""

    transactional_id: str
    value: TransactionLogValue | None
    done: Callable[[int], None]


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """The markers that end one transaction (Kafka's ``TxnMarkerEntry`` per partition)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass(slots=True)
class InitResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    # No producer id was given and one is needed: ask again with a fresh one.
    needs_producer_id: bool = False


@dataclass(slots=True)
class VerifyResult:
    error: int  # transaction-wide error, NONE when the partitions carry their own
    partitions: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass(slots=True)
class Description:
    transactional_id: str
    error: int
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Listing:
    transactional_id: str
    producer_id: int
    state: str


def map_append_error(code: int) -> int:
    """A failed append to ``__transaction_state`` as the coordinator answers it
    (``TransactionStateManager.appendTransactionToLog``)."""
    if code in (
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.REQUEST_TIMED_OUT,
        E.LEADER_NOT_AVAILABLE,
    ):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return code


class TransactionShard:
    def __init__(
        self,
        shard: int,
        coordinator_epoch: int,
        config: TxnConfig,
        scheduler: Scheduler,
        on_write: Callable[[LogWrite], None],
        send_markers: Callable[[MarkerJob], None],
    ) -> None:
        self.shard = shard
        self.coordinator_epoch = coordinator_epoch
        self.config = config
        self.scheduler = scheduler
        self._on_write = on_write
        self._send_markers = send_markers
        self.txns: dict[str, TransactionMetadata] = {}
        # Completion transits waiting for their markers (Kafka's pending completions).
        self._completions: dict[str, tuple[MarkerJob, TxnTransit]] = {}
        self.timed_out_aborts = 0
        self.expired_ids = 0

    # -- loading ------------------------------------------------------------------------------
    def load(self, stored: dict[str, TransactionLogValue]) -> None:
        """The shard's replayed log (latest value per id, tombstones removed): rebuild the
        cache, finish every PrepareCommit/PrepareAbort (markers re-sent), start the scans."""
        for transactional_id, value in stored.items():
            md = TransactionMetadata.from_log(transactional_id, value)
            if md.state is S.PREPARE_EPOCH_FENCE:  # never written by us; finish the abort
                md.state = S.PREPARE_ABORT
            if md.state is S.DEAD:
                continue
            self.txns[transactional_id] = md
        for md in self.txns.values():
            if md.state in PREPARED:
                log.info("shard %d: completing %r after load", self.shard, md)
                self._start_completion(md)
        self.scheduler.schedule(ABORT_SCAN, self.config.abort_interval_ms, self.abort_timed_out)
        self.scheduler.schedule(
            EXPIRE_SCAN, self.config.expiration_interval_ms, self.remove_expired
        )

    def unload(self) -> None:
        """The shard moves away: stop the scans; writes in flight are answered
        NOT_COORDINATOR by the runtime, markers in flight are cancelled by the service."""
        for key in (ABORT_SCAN, EXPIRE_SCAN):
            self.scheduler.cancel(key)
        for transactional_id in list(self._completions):
            self.scheduler.cancel((RETRY_COMPLETION, transactional_id))
        self._completions.clear()

    # -- persistence ----------------------------------------------------------------------------
    def _append(
        self,
        md: TransactionMetadata,
        transit: TxnTransit,
        callback: Callable[[int], None],
        *,
        retry_on: frozenset[int] = frozenset(),
    ) -> None:
        """Persist ``transit``; adopt it once durable. On failure the pending state is
        dropped (unless the error is in ``retry_on``: the caller retries)."""

        def done(code: int) -> None:
            error = map_append_error(code) if code else E.NONE
            if self.txns.get(md.transactional_id) is not md:
                callback(E.NOT_COORDINATOR if not error else error)
                return
            if error:
                if error not in retry_on:
                    md.abort_pending()
                callback(error)
                return
            md.complete_transition(transit)
            callback(E.NONE)

        self._on_write(LogWrite(md.transactional_id, transit.log_value(), done))

    # -- InitProducerId -------------------------------------------------------------------------
    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_producer_id: int | None,
        respond: Callable[[InitResult], None],
    ) -> None:
        """``expected`` is ``(producer id, epoch)`` of a recovering producer (KIP-360).
        ``new_producer_id`` is a fresh id from the controller's blocks, needed for a new
        transactional id or exhausted epochs; without it the answer asks for one."""
        if not transactional_id:
            respond(InitResult(E.INVALID_REQUEST))
            return
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            respond(InitResult(E.INVALID_TRANSACTION_TIMEOUT))
            return
        now = self.scheduler.now_ms()
        md = self.txns.get(transactional_id)
        if md is None:
            if new_producer_id is None:
                respond(InitResult(E.NONE, needs_producer_id=True))
                return
            md = TransactionMetadata(
                transactional_id, new_producer_id, timeout_ms=timeout_ms, update_ms=now
            )
            self.txns[transactional_id] = md
            new_producer_id = None
        if md.pending is not None:
            respond(InitResult(E.CONCURRENT_TRANSACTIONS))
            return
        if expected is not None and not self._valid_expected_producer(md, *expected):
            respond(InitResult(E.PRODUCER_FENCED))
            return
        if md.state in PREPARED:
            respond(InitResult(E.CONCURRENT_TRANSACTIONS))
            return
        if md.state is S.ONGOING:
            # Fence the producer and abort its transaction; the client retries
            # (CONCURRENT_TRANSACTIONS) and then gets the epoch bumped once more.
            try:
                fence = md.prepare_fence_producer_epoch()
            except IllegalTransition as exc:
                log.error("shard %d: %s", self.shard, exc)
                respond(InitResult(E.UNKNOWN_SERVER_ERROR))
                return
            self._end_transaction(
                md,
                fence.producer_id,
                fence.producer_epoch,
                commit=False,
                from_client=False,
                respond=lambda error: respond(InitResult(error or E.CONCURRENT_TRANSACTIONS)),
            )
            return
        if md.state not in EXPIRABLE:  # Dead, PrepareEpochFence: never at rest
            log.error("shard %d: InitProducerId for %r", self.shard, md)
            respond(InitResult(E.UNKNOWN_SERVER_ERROR))
            return
        transit: TxnTransit | ErrorCode
        if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
            if new_producer_id is None:
                respond(InitResult(E.NONE, needs_producer_id=True))
                return
            transit = md.prepare_producer_id_rotation(
                new_producer_id, timeout_ms, now, record_last_epoch=expected is not None
            )
        else:
            transit = md.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
        if isinstance(transit, ErrorCode):
            respond(InitResult(transit))
            return
        result = transit

        def answered(error: int) -> None:
            if error:
                respond(InitResult(error))
            else:
                respond(InitResult(E.NONE, result.producer_id, result.producer_epoch))

        self._append(md, result, answered)

    @staticmethod
    def _valid_expected_producer(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """KIP-360: a recovering producer keeps going unless someone else took over."""
        return (
            md.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == md.producer_id
            or (producer_id == md.previous_producer_id and is_epoch_exhausted(epoch))
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------
    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> int:
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != epoch:
            return E.PRODUCER_FENCED
        return E.NONE

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        respond: Callable[[int], None],
    ) -> None:
        if not transactional_id:
            respond(E.INVALID_REQUEST)
            return
        error = self._check_producer(transactional_id, producer_id, epoch)
        if error:
            respond(error)
            return
        md = self.txns[transactional_id]
        wanted = set(partitions)
        if md.pending is not None or md.state in PREPARED:
            respond(E.CONCURRENT_TRANSACTIONS)
            return
        if md.state is S.ONGOING and wanted <= md.partitions:
            respond(E.NONE)
            return
        self._append(md, md.prepare_add_partitions(wanted, self.scheduler.now_ms()), respond)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> VerifyResult:
        """KIP-890 verification for a storage leader: are these partitions part of this
        producer's ongoing transaction? Nothing changes."""
        wanted = list(partitions)
        if not transactional_id:
            error: int = E.INVALID_REQUEST
        else:
            error = self._check_producer(transactional_id, producer_id, epoch)
        if not error and self.txns[transactional_id].state in PREPARED:
            error = E.CONCURRENT_TRANSACTIONS
        if error:
            return VerifyResult(error, dict.fromkeys(wanted, error))
        ongoing = self.txns[transactional_id].partitions
        return VerifyResult(
            E.NONE, {tp: E.NONE if tp in ongoing else E.TRANSACTION_ABORTABLE for tp in wanted}
        )

    # -- EndTxn ---------------------------------------------------------------------------------
    def end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        respond: Callable[[int], None],
    ) -> None:
        md = self.txns.get(transactional_id) if transactional_id else None
        if not transactional_id:
            respond(E.INVALID_REQUEST)
        elif md is None:
            respond(E.INVALID_PRODUCER_ID_MAPPING)
        else:
            self._end_transaction(md, producer_id, epoch, commit, True, respond)

    def _end_transaction(
        self,
        md: TransactionMetadata,
        producer_id: int,
        epoch: int,
        commit: bool,
        from_client: bool,
        respond: Callable[[int], None],
    ) -> None:
        if md.producer_id != producer_id:
            respond(E.INVALID_PRODUCER_ID_MAPPING)
            return
        if (from_client and epoch != md.producer_epoch) or epoch < md.producer_epoch:
            respond(E.PRODUCER_FENCED)
            return
        fencing = md.pending is S.PREPARE_EPOCH_FENCE
        if md.pending is not None and not fencing:
            respond(E.CONCURRENT_TRANSACTIONS)
            return
        wanted = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        state = md.state
        if state is S.ONGOING:
            is_fence = wanted is S.PREPARE_ABORT and fencing
            if is_fence:
                # The bumped epoch goes into the PrepareAbort record (Kafka mutates the
                # metadata in place here, and so do we: a failed write keeps it fenced).
                md.pending = None
                md.producer_epoch = epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = md.prepare_abort_or_commit(wanted, self.scheduler.now_ms())

            def prepared(error: int) -> None:
                if error:
                    if is_fence:
                        md.has_failed_epoch_fence = True
                    respond(error)
                    return
                respond(E.NONE)
                self._start_completion(md)

            self._append(md, transit, prepared)
        elif not commit and from_client and state in (S.EMPTY, S.COMPLETE_COMMIT):
            # Deviation (Kafka answers INVALID_TXN_STATE): no transaction is open, so
            # aborting it aborts nothing. librdkafka counts an AddPartitionsToTxn that
            # got CONCURRENT_TRANSACTIONS (the previous transaction's markers were still
            # being written) as registered and sends EndTxn(abort) when the application
            # aborts before the retry; INVALID_TXN_STATE there is fatal to the producer
            # (librdkafka issue #4849, its rdkafka_txnmgr.c txn_req_cnt).
            respond(E.NONE)
        elif state is S.COMPLETE_COMMIT:
            respond(E.NONE if commit else E.INVALID_TXN_STATE)
        elif state is S.COMPLETE_ABORT:
            respond(E.INVALID_TXN_STATE if commit else E.NONE)
        elif state is S.PREPARE_COMMIT:
            respond(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        elif state is S.PREPARE_ABORT:
            respond(E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS)
        else:  # Empty (nothing to commit); Dead/PrepareEpochFence never at rest
            respond(E.INVALID_TXN_STATE)

    # -- markers and completion -------------------------------------------------------------------
    def _start_completion(self, md: TransactionMetadata) -> None:
        """PrepareCommit/PrepareAbort is durable: send the markers, then complete."""
        transit = md.prepare_complete(self.scheduler.now_ms())
        job = MarkerJob(
            md.transactional_id,
            md.producer_id,
            md.producer_epoch,
            md.state is S.PREPARE_COMMIT,
            self.coordinator_epoch,
            frozenset(md.partitions),
        )
        self._completions[md.transactional_id] = (job, transit)
        self._send_markers(job)

    def markers_written(self, job: MarkerJob) -> None:
        """Every partition of ``job`` has its marker: persist the completion."""
        entry = self._completions.get(job.transactional_id)
        md = self.txns.get(job.transactional_id)
        if entry is None or entry[0] != job or md is None:
            return
        self._write_completion(md, entry[1])

    def _write_completion(self, md: TransactionMetadata, transit: TxnTransit) -> None:
        def done(error: int) -> None:
            if not error:
                self._completions.pop(md.transactional_id, None)
                return
            if error == E.NOT_COORDINATOR:
                return  # the shard moved: the new owner completes it from the log
            # Kafka retries COORDINATOR_NOT_AVAILABLE; we retry every error while the
            # shard is ours: the transaction must not stay prepared.
            log.warning(
                "shard %d: completing %s failed (error %d), retrying",
                self.shard,
                md.transactional_id,
                error,
            )
            self.scheduler.schedule(
                (RETRY_COMPLETION, md.transactional_id),
                COMPLETION_RETRY_MS,
                lambda: self._retry_completion(md),
            )

        retry = frozenset(E) - {E.NONE, E.NOT_COORDINATOR}
        self._append(md, transit, done, retry_on=retry)

    def _retry_completion(self, md: TransactionMetadata) -> None:
        entry = self._completions.get(md.transactional_id)
        if entry is not None and self.txns.get(md.transactional_id) is md:
            self._write_completion(md, entry[1])

    def markers_failed(self, job: MarkerJob, error: int) -> None:
        """A partition refused the markers for good (INVALID_PRODUCER_EPOCH,
        TRANSACTION_COORDINATOR_FENCED: a newer coordinator or producer epoch owns the
        outcome). As Kafka, stop sending; the transaction stays prepared here."""
        entry = self._completions.get(job.transactional_id)
        if entry is not None and entry[0] == job:
            del self._completions[job.transactional_id]
            log.warning(
                "shard %d: markers for %s refused with error %d; giving up",
                self.shard,
                job.transactional_id,
                error,
            )

    # -- timers ---------------------------------------------------------------------------------
    def abort_timed_out(self) -> None:
        """Abort every Ongoing transaction open longer than its timeout, fencing its
        producer (``abortTimedOutTransactions``)."""
        now = self.scheduler.now_ms()
        for md in list(self.txns.values()):
            if md.pending is not None or md.state is not S.ONGOING:
                continue
            if md.start_ms + md.timeout_ms >= now:
                continue
            if md.producer_epoch >= SHORT_MAX:
                log.error("shard %d: cannot fence %r (epoch exhausted)", self.shard, md)
                continue
            fence = md.prepare_fence_producer_epoch()
            log.info(
                "shard %d: aborting %s (producer %d): open %d ms, timeout %d ms",
                self.shard,
                md.transactional_id,
                md.producer_id,
                now - md.start_ms,
                md.timeout_ms,
            )
            self.timed_out_aborts += 1
            self._end_transaction(
                md,
                fence.producer_id,
                fence.producer_epoch,
                False,
                False,
                functools.partial(self._log_rollback, md.transactional_id),
            )
        self.scheduler.schedule(ABORT_SCAN, self.config.abort_interval_ms, self.abort_timed_out)

    def _log_rollback(self, transactional_id: str, error: int) -> None:
        if error:
            log.info(
                "shard %d: rollback of %s failed: error %d", self.shard, transactional_id, error
            )

    def remove_expired(self) -> None:
        """Tombstone transactional ids idle longer than ``transactional.id.expiration.ms``."""
        now = self.scheduler.now_ms()
        for md in list(self.txns.values()):
            if md.pending is not None or md.state not in EXPIRABLE:
                continue
            if md.update_ms > now - self.config.id_expiration_ms:
                continue
            md.prepare_dead()

            def done(code: int, md: TransactionMetadata = md) -> None:
                if not code and md.pending is S.DEAD and self.txns.get(md.transactional_id) is md:
                    del self.txns[md.transactional_id]
                    self.expired_ids += 1
                    log.info(
                        "shard %d: transactional id %s expired", self.shard, md.transactional_id
                    )
                else:
                    md.abort_pending()

            self._on_write(LogWrite(md.transactional_id, None, done))
        self.scheduler.schedule(
            EXPIRE_SCAN, self.config.expiration_interval_ms, self.remove_expired
        )

    # -- reads ----------------------------------------------------------------------------------
    def describe(self, transactional_id: str) -> Description:
        if not transactional_id:
            return Description(transactional_id, E.INVALID_REQUEST)
        md = self.txns.get(transactional_id)
        if md is None or md.state is S.DEAD:
            return Description(transactional_id, E.TRANSACTIONAL_ID_NOT_FOUND)
        return Description(
            transactional_id,
            E.NONE,
            md.state.kafka_name,
            md.timeout_ms,
            md.start_ms,
            md.producer_id,
            md.producer_epoch,
            sorted(md.partitions),
        )

    def list_transactions(
        self, states: set[TransactionState], producer_ids: set[int], min_duration_ms: int
    ) -> list[Listing]:
        """Kafka's ``listTransactionStates`` filters (empty set: no filter; duration -1:
        none); Dead ids are being removed and never listed."""
        now = self.scheduler.now_ms()
        out = []
        for md in self.txns.values():
            if md.state is S.DEAD:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if states and md.state not in states:
                continue
            if min_duration_ms >= 0 and now - md.start_ms <= min_duration_ms:
                continue
            out.append(Listing(md.transactional_id, md.producer_id, md.state.kafka_name))
        return out
