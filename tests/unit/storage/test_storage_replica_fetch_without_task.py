"""A follower's fetch on the data link is served without a task (odradek.storage.data_link
``_replica_fetch_now``, odradek.storage.fetch.ParkedFetch): answered at once when there
is something to send, otherwise parked as loop callbacks on the partition's
``data_changed`` until an append or its ``max_wait_ms`` (issue 18: a leader parks each
follower's fetch once per replicated record, and the task it was cost a good share of
the call). The answers are fetch_split's: the records after an append, nothing once the
wait is over, the follower's log end recorded first (which moves the high watermark and
answers an acks=-1 Produce), and a connection that goes away withdraws its fetch. A
consumer's fetch is served the same way (test_storage_consumer_fetch_without_task.py).

A real leader partition (three replicas), the real Produce and Fetch handlers, real
sockets and the real data link client; the test plays the followers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.batches import producer_batch
from helpers.data_links import fetch_one_partition, leader_handlers, served_data_link
from test_storage_replica_manager import snapshot

from odradek.datalink.client import DataLinkError, DataLinkPool
from odradek.datalink.frame import PRODUCE, meta_bytes
from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2
from odradek.storage.data_link import DataLinkServer
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager

ME, NODE = 1, 100


@dataclass
class _Leader:
    server: DataLinkServer
    pool: DataLinkPool
    part: Partition

    def tasks(self) -> int:
        return sum(len(c.tasks) for c in self.server.connections)

    def parked(self) -> int:
        return sum(len(c.parked) for c in self.server.connections)


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[_Leader]:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(snapshot(1, [(0, [ME, 2, 3], ME, 0)]))
    part = replicas.get("t", 0)
    assert part is not None and part.is_leader
    handlers = leader_handlers(replicas, ME)
    async with served_data_link(handlers, NODE) as (server, pool):
        yield _Leader(server, pool, part)
    logs.shutdown()


def _fetch(
    pool: DataLinkPool, replica: int, offset: int, wait_ms: int = 10_000
) -> asyncio.Future[Any]:
    return fetch_one_partition(pool, NODE, replica, offset, wait_ms=wait_ms)


def _produce(pool: DataLinkPool, value: bytes, acks: int) -> asyncio.Future[Any]:
    head = storage_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        partitions=[storage_pb2.ProducePartition(topic="t", partition=0)],
    ).SerializeToString()
    batch = producer_batch([(1000, None, value)])

    async def call() -> storage_pb2.ProducePartitionResult:
        frame = await pool.call(NODE, PRODUCE, head, [batch], timeout=30)
        return storage_pb2.ProduceResponse.FromString(meta_bytes(frame)).partitions[0]

    return asyncio.ensure_future(call())


async def _until(check: Any, what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_a_follower_fetch_parks_without_a_task_and_an_append_answers_it(
    leader: _Leader,
) -> None:
    fetch = _fetch(leader.pool, 2, 0)
    await _until(lambda: leader.parked() == 1, "the fetch to park")
    assert leader.tasks() == 0
    assert len(leader.part.data_changed) == 1
    produced = await asyncio.wait_for(_produce(leader.pool, b"a", acks=1), 10)
    assert produced.error_code == ErrorCode.NONE
    result, records = await asyncio.wait_for(fetch, 10)
    assert result.error_code == ErrorCode.NONE and result.log_end_offset == 1
    assert records == bytes(leader.part.read(0, 1 << 20, max_offset=None, min_one_message=True))
    assert leader.parked() == 0 and len(leader.part.data_changed) == 0


async def test_a_parked_fetch_past_its_wait_answers_empty(leader: _Leader) -> None:
    result, records = await asyncio.wait_for(_fetch(leader.pool, 2, 0, wait_ms=50), 10)
    assert result.error_code == ErrorCode.NONE and records == b""
    assert leader.parked() == 0 and len(leader.part.data_changed) == 0


async def test_the_followers_fetches_move_the_high_watermark_and_answer_acks_all(
    leader: _Leader,
) -> None:
    produce = _produce(leader.pool, b"a", acks=-1)
    await _until(lambda: leader.part.log_end_offset == 1, "the append")
    for replica in (2, 3):  # each has the record: its next fetch is at offset 1
        result, _ = await asyncio.wait_for(_fetch(leader.pool, replica, 0), 10)
        assert result.log_end_offset == 1
    assert not produce.done()
    parked = [_fetch(leader.pool, replica, 1) for replica in (2, 3)]
    result = await asyncio.wait_for(produce, 10)
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert leader.part.high_watermark == 1
    await _until(lambda: leader.parked() == 2, "the followers' next fetches to park")
    for fetch in parked:
        fetch.cancel()


async def test_a_closed_connection_withdraws_its_parked_fetch(leader: _Leader) -> None:
    fetch = _fetch(leader.pool, 2, 0)
    await _until(lambda: leader.parked() == 1, "the fetch to park")
    await leader.pool.close()
    with pytest.raises(DataLinkError):
        await asyncio.wait_for(fetch, 10)
    await _until(lambda: not leader.server.connections, "the node to see the close")
    assert len(leader.part.data_changed) == 0


async def test_a_consumer_fetch_parks_without_a_task_too(leader: _Leader) -> None:
    fetch = _fetch(leader.pool, -1, 0)
    await _until(lambda: leader.parked() == 1, "the consumer's fetch to park")
    assert leader.tasks() == 0
    assert len(leader.part.hw_changed) == 1 and len(leader.part.data_changed) == 0
    fetch.cancel()
