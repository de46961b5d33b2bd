"""Stopping background tasks without trusting cancellation to arrive.

Under Python 3.11, a cancellation that races with a completing ``wait_for`` or with a
gRPC call finishing can be swallowed (the task stays "cancelling" and keeps running),
so loops here also check an explicit stop flag, and shutdown waits for tasks with a
bound instead of awaiting them blindly.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def cancel_and_wait(
    tasks: Iterable[asyncio.Task[object] | None], timeout: float = 5.0
) -> None:
    """Cancel ``tasks`` and wait up to ``timeout`` for them to finish; log stragglers."""
    pending = {t for t in tasks if t is not None and not t.done()}
    for task in pending:
        task.cancel()
    if not pending:
        return
    done, still = await asyncio.wait(pending, timeout=timeout)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            log.warning("task %s ended with %r", task.get_name(), task.exception())
    for task in still:
        log.warning("task %s did not stop within %.1f s", task.get_name(), timeout)
