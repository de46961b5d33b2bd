"""CPU-heavy record work off a service's event loop, bounded.

Decompressing a produced batch to check its records (the storage node, Kafka's
LogValidator) or converting legacy message sets (the gateway, Produce v0-2 and Fetch
v0-3) can be tens of millions of records of work for one 0.5 MB batch of tiny
compressed records. Inputs of at least ``min_bytes`` run in a worker thread
(``asyncio.to_thread``) so the loop keeps serving everyone else between the GIL's
switch intervals, at most :data:`MAX_CONCURRENT` at a time per event loop (more wait
their turn rather than taking every executor thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

OFFLOAD_MIN_BYTES = 16 * 1024
MAX_CONCURRENT = 2

_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


def _semaphore() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    sem = _slots.get(loop)
    if sem is None:
        sem = _slots[loop] = asyncio.Semaphore(MAX_CONCURRENT)
    return sem


async def run_heavy(size: int, fn: Callable[[], T], *, min_bytes: int = OFFLOAD_MIN_BYTES) -> T:
    """``fn()`` inline when ``size`` is below ``min_bytes``, else in a worker thread
    (bounded)."""
    if size < min_bytes:
        return fn()
    async with _semaphore():
        return await asyncio.to_thread(fn)
