"""A response larger than the connection's ``socket.send.buffer.bytes`` (a consumer's
Fetch of a few MB) grows the socket's SO_SNDBUF to hold it whole, so it goes out in one
write instead of a dozen partial writes each waiting for the socket to turn writable
(issue 18, docs/data-link.md "Consume CPU per GB: the socket writes"); small responses
leave the buffer as configured. Real loopback sockets, a stand-in request handler."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest
from helpers.stand_in_frames import stand_in_answer, stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    GROWN_SEND_BUFFER_MAX,
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
    Result,
)
from odradek.protocol.headers import RequestHeader

CONFIGURED = 102_400
LARGE = 1_500_000  # about what librdkafka's Fetch of 1 MB per partition gets back


def _wmem_max() -> int:
    try:
        return int(Path("/proc/sys/net/core/wmem_max").read_text())
    except (OSError, ValueError):
        return 0


def _answer(_ctx: ConnectionContext, header: RequestHeader) -> Result:
    cid = header.correlation_id
    if cid == 1:  # Fetch-like: frame head and a large payload as separate buffers
        payload = bytearray(b"r" * (LARGE - 4))
        return [struct.pack(">ii", LARGE, cid), memoryview(payload)]
    return stand_in_answer(cid)


async def _handle(ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
    return _answer(ctx, header)


def _sndbuf(sock: socket.socket) -> int:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


@pytest.mark.skipif(
    _wmem_max() <= CONFIGURED, reason="net.core.wmem_max leaves no room to grow SO_SNDBUF"
)
async def test_a_response_larger_than_the_send_buffer_grows_it() -> None:
    limits = ConnectionLimits(send_buffer_bytes=CONFIGURED)
    lst = KafkaListener("127.0.0.1", 0, _handle, limits)
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    try:
        await wait_until_async(lambda: len(lst.connections) == 1, "connection accepted")
        conn = next(iter(lst.connections))
        writer.write(stand_in_request(0))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        assert struct.unpack(">i", await reader.readexactly(size))[0] == 0
        sock = conn.transport.get_extra_info("socket")
        configured = _sndbuf(sock)  # the kernel doubles what is set (socket(7))
        assert configured < 2 * LARGE

        writer.write(stand_in_request(1))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        body = await asyncio.wait_for(reader.readexactly(size), 30)
        assert size == LARGE and struct.unpack_from(">i", body)[0] == 1
        assert body[4:] == b"r" * (LARGE - 4)
        grown = min(LARGE, GROWN_SEND_BUFFER_MAX, _wmem_max())
        assert _sndbuf(sock) >= 2 * grown > configured

        # Small responses after it neither shrink nor grow it further.
        writer.write(stand_in_request(2))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        assert struct.unpack(">i", await reader.readexactly(size))[0] == 2
        assert _sndbuf(sock) >= 2 * grown
    finally:
        writer.close()
        await lst.stop(grace=0.1)


async def test_an_autotuned_send_buffer_is_left_alone() -> None:
    """``socket.send.buffer.bytes=-1``: the kernel sizes the buffer; setting SO_SNDBUF
    would turn its autotuning off."""
    lst = KafkaListener("127.0.0.1", 0, _handle, ConnectionLimits(send_buffer_bytes=-1))
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    try:
        await wait_until_async(lambda: len(lst.connections) == 1, "connection accepted")
        conn = next(iter(lst.connections))
        writer.write(stand_in_request(1))
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        await asyncio.wait_for(reader.readexactly(size), 30)
        assert conn._sock is None and conn._send_buffer == 0
    finally:
        writer.close()
        await lst.stop(grace=0.1)
