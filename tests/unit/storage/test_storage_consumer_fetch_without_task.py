"""A consumer's fetch on the data link is served without a task (odradek.storage.data_link
``_fetch_now``, odradek.storage.fetch.ParkedFetch), as a follower's is: answered at
once when there is something to send, otherwise parked as loop callbacks on the
partition's ``hw_changed`` until the high watermark moves or its ``max_wait_ms`` ends
(issue 18: a gateway's consumers fetch about once per replicated record, and the task
each fetch was cost creation, scheduling and its wait machinery). The answers are
fetch_split's: records up to the high watermark, under read_committed only up to the
last stable offset, nothing once the wait is over, and a connection that goes away
withdraws its fetch.

A real leader partition (one replica, so an append moves the high watermark), the real
Fetch handler, real sockets and the real data link client; the loop's task factory
counts the tasks the node creates.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.batches import batch_builder, producer_batch
from helpers.data_links import fetch_one_partition, leader_handlers, served_data_link
from test_storage_replica_manager import snapshot

from odradek.datalink.client import DataLinkError, DataLinkPool
from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode
from odradek.storage.data_link import DataLinkServer
from odradek.storage.fetch import READ_COMMITTED
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager

ME, NODE = 1, 100


class _ServeTasks:
    """A task factory counting the data link server's call tasks (``_serve``)."""

    def __init__(self) -> None:
        self.created = 0

    def __call__(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any
    ) -> asyncio.Task[Any]:
        if getattr(coro, "__qualname__", "").endswith("_Connection._serve"):
            self.created += 1
        return asyncio.Task(coro, loop=loop, **kw)


@dataclass
class _Leader:
    server: DataLinkServer
    pool: DataLinkPool
    part: Partition
    tasks: _ServeTasks

    def parked(self) -> int:
        return sum(len(c.parked) for c in self.server.connections)


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[_Leader]:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(snapshot(1, [(0, [ME], ME, 0)]))
    part = replicas.get("t", 0)
    assert part is not None and part.is_leader
    handlers = leader_handlers(replicas, ME)
    loop = asyncio.get_running_loop()
    tasks = _ServeTasks()
    loop.set_task_factory(tasks)  # type: ignore[arg-type]
    try:
        async with served_data_link(handlers, NODE) as (server, pool):
            yield _Leader(server, pool, part, tasks)
    finally:
        loop.set_task_factory(None)
        logs.shutdown()


def _fetch(
    pool: DataLinkPool, offset: int, wait_ms: int = 10_000, isolation: int = 0
) -> asyncio.Future[Any]:
    return fetch_one_partition(pool, NODE, -1, offset, wait_ms=wait_ms, isolation=isolation)


def _append(part: Partition, value: bytes) -> None:
    part.append_as_leader(producer_batch([(1000, None, value)]), 1)


def _append_transactional(part: Partition, value: bytes) -> None:
    builder = batch_builder(transactional=True, producer_id=7, producer_epoch=0, base_sequence=0)
    builder.append(0, timestamp=1000, key=None, value=value, headers=[])
    part.append_as_leader(bytearray(builder.build()), 1)


def _records(part: Partition, start: int, end: int) -> bytes:
    return bytes(part.read(start, 1 << 20, max_offset=end, min_one_message=True))


async def _until(check: Any, what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_consumer_fetch_with_data_is_answered_without_a_task(leader: _Leader) -> None:
    _append(leader.part, b"a")
    for _ in range(5):
        result, records = await asyncio.wait_for(_fetch(leader.pool, 0), 10)
        assert result.error_code == ErrorCode.NONE and result.high_watermark == 1
        assert records == _records(leader.part, 0, 1)
    assert leader.tasks.created == 0  # before: one task per fetch
    assert leader.parked() == 0


async def test_a_parked_consumer_fetch_is_answered_by_an_append(leader: _Leader) -> None:
    fetch = _fetch(leader.pool, 0)
    await _until(lambda: leader.parked() == 1, "the fetch to park")
    assert leader.tasks.created == 0
    assert len(leader.part.hw_changed) == 1
    _append(leader.part, b"a")
    result, records = await asyncio.wait_for(fetch, 10)
    assert result.error_code == ErrorCode.NONE and result.high_watermark == 1
    assert records == _records(leader.part, 0, 1)
    assert leader.parked() == 0 and len(leader.part.hw_changed) == 0


async def test_a_parked_consumer_fetch_past_its_wait_answers_empty(leader: _Leader) -> None:
    result, records = await asyncio.wait_for(_fetch(leader.pool, 0, wait_ms=50), 10)
    assert result.error_code == ErrorCode.NONE and records == b""
    assert leader.tasks.created == 0
    assert leader.parked() == 0 and len(leader.part.hw_changed) == 0


async def test_read_committed_stops_at_the_last_stable_offset(leader: _Leader) -> None:
    _append(leader.part, b"a")
    _append_transactional(leader.part, b"open")
    _append(leader.part, b"b")
    assert (leader.part.last_stable_offset, leader.part.high_watermark) == (1, 3)
    result, records = await asyncio.wait_for(_fetch(leader.pool, 0, isolation=READ_COMMITTED), 10)
    assert result.last_stable_offset == 1 and records == _records(leader.part, 0, 1)
    # At the last stable offset it parks, though the high watermark is beyond it; the
    # commit marker answers it. read_uncommitted gets all three at once.
    parked = _fetch(leader.pool, 1, isolation=READ_COMMITTED)
    await _until(lambda: leader.parked() == 1, "the read_committed fetch to park")
    _, uncommitted = await asyncio.wait_for(_fetch(leader.pool, 1), 10)
    assert uncommitted == _records(leader.part, 1, 3)
    assert not parked.done()
    leader.part.append_end_txn_marker(
        producer_id=7, producer_epoch=0, coordinator_epoch=0, committed=True
    )
    result, records = await asyncio.wait_for(parked, 10)
    assert result.last_stable_offset == 4 and records == _records(leader.part, 1, 4)
    assert leader.tasks.created == 0


async def test_a_closed_connection_withdraws_a_parked_consumer_fetch(leader: _Leader) -> None:
    fetch = _fetch(leader.pool, 0)
    await _until(lambda: leader.parked() == 1, "the fetch to park")
    await leader.pool.close()
    with pytest.raises(DataLinkError):
        await asyncio.wait_for(fetch, 10)
    await _until(lambda: not leader.server.connections, "the node to see the close")
    assert len(leader.part.hw_changed) == 0


async def test_an_error_is_answered_at_once(leader: _Leader) -> None:
    result, records = await asyncio.wait_for(_fetch(leader.pool, 5), 10)
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and records == b""
    assert leader.tasks.created == 0 and leader.parked() == 0
