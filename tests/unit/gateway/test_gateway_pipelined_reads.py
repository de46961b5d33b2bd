"""A read full of small pipelined requests is split only as far as the connection may
queue requests (``queued.max.requests``), and no more than ``SPLIT_AHEAD`` of them to
wait behind the one being handled, over a real loopback socket with a stand-in
handler: thousands of 15-byte requests in one read were thousands of frames split and
queued on one callback (milliseconds of loop time, far past the bound), and then all
of ``queued.max.requests`` (a never-reading client had 500 split, ~57 answered). The
rest wait unparsed and are all answered, in order, as the queue drains (issue 14).
Pipelined Produce requests, which start at once (their lane), are still all split
and started together."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from helpers.stand_in_frames import read_answers, stand_in_answer, stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    SPLIT_AHEAD,
    ConnectionContext,
    ConnectionLimits,
    Dispatch,
    KafkaListener,
    Result,
    request_handed_off,
)
from odradek.protocol.headers import RequestHeader

QUEUED = 50  # queued.max.requests
PIPELINED = 3000


@contextlib.asynccontextmanager
async def pipelined(
    handler: Dispatch, api_key: int = 3
) -> AsyncIterator[tuple[KafkaListener, asyncio.StreamReader, asyncio.StreamWriter]]:
    """A listener allowing QUEUED requests and a client that has sent it PIPELINED."""
    lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(max_inflight_requests=QUEUED))
    port = await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"".join(stand_in_request(cid, api_key) for cid in range(PIPELINED)))
        yield lst, reader, writer
    finally:
        writer.close()
        await lst.stop(grace=0.1)


async def test_one_read_splits_only_what_waits_next() -> None:
    """Metadata-like requests handled one at a time: one is handled and SPLIT_AHEAD
    wait split (before: all QUEUED of queued.max.requests), the rest unparsed."""
    gate = asyncio.Event()

    async def gated(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        await gate.wait()
        return stand_in_answer(header.correlation_id)

    async with pipelined(gated) as (lst, reader, writer):
        await writer.drain()
        await wait_until_async(lambda: len(lst.connections) == 1, "connection accepted")
        (conn,) = lst.connections
        await wait_until_async(lambda: conn.queued_requests > SPLIT_AHEAD, "requests queued")
        await asyncio.sleep(0.2)  # every read the kernel had for it has been taken
        assert conn.handling == 1
        assert len(conn.waiting) == SPLIT_AHEAD < QUEUED
        assert conn.decoder.unparsed_bytes and conn.reading_paused
        gate.set()
        assert await asyncio.wait_for(read_answers(reader, PIPELINED), 60) == list(range(PIPELINED))
        assert conn.decoder.buffered_bytes == 0 and not conn.reading_paused


async def test_pipelined_produce_requests_are_all_started_at_once() -> None:
    """Produce requests join their lane as they are split (produce_lane.py): a read of
    them is split up to queued.max.requests and all start together, as before, so
    that they can coalesce."""
    gate = asyncio.Event()
    started = 0

    async def handed_off(
        _ctx: ConnectionContext, header: RequestHeader, _body: memoryview
    ) -> Result:
        nonlocal started
        started += 1
        request_handed_off()()  # on its way to the storage nodes
        await gate.wait()
        return stand_in_answer(header.correlation_id)

    async with pipelined(handed_off, api_key=0) as (lst, reader, writer):
        await writer.drain()
        await wait_until_async(lambda: started >= QUEUED, "Produce requests started")
        (conn,) = lst.connections
        assert started == QUEUED and not conn.waiting
        gate.set()
        assert await asyncio.wait_for(read_answers(reader, PIPELINED), 60) == list(range(PIPELINED))


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
