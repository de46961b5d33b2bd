"""Per-connection lanes: requests of one kind on one connection run one after another.

Kafka's broker handles one request per connection at a time, so clients may rely on
pipelined writes of one connection landing in the order they were sent. The gateway
starts every request at once (a long-poll Fetch must not hold up a Metadata), so
the APIs whose effects must keep that order enter a lane of their connection:
OffsetCommit and TxnOffsetCommit (a later commit never overtakes an earlier one).
Produce has a lane of its own that also coalesces the requests queued on it
(:mod:`odradek.gateway.produce_lane`). Other APIs are not held up.

A lane is an :class:`asyncio.Lock`, which wakes its waiters first come, first
served: requests enter in the order their handlers started, which is arrival order.
A lane exists only while a request holds or awaits it.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class _Lane:
    __slots__ = ("_key", "_lanes", "_lock", "_users")

    def __init__(self, lanes: OrderedLanes, key: int) -> None:
        self._lanes = lanes
        self._key = key
        self._lock = asyncio.Lock()
        self._users = 0

    async def acquire(self) -> None:
        """Wait for the earlier entrants; :meth:`release` exactly once afterwards."""
        self._users += 1
        try:
            await self._lock.acquire()
        except BaseException:
            self._leave()
            raise

    def release(self) -> None:
        """Pass the lane on (callable from a plain callback, e.g. once a request is sent)."""
        self._lock.release()
        self._leave()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def _leave(self) -> None:
        self._users -= 1
        if self._users == 0:
            self._lanes._drop(self._key)


class OrderedLanes:
    """The lanes of one connection, one per API key: ``async with lanes.lane(key):``."""

    __slots__ = ("_lanes",)

    def __init__(self) -> None:
        self._lanes: dict[int, _Lane] = {}

    def lane(self, key: int) -> _Lane:
        """The lane for ``key`` (an API key); entering it waits for earlier entrants."""
        found = self._lanes.get(key)
        if found is None:
            found = self._lanes[key] = _Lane(self, key)
        return found

    def __len__(self) -> int:
        """Lanes in use (held or awaited)."""
        return len(self._lanes)

    def _drop(self, key: int) -> None:
        self._lanes.pop(key, None)
