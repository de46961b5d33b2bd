"""Requests on a PLAINTEXT listener are read in place too
(services/gateway/connection.py, ``InPlaceKafkaConnection``): a ~1 MB Produce request
lands in a buffer of its own that the handler gets a view of, not in bytes uvloop copied
each read into and the decoder joined again (issue 18: two copies of every produced
byte); small pipelined requests and the memory budget's holds work as before. Real
loopback sockets, under asyncio's and uvloop's transports (the services run uvloop)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest
import uvloop
from helpers.stand_in_frames import stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    InPlaceKafkaConnection,
    KafkaListener,
    Result,
)
from odradek.gateway.memory_pool import MemoryPool
from odradek.protocol.headers import RequestHeader

LOOPS: dict[str, Callable[[Awaitable[None]], None]] = {
    "asyncio": asyncio.run,  # type: ignore[dict-item]
    "uvloop": uvloop.run,  # type: ignore[dict-item]
}


class _Handler:
    """Keeps each request's body (and what holds its bytes); answers its correlation
    id once released."""

    def __init__(self) -> None:
        self.bodies: dict[int, memoryview] = {}
        self.release: dict[int, asyncio.Event] = {}

    def gate(self, cid: int) -> asyncio.Event:
        return self.release.setdefault(cid, asyncio.Event())

    async def __call__(
        self, _ctx: ConnectionContext, header: RequestHeader, body: memoryview
    ) -> Result:
        self.bodies[header.correlation_id] = body
        await self.gate(header.correlation_id).wait()
        payload = struct.pack(">i", header.correlation_id)
        return struct.pack(">i", len(payload)) + payload


async def _answer(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return int(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_plaintext_requests_are_read_in_place(loop: str) -> None:
    big = bytes(range(256)) * 4_000  # ~1 MB, a Produce request of librdkafka's size
    smalls = {cid: bytes([cid]) * cid * 10 for cid in range(2, 40)}

    async def run() -> None:
        handler = _Handler()
        lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits())
        await lst.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
            await wait_until_async(lambda: lst.connections, "the connection", timeout=10)
            (conn,) = lst.connections
            assert isinstance(conn, InPlaceKafkaConnection)
            stream = stand_in_request(1, 0, big) + b"".join(
                stand_in_request(c, 18, p) for c, p in smalls.items()
            )
            writer.write(stream + stand_in_request(99, 0, big))
            for cid in (1, *smalls, 99):
                await wait_until_async(
                    lambda c=cid: c in handler.bodies, f"request {cid}", timeout=10
                )
                handler.gate(cid).set()
                assert await _answer(reader) == cid
            for cid, payload in ((1, big), *smalls.items(), (99, big)):
                assert bytes(handler.bodies[cid][-len(payload) :]) == payload, cid
            for cid in (1, 99):
                # read into the request's own buffer, not joined from bytes of each read
                owner = handler.bodies[cid].obj
                assert isinstance(owner, bytearray), type(owner)
                assert len(owner) == len(stand_in_request(cid, 0, big)) - 4
            writer.close()
        finally:
            await lst.stop()

    LOOPS[loop](run())


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_used_up_budget_holds_plaintext_reads_until_released(loop: str) -> None:
    budget = 256 * 1024

    async def run() -> None:
        pool = MemoryPool(budget)
        handler = _Handler()
        lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(memory_pool=pool))
        await lst.start()
        try:
            r1, w1 = await asyncio.open_connection("127.0.0.1", lst.port)
            r2, w2 = await asyncio.open_connection("127.0.0.1", lst.port)
            w1.write(stand_in_request(1, 18, b"b" * 2 * budget))  # more than the budget: read whole
            await wait_until_async(lambda: 1 in handler.bodies, "the big request", timeout=10)
            assert pool.exhausted
            w2.write(stand_in_request(2, 18, b"s" * 10) + stand_in_request(3, 18, b"t" * 40_000))
            await asyncio.sleep(0.5)
            assert sorted(handler.bodies) == [1]  # held while the budget is used up
            handler.gate(1).set()
            assert await _answer(r1) == 1
            await wait_until_async(lambda: 2 in handler.bodies, "the held request", timeout=10)
            handler.gate(2).set()
            assert await _answer(r2) == 2
            await wait_until_async(lambda: 3 in handler.bodies, "the next one", timeout=10)
            assert bytes(handler.bodies[3][-40_000:]) == b"t" * 40_000
            handler.gate(3).set()
            assert await _answer(r2) == 3
            w1.close()
            w2.close()
            await wait_until_async(lambda: not lst.connections, "connections closed", timeout=10)
            assert pool.used == 0
        finally:
            await lst.stop()

    LOOPS[loop](run())


def test_reads_inside_a_large_request_skip_the_split() -> None:
    """A 1 MB request arrives in many reads (~130 KB each from librdkafka on loopback):
    the reads that only add to its buffer do not run the connection's split and
    accounting (its buffer is in the budget whole since it began); the read that
    completes it does. Still exactly the bytes sent."""
    big = bytes(range(256)) * 4_000

    async def run() -> None:
        handler = _Handler()
        lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits())
        await lst.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
            await wait_until_async(lambda: lst.connections, "the connection", timeout=10)
            (conn,) = lst.connections
            splits = 0
            split = conn._frames_read

            def counted(frames: list[memoryview | bytes]) -> None:
                nonlocal splits
                splits += 1
                split(frames)

            conn._frames_read = counted  # type: ignore[method-assign]
            request = stand_in_request(1, 0, big)
            pieces = range(0, len(request), 32 * 1024)
            for start in pieces:
                writer.write(request[start : start + 32 * 1024])
                await writer.drain()
                await asyncio.sleep(0.002)  # one read per piece, most of them
            await wait_until_async(lambda: 1 in handler.bodies, "the request", timeout=10)
            handler.gate(1).set()
            assert await _answer(reader) == 1
            assert bytes(handler.bodies[1][-len(big) :]) == big
            assert splits <= 3, (splits, len(pieces))
            writer.close()
        finally:
            await lst.stop()

    uvloop.run(run())
