"""The gateway process's memory budget for client traffic (``queued.max.request.bytes``).

Kafka's broker allocates every request's receive buffer from one process-wide pool
(``queued.max.request.bytes``, Kafka's ``SimpleMemoryPool`` in non-strict mode): while
the pool is used up, the socket server mutes every channel, so a flood of clients
slows down instead of growing the heap until the OOM killer stops the broker. This is
that pool, with one difference: besides requests being read and requests being
handled, it counts the responses a connection has finished but not yet sent (Kafka
holds one request per connection at a time; a gateway pipelines, so its unsent
responses are the other half of what clients can make it hold).

Non-strict like Kafka's: a connection is paused only once the budget is *used up*, so
a request larger than what is left is still read whole (otherwise a request larger
than the budget could never be read), and the overshoot is bounded by one socket read
per connection. Sans-io: connections report their holdings with :meth:`adjust` and
register a wake-up with :meth:`wait`; the pool calls it back once holdings drop below
the budget.
"""

from __future__ import annotations

from collections.abc import Callable


class MemoryPool:
    """Bytes held by every connection of one gateway, against ``capacity``."""

    __slots__ = ("_waiting", "capacity", "depleted", "used")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity  # <= 0: no budget (Kafka's -1)
        self.used = 0
        self.depleted = 0  # how many times a connection was paused for the budget
        self._waiting: dict[int, Callable[[], None]] = {}

    @property
    def exhausted(self) -> bool:
        return 0 < self.capacity <= self.used

    @property
    def available(self) -> int:
        return self.capacity - self.used if self.capacity > 0 else -1

    def adjust(self, delta: int) -> None:
        """A connection now holds ``delta`` more bytes (negative: fewer)."""
        self.used += delta
        if delta < 0 and self._waiting and not self.exhausted:
            waiting, self._waiting = self._waiting, {}
            for resume in waiting.values():
                resume()

    def wait(self, key: int, resume: Callable[[], None]) -> None:
        """Call ``resume`` once the budget has room again (once per registration)."""
        if key not in self._waiting:
            self.depleted += 1
        self._waiting[key] = resume

    def forget(self, key: int) -> None:
        self._waiting.pop(key, None)

    def __len__(self) -> int:
        """Connections paused for the budget."""
        return len(self._waiting)
