"""A read full of small pipelined requests is split only as far as the connection may
queue requests (``queued.max.requests``), over a real loopback socket with a stand-in
handler: thousands of 15-byte requests in one read were thousands of frames split and
queued on one callback (milliseconds of loop time, far past the bound). The rest wait
unparsed and are all answered, in order, as the queue drains (issue 14)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from helpers.stand_in_frames import read_answers, stand_in_answer, stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    Dispatch,
    KafkaListener,
    Result,
)
from odradek.protocol.headers import RequestHeader

QUEUED = 50  # queued.max.requests
PIPELINED = 3000


@contextlib.asynccontextmanager
async def pipelined(
    handler: Dispatch,
) -> AsyncIterator[tuple[KafkaListener, asyncio.StreamReader, asyncio.StreamWriter]]:
    """A listener allowing QUEUED requests and a client that has sent it PIPELINED."""
    lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(max_inflight_requests=QUEUED))
    port = await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(stand_in_request(cid) for cid in range(PIPELINED)))
        yield lst, reader, writer
    finally:
        writer.close()
        await lst.stop(grace=0.1)


async def test_one_read_queues_at_most_queued_max_requests() -> None:
    gate = asyncio.Event()

    async def gated(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        await gate.wait()
        return stand_in_answer(header.correlation_id)

    async with pipelined(gated) as (lst, reader, writer):
        await writer.drain()
        await wait_until_async(lambda: len(lst.connections) == 1, "connection accepted")
        (conn,) = lst.connections
        await wait_until_async(lambda: conn.queued_requests >= QUEUED, "requests queued")
        await asyncio.sleep(0.2)  # every read the kernel had for it has been taken
        assert conn.queued_requests <= QUEUED
        assert conn.decoder.unparsed_bytes or conn.reading_paused
        gate.set()
        assert await asyncio.wait_for(read_answers(reader, PIPELINED), 60) == list(range(PIPELINED))
        assert conn.decoder.buffered_bytes == 0 and not conn.reading_paused


async def test_requests_left_unparsed_at_eof_are_answered() -> None:
    """A client that pipelines and half-closes gets every answer (Kafka answers what it
    read before closing), also those still unparsed when its EOF came."""

    async def answer(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        await asyncio.sleep(0)
        return stand_in_answer(header.correlation_id)

    async with pipelined(answer) as (_lst, reader, writer):
        writer.write_eof()
        assert await asyncio.wait_for(read_answers(reader, PIPELINED), 60) == list(range(PIPELINED))
        assert await asyncio.wait_for(reader.read(), 10) == b""  # then closed
