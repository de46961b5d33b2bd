"""Edge-triggered wake-ups for long polls (Kafka's purgatory, reduced to what asyncio needs).

A waiting request (a consumer fetch, a replica fetch, an acks=-1 produce) registers
one :class:`asyncio.Event` with the :class:`Notifier` of every partition it waits on;
whoever changes the partition calls :meth:`Notifier.notify`, which sets each
registered event. The waiter then re-checks its condition. Everything runs on the
event-loop thread, so there is no lock and no polling loop: between the check and the
``await`` nothing else can run.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Iterable, Iterator
from typing import Protocol


class Notifier:
    """The set of events to set when one partition-level condition changes."""

    __slots__ = ("_events",)

    def __init__(self) -> None:
        self._events: set[asyncio.Event] = set()

    def add(self, event: asyncio.Event) -> None:
        self._events.add(event)

    def discard(self, event: asyncio.Event) -> None:
        self._events.discard(event)

    def notify(self) -> None:
        for event in self._events:
            event.set()

    def __len__(self) -> int:
        return len(self._events)


class Wakeable(Protocol):
    """What a registration sets: an :class:`asyncio.Event`, or anything as cheap."""

    def set(self) -> None: ...


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
