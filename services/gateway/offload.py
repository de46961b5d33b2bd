"""CPU-heavy record work off the gateway's event loop, bounded.

Up-conversion of legacy produce message sets (Produce v0-2) and down-conversion for
old fetchers (Fetch v0-3) decompress and rebuild every record: a 0.5 MB batch of tiny
compressed records is tens of millions of records of work. Inputs of at least
:data:`OFFLOAD_MIN_BYTES` run in a worker thread (``asyncio.to_thread``) so the loop
keeps serving other clients between the GIL's switch intervals, at most
:data:`MAX_CONCURRENT` at a time per gateway (more wait their turn rather than taking
every executor thread), and every conversion decompresses at most
:data:`LEGACY_CONVERSION_MAX_BYTES` per batch (beyond it: CORRUPT_MESSAGE for a
produce, UNSUPPORTED/empty for a fetch, as a bounded broker must).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

OFFLOAD_MIN_BYTES = 16 * 1024
MAX_CONCURRENT = 2
LEGACY_CONVERSION_MAX_BYTES = 64 * 1024 * 1024

_slots: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}


def _semaphore() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    sem = _slots.get(loop)
    if sem is None:
        sem = _slots[loop] = asyncio.Semaphore(MAX_CONCURRENT)
    return sem


async def run_heavy(size: int, fn: Callable[[], T]) -> T:
    """``fn()`` inline when ``size`` is small, else in a worker thread (bounded)."""
    if size < OFFLOAD_MIN_BYTES:
        return fn()
    async with _semaphore():
        return await asyncio.to_thread(fn)
