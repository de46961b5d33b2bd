"""A follower's fetch rounds on the data link run from the answers themselves
(odradek.storage.fetcher ``_Rounds``, ``DataLinkConnection.call_with``): each answer is
applied and the next fetch sent from the connection's read, without waking the
fetcher's task per round (issue 18: one round per replicated record, and the task's
wake-up was a loop turn of its own). The task still runs what needs it: the first
round after a (re)connect, and a lost connection, which it retries as before.

A real leader (its partition, Fetch handler and data link server on TCP), a real
follower (its partition and ReplicaFetcherManager) and real logs in one process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.batches import producer_batch
from helpers.data_links import leader_handlers
from test_storage_replica_manager import snapshot

from odradek.datalink.client import DataLinkConnection
from odradek.log.manager import LogManager
from odradek.storage.data_link import DataLinkServer
from odradek.storage.fetcher import ReplicaFetcherManager
from odradek.storage.metrics import StorageMetrics
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.settings import StorageSettings

LEADER, FOLLOWER = 1, 2


@dataclass
class _Pair:
    leader: Partition
    follower: Partition
    server: DataLinkServer
    fetchers: ReplicaFetcherManager


async def _serve(tmp_path: Path) -> tuple[Partition, DataLinkServer, LogManager]:
    logs = LogManager([tmp_path / "leader"], LEADER, "c", {})
    replicas = ReplicaManager(LEADER, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(snapshot(1, [(0, [LEADER, FOLLOWER], LEADER, 0)]))
    part = replicas.get("t", 0)
    assert part is not None and part.is_leader
    handlers = leader_handlers(replicas, LEADER)
    server = DataLinkServer("127.0.0.1", 0, lambda: handlers)  # type: ignore[arg-type, return-value]
    await server.start()
    return part, server, logs


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[_Pair]:
    leader, server, leader_logs = await _serve(tmp_path)
    settings = StorageSettings(
        node_id=FOLLOWER,
        host="127.0.0.1",
        grpc_port=0,
        metrics_port=0,
        controller_address="127.0.0.1:9",
        log_dirs=[tmp_path / "follower"],
        replica_fetch_wait_max_ms=500,
    )
    logs = LogManager([tmp_path / "follower"], FOLLOWER, "c", {})
    replicas = ReplicaManager(FOLLOWER, logs, {}, replica_lag_time_max_ms=30_000)
    fetchers = ReplicaFetcherManager(
        settings,
        lambda _node: "127.0.0.1:9",  # gRPC: unused (an empty log has nothing to truncate)
        lambda: 1,
        StorageMetrics(),
        data_address_of=lambda _node: ("127.0.0.1", server.port),
    )
    replicas.on_follow = fetchers.add
    replicas.on_unfollow = fetchers.remove
    replicas.apply(snapshot(1, [(0, [LEADER, FOLLOWER], LEADER, 0)]))
    follower = replicas.get("t", 0)
    assert follower is not None
    yield _Pair(leader, follower, server, fetchers)
    await fetchers.shutdown()
    await server.stop(0.1)
    logs.shutdown()
    leader_logs.shutdown()


@pytest.fixture
def awaited_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """How many data link calls were awaited (``DataLinkConnection.call``) since."""
    calls = [0]
    call = DataLinkConnection.call

    def counting(self: DataLinkConnection, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return call(self, *args, **kwargs)

    monkeypatch.setattr(DataLinkConnection, "call", counting)
    return lambda: calls[0]


async def _until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _append(part: Partition, value: bytes) -> None:
    part.append_as_leader(bytearray(producer_batch([(1000, None, value)])), -1)


async def test_replicated_records_are_fetched_without_the_fetchers_task(
    pair: _Pair, awaited_calls: Callable[[], int]
) -> None:
    records = 30
    for n in range(records):
        _append(pair.leader, b"%d" % n)
        await _until(lambda n=n: pair.follower.log_end_offset == n + 1, "the follower's append")
        # The follower's next fetch at its new log end moves the high watermark.
        await _until(lambda n=n: pair.leader.high_watermark == n + 1, "the high watermark")
    assert pair.follower.read(0, 1 << 20, max_offset=None, min_one_message=True) == (
        pair.leader.read(0, 1 << 20, max_offset=None, min_one_message=True)
    )
    # The task's first round, then every round from the answers: one call per record
    # or more had the task awaited each.
    assert awaited_calls() <= 2


async def test_a_lost_connection_goes_back_to_the_task_which_fetches_again(
    pair: _Pair,
) -> None:
    _append(pair.leader, b"a")
    await _until(lambda: pair.follower.log_end_offset == 1, "the follower's append")
    for conn in list(pair.server.connections):  # the leader drops the follower
        assert conn.transport is not None
        conn.transport.abort()
    await asyncio.sleep(0.05)
    _append(pair.leader, b"b")
    # The task backs off, reconnects and goes on: nothing is lost or duplicated.
    await _until(lambda: pair.follower.log_end_offset == 2, "the follower's second append")
    await _until(lambda: pair.leader.high_watermark == 2, "the high watermark")
    assert pair.follower.read(0, 1 << 20, max_offset=None, min_one_message=True) == (
        pair.leader.read(0, 1 << 20, max_offset=None, min_one_message=True)
    )
