"""The log manager's periodic work on the storage node's event loop.

:meth:`odradek.log.manager.LogManager.periodic_jobs` says what runs how often
(retention, flushes, checkpoints, the cleaner, by Kafka's ``log.*`` interval names);
this runs each job on its interval in a worker thread (``asyncio.to_thread``) so the
loop keeps serving. The log layer itself stays free of asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from odradek.log.manager import LogManager, PeriodicJob

log = logging.getLogger(__name__)


async def run_log_maintenance(manager: LogManager, stop: asyncio.Event) -> None:
    """Run every periodic job until ``stop``; then return once no job is running.

    After this returns, :meth:`LogManager.shutdown` can follow safely.
    """
    tasks = [asyncio.create_task(_every(manager, job, stop)) for job in manager.periodic_jobs()]
    try:
        await stop.wait()
    finally:
        # Let a running job finish (its thread cannot be cancelled) before returning.
        await asyncio.gather(*tasks, return_exceptions=True)


async def _every(manager: LogManager, job: PeriodicJob, stop: asyncio.Event) -> None:
    delay = max(job.interval_ms, 1) / 1000
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
        if stop.is_set() or manager.is_shut_down:
            return
        try:
            # The look is cheap and on the loop; the hop to a thread is not, when
            # there is nothing to do (an idle node, every second).
            if job.has_work():
                await asyncio.to_thread(manager.run_job, job.run)
        except Exception:  # a failing job must not stop the others
            log.exception("periodic log job %s failed", getattr(job.run, "__name__", job.run))
