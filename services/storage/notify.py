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
from collections.abc import Iterable, Iterator


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
