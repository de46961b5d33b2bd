"""One transactional id's state and its legal transitions (Kafka's ``TransactionMetadata``).

Sans-io. A change is made in two steps, as in Kafka: ``prepare_*`` checks that the
transition is legal, records the target state as ``pending`` (so no second transition
can start meanwhile) and returns a :class:`TxnTransit`, the complete new state; the
caller persists the transit to ``__transaction_state`` and, once it is durable, calls
:meth:`TransactionMetadata.complete_transition` (or :meth:`abort_pending` when the
write failed). Nothing a client can see changes before the write is durable.

Legal previous states (``TransactionState.validPreviousStates``)::

    Empty              <- Empty, CompleteCommit, CompleteAbort   (InitProducerId)
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitions)
    PrepareCommit      <- Ongoing                                 (EndTxn commit)
    PrepareAbort       <- Ongoing, PrepareEpochFence              (EndTxn abort, fencing)
    CompleteCommit     <- PrepareCommit                           (markers written)
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteCommit, CompleteAbort    (id expired)
    PrepareEpochFence  <- Ongoing       (never persisted: becomes PrepareAbort at once)

Transactions v1 rules only (KIP-98/360): EndTxn does not bump the epoch (that is
transactions v2, KIP-890 part 2, which Odradek does not advertise).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode
from odradek.transaction_log.records import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionLogValue,
    TransactionState,
)

S = TransactionState
SHORT_MAX = 32767

_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
# States a transactional id may expire in (``TransactionState.isExpirationAllowed``).
EXPIRABLE = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class IllegalTransition(RuntimeError):
    """A transition the state machine forbids: a bug in the caller, never client input."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps ``Short.MaxValue`` free so a producer can always be fenced once more."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The whole new state of a transition (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_ms: int
    update_ms: int

    def log_value(self) -> TransactionLogValue:
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            state=self.state,
            partitions=self.partitions if self.state is not S.EMPTY else frozenset(),
            last_update_timestamp_ms=self.update_ms,
            start_timestamp_ms=self.start_ms,
            previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id,
        )


