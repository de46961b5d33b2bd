"""``connection.max.unread.response.bytes``: what a client that never reads gets
answered, over real loopback sockets (the gateway's listener with a stand-in request
handler; no cluster needed).

Without the bound a never-reading connection had requests handled until the kernel's
send buffer (``socket.send.buffer.bytes``, doubled by Linux) and the transport's
buffer were full of its answers: hundreds of small answers (Metadata, Produce) of work
per connection, and pipelined Produce requests kept starting even after that. With
it, the connection starts nothing more once that many answer bytes are waiting for
the client, and carries on as soon as the client reads them.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from helpers.stand_in_frames import stand_in_answer, stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaConnection,
    KafkaListener,
    Result,
    request_handed_off,
)
from odradek.protocol.headers import RequestHeader

ANSWER_BYTES = 1024
UNREAD_LIMIT = 8 * 1024
QUEUED_MAX_REQUESTS = 20  # queued.max.requests: what one read can start at once
PIPELINED = 3000


class _Handler:
    """Answers every request with ANSWER_BYTES; a Produce (API key 0) first hands its
    request off as the gateway's Produce does once its records are on their way."""

    def __init__(self) -> None:
        self.started = 0

    async def __call__(
        self, _ctx: ConnectionContext, header: RequestHeader, _body: memoryview
    ) -> Result:
        self.started += 1
        if header.api_key == 0:
            request_handed_off()()
            await asyncio.sleep(0)  # the acknowledgement comes later
        return stand_in_answer(header.correlation_id, ANSWER_BYTES)


async def _listener(handler: _Handler, unread_limit: int = UNREAD_LIMIT) -> KafkaListener:
    limits = ConnectionLimits(
        max_inflight_requests=QUEUED_MAX_REQUESTS, max_unread_response_bytes=unread_limit
    )
    lst = KafkaListener("127.0.0.1", 0, handler, limits)
    await lst.start()
    return lst


async def _settled(handler: _Handler) -> int:
    """The number of requests started once it stops growing (the connection has
    stopped reading and starting)."""
    seen: list[int] = []

    def still() -> bool:
        seen.append(handler.started)
        return len(seen) >= 5 and len(set(seen[-5:])) == 1

    await wait_until_async(still, "the never-reading connection to settle", interval=0.1)
    return handler.started


@pytest.mark.parametrize("api_key", [0, 3], ids=["produce", "metadata"])
async def test_never_reading_client_gets_about_the_unread_limit_answered(api_key: int) -> None:
    handler = _Handler()
    lst = await _listener(handler)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(s, ("127.0.0.1", lst.port))
    requests = b"".join(stand_in_request(cid, api_key) for cid in range(PIPELINED))
    # Sent until the gateway stops reading (the rest stays in our send buffer).
    sender = asyncio.ensure_future(loop.sock_sendall(s, requests))
    started = await _settled(handler)
    (conn,) = lst.connections
    assert isinstance(conn, KafkaConnection)
    unsent = conn.unsent_bytes()
    # The limit, what the client's small receive window took, and one read's worth of
    # pipelined Produce requests (started together, before any answer was written).
    # Without the bound: about 260 answers, the kernel's send buffer and the
    # transport's full (and for Produce every read request kept starting).
    most = (UNREAD_LIMIT + 8192) // ANSWER_BYTES + QUEUED_MAX_REQUESTS + 4
    assert started <= most, (started, unsent)
    assert unsent <= UNREAD_LIMIT + (QUEUED_MAX_REQUESTS + 2) * ANSWER_BYTES, unsent
    assert conn.unread_backlog
    sender.cancel()
    s.close()
    await lst.stop(grace=0.1)


async def test_client_that_reads_late_gets_every_answer_in_order() -> None:
    # Held back at the limit, the connection goes on by itself once the client reads
    # (nothing but the recheck timer notices a kernel send queue draining).
    handler = _Handler()
    lst = await _listener(handler, unread_limit=4096)
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    count = 600
    writer.write(b"".join(stand_in_request(cid, cid % 2 * 3) for cid in range(count)))
    await _settled(handler)
    assert handler.started < count  # held back while we read nothing
    cids = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
        cids.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
        if len(cids) % 100 == 0:
            await asyncio.sleep(0.3)  # and stop reading now and then
    assert cids == list(range(count))
    assert handler.started == count
    writer.close()
    await lst.stop(grace=0.1)


async def test_held_connection_waits_for_the_client_to_take_half() -> None:
    # Held back at the limit, the connection starts requests again only once the
    # client has taken half of its unread answers. Resumed as soon as they were under
    # the limit, a never-reading client whose TCP stack still took a segment now and
    # then had one more answer computed each time, and the recheck's back-off started
    # over at 1 ms (bench hostile's never-read clients).
    handler = _Handler()
    limit = 64 * 1024
    lst = await _listener(handler, unread_limit=limit)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(s, ("127.0.0.1", lst.port))
    requests = b"".join(stand_in_request(cid) for cid in range(PIPELINED))
    sender = asyncio.ensure_future(loop.sock_sendall(s, requests))
    started = await _settled(handler)
    (conn,) = lst.connections
    assert isinstance(conn, KafkaConnection)
    assert conn.unread_backlog
    # Take 16 KiB: with what refills our small receive buffer, the gateway's unread
    # bytes drop below the limit, not below half of it.
    taken = 0
    while taken < 16 * 1024:
        try:
            chunk = s.recv(16 * 1024 - taken)
        except BlockingIOError:
            await asyncio.sleep(0.01)
            continue
        assert chunk
        taken += len(chunk)
    await asyncio.sleep(1.5)  # the recheck's back-off is 0.5 s at most
    assert handler.started == started, (handler.started, started, conn.unsent_bytes())
    assert conn.unread_backlog
    assert limit // 2 < conn.unsent_bytes() <= limit, conn.unsent_bytes()
    sender.cancel()
    s.close()
    await lst.stop(grace=0.1)
