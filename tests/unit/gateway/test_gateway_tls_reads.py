"""Requests on a TLS listener are decrypted in place (services/gateway/connection.py,
``TlsKafkaConnection``; odradek.protocol.framing ``get_buffer``): a large request lands
in a buffer of its own that the handler gets a view of, small pipelined requests are
views of the reads, and the memory budget's holds still apply. Real loopback TLS, under
asyncio's and uvloop's transports (the services run uvloop)."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop
from helpers.stand_in_frames import stand_in_request
from helpers.waiting import wait_until_async

from odradek.certs import ensure_ca, issue
from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
    Result,
    TlsKafkaConnection,
)
from odradek.gateway.listeners import ListenerSecurity
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


def _contexts(tmp: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    ca, _ = ensure_ca(tmp)
    cert = issue(tmp, "gateway", hosts=("127.0.0.1",))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert.pem)
    return server, ssl.create_default_context(cafile=str(ca))


async def _answer(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return int(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_large_and_pipelined_requests_read_in_place(tmp_path: Path, loop: str) -> None:
    server_ctx, client_ctx = _contexts(tmp_path)
    big = bytes(range(256)) * 12_000  # ~3 MB: many TLS records, many reads
    smalls = {cid: bytes([cid]) * cid * 10 for cid in range(2, 40)}

    async def run() -> None:
        handler = _Handler()
        security = ListenerSecurity(name="SSL", protocol="SSL", ssl_context=server_ctx)
        lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(), security=security)
        await lst.start()
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", lst.port, ssl=client_ctx, server_hostname="127.0.0.1"
            )
            # (the server's side of the handshake may end after the client's)
            await wait_until_async(lambda: lst.connections, "the server's handshake", timeout=10)
            (conn,) = lst.connections
            assert isinstance(conn, TlsKafkaConnection)
            stream = stand_in_request(1, 18, big) + b"".join(
                stand_in_request(c, 18, p) for c, p in smalls.items()
            )
            writer.write(stream + stand_in_request(99, 18, big))
            for cid in (1, *smalls, 99):
                await wait_until_async(
                    lambda c=cid: c in handler.bodies, f"request {cid}", timeout=10
                )
                handler.gate(cid).set()
                assert await _answer(reader) == cid
            for cid, payload in ((1, big), *smalls.items(), (99, big)):
                assert bytes(handler.bodies[cid][-len(payload) :]) == payload, cid
            for cid in (1, 99):
                # decrypted into the request's own buffer, not joined from reads
                owner = handler.bodies[cid].obj
                assert isinstance(owner, bytearray), type(owner)
                assert len(owner) == len(stand_in_request(cid, 18, big)) - 4
            writer.close()
        finally:
            await lst.stop()

    LOOPS[loop](run())


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_used_up_budget_holds_tls_reads_until_released(tmp_path: Path, loop: str) -> None:
    server_ctx, client_ctx = _contexts(tmp_path)
    budget = 256 * 1024

    async def run() -> None:
        pool = MemoryPool(budget)
        handler = _Handler()
        security = ListenerSecurity(name="SSL", protocol="SSL", ssl_context=server_ctx)
        limits = ConnectionLimits(memory_pool=pool)
        lst = KafkaListener("127.0.0.1", 0, handler, limits, security=security)
        await lst.start()
        try:
            r1, w1 = await asyncio.open_connection(
                "127.0.0.1", lst.port, ssl=client_ctx, server_hostname="127.0.0.1"
            )
            r2, w2 = await asyncio.open_connection(
                "127.0.0.1", lst.port, ssl=client_ctx, server_hostname="127.0.0.1"
            )
            w1.write(stand_in_request(1, 18, b"b" * 2 * budget))  # more than the budget: read whole
            await wait_until_async(lambda: 1 in handler.bodies, "the big request", timeout=10)
            assert pool.exhausted
            w2.write(stand_in_request(2, 18, b"s" * 10) + stand_in_request(3, 18, b"t" * 40_000))
            await asyncio.sleep(0.5)
            assert sorted(handler.bodies) == [1]  # held while the budget is used up
            handler.gate(1).set()
            assert await _answer(r1) == 1
            # (one request handled at a time per connection: Kafka's, and ours by default)
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


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_refused_frames_on_tls_are_logged_as_refusals(
    tmp_path: Path, loop: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame over socket.request.max.bytes closes a TLS connection as it does a plain
    one, through the rate-limited refusal log: three clients sending one each make one
    line (one per connection before, a flood when a client reconnects in a loop)."""
    from odradek.gateway import connection

    monkeypatch.setattr(connection._refusals, "interval_s", 3600.0)
    monkeypatch.setattr(connection._refusals, "_last", {})
    server_ctx, client_ctx = _contexts(tmp_path)

    async def run() -> None:
        security = ListenerSecurity(name="SSL", protocol="SSL", ssl_context=server_ctx)
        limits = ConnectionLimits(max_request_bytes=1000)
        lst = KafkaListener("127.0.0.1", 0, _Handler(), limits, security=security)
        await lst.start()
        try:
            for _ in range(3):
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", lst.port, ssl=client_ctx, server_hostname="127.0.0.1"
                )
                writer.write(struct.pack(">i", 10_000_000) + b"x" * 100)
                assert await asyncio.wait_for(reader.read(), 10) == b""  # closed
                writer.close()
            await wait_until_async(lambda: not lst.connections, "all closed")
        finally:
            await lst.stop()

    with caplog.at_level("INFO", logger=connection.log.name):
        LOOPS[loop](run())
    closing = [r for r in caplog.records if r.getMessage().startswith("closing")]
    assert len(closing) == 1, [r.getMessage() for r in closing]
