"""A TLS handshake that fails (plaintext bytes on the TLS port) or never finishes is
closed, and the listener forgets the connection (the TLS transport never tells the
application protocol of a failed handshake, so every one stayed in
``KafkaListener.connections`` and the connections gauge while they were registered at
accept). A real client still gets through afterwards. Real loopback sockets, under asyncio and uvloop."""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop

from odradek.certs import ensure_ca, issue
from odradek.gateway.connection import ConnectionContext, ConnectionLimits, KafkaListener, Result
from odradek.gateway.listeners import ListenerSecurity
from odradek.protocol.headers import RequestHeader

LOOPS: dict[str, Callable[[Awaitable[None]], None]] = {
    "asyncio": asyncio.run,  # type: ignore[dict-item]
    "uvloop": uvloop.run,  # type: ignore[dict-item]
}


async def _echo_id(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
    payload = struct.pack(">i", header.correlation_id)
    return struct.pack(">i", len(payload)) + payload


def _request(correlation_id: int) -> bytes:
    # ApiVersions v0 header: api key 18, version 0, correlation id, client id "t".
    body = struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t"
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_failed_handshakes_are_closed_and_forgotten(tmp_path: Path, loop: str) -> None:
    ca, _ = ensure_ca(tmp_path)
    cert = issue(tmp_path, "gateway", hosts=("127.0.0.1",))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert.pem)
    client = ssl.create_default_context(cafile=str(ca))

    async def run() -> None:
        security = ListenerSecurity(protocol="SSL", ssl_context=server, auth_timeout_s=0.3)
        listener = KafkaListener("127.0.0.1", 0, _echo_id, ConnectionLimits(), security=security)
        port = await listener.start()
        try:
            for _ in range(3):  # plaintext Kafka bytes on the TLS port: an alert, then EOF
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(_request(1))
                await asyncio.wait_for(reader.read(), 5)
                writer.close()
            for _ in range(2):  # no handshake at all: closed after the timeout
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                assert await asyncio.wait_for(reader.read(), 5) == b""
                writer.close()
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client, server_hostname="127.0.0.1"
            )
            writer.write(_request(7))
            (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
            assert struct.unpack(">i", await reader.readexactly(size)) == (7,)
            for _ in range(50):
                if len(listener.connections) == 1:
                    break
                await asyncio.sleep(0.02)
            assert len(listener.connections) == 1  # the TLS client's only
            writer.close()
        finally:
            await listener.stop(0.1)

    LOOPS[loop](run())
