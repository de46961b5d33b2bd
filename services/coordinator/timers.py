"""Schedulers for :class:`odradek.coordinator.shard.GroupShard`.

:class:`ManualScheduler` keeps time by hand: ``advance(ms)`` runs due timers in
deadline order (ties in scheduling order), so rebalance and session-timeout rules can
be checked exactly and instantly. The asyncio scheduler used in service lives with
the shard runtime (:mod:`odradek.coordinator.runtime`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable


class ManualScheduler:
    def __init__(self, start_ms: int = 1_000_000) -> None:
        self.time_ms = start_ms
        self._heap: list[tuple[int, int, Hashable]] = []
        self._timers: dict[Hashable, tuple[int, int, Callable[[], None]]] = {}
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self.time_ms

    def schedule(self, key: Hashable, delay_ms: int, action: Callable[[], None]) -> None:
        entry = (self.time_ms + max(0, delay_ms), next(self._seq), action)
        self._timers[key] = entry
        heapq.heappush(self._heap, (entry[0], entry[1], key))

    def cancel(self, key: Hashable) -> None:
        self._timers.pop(key, None)

    def pending(self, key: Hashable) -> int | None:
        """Deadline of the timer under ``key``, if armed."""
        entry = self._timers.get(key)
        return entry[0] if entry else None

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms``, firing every timer that falls due on the way."""
        target = self.time_ms + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, seq, key = heapq.heappop(self._heap)
            entry = self._timers.get(key)
            if entry is None or entry[1] != seq:
                continue  # cancelled or replaced
            del self._timers[key]
            self.time_ms = max(self.time_ms, deadline)
            entry[2]()
        self.time_ms = target
