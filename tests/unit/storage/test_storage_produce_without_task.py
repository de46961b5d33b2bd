"""A data link Produce whose append needs no await is served without a task of its own
(odradek.storage.data_link ``_produce_now``): appended as its frame arrives, its
acks=-1 wait kept as loop callbacks (odradek.storage.replication_wait.ReplicationWait)
and answered from them (issue 18: the task and the coroutines it ran through were a
good share of a one-record Produce's CPU). The answers are those of the task path:
acks=-1 waits for the high watermark, a timeout is REQUEST_TIMED_OUT, a lost
leadership NOT_LEADER_OR_FOLLOWER, a connection that goes away withdraws its waits,
and a lane's order holds when a Produce that does await comes first.

A real leader partition (three replicas, followers played by the test through
``update_follower_fetch_state``), the real ProduceHandler, real sockets and the real
data link client.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.batches import producer_batch
from helpers.data_links import served_data_link
from test_storage_replica_manager import snapshot

from odradek.datalink.client import DataLinkError, DataLinkPool
from odradek.datalink.frame import PRODUCE, meta_bytes
from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode
from odradek.records.compression import Compression
from odradek.rpc.v1 import common_pb2, storage_pb2
from odradek.storage.data_link import DataLinkServer
from odradek.storage.metrics import StorageMetrics
from odradek.storage.partition import Partition
from odradek.storage.produce import VALIDATE_OFF_LOOP_BYTES, ProduceHandler
from odradek.storage.replica_manager import ReplicaManager

ME, NODE = 1, 100


@dataclass
class _Handlers:
    produce: ProduceHandler


@dataclass
class _Leader:
    server: DataLinkServer
    pool: DataLinkPool
    part: Partition

    def tasks(self) -> int:
        return sum(len(c.tasks) for c in self.server.connections)

    def waits(self) -> int:
        return sum(len(c.parked) for c in self.server.connections)

    def followers_at(self, offset: int) -> None:
        for replica in (2, 3):
            self.part.update_follower_fetch_state(replica, offset, 0, self.part.clock_ms())


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[_Leader]:
    logs = LogManager([tmp_path / "logs"], ME, "c", {})
    replicas = ReplicaManager(ME, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(snapshot(1, [(0, [ME, 2, 3], ME, 0)]))
    part = replicas.get("t", 0)
    assert part is not None and part.is_leader
    handlers = _Handlers(ProduceHandler(replicas, StorageMetrics()))
    async with served_data_link(handlers, NODE) as (server, pool):
        yield _Leader(server, pool, part)
    logs.shutdown()


def _produce(
    pool: DataLinkPool, value: bytes, *, timeout_ms: int = 10_000, lane: int = 7, codec: int = 0
) -> asyncio.Future[Any]:
    head = storage_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=timeout_ms,
        ordering_lane=lane,
        partitions=[storage_pb2.ProducePartition(topic="t", partition=0)],
    ).SerializeToString()
    batch = producer_batch([(1000, None, value)], codec=codec)

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


async def test_an_acks_all_produce_waits_without_a_task(leader: _Leader) -> None:
    answer = _produce(leader.pool, b"a")
    await _until(lambda: leader.part.log_end_offset == 1, "the append")
    # Appended and waiting for the followers, with no task on the node.
    assert leader.waits() == 1
    assert leader.tasks() == 0
    await asyncio.sleep(0.05)
    assert not answer.done()  # the high watermark is still 0
    leader.followers_at(1)  # both followers fetch past it: the high watermark moves
    result = await asyncio.wait_for(answer, 10)
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert leader.waits() == 0


async def test_a_wait_past_its_timeout_is_request_timed_out(leader: _Leader) -> None:
    result = await asyncio.wait_for(_produce(leader.pool, b"a", timeout_ms=50), 10)
    assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert leader.waits() == 0
    assert leader.part.log_end_offset == 1  # appended all the same, as Kafka's


async def test_a_lost_leadership_answers_not_leader(leader: _Leader) -> None:
    answer = _produce(leader.pool, b"a")
    await _until(lambda: leader.waits() == 1, "the wait")
    leader.part.make_follower(
        common_pb2.Partition(
            partition=0, replicas=[ME, 2, 3], isr=[ME, 2, 3], leader=2, leader_epoch=1
        )
    )
    result = await asyncio.wait_for(answer, 10)
    assert result.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_closed_connection_withdraws_its_waits(leader: _Leader) -> None:
    answer = _produce(leader.pool, b"a")
    await _until(lambda: leader.waits() == 1, "the wait")
    [conn] = leader.server.connections
    waiting = dict(conn.parked)
    await leader.pool.close()
    with pytest.raises(DataLinkError):
        await asyncio.wait_for(answer, 10)
    await _until(lambda: not leader.server.connections, "the node to see the close")
    assert all(w.done for w in waiting.values())
    assert len(leader.part.replication_waiters) == 1  # held, but withdrawn
    leader.followers_at(1)  # wakes nothing: withdrawn
    assert len(leader.part.replication_waiters) == 0


async def test_a_lane_keeps_its_order_behind_a_produce_that_awaits(leader: _Leader) -> None:
    # A large compressed batch is validated in a worker thread, so its append awaits: a
    # task, which the uncompressed Produce sent right behind it must not overtake.
    value = os.urandom(VALIDATE_OFF_LOOP_BYTES).hex().encode()  # gzip: still past it
    first = _produce(leader.pool, value, codec=Compression.GZIP)
    second = _produce(leader.pool, b"second")
    await _until(lambda: leader.part.log_end_offset == 2, "both appends")
    leader.followers_at(2)
    a, b = await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert (a.error_code, a.base_offset) == (ErrorCode.NONE, 0)
    assert (b.error_code, b.base_offset) == (ErrorCode.NONE, 1)
