"""Critical sections that must finish even if the request that started them is cancelled.

gRPC cancels a handler when its caller gives up. A metadata write cancelled between
"journaled" and "applied in memory" would leave the two disagreeing, so writes run
in their own task: the caller may stop waiting, the write still completes (like an
etcd request whose client timed out: it may or may not have been applied).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


def _consume(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("abandoned critical section failed: %r", task.exception())


async def uncancellable(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion in its own task; cancelling the caller only stops the wait."""
    task = asyncio.get_running_loop().create_task(coro)
    task.add_done_callback(_consume)
    return await asyncio.shield(task)
