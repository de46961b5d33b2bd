"""Edge-triggered wake-ups for long polls (Kafka's purgatory, reduced to what asyncio needs).

A waiting request (a consumer fetch, a replica fetch, an acks=-1 produce) registers
one :class:`Wakeup` (or an :class:`asyncio.Event`) with the :class:`Notifier` of every
partition it waits on; whoever changes the partition calls :meth:`Notifier.notify`,
which sets each registered one. The waiter then re-checks its condition. Everything
runs on the event-loop thread, so there is no lock and no polling loop: between the
check and the ``await`` nothing else can run.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Iterable, Iterator
from typing import Protocol


class Wakeable(Protocol):
    """What a registration sets: an :class:`asyncio.Event`, or anything as cheap."""

    def set(self) -> None: ...


class Notifier:
    """The set of events to set when one partition-level condition changes."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: set[Wakeable] = set()

    def add(self, event: Wakeable) -> None:
        self._events.add(event)

    def discard(self, event: Wakeable) -> None:
        self._events.discard(event)

    def notify(self) -> None:
        for event in self._events:
            event.set()

    def __len__(self) -> int:
        return len(self._events)


class Wakeup:
    """One waiting request's wake-ups until its deadline: a future per wait and one loop
    timer for the deadline, armed at the first wait.

    An :class:`asyncio.Event` waited for under ``asyncio.timeout_at`` costs a Timeout
    object, task lookups, a reschedule and a cancellation check per wait, three times
    what this costs; a partition leader parks every follower's fetch and the consumers'
    fetches once per replicated record, thousands a second with one-record acks=all
    requests (issue 18). A :meth:`set` while nobody waits is dropped: the waiter
    re-checks its condition after each wait, which covers it.
    """

    __slots__ = ("_deadline", "_future", "_loop", "_timer", "expired")

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        self._loop = loop
        self._deadline = deadline
        self._future: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.expired = False

    def set(self) -> None:
        future = self._future
        if future is not None and not future.done():
            future.set_result(None)

    def _expire(self) -> None:
        self.expired = True
        self.set()

    async def wait(self) -> bool:
        """Until :meth:`set` or the deadline; False once the deadline has passed."""
        if self.expired:
            return False
        if self._timer is None:
            if self._deadline <= self._loop.time():
                self.expired = True
                return False
            self._timer = self._loop.call_at(self._deadline, self._expire)
        self._future = future = self._loop.create_future()
        try:
            await future
        finally:
            self._future = None
        return not self.expired

    def close(self) -> None:
        """Drop the deadline's timer (the request is answered)."""
        if self._timer is not None:
            self._timer.cancel()


class OffsetWaiter:
    """One registration with :class:`OffsetWaiters`; ``active`` until woken or withdrawn."""

    __slots__ = ("active", "event", "offset")

    def __init__(self, offset: int, event: Wakeable) -> None:
        self.offset = offset
        self.event = event
        self.active = True


class OffsetWaiters:
    """Events waiting for a partition's high watermark to reach an offset (acks=-1).

    A high watermark advance wakes only the waiters it reached, in offset order (a heap),
    so a backlog of N acks=-1 produces costs O(log N) per wake-up instead of waking all N
    on every advance (Kafka's DelayedProduce purgatory is keyed by partition and checked
    per completion; here the offset order does the checking). :meth:`wake_all` wakes
    everyone, for changes other than the high watermark (role, leader epoch, ISR).
    """

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, OffsetWaiter]] = []
        self._seq = itertools.count()

    def add(self, offset: int, event: Wakeable) -> OffsetWaiter:
        waiter = OffsetWaiter(offset, event)
        heapq.heappush(self._heap, (offset, next(self._seq), waiter))
        return waiter

    def wake_up_to(self, offset: int) -> None:
        """Wake every waiter for an offset <= ``offset``."""
        heap = self._heap
        while heap and heap[0][0] <= offset:
            waiter = heapq.heappop(heap)[2]
            if waiter.active:
                waiter.active = False
                waiter.event.set()

    def wake_all(self) -> None:
        heap, self._heap = self._heap, []
        for _, _, waiter in heap:
            if waiter.active:
                waiter.active = False
                waiter.event.set()

    def __len__(self) -> int:
        """Registrations held, withdrawn ones not yet dropped included."""
        return len(self._heap)


@contextlib.contextmanager
def subscribed(event: asyncio.Event, notifiers: Iterable[Notifier]) -> Iterator[asyncio.Event]:
    """Register ``event`` with every notifier for the duration of the block."""
    registered = list(notifiers)
    for notifier in registered:
        notifier.add(event)
    try:
        yield event
    finally:
        for notifier in registered:
            notifier.discard(event)


async def wait_until(event: asyncio.Event, deadline: float) -> bool:
    """Wait for ``event`` until the loop-time ``deadline``; False when the time ran out."""
    loop = asyncio.get_running_loop()
    if event.is_set():
        return True
    if deadline <= loop.time():
        return False
    try:
        async with asyncio.timeout_at(deadline):
            await event.wait()
    except TimeoutError:
        return False
    return True
