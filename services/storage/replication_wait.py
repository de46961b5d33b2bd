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
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from odradek.protocol.errors import ErrorCode
from odradek.storage.notify import OffsetWaiter, Wakeup
from odradek.storage.partition import Partition

Waiter = tuple[Partition, int, int]


async def await_replication(
    waiting: Sequence[Waiter], timeout_ms: int, loop: asyncio.AbstractEventLoop | None = None
) -> list[ErrorCode]:
    """The outcome of each waiter, in order (``loop``: the running loop, when the caller
    holds it; looking it up costs a ``getpid``).

    Waiters on one partition share one registration, at the lowest offset still
    pending: a storage call carrying many batches of one partition (a run of coalesced
    Produce requests, odradek.gateway.produce_lane) waits once, not once per batch.
    """
    outcome: list[ErrorCode | None] = [None] * len(waiting)
    pending = list(range(len(waiting)))
    if loop is None:
        loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, timeout_ms) / 1000.0
    wake: Wakeup | None = None
    registered: dict[int, OffsetWaiter] = {}  # by id() of the partition
    try:
        while pending:
            still = []
            lowest: dict[int, tuple[Partition, int]] = {}
            for i in pending:
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
            pending = still
            if not pending:
                break
            if wake is None:
                # One future per wake-up and one timer for the deadline (notify.Wakeup):
                # every one-record acks=all request waits once, thousands a second.
                wake = Wakeup(loop, deadline)
            for key, (part, required) in lowest.items():
                waiter = registered.get(key)
                if waiter is None or not waiter.active:
                    registered[key] = part.replication_waiters.add(required, wake)
            if not await wake.wait():
                break
    finally:
        if wake is not None:
            wake.close()
        for waiter in registered.values():
            waiter.active = False
    return [ErrorCode.REQUEST_TIMED_OUT if code is None else code for code in outcome]
