"""The gateway's process-wide budget for client traffic (``queued.max.request.bytes``,
services/gateway/memory_pool.py), over real loopback sockets with a stand-in handler.

While the budget is used up no connection is read from, a request already being read
is finished (no deadlock on half-read requests), and everything paused is served once
the bytes are released; responses not yet sent count against the budget too.
"""

from __future__ import annotations

import asyncio
import struct

from helpers.stand_in_frames import stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
    Result,
)
from odradek.gateway.memory_pool import MemoryPool
from odradek.protocol.headers import RequestHeader

BUDGET = 256 * 1024


def test_pool_wakes_the_paused_once_it_has_room() -> None:
    pool = MemoryPool(100)
    woken: list[str] = []
    pool.adjust(60)
    assert not pool.exhausted and pool.available == 40
    pool.adjust(50)  # non-strict: one holder may overshoot
    assert pool.exhausted and pool.available == -10
    pool.wait(1, lambda: woken.append("a"))
    pool.wait(2, lambda: woken.append("b"))
    pool.wait(2, lambda: woken.append("b"))  # registered once
    pool.forget(1)
    pool.adjust(-5)
    assert woken == [] and len(pool) == 1  # still used up
    pool.adjust(-10)
    assert woken == ["b"] and len(pool) == 0
    assert pool.depleted == 2


def test_no_budget_is_never_exhausted() -> None:
    pool = MemoryPool(-1)
    pool.adjust(1 << 40)
    assert not pool.exhausted and pool.available == -1


class _Handler:
    """Answers each request once its correlation id is released; records arrivals."""

    def __init__(self) -> None:
        self.arrived: list[int] = []
        self.release: dict[int, asyncio.Event] = {}

    def gate(self, cid: int) -> asyncio.Event:
        return self.release.setdefault(cid, asyncio.Event())

    async def __call__(
        self, _ctx: ConnectionContext, header: RequestHeader, _b: memoryview
    ) -> Result:
        self.arrived.append(header.correlation_id)
        await self.gate(header.correlation_id).wait()
        payload = struct.pack(">i", header.correlation_id)
        return struct.pack(">i", len(payload)) + payload


async def _answer(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return int(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])


async def test_used_up_budget_stops_reading_every_connection_until_released() -> None:
    pool = MemoryPool(BUDGET)
    handler = _Handler()
    lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(memory_pool=pool))
    await lst.start()
    try:
        r1, w1 = await asyncio.open_connection("127.0.0.1", lst.port)
        r2, w2 = await asyncio.open_connection("127.0.0.1", lst.port)
        # Larger than the whole budget: read whole all the same (non-strict, as Kafka).
        w1.write(stand_in_request(1, 18, b"\0" * 2 * BUDGET))
        await wait_until_async(lambda: handler.arrived == [1], "the big request read", timeout=10)
        assert pool.exhausted and pool.used >= 2 * BUDGET
        w2.write(stand_in_request(2, 18, b"\0" * 10))
        w1.write(stand_in_request(3, 18, b"\0" * 10))
        await asyncio.sleep(0.5)
        assert handler.arrived == [1]  # nobody is read from while the budget is used up
        assert len(pool) >= 1
        handler.gate(1).set()
        assert await _answer(r1) == 1
        await wait_until_async(
            lambda: sorted(handler.arrived) == [1, 2, 3], "the paused requests read", timeout=10
        )
        handler.gate(2).set()
        handler.gate(3).set()
        assert await _answer(r2) == 2
        assert await _answer(r1) == 3
        w1.close()
        w2.close()
        await wait_until_async(lambda: not lst.connections, "connections closed", timeout=10)
        assert pool.used == 0
    finally:
        await lst.stop()


async def test_a_request_half_read_when_the_budget_runs_out_is_finished() -> None:
    """(A request read in place holds its whole buffer from its first bytes on, as
    Kafka's NetworkReceive takes its size from the pool at once: the half-read one is
    half the budget, so the big one on the other connection is still read.)"""
    pool = MemoryPool(BUDGET)
    handler = _Handler()
    lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(memory_pool=pool))
    await lst.start()
    try:
        r1, w1 = await asyncio.open_connection("127.0.0.1", lst.port)
        r2, w2 = await asyncio.open_connection("127.0.0.1", lst.port)
        second = stand_in_request(2, 18, b"\0" * (BUDGET // 2))
        w2.write(second[: len(second) // 2])  # half of a request, then the budget goes
        await wait_until_async(lambda: pool.used > 0, "half a request buffered", timeout=10)
        w1.write(stand_in_request(1, 18, b"\0" * 2 * BUDGET))
        await wait_until_async(lambda: handler.arrived == [1], "the big request read", timeout=10)
        assert pool.exhausted
        w2.write(second[len(second) // 2 :])  # the rest is still read
        await wait_until_async(lambda: handler.arrived == [1, 2], "the half request", timeout=10)
        for cid in (1, 2):
            handler.gate(cid).set()
        assert await _answer(r1) == 1
        assert await _answer(r2) == 2
        w1.close()
        w2.close()
    finally:
        await lst.stop()
