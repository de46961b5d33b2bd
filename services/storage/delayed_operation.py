"""Kafka's DelayedOperation (``kafka.server.DelayedOperation``, what its purgatories
hold): a call parked on the leader until it can be answered or its deadline passes.
Two kinds share it, as in Kafka: a fetch with nothing to answer yet (DelayedFetch,
:class:`odradek.storage.fetch.ParkedFetch`) and an acks=-1 wait for the high watermark
(DelayedProduce, :class:`odradek.storage.replication_wait.ReplicationWait`).

A parked call is loop callbacks, not a task (docs/data-link.md, "Parked calls without
a task"): a wake-up (:meth:`DelayedOperation.set`, from a partition's notifier)
re-checks in a loop callback of its own or, when given, in the loop's
:class:`~odradek.storage.wakeup_turn.WakeupTurn`, after whatever woke it has
finished; the deadline is a loop timer or, when given, the connection's
:class:`~odradek.storage.deadlines.Deadlines` (one timer for all its parked calls).
A call is answered once: ``done`` is set before the answer goes, and nothing wakes or
expires it after (its registrations are dropped in :meth:`DelayedOperation._release`).
"""

from __future__ import annotations

import asyncio

from odradek.storage.deadlines import Deadlines
from odradek.storage.wakeup_turn import WakeupTurn


class DelayedOperation:
    """What the parked calls share; a kind gives :meth:`try_complete` (Kafka's
    ``tryComplete``: answer if it can, True once answered) and :meth:`expire` (Kafka's
    ``onExpiration`` then ``forceComplete``: the deadline passed, answer now)."""

    __slots__ = ("_deadlines", "_loop", "_scheduled", "_timer", "_turn", "done")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        deadlines: Deadlines | None,
        turn: WakeupTurn | None,
    ) -> None:
        self._loop = loop
        self._deadlines = deadlines
        self._turn = turn
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self.done = False

    def try_complete(self) -> bool:
        raise NotImplementedError

    def expire(self) -> None:
        raise NotImplementedError

    def _park_until(self, deadline: float) -> None:
        """Expire at ``deadline`` (loop time) unless answered first."""
        if self._deadlines is not None:
            self._deadlines.add(self, deadline)
        else:
            self._timer = self._loop.call_at(deadline, self.expire)

    def set(self) -> None:
        """A wake-up: re-check once what woke it has finished (several wake-ups before
        then make one re-check)."""
        if not self._scheduled and not self.done:
            self._scheduled = True
            if self._turn is not None:
                self._turn.call(self._recheck)
            else:
                self._loop.call_soon(self._recheck)

    def cancel(self) -> None:
        """Withdraw the call without an answer (the caller is gone)."""
        if not self.done:
            self.done = True
            self._release()

    def _recheck(self) -> None:
        self._scheduled = False
        if not self.done:
            self.try_complete()

    def _release(self) -> None:
        """Drop the deadline; a kind drops its wake-up registrations too."""
        if self._deadlines is not None:
            self._deadlines.discard(self)
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None
