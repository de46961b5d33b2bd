"""Metadata requests started a few per event loop turn, over all connections (issue 14).

A repeated all-topics Metadata request is answered in the callback that starts it
(``answer_at_once``, connection.py), and a connection starts its waiting requests each
time its writer has handed the answers before them to the socket, up to
``connection.max.unread.response.bytes`` of answers its client has not taken. bench
hostile's 20 never-read clients connect together and read their answers (into their
own buffers, never processing them) together, so their writers ran in the same loop
turns: in-process, 25-35 answers computed in one turn from the writers alone and up to
114 with their reconnects, turns of 5-14 ms of the gateway's own CPU in a whole
cluster that every other client's request of that turn waited behind
(docs/security.md, "Hostile clients").

Kafka's network thread reads at most one request per channel per poll; here at most
:data:`PER_TURN` Metadata requests start per loop turn over all connections, the rest
in the turns after, connections in the order they asked. Only Metadata requests: a
client sends one now and then (at start, on a leadership change, every
``metadata.max.age.ms``), so a burst of them is a burst of clients, which a turn or
two more costs nothing, while Produce and Fetch requests (their throughput, the
coalescing of pipelined Produce requests) are left alone.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

# Metadata requests started per loop turn, over all connections of the loop: a
# repeated all-topics one answered at once costs 20-40 us of the loop with its share
# of the write, a handled one 100-150 us.
PER_TURN = 16


class TurnAllowance:
    """Per event loop: how many Metadata requests may still start in this turn, and the
    connections waiting for a later one."""

    __slots__ = ("_left", "_loop", "_next_turn_due", "_waiting", "per_turn")

    def __init__(self, loop: asyncio.AbstractEventLoop, per_turn: int = PER_TURN) -> None:
        self._loop = loop
        self.per_turn = per_turn
        self._left = per_turn
        self._next_turn_due = False
        self._waiting: collections.deque[Callable[[], None]] = collections.deque()

    def may_start(self, retry: Callable[[], None]) -> bool:
        """Whether one more may start now; if not, ``retry`` (the connection's start of
        its waiting requests) is called in a later turn, after those that asked before."""
        if not self._next_turn_due:
            # call_soon from a callback runs in the next loop turn, after its I/O poll
            self._next_turn_due = True
            self._loop.call_soon(self._next_turn)
        if self._left > 0 and not self._waiting:
            self._left -= 1
            return True
        if retry not in self._waiting:  # (one place per connection)
            self._waiting.append(retry)
        return False

    def _next_turn(self) -> None:
        self._next_turn_due = False
        self._left = self.per_turn
        waiting, self._waiting = self._waiting, collections.deque()
        while waiting and self._left > 0:
            waiting.popleft()()  # starts what it may (this turn's allowance) or asks again
        # The one that ran out of allowance asked again first; the rest keep their order.
        self._waiting.extend(waiting)
        if self._waiting and not self._next_turn_due:
            self._next_turn_due = True
            self._loop.call_soon(self._next_turn)


_BY_LOOP: dict[asyncio.AbstractEventLoop, TurnAllowance] = {}


def metadata_turns(loop: asyncio.AbstractEventLoop) -> TurnAllowance:
    """The loop's Metadata allowance (one per loop: tests run many loops in turn)."""
    turns = _BY_LOOP.get(loop)
    if turns is None:
        for old in [old for old in _BY_LOOP if old.is_closed()]:
            del _BY_LOOP[old]  # loops of finished tests
        turns = _BY_LOOP[loop] = TurnAllowance(loop)
    return turns
