"""Fetch on the leader: consumers (up to the high watermark, or the last stable offset
under read_committed) and followers (up to the LEO).

Both are long polls (Kafka's DelayedFetch): the first read happens at once; the
request returns immediately when it has ``min_bytes``, when any partition has an
error, or when ``max_wait_ms`` is 0; otherwise it waits on the partitions' notifiers
(a consumer wakes when the high watermark moves, a follower when the log end offset
or log start moves) and reads again, until ``max_wait_ms`` passes.

Byte limits (Kafka's readFromLog): each partition reads at most
``min(partition_max_bytes, bytes left of max_bytes)``; the first partition that has
data returns its first batch whole even if that is larger (``min_one_message``) so a
consumer can always make progress; once data was included, later partitions no
longer get that allowance.

Isolation (KIP-98): a consumer fetch with ``isolation_level=1`` (READ_COMMITTED) returns
only whole batches below the partition's last stable offset and, with them, the aborted
transactions (producer id, first offset) overlapping the returned batches, from the
``.txnindex`` files (Kafka's LocalLog.addAbortedTransactions); an empty read has an
empty list. ``last_stable_offset`` is filled in for every consumer fetch.

A follower's fetch is also how the leader learns the follower's log end offset
(Kafka's ``Partition.updateFollowerFetchState``): before reading, the leader records it, which may advance the high
watermark and may add the follower back to the ISR. If the follower's last fetched
epoch does not end where the follower thinks it does in the leader's log, the answer
is ``diverging_epoch`` instead of data (KIP-320).

Leader replication throttle (Kafka's ``shouldLeaderThrottle``): a follower outside the
ISR fetching a replica listed in ``leader.replication.throttled.replicas`` for this
node gets no data for it while ``leader.replication.throttled.rate`` is exceeded; the
bytes sent for such replicas count against the rate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from odradek.log.file_range import FileRange
from odradek.log.transaction_index import AbortedTxn
from odradek.protocol.errors import ErrorCode, KafkaError, error_code_for
from odradek.protocol.fetch_request import READ_COMMITTED
from odradek.rpc.v1 import storage_pb2
from odradek.storage.deadlines import Deadlines
from odradek.storage.delayed_operation import DelayedOperation
from odradek.storage.isr import IsrManager
from odradek.storage.metrics import StorageMetrics
from odradek.storage.notify import Wakeup
from odradek.storage.partition import Partition, Role
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.wakeup_turn import WakeupTurn

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Slot:
    """One requested partition during a (possibly repeated) read: the request's fields
    that every pass reads, read once. A field of a upb message costs about seven times an
    attribute of a slot to read, and a parked fetch read them some fifteen times, a
    leader's three or more fetches per replicated record (issue 18)."""

    request: storage_pb2.FetchPartition
    partition: Partition | None
    fetch_offset: int
    epoch: int  # current_leader_epoch
    max_bytes: int  # partition_max_bytes
    error: int = ErrorCode.NONE
    message: str = ""
    diverging: tuple[int, int] | None = None


