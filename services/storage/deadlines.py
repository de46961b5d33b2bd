"""The deadlines of one data link connection's parked calls behind one loop timer.

A leader parks each follower's fetch, a gateway's fetch for its consumers and each
acks=-1 Produce about once per replicated record (docs/data-link.md, "Parked calls
without a task"), and nearly all of them are answered long before their deadline. A
loop timer started and cancelled per parked call cost 3.0-4.1 us of CPU on uvloop here
(a handle and two libuv calls), about four per replicated record on the leader (issue
18); adding a call here and discarding it, 0.3-0.5 us. Kafka's
purgatory keeps its delayed operations' deadlines on one timing wheel; a connection's
parked calls share one timer here, armed for the earliest deadline: calls of one kind
mostly share one wait (``replica.fetch.wait.max.ms``, a consumer's ``fetch.max.wait.ms``,
a Produce's ``timeout_ms``), so a later call's deadline is later and arms nothing. When
the timer fires it expires what is due and is armed again for the earliest left.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

# libuv counts whole milliseconds: a timer may fire up to a millisecond before its time.
_SLACK_S = 0.001


class Expiring(Protocol):
    """A parked call: :meth:`expire` answers it as its deadline passing does."""

    def expire(self) -> None: ...


class Deadlines:
    """Parked calls by deadline (loop time); each call is :meth:`discard`-ed by its owner
    once answered or withdrawn, and expired (:meth:`Expiring.expire`) once its deadline
    has passed, after which it is no longer held."""

    __slots__ = ("_at", "_calls", "_loop", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._calls: dict[Expiring, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._at = 0.0

    def add(self, call: Expiring, deadline: float) -> None:
        self._calls[call] = deadline
        if self._timer is None or deadline < self._at:
            self._arm(deadline)

    def discard(self, call: Expiring) -> None:
        # The timer stays armed: when it fires with nothing due it is armed for the
        # earliest deadline left, once per wait rather than once per call.
        self._calls.pop(call, None)

    def close(self) -> None:
        """Stop the timer (the connection is gone; its calls were withdrawn)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._calls.clear()

    def __len__(self) -> int:
        return len(self._calls)

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._at = at
        self._timer = self._loop.call_at(at, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time() + _SLACK_S
        calls = self._calls
        due = [call for call, at in calls.items() if at <= now]
        for call in due:
            del calls[call]
        if calls:
            self._arm(min(calls.values()))
        for call in due:
            # Each as if from a timer of its own: what one raises goes to the loop's
            # exception handler and the others still expire.
            try:
                call.expire()
            except Exception as exc:
                self._loop.call_exception_handler(
                    {"message": f"Exception expiring {call!r}", "exception": exc}
                )
