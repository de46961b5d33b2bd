"""One hosted partition replica: its log, its role, and the leader's replication state.

This is the only module that touches :class:`odradek.log.log.PartitionLog`; everything
above it (request handlers, the replica fetcher, ISR maintenance) goes through
:class:`Partition`. All methods run on the event-loop thread and never await, so a
partition's state changes atomically with respect to every other coroutine; the owner
of role changes is the metadata path (:mod:`odradek.storage.replica_manager`).

Leader side (Kafka's ``Partition.updateFollowerFetchState`` and
``maybeIncrementLeaderHW``): the leader records each follower's log end offset from
the offset it fetches at, and moves the high watermark to the minimum log end offset
over the "maximal" ISR (the committed ISR plus a member whose addition is in flight)
and over replicas that are caught up and eligible to join (Kafka's
``shouldWaitForReplicaToJoinIsr``, so a catching-up follower is not outrun for ever).
The high watermark never moves backwards on a leader. Becoming leader in epoch E
stamps ``(E, LEO)`` into the leader epoch cache before any append (KIP-101).

Follower side: appends what the leader sent, sets its high watermark to
``min(leader HW, own LEO)``, follows the leader's log start offset, and truncates only
where :mod:`odradek.storage.truncation` says.

Disk failures: an OSError from the log marks the replica :attr:`offline` at once (its
directory has failed, Kafka's LogDirFailureChannel), tells the node through
:attr:`Partition.on_io_error`, and answers KAFKA_STORAGE_ERROR; an offline replica
serves nothing until the node restarts.
Transactions: the log applies COMMIT/ABORT control batches the same way on both sides
(producer state, ``.txnindex``), so a follower that becomes leader has the same last
stable offset and aborted-transaction list. The leader appends markers for the
transaction coordinator (:meth:`Partition.append_end_txn_marker`) and hands out KIP-890
verification guards (:meth:`Partition.maybe_start_transaction_verification`).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

from odradek.log.file_range import FileRange
from odradek.log.log import AppendResult, PartitionLog
from odradek.log.producer_state import AppendOrigin, ProducerStateEntry, VerificationGuard
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.records.batch import BatchesSummary
from odradek.rpc.v1 import common_pb2
from odradek.storage.notify import Notifier, OffsetWaiters
from odradek.storage.replica_state import UNKNOWN_OFFSET, FollowerState
from odradek.topic_config import LogConfig

UNDEFINED_EPOCH = -1

P = ParamSpec("P")
R = TypeVar("R")


def _log_io(
    method: Callable[Concatenate[Partition, P], R],
) -> Callable[Concatenate[Partition, P], R]:
    """Run a method that touches the log; an OSError fails the replica's directory."""

    @functools.wraps(method)
    def guarded(self: Partition, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.offline:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"Partition {self.name} is offline: its log directory failed",
            )
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self.offline = True
            self.on_io_error(self, exc)
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"Error while accessing the log of {self.name}: {exc}",
            ) from exc

    return guarded


class Role(enum.Enum):
    NONE = "none"  # hosted but neither leader nor following anyone (offline / stopping)
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class LeaderAppend:
    """What a leader append produced, as the produce path answers it (not frozen: one per
    append, and a frozen dataclass costs three times as much to build, issue 18)."""

    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool
    leader_epoch: int
    size: int