class TransactionMetadata:
    __slots__ = (
        "has_failed_epoch_fence",
        "last_producer_epoch",
        "next_producer_id",
        "partitions",
        "pending",
        "previous_producer_id",
        "producer_epoch",
        "producer_id",
        "start_ms",
        "state",
        "timeout_ms",
        "transactional_id",
        "update_ms",
    )

    def __init__(
        self,
        transactional_id: str,
        producer_id: int,
        *,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        last_producer_epoch: int = NO_PRODUCER_EPOCH,
        previous_producer_id: int = NO_PRODUCER_ID,
        next_producer_id: int = NO_PRODUCER_ID,
        timeout_ms: int,
        state: TransactionState = S.EMPTY,
        partitions: Iterable[TopicPartition] = (),
        start_ms: int = -1,
        update_ms: int,
    ) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.timeout_ms = timeout_ms
        self.state = state
        self.partitions: set[TopicPartition] = set(partitions)
        self.start_ms = start_ms
        self.update_ms = update_ms
        # The state a transition in flight goes to (Kafka's pendingState).
        self.pending: TransactionState | None = None
        # A fencing epoch bump whose write failed: do not bump again (it was never
        # returned to anyone).
        self.has_failed_epoch_fence = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """Rebuilt from the log (Kafka's ``readTxnRecordValue``: the last epoch is not
        stored, so a retry of InitProducerId spanning a coordinator move is fenced)."""
        return cls(
            transactional_id,
            value.producer_id,
            producer_epoch=value.producer_epoch,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
            timeout_ms=value.transaction_timeout_ms,
            state=value.state,
            partitions=value.partitions,
            start_ms=value.start_timestamp_ms,
            update_ms=value.last_update_timestamp_ms,
        )

    def __repr__(self) -> str:
        return (
            f"TransactionMetadata({self.transactional_id!r}, pid={self.producer_id}, "
            f"epoch={self.producer_epoch}, state={self.state.kafka_name}, "
            f"pending={self.pending.kafka_name if self.pending else None}, "
            f"partitions={sorted(self.partitions)})"
        )

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    # -- preparing transitions ---------------------------------------------------------------
    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        now_ms: int,
    ) -> TxnTransit:
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: transition to {state.kafka_name} while "
                f"{self.pending.kafka_name} is pending"
            )
        if producer_id < 0:
            raise IllegalTransition(f"{self.transactional_id}: producer id {producer_id}")
        if state is not S.DEAD and epoch < 0:
            raise IllegalTransition(f"{self.transactional_id}: producer epoch {epoch}")
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}"
            )
        self.pending = state
        return TxnTransit(
            producer_id=producer_id,
            previous_producer_id=self.producer_id,
            next_producer_id=NO_PRODUCER_ID,
            producer_epoch=epoch,
            last_producer_epoch=last_epoch,
            timeout_ms=timeout_ms,
            state=state,
            partitions=partitions,
            start_ms=start_ms,
            update_ms=now_ms,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the current producer before aborting its transaction
        (timeout, or InitProducerId during an Ongoing transaction)."""
        if self.producer_epoch >= SHORT_MAX:
            raise IllegalTransition(f"{self.transactional_id}: epoch {SHORT_MAX} cannot grow")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            epoch,
            NO_PRODUCER_EPOCH,
            self.timeout_ms,
            frozenset(self.partitions),
            self.start_ms,
            self.update_ms,
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId on the same producer id; ``expected_epoch`` is the epoch a
        recovering producer sends (KIP-360), None for a new producer."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: epochs exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # A producer going on after an error, nobody else initialised since.
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # A retry of a bump that succeeded: answer the current epoch again.
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(
            S.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """Epochs exhausted: continue under a new producer id at epoch 0."""
        if self.has_pending_transaction:
            raise IllegalTransition(f"{self.transactional_id}: rotation with a transaction open")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(
        self, partitions: Iterable[TopicPartition], now_ms: int
    ) -> TxnTransit:
        start = now_ms if self.state in EXPIRABLE else self.start_ms
        return self._prepare(
            S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(self.partitions | set(partitions)),
            start,
            now_ms,
        )

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransit:
        if state not in PREPARED:
            raise IllegalTransition(f"{self.transactional_id}: EndTxn to {state.kafka_name}")
        return self._prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(self.partitions),
            self.start_ms,
            now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """Markers written: CompleteCommit or CompleteAbort, partitions cleared."""
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(
            state,
            self.producer_id,
            self.producer_epoch,
            self.producer_epoch,
            self.timeout_ms,
            frozenset(),
            self.start_ms,
            now_ms,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(
            S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            frozenset(),
            self.start_ms,
            self.update_ms,
        )

    # -- finishing transitions ----------------------------------------------------------------
    def abort_pending(self) -> None:
        """The write of the pending transition failed: nothing changed."""
        self.pending = None

    def complete_transition(self, t: TxnTransit) -> None:
        """The transit is durable: adopt it (Kafka's ``completeTransitionTo`` checks)."""
        if self.pending is not t.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {t.state.kafka_name}, pending "
                f"{self.pending.kafka_name if self.pending else None}"
            )
        same_producer = (
            t.producer_id == self.producer_id and t.producer_epoch == self.producer_epoch
        )
        if t.state is S.EMPTY:
            bumped = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id
            )
            if (t.producer_epoch != self.producer_epoch and not bumped) or t.partitions:
                raise IllegalTransition(f"{self.transactional_id}: bad InitProducerId transit")
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.previous_producer_id
            self.start_ms = -1
            self.partitions.clear()
        elif t.state is S.ONGOING:
            if not same_producer or not self.partitions <= t.partitions:
                raise IllegalTransition(f"{self.transactional_id}: bad AddPartitions transit")
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif t.state in PREPARED:
            if not same_producer or self.partitions != set(t.partitions):
                raise IllegalTransition(f"{self.transactional_id}: bad EndTxn transit")
        elif t.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if not same_producer or t.start_ms == -1:
                raise IllegalTransition(f"{self.transactional_id}: bad completion transit")
            self.partitions.clear()
        else:  # Dead is removed from the cache, PrepareEpochFence never completes
            raise IllegalTransition(
                f"{self.transactional_id}: {t.state.kafka_name} never completes"
            )
        self.update_ms = t.update_ms
        self.pending = None
        self.state = t.state
