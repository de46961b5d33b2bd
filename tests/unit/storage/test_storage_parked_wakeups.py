"""The calls a data link connection parks (a follower's fetch, a consumer's fetch, an
acks=-1 Produce) are timed by one loop timer per connection
(odradek.storage.deadlines.Deadlines), not one each: a leader parks about four per
replicated record and a timer started and cancelled cost more than the rest of the
wait (issue 18). Their answers stay those of their own timers: a fetch parked behind a
longer wait still ends at its own ``max_wait_ms``, an acks=-1 Produce still times out
at its ``timeout_ms``, and an append still answers at once.

And the wake-ups of one loop turn re-check in one loop callback, the answers they give
written at its end (odradek.storage.wakeup_turn.WakeupTurn): two loop callbacks per
replicated record on the leader (the append's wake-up, the high watermark's), where a
callback per woken call and another per connection written to were six or more.

A real leader partition (three replicas), the real Produce and Fetch handlers, real
sockets and the real data link client; the test plays the followers and the consumer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.batches import producer_batch
from helpers.data_links import fetch_one_partition, leader_handlers, served_data_link
from test_storage_replica_manager import snapshot

from odradek.datalink.client import DataLinkPool
from odradek.datalink.frame import PRODUCE, meta_bytes
from odradek.log.manager import LogManager
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import storage_pb2
from odradek.storage.data_link import DataLinkServer, _Connection
from odradek.storage.deadlines import Deadlines
from odradek.storage.fetch import ParkedFetch
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager
from odradek.storage.replication_wait import ReplicationWait
from odradek.storage.wakeup_turn import WakeupTurn

ME, NODE = 1, 100
PARKED_KINDS = (ParkedFetch, ReplicationWait, Deadlines)
WAKEUP_KINDS = (ParkedFetch, ReplicationWait, WakeupTurn, DataLinkServer, _Connection)


@dataclass
class _Leader:
    server: DataLinkServer
    pool: DataLinkPool
    part: Partition

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


@pytest.fixture
async def parked_timers() -> AsyncIterator[Callable[[], int]]:
    """How many loop timers the parked calls (or their connection's Deadlines) started
    since the fixture was made: the running loop's ``call_at`` counted by the object
    whose method the timer calls."""
    loop = asyncio.get_running_loop()
    started = [0]
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if isinstance(getattr(callback, "__self__", None), PARKED_KINDS):
            started[0] += 1
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counting  # type: ignore[method-assign]
    yield lambda: started[0]
    del loop.call_at  # the class's again


@pytest.fixture
async def wakeup_callbacks() -> AsyncIterator[Callable[[], int]]:
    """How many loop callbacks (``call_soon``) the parked calls' wake-ups and the data
    link's writes scheduled since the fixture was made."""
    loop = asyncio.get_running_loop()
    scheduled = [0]
    call_soon = loop.call_soon

    def counting(callback: Any, *args: Any, **kwargs: Any) -> asyncio.Handle:
        if isinstance(getattr(callback, "__self__", None), WAKEUP_KINDS):
            scheduled[0] += 1
        return call_soon(callback, *args, **kwargs)

    loop.call_soon = counting  # type: ignore[method-assign]
    yield lambda: scheduled[0]
    del loop.call_soon


def _fetch(
    pool: DataLinkPool, replica: int, offset: int, wait_ms: int = 10_000
) -> asyncio.Future[Any]:
    return fetch_one_partition(pool, NODE, replica, offset, wait_ms=wait_ms)


def _produce(
    pool: DataLinkPool, value: bytes, acks: int = -1, timeout_ms: int = 10_000
) -> asyncio.Future[storage_pb2.ProducePartitionResult]:
    head = storage_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        partitions=[storage_pb2.ProducePartition(topic="t", partition=0)],
    ).SerializeToString()
    batch = producer_batch([(1000, None, value)])

    async def call() -> storage_pb2.ProducePartitionResult:
        frame = await pool.call(NODE, PRODUCE, head, [batch], timeout=30)
        return storage_pb2.ProduceResponse.FromString(meta_bytes(frame)).partitions[0]

    return asyncio.ensure_future(call())


async def _until(check: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_replicated_records_start_one_timer_per_connection_and_two_callbacks_a_record(
    leader: _Leader, parked_timers: Callable[[], int], wakeup_callbacks: Callable[[], int]
) -> None:
    records = 20
    follower_fetches = {replica: _fetch(leader.pool, replica, 0) for replica in (2, 3)}
    consumer = _fetch(leader.pool, -1, 0)
    await _until(lambda: leader.parked() == 3, "the fetches to park")
    for n in range(records):
        produce = _produce(leader.pool, b"%d" % n)
        for replica in (2, 3):  # each follower gets the record, then fetches past it
            result, data = await asyncio.wait_for(follower_fetches[replica], 10)
            assert result.error_code == ErrorCode.NONE and data
            follower_fetches[replica] = _fetch(leader.pool, replica, n + 1)
        answer = await asyncio.wait_for(produce, 10)
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, n)
        result, data = await asyncio.wait_for(consumer, 10)
        assert result.high_watermark == n + 1 and data
        consumer = _fetch(leader.pool, -1, n + 1)
    # Four parked calls per record (two followers' fetches, the consumer's, the acks=-1
    # wait), 80 timers with one each; the calls share one connection here: one timer.
    assert parked_timers() <= 2
    # Per record: the append wakes the followers' fetches, the high watermark the
    # consumer's and the acks=-1 wait: one run of the WakeupTurn each, their answers
    # written within it (a fetch answered at once still schedules its write).
    assert wakeup_callbacks() <= 2 * records + 2
    for fetch in (*follower_fetches.values(), consumer):
        fetch.cancel()


