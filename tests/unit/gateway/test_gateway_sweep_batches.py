"""The listener's timeout sweep (KafkaListener.sweep) looks at a bounded number of
connections per loop turn: with hundreds of connections open, other callbacks run
between its batches, and it still reaches every connection (issue 14)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from helpers.waiting import wait_until_async

from odradek.gateway import connection
from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaConnection,
    KafkaListener,
    Result,
)
from odradek.protocol.headers import RequestHeader

CONNECTIONS = 200


async def _nothing(_ctx: ConnectionContext, _header: RequestHeader, _body: memoryview) -> Result:
    return None


async def test_sweep_yields_between_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    lst = KafkaListener("127.0.0.1", 0, _nothing, ConnectionLimits())
    port = await lst.start()
    loop = asyncio.get_running_loop()
    clients: list[socket.socket] = []
    try:
        for _ in range(CONNECTIONS):
            s = socket.socket()
            s.setblocking(False)
            await loop.sock_connect(s, ("127.0.0.1", port))
            clients.append(s)
        await wait_until_async(
            lambda: len(lst.connections) == CONNECTIONS, "connections accepted", timeout=10
        )

        # Connections looked at since the loop last ran another callback, at most.
        looked_at = 0
        runs: list[int] = []
        overdue = KafkaConnection.overdue

        def counted(conn: KafkaConnection, now: float) -> str | None:
            nonlocal looked_at
            looked_at += 1
            return overdue(conn, now)

        monkeypatch.setattr(KafkaConnection, "overdue", counted)
        sweeping = True

        async def other_client() -> None:
            nonlocal looked_at
            while sweeping:
                runs.append(looked_at)
                looked_at = 0
                await asyncio.sleep(0)

        other = loop.create_task(other_client())
        await asyncio.sleep(0)
        await lst.sweep()
        sweeping = False
        await other
        runs.append(looked_at)
        assert sum(runs) == CONNECTIONS  # every connection looked at once
        assert max(runs) < CONNECTIONS  # other callbacks ran in between...
        assert max(runs) <= connection.SWEEP_BATCH  # ...every batch
    finally:
        for s in clients:
            s.close()
        await lst.stop(grace=0.1)
