"""A client that reconnects in a loop to send what the gateway refuses, over real
loopback sockets (the gateway's listener with a stand-in request handler).

Each oversize frame still closes its connection from the 4-byte size alone, as Kafka
does (``socket.request.max.bytes``), and a connection over ``max.connections.per.ip``
is still closed when accepted; the log gets one line per reason a second, with the
count of those left out, instead of one line per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
import struct
import time
import weakref

import pytest
from helpers.waiting import wait_until_async

from odradek.gateway import connection
from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    ConnectionQuota,
    KafkaConnection,
    KafkaListener,
    Result,
)
from odradek.protocol.headers import RequestHeader

ATTEMPTS = 150


async def _never_called(_ctx: ConnectionContext, _h: RequestHeader, _b: memoryview) -> Result:
    raise AssertionError("a refused connection's request was handled")


def _closed_by_server(s: socket.socket) -> bool:
    """The server closed the connection without answering (EOF or reset)."""
    s.settimeout(10)
    try:
        return s.recv(16) == b""
    except ConnectionResetError:
        return True


def _oversize_attempts(port: int) -> float:
    start = time.monotonic()
    for _ in range(ATTEMPTS):
        with socket.create_connection(("127.0.0.1", port)) as s:
            try:
                s.sendall(struct.pack(">i", 1 << 30) + b"\0" * 4096)
            except ConnectionResetError:
                continue
            assert _closed_by_server(s)
    return time.monotonic() - start


def _lines(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


@pytest.fixture
def quick_interval(monkeypatch: pytest.MonkeyPatch) -> float:
    interval = 0.25
    monkeypatch.setattr(connection._refusals, "interval_s", interval)
    monkeypatch.setattr(connection._refusals, "_last", {})
    return interval


async def test_oversize_frames_close_and_log_once_per_interval(
    caplog: pytest.LogCaptureFixture, quick_interval: float
) -> None:
    caplog.set_level(logging.INFO, logger=connection.__name__)
    lst = KafkaListener("127.0.0.1", 0, _never_called, ConnectionLimits(max_request_bytes=1024))
    await lst.start()
    elapsed = await asyncio.to_thread(_oversize_attempts, lst.port)
    await lst.stop(grace=0.1)
    lines = _lines(caplog, "larger than 1024")
    # One line per attempt before (150); now one per interval.
    assert 1 <= len(lines) <= elapsed / quick_interval + 2, (len(lines), elapsed)
    if len(lines) > 1:
        assert any("more like it" in line for line in lines[1:]), lines


async def test_connections_over_the_per_ip_limit_close_and_log_once_per_interval(
    caplog: pytest.LogCaptureFixture, quick_interval: float
) -> None:
    caplog.set_level(logging.INFO, logger=connection.__name__)
    quota = ConnectionQuota(max_per_ip=1)
    lst = KafkaListener("127.0.0.1", 0, _never_called, ConnectionLimits(), quota=quota)
    await lst.start()

    def attempts(port: int) -> float:
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", port)):  # holds the one place
            for _ in range(ATTEMPTS):
                with socket.create_connection(("127.0.0.1", port)) as s:
                    assert _closed_by_server(s)
        return time.monotonic() - start

    elapsed = await asyncio.to_thread(attempts, lst.port)
    await lst.stop(grace=0.1)
    lines = _lines(caplog, "too many connections")
    assert 1 <= len(lines) <= elapsed / quick_interval + 2, (len(lines), elapsed)


@pytest.mark.parametrize("oversize", [True, False], ids=["oversize", "answered"])
async def test_closed_connections_are_freed_without_the_cyclic_collector(oversize: bool) -> None:
    # A client reconnecting in a loop leaves a closed connection per attempt: freed by
    # reference counting, not left for the cyclic collector (whose passes stall the
    # loop for every client), and a refused one never starts a writer task.
    async def answer(_ctx: ConnectionContext, header: RequestHeader, _b: memoryview) -> Result:
        return struct.pack(">ii", 4, header.correlation_id)

    lst = KafkaListener("127.0.0.1", 0, answer, ConnectionLimits(max_request_bytes=1024))
    made: list[weakref.ref[KafkaConnection]] = []
    make = lst._make

    def tracked() -> KafkaConnection:
        conn = make()
        made.append(weakref.ref(conn))
        return conn

    lst._make = tracked  # type: ignore[method-assign]
    await lst.start()
    gc.collect()
    gc.disable()
    try:
        for cid in range(50):
            reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
            if oversize:
                writer.write(struct.pack(">i", 1 << 20) + b"\0" * 100)
            else:
                body = struct.pack(">hhih", 18, 0, cid, 1) + b"x"
                writer.write(struct.pack(">i", len(body)) + body)
                assert await reader.readexactly(8) == struct.pack(">ii", 4, cid)
                writer.write_eof()
            with contextlib.suppress(ConnectionError):
                assert await asyncio.wait_for(reader.read(), 10) == b""
            writer.close()
        await wait_until_async(lambda: not lst.connections, "every connection closed")
        await asyncio.sleep(0)  # connection_lost's last references go with this turn
        alive = [ref() for ref in made if ref() is not None]
        assert len(made) == 50
        assert not alive, f"{len(alive)} closed connections wait for the cyclic collector"
    finally:
        gc.enable()
        await lst.stop(grace=0.1)


async def test_socket_options_wait_for_the_first_request() -> None:
    # A connection refused on its first bytes never needs its send buffer sized: the
    # gateway sets socket.send.buffer.bytes when the first request starts, before any
    # response is written (on accept it cost a socket object and three system calls for
    # every refused connection of a reconnect storm).
    async def answer(_ctx: ConnectionContext, header: RequestHeader, _b: memoryview) -> Result:
        return struct.pack(">ii", 4, header.correlation_id)

    limits = ConnectionLimits(send_buffer_bytes=48 * 1024)
    lst = KafkaListener("127.0.0.1", 0, answer, limits)
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    try:
        await wait_until_async(lambda: len(lst.connections) == 1, "the connection accepted")
        (conn,) = lst.connections
        assert conn.transport is not None
        sock = conn.transport.get_extra_info("socket")

        def send_buffer() -> int:
            return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))

        # (Linux reports twice the size asked for, its bookkeeping included.)
        assert send_buffer() != 2 * limits.send_buffer_bytes
        body = struct.pack(">hhih", 18, 0, 7, 1) + b"x"
        writer.write(struct.pack(">i", len(body)) + body)
        assert await asyncio.wait_for(reader.readexactly(8), 10) == struct.pack(">ii", 4, 7)
        assert send_buffer() == 2 * limits.send_buffer_bytes
    finally:
        writer.close()
        await lst.stop(grace=0.1)
