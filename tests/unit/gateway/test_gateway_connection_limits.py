"""Per-connection memory and time bounds of the gateway's Kafka listener, over real
loopback sockets (the listener with a stand-in request handler; no cluster needed).

A client that never reads, one that reads nothing for too long, and one that trickles
a request byte by byte are each aborted; a well-behaved client on the same listener
is served throughout.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest
from helpers.stand_in_frames import stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
    Result,
)
from odradek.protocol.headers import RequestHeader

RESPONSE_BYTES = 64 * 1024


async def _big_response(
    _ctx: ConnectionContext, header: RequestHeader, _body: memoryview
) -> Result:
    payload = struct.pack(">i", header.correlation_id) + b"r" * RESPONSE_BYTES
    return struct.pack(">i", len(payload)) + payload


async def _listener(**limits: float) -> KafkaListener:
    lst = KafkaListener("127.0.0.1", 0, _big_response, ConnectionLimits(**limits))  # type: ignore[arg-type]
    await lst.start()
    return lst


async def _stubborn_client(port: int) -> socket.socket:
    """A client with a tiny receive buffer that never reads."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
    return s


async def _send_until_refused(s: socket.socket, requests: int) -> bool:
    """Send requests until done or refused; True when the server reset the connection."""
    loop = asyncio.get_running_loop()
    try:
        for cid in range(requests):
            await asyncio.wait_for(loop.sock_sendall(s, stand_in_request(cid, 18)), 5)
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        pass
    return False


async def _reset(s: socket.socket, seen: bool = False) -> bool:
    """The server aborted: the client sees a reset (on a send, ``seen``, or now), not
    an orderly end after the data."""
    if seen:
        return True
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await asyncio.wait_for(loop.sock_recv(s, 1 << 20), 10)
            if not data:
                return False
    except ConnectionResetError:
        return True


async def _polite_client_works(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(stand_in_request(7, 18))
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    assert struct.unpack(">i", (await reader.readexactly(size))[:4])[0] == 7
    writer.close()


async def test_client_that_never_reads_is_aborted_at_the_queued_bytes_cap() -> None:
    # A connection handles one request at a time and hands the next response to the
    # socket only when its write buffer has room (connection.max.handled.requests), so
    # a never-reading client holds about one unsent response: a cap below that is hit.
    lst = await _listener(max_queued_response_bytes=RESPONSE_BYTES // 2)
    s = await _stubborn_client(lst.port)
    refused = await _send_until_refused(s, 2000)  # 2000 x 64 KiB of responses asked for
    await wait_until_async(lambda: not lst.connections, "stubborn connection aborted", timeout=10)
    assert await _reset(s, refused)
    s.close()
    await _polite_client_works(lst.port)
    await lst.stop()


async def test_client_that_never_reads_holds_about_one_response() -> None:
    lst = await _listener(max_queued_response_bytes=1 << 20)
    s = await _stubborn_client(lst.port)
    assert not await _send_until_refused(s, 2000)  # until the gateway stops reading
    (conn,) = lst.connections
    assert conn.transport is not None
    held = conn.queued_response_bytes + conn.transport.get_write_buffer_size()
    # Before connection.max.handled.requests, every request read was answered into
    # the transport's buffer until the 1 MiB cap aborted the connection.
    assert held <= 3 * RESPONSE_BYTES, held
    s.close()
    await lst.stop()


async def test_client_reading_nothing_is_aborted_after_the_write_timeout() -> None:
    lst = await _listener(write_timeout_s=1.0)
    s = await _stubborn_client(lst.port)
    # Far below the byte cap, above what the kernel buffers take: bytes wait in the
    # transport and the peer reads none of them.
    refused = await _send_until_refused(s, 200)
    start = time.monotonic()
    await wait_until_async(lambda: not lst.connections, "slow reader aborted", timeout=15)
    assert time.monotonic() - start < 10
    assert await _reset(s, refused)
    s.close()
    await lst.stop()


@pytest.mark.parametrize("prefix_only", [False, True])
async def test_trickling_request_is_aborted_after_the_read_timeout(prefix_only: bool) -> None:
    lst = await _listener(request_read_timeout_s=0.5)
    _reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    frame = stand_in_request(1, 18)
    start = time.monotonic()
    chunks = [frame[:2], frame[2:3]] if prefix_only else [bytes([b]) for b in frame[:-1]]
    try:
        for chunk in chunks * 20:  # a byte every 100 ms: never idle, never complete
            writer.write(chunk if not prefix_only else chunk[:1])
            await writer.drain()
            await asyncio.sleep(0.1)
            if not lst.connections:
                break
    except ConnectionError:
        pass
    await wait_until_async(lambda: not lst.connections, "trickler aborted", timeout=10)
    assert time.monotonic() - start < 5
    writer.close()
    await _polite_client_works(lst.port)
    await lst.stop()
