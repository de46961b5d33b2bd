"""An idle storage node's once-a-second log jobs (flush, purge) stay on the event
loop: a cheap look says there is nothing to do, and no worker thread is woken
(docs/data-link.md, "Idle CPU")."""

from __future__ import annotations

import asyncio
from pathlib import Path

from helpers.waiting import wait_until_async
from log_testkit import NOW, batch

from odradek.log.manager import LogManager
from odradek.storage.log_maintenance import run_log_maintenance

SETTINGS = {
    "log.segment.bytes": "1000",
    "log.index.interval.bytes": "200",
    "log.index.size.max.bytes": "800",
    "log.segment.delete.delay.ms": "0",
    "log.flush.scheduler.interval.ms": "20",  # the flush job every 20 ms
}


def make(tmp_path: Path) -> LogManager:
    return LogManager([tmp_path / "logs"], 1, "Q8c1iVrxTaaOPOtnLlS5Jg", SETTINGS)


def test_flush_and_purge_say_when_they_have_work(tmp_path: Path) -> None:
    mgr = make(tmp_path)
    log = mgr.create_log("p", 0)
    log.append_as_leader(batch(2, NOW), 0)  # in the active segment: nothing to flush
    assert not mgr.flush_due() and not mgr.purge_due()
    for i in range(20):  # rolls segments
        log.append_as_leader(batch(2, NOW + i), 0)
    assert mgr.flush_due()
    mgr.run_flush()
    assert not mgr.flush_due()
    log.high_watermark = log.log_end_offset
    mgr.update_config("p", {"retention.ms": "1", "file.delete.delay.ms": "60000"})
    mgr.run_retention(NOW + 10_000)
    assert mgr.purge_due()  # segments wait for file.delete.delay.ms
    mgr.shutdown()


async def test_an_idle_node_wakes_no_thread_and_a_roll_is_still_flushed(tmp_path: Path) -> None:
    mgr = make(tmp_path)
    log = mgr.create_log("p", 0)
    ran: list[object] = []
    run_job = mgr.run_job

    def counted(job: object) -> None:
        ran.append(job)
        run_job(job)  # type: ignore[arg-type]

    mgr.run_job = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.create_task(run_log_maintenance(mgr, stop))
    try:
        await asyncio.sleep(0.5)  # 25 rounds of the flush job
        assert ran == []
        for i in range(20):
            log.append_as_leader(batch(2, NOW + i), 0)
        active = log.segments[-1].base_offset
        await wait_until_async(
            lambda: log.recovery_point >= active, "the rolled segments to be flushed", timeout=5
        )
        assert ran
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
        mgr.shutdown()