class FetchHandler:
    def __init__(
        self,
        replicas: ReplicaManager,
        isr: IsrManager,
        metrics: StorageMetrics,
        stopping: Callable[[], bool],
    ) -> None:
        self.replicas = replicas
        self.isr = isr
        self.metrics = metrics
        self.stopping = stopping

    async def fetch(self, request: storage_pb2.FetchRequest) -> storage_pb2.FetchResponse:
        """The answer with the records inside (gRPC: ``Fetch``, ``ReplicaFetch``)."""
        response, records = await self.fetch_split(request)
        for result, data in zip(response.partitions, records, strict=True):
            if data:
                result.records = data if isinstance(data, bytes) else data.read()
        return response

    async def fetch_split(
        self,
        request: storage_pb2.FetchRequest,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        lazy: bool = False,
    ) -> tuple[storage_pb2.FetchResponse, list[bytes | FileRange]]:
        """The answer with empty ``records`` fields, and each partition's records beside
        it in the same order (the data link sends them without copying). ``loop``: the
        running loop when the caller holds it (``asyncio.get_running_loop`` costs a
        ``getpid`` per call, issue 18). ``lazy`` (a consumer's fetch on the data link's
        Unix socket): large records as FileRanges, sent with ``sendfile``."""
        replica, slots = self._begin(request)
        if loop is None:
            loop = asyncio.get_running_loop()
        # A Wakeup, not an Event under asyncio.timeout_at: a leader parks each follower's
        # fetch and each consumer's once per replicated record (notify.Wakeup).
        wake = Wakeup(loop, loop.time() + max(0, request.max_wait_ms) / 1000.0)
        notifiers = [
            (s.partition.data_changed if replica else s.partition.hw_changed)
            for s in slots
            if s.partition is not None and s.error == ErrorCode.NONE
        ]
        for notifier in notifiers:
            notifier.add(wake)
        may_wait = request.max_wait_ms > 0 and request.min_bytes > 0 and bool(notifiers)
        try:
            while True:
                # Nothing to read yet: park without building an answer that would be
                # thrown away (a leader parks each follower's fetch once per record).
                if (
                    may_wait
                    and not self.stopping()
                    and self._nothing_new(request, slots, replica)
                    and await wake.wait()
                ):
                    continue
                response, records, total, errors = self._read(request, slots, replica, lazy)
                if (
                    errors
                    or total >= request.min_bytes
                    or not may_wait
                    or self.stopping()
                    or wake.expired
                ):
                    break
                if not await wake.wait():
                    break
        finally:
            for notifier in notifiers:
                notifier.discard(wake)
            wake.close()
        return self._respond(request, slots, replica, response, records)

    def fetch_later(
        self,
        request: storage_pb2.FetchRequest,
        loop: asyncio.AbstractEventLoop,
        answer: Callable[[Answer | Exception], None],
        *,
        lazy: bool = False,
        deadlines: Deadlines | None = None,
        turn: WakeupTurn | None = None,
    ) -> ParkedFetch | None:
        """A fetch as :meth:`fetch_split` does it, as loop callbacks: ``answer`` gets
        the response and records (or the exception the read raised), at once when
        there is something to send (None is returned then), otherwise from the
        returned parked fetch, which the caller cancels if it goes away first. The
        data link parks fetches this way, without a task: a leader parks each
        follower's and each consumer's fetch about once per replicated record (issue
        18). ``lazy`` as for :meth:`fetch_split` (a consumer's, on the Unix socket).
        ``deadlines``: the caller's connection's, which then times the wait instead of a
        loop timer of its own (odradek.storage.deadlines); ``turn``: the loop's, which
        then runs the wake-up's re-check (odradek.storage.wakeup_turn)."""
        replica, slots = self._begin(request)
        parked = ParkedFetch(self, request, slots, loop, answer, replica, lazy, deadlines, turn)
        return None if parked.done else parked

    def _begin(self, request: storage_pb2.FetchRequest) -> tuple[bool, list[_Slot]]:
        """Count the fetch and check each partition (a follower's or a consumer's
        rules): whether it is a follower's, and its slots."""
        replica = request.replica_id >= 0
        self.metrics.fetch_request(replica)
        get = self.replicas.get
        slots = [
            _Slot(
                fp,
                get(fp.topic, fp.partition),
                fp.fetch_offset,
                fp.current_leader_epoch,
                fp.partition_max_bytes,
            )
            for fp in request.partitions
        ]
        if replica:
            self._prepare_follower(request, slots)
        else:
            self._prepare_consumer(slots)
        return replica, slots

    def _respond(
        self,
        request: storage_pb2.FetchRequest,
        slots: list[_Slot],
        replica: bool,
        response: storage_pb2.FetchResponse,
        records: list[bytes | FileRange],
    ) -> Answer:
        self._count_out(slots, records, replica)
        if replica:
            throttled = 0
            for data, slot in zip(records, slots, strict=True):
                part = slot.partition
                if data and part is not None and self._throttled(part, request.replica_id):
                    throttled += len(data)
            if throttled:
                self.replicas.quotas.leader.record(throttled)
        return response, records

    @staticmethod
    def _throttled(part: Partition, replica_id: int) -> bool:
        return part.leader_throttled and replica_id not in part.isr

    # -- per-kind checks done once per request --------------------------------------------
    def _prepare_consumer(self, slots: list[_Slot]) -> None:
        for slot in slots:
            part = slot.partition
            if part is None:
                slot.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                part.check_leader(slot.epoch)
            except KafkaError as exc:
                slot.error, slot.message = exc.code, exc.message

    def _prepare_follower(self, request: storage_pb2.FetchRequest, slots: list[_Slot]) -> None:
        now = self.replicas.clock_ms()
        replica_id = request.replica_id
        for slot in slots:
            part = slot.partition
            fp = slot.request
            if part is None:
                slot.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                part.check_leader(slot.epoch)
                if replica_id not in part.replicas:
                    raise KafkaError(
                        ErrorCode.REPLICA_NOT_AVAILABLE,
                        f"Replica {replica_id} is not assigned to partition {part.name}",
                    )
                fetch_offset = slot.fetch_offset
                last_fetched = fp.last_fetched_epoch
                if last_fetched >= 0:
                    # The common round: the follower is in the leader's latest epoch,
                    # which ends at the log end (LeaderEpochFileCache.endOffsetFor),
                    # answered without the cache's lock and search (issue 18).
                    if last_fetched == part.log.leader_epoch_cache.latest_epoch:
                        epoch, end = last_fetched, part.log.log_end_offset
                    else:
                        epoch, end = part.end_offset_for_epoch(last_fetched)
                    if end >= 0 and (end < fetch_offset or epoch < last_fetched):
                        slot.diverging = (epoch, end)
                        continue
                part.check_fetch_offset(fetch_offset)
            except KafkaError as exc:
                slot.error, slot.message = exc.code, exc.message
                continue
            part.update_follower_fetch_state(replica_id, fetch_offset, fp.log_start_offset, now)
            if replica_id not in part.isr:  # an ISR member never expands it (the common case)
                self.isr.maybe_expand(part, replica_id)

    # -- the read -----------------------------------------------------------------------
    @staticmethod
    def _nothing_new(request: storage_pb2.FetchRequest, slots: list[_Slot], replica: bool) -> bool:
        """Whether a read now would give no bytes and no error for any partition: each
        is led here in the epoch asked for and fetched exactly at its limit (the log
        end for a follower, the high watermark or last stable offset for a consumer).
        Anything else, errors included, is left to :meth:`_read`."""
        committed = request.isolation_level == READ_COMMITTED
        for slot in slots:
            part = slot.partition
            if part is None or slot.error != ErrorCode.NONE or slot.diverging is not None:
                return False
            epoch = slot.epoch
            if (
                part.offline
                or part.role is not Role.LEADER
                or (epoch >= 0 and epoch != part.leader_epoch)
            ):
                return False
            # The log's fields, not the partition's properties over them: a leader runs
            # this twice per parked fetch, several fetches per replicated record.
            plog = part.log
            offset = slot.fetch_offset
            if offset < plog.log_start_offset:
                return False
            leo = plog.log_end_offset
            if replica:
                if offset != leo:
                    return False
            elif offset > leo or offset < (
                plog.last_stable_offset if committed else plog.high_watermark
            ):
                return False
        return True

    def _read(
        self,
        request: storage_pb2.FetchRequest,
        slots: list[_Slot],
        replica: bool,
        lazy: bool = False,
    ) -> tuple[storage_pb2.FetchResponse, list[bytes | FileRange], int, bool]:
        remaining = max(0, request.max_bytes)
        min_one = True
        total = 0
        errors = False
        # The results are built in place in the answer, their fields set one by one:
        # upb's keyword construction and a copy into the answer's list cost three times
        # as much, about 5 us per fetch answered (issue 18; error_code NONE is the default).
        response = storage_pb2.FetchResponse()
        results = response.partitions
        out: list[bytes | FileRange] = []
        for slot in slots:
            part = slot.partition
            result = results.add()
            # The partition's own str and index: reading the request's field decodes a
            # new str.
            if part is None:
                result.topic = slot.request.topic
                result.partition = slot.request.partition
            else:
                result.topic = part.topic
                result.partition = part.index
            data: bytes | FileRange = b""
            error = slot.error
            held_back = (
                replica
                and part is not None
                and self._throttled(part, request.replica_id)
                and self.replicas.quotas.leader.exceeded()
            )
            if (
                error == ErrorCode.NONE
                and part is not None
                and slot.diverging is None
                and not held_back
            ):
                try:
                    records, aborted = self._read_partition(
                        part,
                        slot,
                        min(slot.max_bytes, remaining),
                        min_one,
                        request,
                        replica,
                        lazy,
                    )
                except Exception as exc:
                    error = error_code_for(exc)
                    if error == ErrorCode.UNKNOWN_SERVER_ERROR:
                        log.exception("%s: read at %d failed", part.name, slot.fetch_offset)
                else:
                    for txn in aborted:
                        result.aborted_transactions.add(
                            producer_id=txn.producer_id, first_offset=txn.first_offset
                        )
                    if records:
                        data = records
                        total += len(records)
                        remaining = max(0, remaining - len(records))
                        min_one = False
            if part is not None:
                # The log's own fields, not the partition's properties over them: five
                # property chains per answer, three answers per replicated record.
                plog = part.log
                result.high_watermark = plog.high_watermark
                result.last_stable_offset = plog.last_stable_offset
                result.log_start_offset = plog.log_start_offset
                result.log_end_offset = plog.log_end_offset
                result.current_leader_epoch = part.leader_epoch
            else:
                result.high_watermark = result.last_stable_offset = -1
                result.log_start_offset = result.log_end_offset = -1
                result.current_leader_epoch = -1
            if slot.diverging is not None:
                result.diverging_epoch.epoch, result.diverging_epoch.end_offset = slot.diverging
                errors = True  # answer at once so the follower truncates
            if error != ErrorCode.NONE:
                result.error_code = error
                errors = True
            out.append(data)
        return response, out, total, errors

    def _read_partition(
        self,
        part: Partition,
        slot: _Slot,
        max_bytes: int,
        min_one: bool,
        request: storage_pb2.FetchRequest,
        replica: bool,
        lazy: bool = False,
    ) -> tuple[bytes | FileRange, tuple[AbortedTxn, ...]]:
        part.check_leader(slot.epoch)
        offset = slot.fetch_offset
        if replica:
            data = part.read(offset, max_bytes, max_offset=None, min_one_message=min_one)
            return data, ()
        if request.isolation_level == READ_COMMITTED:
            return part.read_committed(offset, max_bytes, min_one_message=min_one, lazy=lazy)
        read = part.read_lazy if lazy else part.read
        records = read(offset, max_bytes, max_offset=part.high_watermark, min_one_message=min_one)
        return records, ()

    def _count_out(
        self, slots: list[_Slot], records: list[bytes | FileRange], replica: bool
    ) -> None:
        for slot, data in zip(slots, records, strict=True):
            n = len(data)
            part = slot.partition
            if n and part is not None:  # (records only come from a partition here)
                if replica:
                    self.metrics.replica_bytes_out(part.topic, n)
                else:
                    self.metrics.bytes_out(part.topic, n)


