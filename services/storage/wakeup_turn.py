"""The wake-ups of parked calls, run together in one loop callback, and the data link
answers they give written at its end.

A partition change wakes the calls parked on it (a follower's and a consumer's fetch,
an acks=-1 wait); each re-checks in a loop callback, after whatever moved the partition
has finished (odradek.storage.fetch.ParkedFetch, odradek.storage.replication_wait). The
answers they give were written one loop turn later again (the data link's outbox,
which puts a connection's answers of one turn in one write). So an append answered the
followers' parked fetches two loop turns after it and a high watermark advance
answered the acks=-1 Produce and the consumer's fetch two turns after it: per
replicated record four turns of the leader's loop (an ``epoll_wait`` each) and a loop
callback per woken call and per connection written to (issue 18).

Here the wake-ups of one loop turn run in one callback, in the order they came, and a
connection that got answers from them writes them when they have all run: one write
per connection as before, one loop turn after the change instead of two. Kafka's
purgatory completes delayed operations from the thread that moved the partition; the
callback keeps the re-checks out of the middle of that move, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class WakeupTurn:
    """One loop's queue of re-checks (:meth:`call`) and of writes to run after them
    (:meth:`after`)."""

    __slots__ = ("_after", "_due", "_loop", "_running")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._due: list[Callable[[], None]] = []
        self._after: list[Callable[[], None]] = []
        self._running = False

    def call(self, recheck: Callable[[], None]) -> None:
        """Run ``recheck`` in the next run (one loop callback for all queued before it)."""
        due = self._due
        due.append(recheck)
        if len(due) == 1:
            self._loop.call_soon(self._run)

    def after(self, write: Callable[[], None]) -> bool:
        """While a run is going: run ``write`` at its end and return True. Otherwise
        False (the caller schedules it itself)."""
        if not self._running:
            return False
        self._after.append(write)
        return True

    def _run(self) -> None:
        # Re-checks queued while these run (a wake-up an answer causes) go to the next
        # run, a loop turn later, as a loop callback of their own would.
        due, self._due = self._due, []
        self._running = True
        try:
            for recheck in due:
                self._guarded(recheck)
        finally:
            self._running = False
            after, self._after = self._after, []
            for write in after:
                self._guarded(write)

    def _guarded(self, fn: Callable[[], None]) -> None:
        """Run ``fn``; what it raises goes to the loop's exception handler, as it would
        from a loop callback of its own, and the others still run."""
        try:
            fn()
        except Exception as exc:
            self._loop.call_exception_handler({"message": f"Exception in {fn!r}", "exception": exc})
