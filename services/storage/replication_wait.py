"""acks=all on the leader: wait until the high watermark passes what was appended
(Kafka's DelayedProduce and checkEnoughReplicasReachOffset), for Produce and WriteTxnMarkers.

Each waiter is ``(partition, required offset, leader epoch at append)``. The answer per
waiter is NONE once the high watermark reached the required offset with an ISR of at
least ``min.insync.replicas``, NOT_ENOUGH_REPLICAS_AFTER_APPEND if it got there with a
smaller ISR, NOT_LEADER_OR_FOLLOWER if leadership or the epoch moved first, and
REQUEST_TIMED_OUT when ``timeout_ms`` passes first.

A waiter is woken only when its partition's high watermark reaches its offset, or on a
change of role, epoch or ISR (:class:`~odradek.storage.notify.OffsetWaiters`), never by
every advance of the high watermark: with thousands of one-record acks=-1 requests in
flight, waking all of them on each advance made the cost quadratic.

The wait is loop callbacks (:class:`ReplicationWait`), like Kafka's purgatory, which
completes a DelayedProduce from the thread that moved the high watermark: the data
link answers a one-record acks=-1 Produce from them without a task per request
(docs/data-link.md); :func:`await_replication` is the same wait for a coroutine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from odradek.protocol.errors import ErrorCode
from odradek.storage.deadlines import Deadlines
from odradek.storage.delayed_operation import DelayedOperation
from odradek.storage.notify import OffsetWaiter
from odradek.storage.partition import Partition
from odradek.storage.wakeup_turn import WakeupTurn

Waiter = tuple[Partition, int, int]


def _answered(codes: list[ErrorCode]) -> None:
    """A finished wait's callback: the answer went out already."""


class ReplicationWait(DelayedOperation):
    """The outcome of each waiter, in order, handed to ``on_done`` once every waiter is
    decided or ``timeout_ms`` has passed (the undecided ones are REQUEST_TIMED_OUT).

    Waiters on one partition share one registration, at the lowest offset still
    pending: a storage call carrying many batches of one partition (a run of coalesced
    Produce requests, odradek.gateway.produce_lane) waits once, not once per batch.
    ``on_done`` may run inside the constructor (everything decided already, or no time
    left); :meth:`cancel` withdraws the wait unanswered. Wake-ups and the deadline as
    every parked call's (:mod:`odradek.storage.delayed_operation`).
    """

    __slots__ = (
        "_on_done",
        "_outcome",
        "_pending",
        "_registered",
        "_waiting",
    )

    def __init__(
        self,
        waiting: Sequence[Waiter],
        timeout_ms: int,
        loop: asyncio.AbstractEventLoop,
        on_done: Callable[[list[ErrorCode]], None],
        deadlines: Deadlines | None = None,
        turn: WakeupTurn | None = None,
    ) -> None:
        DelayedOperation.__init__(self, loop, deadlines, turn)
        self._waiting = waiting
        self._on_done = on_done
        self._outcome: list[ErrorCode | None] = [None] * len(waiting)
        self._pending = list(range(len(waiting)))
        self._registered: dict[int, OffsetWaiter] = {}  # by id() of the partition
        deadline = loop.time() + max(0, timeout_ms) / 1000.0
        if self.try_complete():
            return
        if deadline <= loop.time():
            self.expire()
            return
        self._park_until(deadline)

    def try_complete(self) -> bool:
        """Decide what can be decided; True once every waiter is (answered then)."""
        waiting, outcome = self._waiting, self._outcome
        still = []
        lowest: dict[int, tuple[Partition, int]] = {}
        for i in self._pending:
            part, required, epoch = waiting[i]
            done, error = part.replication_status(required, epoch)
            if done:
                outcome[i] = error
                continue
            still.append(i)
            key = id(part)
            low = lowest.get(key)
            if low is None or required < low[1]:
                lowest[key] = (part, required)
        self._pending = still
        if not still:
            self._finish()
            return True
        registered = self._registered
        for key, (part, required) in lowest.items():
            waiter = registered.get(key)
            if waiter is None or not waiter.active:
                registered[key] = part.replication_waiters.add(required, self)
        return False

    def expire(self) -> None:
        """The timeout passed: answer, the undecided waiters REQUEST_TIMED_OUT."""
        self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        on_done = self._on_done
        self._release()
        on_done([ErrorCode.REQUEST_TIMED_OUT if code is None else code for code in self._outcome])

    def _release(self) -> None:
        DelayedOperation._release(self)
        for waiter in self._registered.values():
            waiter.active = False
        # Each registration holds this wait (its ``event``) and this wait held them: a
        # cycle, freed only by the cyclic collector, which runs rarely in a service
        # (odradek.gc_tuning). Until then the answer callback kept the request's record
        # blobs, views of a 4 MiB data link receive buffer each (issue 18).
        self._registered = {}
        self._on_done = _answered


async def await_replication(
    waiting: Sequence[Waiter], timeout_ms: int, loop: asyncio.AbstractEventLoop | None = None
) -> list[ErrorCode]:
    """:class:`ReplicationWait` for a coroutine (``loop``: the running loop, when the
    caller holds it; looking it up costs a ``getpid``)."""
    if loop is None:
        loop = asyncio.get_running_loop()
    answer: list[list[ErrorCode]] = []
    future: asyncio.Future[None] | None = None

    def done(codes: list[ErrorCode]) -> None:
        answer.append(codes)
        if future is not None and not future.done():
            future.set_result(None)

    wait = ReplicationWait(waiting, timeout_ms, loop, done)
    if not answer:
        future = loop.create_future()
        try:
            await future
        finally:
            wait.cancel()
    return answer[0]