Answer = tuple[storage_pb2.FetchResponse, list[bytes | FileRange]]


class ParkedFetch(DelayedOperation):
    """A fetch parked on the leader (:meth:`FetchHandler.fetch_later`; Kafka's
    DelayedFetch): the same steps as :meth:`FetchHandler.fetch_split`'s loop, re-run on
    each wake-up of the partitions' notifiers (``data_changed`` for a follower,
    ``hw_changed`` for a consumer) and once more at ``max_wait_ms``
    (:mod:`odradek.storage.delayed_operation`)."""

    __slots__ = (
        "_answer",
        "_handler",
        "_lazy",
        "_may_wait",
        "_min_bytes",
        "_notifiers",
        "_replica",
        "_request",
        "_slots",
        "expired",
    )

    def __init__(
        self,
        handler: FetchHandler,
        request: storage_pb2.FetchRequest,
        slots: list[_Slot],
        loop: asyncio.AbstractEventLoop,
        answer: Callable[[Answer | Exception], None],
        replica: bool,
        lazy: bool = False,
        deadlines: Deadlines | None = None,
        turn: WakeupTurn | None = None,
    ) -> None:
        DelayedOperation.__init__(self, loop, deadlines, turn)
        self._handler = handler
        self._replica = replica
        self._lazy = lazy
        self._request = request
        self._slots = slots
        self._answer = answer
        self.expired = False
        self._notifiers = [
            (s.partition.data_changed if replica else s.partition.hw_changed)
            for s in slots
            if s.partition is not None and s.error == ErrorCode.NONE
        ]
        wait_ms = request.max_wait_ms
        self._min_bytes = min_bytes = request.min_bytes
        self._may_wait = wait_ms > 0 and min_bytes > 0 and bool(self._notifiers)
        deadline = loop.time() + max(0, wait_ms) / 1000.0
        if self.try_complete():
            return
        if deadline <= loop.time():
            self.expire()
            return
        for notifier in self._notifiers:
            notifier.add(self)
        self._park_until(deadline)

    def expire(self) -> None:
        """The wait is over: read once more and answer (Kafka's DelayedFetch on expiry)."""
        self._timer = None
        self.expired = True
        if not self.done:
            self.try_complete()

    def try_complete(self) -> bool:
        """One pass of fetch_split's loop; True once answered."""
        handler, request, slots = self._handler, self._request, self._slots
        replica = self._replica
        try:
            stopping = handler.stopping()
            if (
                self._may_wait
                and not stopping
                and not self.expired
                and handler._nothing_new(request, slots, replica)
            ):
                return False
            response, records, total, errors = handler._read(request, slots, replica, self._lazy)
            if not (
                errors or total >= self._min_bytes or not self._may_wait or stopping or self.expired
            ):
                return False
            answer: Answer | Exception = handler._respond(
                request, slots, replica, response, records
            )
        except Exception as exc:
            answer = exc
        self.done = True
        self._release()
        self._answer(answer)
        return True

    def _release(self) -> None:
        for notifier in self._notifiers:
            notifier.discard(self)
        DelayedOperation._release(self)