class Partition:
    def __init__(
        self,
        node_id: int,
        topic: str,
        index: int,
        topic_id: bytes,
        log: PartitionLog,
        config: LogConfig,
        *,
        replica_lag_time_max_ms: int,
        clock_ms: Callable[[], int],
        is_replica_eligible: Callable[[int], bool] = lambda _node: True,
    ) -> None:
        self.node_id = node_id
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.config = config
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.clock_ms = clock_ms
        self.is_replica_eligible = is_replica_eligible

        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch = UNDEFINED_EPOCH
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        # An AlterPartition in flight: the ISR we asked for (Kafka's PendingExpand/ShrinkIsr).
        self.pending_isr: tuple[int, ...] | None = None
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET

        # Replication throttles (odradek.storage.replication_quota): this replica is listed
        # in the topic's leader/follower.replication.throttled.replicas for this node.
        self.leader_throttled = False
        self.follower_throttled = False
        # Its log directory failed: nothing is served until the node restarts.
        self.offline = False
        self.on_io_error: Callable[[Partition, OSError], None] = lambda _p, _e: None

        self.hw_changed = Notifier()  # HW moved, role/epoch/ISR changed: consumers, acks=-1
        self.data_changed = Notifier()  # LEO or log start moved, role changed: replica fetches
        # acks=-1 produces: woken when the HW reaches their offset, or role/epoch/ISR change
        self.replication_waiters = OffsetWaiters()
        self.followers_changed = Notifier()  # follower log starts moved: DeleteRecords

    # -- identity ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def __repr__(self) -> str:
        return (
            f"Partition({self.name}, {self.role.value}, epoch={self.leader_epoch}, "
            f"isr={list(self.isr)}, hw={self.high_watermark}, leo={self.log_end_offset})"
        )

    # -- log facts --------------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the earliest transaction that is
        undecided or whose marker is not yet replicated, whichever is lower."""
        return self.log.last_stable_offset

    @property
    def latest_epoch(self) -> int:
        epoch = self.log.leader_epoch_cache.latest_epoch
        return UNDEFINED_EPOCH if epoch is None else epoch

    @property
    def size_bytes(self) -> int:
        return self.log.size_bytes

    @property
    def segment_count(self) -> int:
        return self.log.segment_count

    @property
    def log_dir(self) -> str:
        return str(self.log.dir)

    def replace_log(self, log: PartitionLog) -> None:
        """A future log (AlterReplicaLogDirs) took over from the current one."""
        self.log = log
        self.notify_all()

    def go_offline(self) -> None:
        """Its log directory failed: stop serving (the log is already closed)."""
        self.offline = True
        self.stop()

    @property
    def min_insync_replicas(self) -> int:
        return self.config.min_insync_replicas

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(self.pending_isr)))

    @property
    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.replicas)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch over this replica's epoch cache (Kafka semantics)."""
        return self.log.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        epoch = self.log.leader_epoch_cache.epoch_for_offset(offset)
        return UNDEFINED_EPOCH if epoch is None else epoch

    def producers(self) -> list[ProducerStateEntry]:
        return list(self.log.producer_state.producers.values())

    def notify_all(self) -> None:
        self.hw_changed.notify()
        self.replication_waiters.wake_all()
        self.data_changed.notify()
        self.followers_changed.notify()

    # -- configuration ------------------------------------------------------------------
    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.log.update_config(config)

    # -- role changes (driven by metadata) ------------------------------------------------
    @_log_io
    def make_leader(self, state: common_pb2.Partition) -> bool:
        """Become (or stay) leader per ``state``; True when this starts a new leader epoch."""
        now = self.clock_ms()
        new_leader = self.role is not Role.LEADER
        new_epoch = state.leader_epoch > self.leader_epoch or new_leader
        if not new_epoch and state.partition_epoch < self.partition_epoch:
            return False  # an older view than what AlterPartition already gave us
        self._adopt(state)
        self.role = Role.LEADER
        self.leader_id = self.node_id
        if new_epoch:
            self.leader_epoch = state.leader_epoch
            leo = self.log_end_offset
            self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
            self.leader_epoch_start_offset = leo
            self.pending_isr = None
            followers: dict[int, FollowerState] = {}
            for replica in self.replicas:
                if replica == self.node_id:
                    continue
                follower = self.followers.get(replica) or FollowerState(replica)
                follower.reset(now, in_sync=replica in self.isr, new_leader=new_leader)
                followers[replica] = follower
            self.followers = followers
        else:
            for replica in self.replicas:
                if replica != self.node_id and replica not in self.followers:
                    self.followers[replica] = FollowerState(replica)
            for replica in list(self.followers):
                if replica not in self.replicas:
                    del self.followers[replica]
        self.maybe_increment_high_watermark(now)
        self.notify_all()
        return new_epoch

    @_log_io
    def make_follower(self, state: common_pb2.Partition) -> bool:
        """Follow ``state.leader``; True when the leader or its epoch changed (refetch)."""
        changed = (
            self.role is not Role.FOLLOWER
            or state.leader != self.leader_id
            or state.leader_epoch != self.leader_epoch
        )
        if not changed and state.partition_epoch < self.partition_epoch:
            return False
        self._adopt(state)
        self.role = Role.FOLLOWER if state.leader >= 0 else Role.NONE
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.pending_isr = None
        self.followers = {}
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.notify_all()
        return changed

    def stop(self) -> None:
        """No longer served here (deleted, reassigned or shutting down)."""
        self.role = Role.NONE
        self.leader_id = -1
        self.followers = {}
        self.pending_isr = None
        self.notify_all()

    def _adopt(self, state: common_pb2.Partition) -> None:
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.partition_epoch = state.partition_epoch

    def adopt_isr(self, state: common_pb2.Partition) -> bool:
        """Take the controller's answer to our AlterPartition (or a newer metadata view)."""
        if not self.is_leader or state.leader_epoch != self.leader_epoch:
            return False
        if state.partition_epoch < self.partition_epoch:
            return False
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        self.partition_epoch = state.partition_epoch
        self.pending_isr = None
        self.maybe_increment_high_watermark(self.clock_ms())
        self.hw_changed.notify()
        self.replication_waiters.wake_all()
        return True

    # -- checks -------------------------------------------------------------------------
    def check_leader(self, current_leader_epoch: int = -1) -> None:
        if self.offline:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR,
                f"Partition {self.name} is offline: its log directory failed",
            )
        # The epoch check only when it would raise, the role read directly: a leader
        # runs this several times per replicated record (issue 18).
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            self.check_leader_epoch(current_leader_epoch)
        if self.role is not Role.LEADER:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"Leader not local for partition {self.name} on broker {self.node_id}",
            )

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """Kafka's current-leader-epoch fencing (KIP-320): -1 skips the check."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"The leader epoch in the request {current_leader_epoch} is smaller than the "
                f"current leader epoch {self.leader_epoch} of {self.name}",
            )
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(
                ErrorCode.UNKNOWN_LEADER_EPOCH,
                f"The leader epoch in the request {current_leader_epoch} is larger than the "
                f"current leader epoch {self.leader_epoch} of {self.name}",
            )

    # -- leader: produce ----------------------------------------------------------------
    def _check_min_isr(self, required_acks: int) -> None:
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {list(self.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {self.min_insync_replicas} for partition {self.name}",
            )

    @_log_io
    def append_as_leader(
        self,
        records: bytearray | memoryview,
        required_acks: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
        verification_required: bool = False,
        validated: BatchesSummary | None = None,
    ) -> LeaderAppend:
        """Validate and append; raises KafkaError or a log error carrying ``kafka_error``.
        ``validated``: :meth:`validate_records` already ran (in a worker thread)."""
        self.check_leader()
        self._check_min_isr(required_acks)
        result = self.log.append_as_leader(
            records,
            self.leader_epoch,
            origin=origin,
            verification_guard=verification_guard,
            verification_required=verification_required,
            validated=validated,
        )
        return self._appended(result, len(records))

    def validate_records(
        self, records: bytearray | memoryview, origin: AppendOrigin
    ) -> BatchesSummary:
        """The record checks of an append, safe to run off the event loop (no state)."""
        # The log's wall clock (record timestamps), not the partition's replica clock.
        return self.log.validate_records(records, now_ms=self.log.clock_ms(), origin=origin)

    @_log_io
    def append_end_txn_marker(
        self, *, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool
    ) -> LeaderAppend:
        """WriteTxnMarkers on the leader (always acks=all, so the ISR must be big enough)."""
        self.check_leader()
        self._check_min_isr(-1)
        result = self.log.append_end_txn_marker(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            committed=committed,
            leader_epoch=self.leader_epoch,
        )
        return self._appended(result, 0)

    @_log_io
    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, epoch: int
    ) -> VerificationGuard | None:
        """KIP-890: a guard to verify with the coordinator, None when the producer's
        transaction is already ongoing here."""
        self.check_leader()
        return self.log.maybe_start_transaction_verification(producer_id, sequence, epoch)

    def _appended(self, result: AppendResult, size: int) -> LeaderAppend:
        if not result.duplicate:
            self.data_changed.notify()
            self.maybe_increment_high_watermark(self.clock_ms())
        return LeaderAppend(
            first_offset=result.first_offset,
            last_offset=result.last_offset,
            log_append_time=result.log_append_time,
            log_start_offset=result.log_start_offset,
            duplicate=result.duplicate,
            leader_epoch=self.leader_epoch,
            size=size,
        )

    def replication_status(self, required_offset: int, leader_epoch: int) -> tuple[bool, ErrorCode]:
        """Kafka's checkEnoughReplicasReachOffset for an acks=-1 produce: (done, error)."""
        if not self.is_leader or self.leader_epoch != leader_epoch:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.isr) >= self.min_insync_replicas:
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # -- leader: replication ------------------------------------------------------------
    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        if self.role is not Role.LEADER:
            return False
        log = self.log
        leo = log.log_end_offset
        new_hw = leo
        maximal = self.isr if self.pending_isr is None else self.maximal_isr
        for replica, follower in self.followers.items():
            if follower.log_end_offset >= new_hw:
                continue
            if replica in maximal or (
                follower.is_caught_up(leo, now_ms, self.replica_lag_time_max_ms)
                and self.is_replica_eligible(replica)
            ):
                new_hw = follower.log_end_offset
        if new_hw > log.high_watermark:
            log.high_watermark = new_hw
            self.hw_changed.notify()
            self.replication_waiters.wake_up_to(new_hw)
            return True
        return False

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, now_ms: int
    ) -> None:
        follower = self.followers.get(replica_id)
        if follower is None:
            return
        before_start = follower.log_start_offset
        follower.update_fetch_state(fetch_offset, log_start_offset, self.log.log_end_offset, now_ms)
        self.maybe_increment_high_watermark(now_ms)
        if follower.log_start_offset != before_start:
            self.followers_changed.notify()

    def wants_isr_expansion(self, replica_id: int) -> bool:
        """Kafka's isFollowerInSync + eligibility: LEO >= HW and >= this epoch's start."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return False
        follower = self.followers.get(replica_id)
        if follower is None or not self.is_replica_eligible(replica_id):
            return False
        leo = follower.log_end_offset
        return leo >= self.high_watermark and leo >= self.leader_epoch_start_offset

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        if not self.is_leader or self.pending_isr is not None:
            return []
        leo = self.log_end_offset
        out = []
        for replica in self.isr:
            if replica == self.node_id:
                continue
            follower = self.followers.get(replica)
            if follower is None or follower.is_out_of_sync(
                leo, now_ms, self.replica_lag_time_max_ms
            ):
                out.append(replica)
        return out

    def low_watermark(self) -> int:
        """Smallest log start offset over this leader and its live followers (DeleteRecords).

        A live follower that has not fetched yet counts as -1, as in Kafka, so the answer
        waits for it instead of claiming records are gone everywhere.
        """
        low = self.log_start_offset
        for replica, follower in self.followers.items():
            if self.is_replica_eligible(replica) and follower.log_start_offset < low:
                low = follower.log_start_offset
        return low

    @_log_io
    def delete_records_before(self, offset: int) -> int:
        self.check_leader()
        hw = self.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {offset} of partition {self.name} "
                f"since it is larger than the high watermark {hw}",
            )
        if target > self.log_start_offset:
            self.log.delete_records_before(target)
            self.data_changed.notify()
        return self.log_start_offset

    # -- reads --------------------------------------------------------------------------
    def check_fetch_offset(self, fetch_offset: int) -> None:
        log = self.log
        start, end = log.log_start_offset, log.log_end_offset
        if fetch_offset < start or fetch_offset > end:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Received request for offset {fetch_offset} for partition {self.name}, but we "
                f"only have log segments in the range {start} to {end}.",
            )

    @_log_io
    def read(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int | None, min_one_message: bool
    ) -> bytes:
        """Whole batches from ``fetch_offset`` below ``max_offset`` (None: the LEO).

        :meth:`read_with_aborted`'s steps without its tuple and its lazy and aborted
        cases: each follower's fetch reads here once per replicated record (issue 18)."""
        self.check_fetch_offset(fetch_offset)
        limit = self.log.log_end_offset if max_offset is None else max_offset
        if fetch_offset >= limit or (max_bytes <= 0 and not min_one_message):
            return b""
        records = self.log.read(
            fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message
        ).records
        return records.read() if isinstance(records, FileRange) else bytes(records)

    @_log_io
    def read_lazy(
        self, fetch_offset: int, max_bytes: int, *, max_offset: int | None, min_one_message: bool
    ) -> bytes | FileRange:
        """As :meth:`read`, large records as a FileRange not read yet (a consumer's
        fetch on the data link's Unix socket, sent with ``sendfile``)."""
        return self.read_with_aborted(
            fetch_offset,
            max_bytes,
            max_offset=max_offset,
            min_one_message=min_one_message,
            lazy=True,
        )[0]

    def read_committed(
        self, fetch_offset: int, max_bytes: int, *, min_one_message: bool, lazy: bool = False
    ) -> tuple[bytes | FileRange, tuple[AbortedTxn, ...]]:
        """A read_committed read: batches below the LSO and the aborted transactions
        overlapping them (Kafka's FetchIsolation.TXN_COMMITTED)."""
        return self.read_with_aborted(
            fetch_offset,
            max_bytes,
            max_offset=self.last_stable_offset,
            min_one_message=min_one_message,
            include_aborted=True,
            lazy=lazy,
        )

    def read_with_aborted(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None,
        min_one_message: bool,
        include_aborted: bool = False,
        lazy: bool = False,
    ) -> tuple[bytes | FileRange, tuple[AbortedTxn, ...]]:
        self.check_fetch_offset(fetch_offset)
        limit = self.log_end_offset if max_offset is None else max_offset
        if fetch_offset >= limit or (max_bytes <= 0 and not min_one_message):
            return b"", ()
        result = self.log.read(
            fetch_offset,
            max_bytes,
            max_offset=max_offset,
            min_one_message=min_one_message,
            include_aborted=include_aborted,
            lazy=lazy,
        )
        records = result.records
        if not isinstance(records, FileRange):
            records = bytes(records)
        return records, result.aborted or ()

    @_log_io
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= it."""
        return self.log.offset_for_timestamp(timestamp)

    @_log_io
    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        return self.log.max_timestamp_offset()

    # -- follower -----------------------------------------------------------------------
    @_log_io
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> None:
        self.log.append_as_follower(records)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        # Only when it moves: a follower calls this on every fetch answer, thousands a
        # second under one-record acks=all produces, and the log's setter walks the
        # producer state each time (issue 18).
        log = self.log
        hw = min(leader_high_watermark, log.log_end_offset)
        if hw != log.high_watermark:
            log.high_watermark = hw

    @_log_io
    def follow_leader_log_start(self, leader_log_start_offset: int) -> None:
        if self.log_start_offset < leader_log_start_offset <= self.high_watermark:
            self.log.delete_records_before(leader_log_start_offset)

    @_log_io
    def truncate_to(self, offset: int) -> None:
        """Follower truncation. At or past the LEO only the epoch cache is cut: an epoch
        this node started as leader but never wrote to must not survive (Kafka does the
        same), or every later divergence check would fail on it."""
        if self.log.truncate_to(offset):
            self.notify_all()
        else:
            self.log.leader_epoch_cache.truncate_from_end(self.log_end_offset)

    @_log_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.notify_all()