async def test_a_shorter_wait_parked_behind_a_longer_one_ends_on_time(leader: _Leader) -> None:
    longer = _fetch(leader.pool, 2, 0, wait_ms=10_000)
    await _until(lambda: leader.parked() == 1, "the long fetch to park")
    start = time.monotonic()
    result, data = await asyncio.wait_for(_fetch(leader.pool, 3, 0, wait_ms=100), 5)
    waited = time.monotonic() - start
    assert result.error_code == ErrorCode.NONE and data == b""
    assert 0.09 <= waited < 2.0
    assert not longer.done() and leader.parked() == 1
    produce = _produce(leader.pool, b"a", acks=1)
    assert (await asyncio.wait_for(produce, 5)).error_code == ErrorCode.NONE
    result, data = await asyncio.wait_for(longer, 5)
    assert data and leader.parked() == 0


async def test_an_acks_all_produce_still_times_out_at_its_timeout(leader: _Leader) -> None:
    fetches = [_fetch(leader.pool, replica, 0, wait_ms=10_000) for replica in (2, 3)]
    await _until(lambda: leader.parked() == 2, "the followers' fetches to park")
    start = time.monotonic()
    answer = await asyncio.wait_for(_produce(leader.pool, b"a", timeout_ms=150), 5)
    waited = time.monotonic() - start
    # The followers got the record but never fetched past it: no high watermark.
    assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert 0.14 <= waited < 2.0
    for fetch in fetches:
        assert (await asyncio.wait_for(fetch, 5))[1]
    assert leader.parked() == 0


async def test_a_turn_runs_the_rechecks_queued_before_it_then_the_writes() -> None:
    loop = asyncio.get_running_loop()
    turn = WakeupTurn(loop)
    ran: list[str] = []

    def recheck(name: str) -> None:
        ran.append(name)
        assert turn.after(lambda: ran.append(f"write {name}"))
        if name == "a":
            turn.call(lambda: ran.append("queued by a"))  # the next run, a turn later
        if name == "b":
            raise RuntimeError("a failing re-check leaves the others running")

    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        for name in "abc":
            turn.call(lambda name=name: recheck(name))  # type: ignore[misc]
        assert not turn.after(lambda: None)  # outside a run: the caller schedules it
        await asyncio.sleep(0)
        assert ran == ["a", "b", "c", "write a", "write b", "write c"]
        await asyncio.sleep(0)
        assert ran[-1] == "queued by a"
        assert [type(c["exception"]) for c in errors] == [RuntimeError]
    finally:
        loop.set_exception_handler(None)


async def test_deadlines_expire_what_is_due_and_keep_the_rest() -> None:
    loop = asyncio.get_running_loop()
    expired: list[str] = []

    class Call:
        def __init__(self, name: str) -> None:
            self.name = name

        def expire(self) -> None:
            expired.append(self.name)

    deadlines = Deadlines(loop)
    gone, late, soon = Call("gone"), Call("late"), Call("soon")
    now = loop.time()
    deadlines.add(gone, now + 0.02)
    deadlines.add(late, now + 0.3)
    deadlines.add(soon, now + 0.05)
    deadlines.discard(gone)  # answered first: never expired
    await asyncio.sleep(0.15)
    assert expired == ["soon"] and len(deadlines) == 1
    await asyncio.sleep(0.3)
    assert expired == ["soon", "late"] and len(deadlines) == 0
    deadlines.add(Call("closed"), loop.time() + 0.01)
    deadlines.close()
    await asyncio.sleep(0.05)
    assert expired == ["soon", "late"]


async def test_a_call_that_fails_to_expire_leaves_the_others_expiring() -> None:
    loop = asyncio.get_running_loop()
    expired: list[str] = []

    class Call:
        def __init__(self, name: str) -> None:
            self.name = name

        def expire(self) -> None:
            expired.append(self.name)
            if self.name == "bad":
                raise RuntimeError("expire failed")

    errors: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    try:
        deadlines = Deadlines(loop)
        at = loop.time() + 0.02
        for name in ("bad", "good"):
            deadlines.add(Call(name), at)
        await asyncio.sleep(0.1)
        assert expired == ["bad", "good"] and len(deadlines) == 0
        assert [type(c["exception"]) for c in errors] == [RuntimeError]
    finally:
        loop.set_exception_handler(None)
