"""Answers the storage node's data link finishes in one loop turn leave in one write
(odradek.storage.data_link): a high watermark advance completes an acks=-1 Produce and
a long-poll Fetch of one gateway together, and two writes were two wake-ups of that
gateway. Real sockets and the real client; the handlers are stand-ins whose appends
wait for one gate, so both calls finish in the same turn; the server's transport is
wrapped only to count its writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, cast

import pytest
from helpers.data_links import served_data_link

from odradek.datalink.client import DataLinkPool
from odradek.datalink.frame import PRODUCE, Buffer
from odradek.rpc.v1 import storage_pb2
from odradek.storage.data_link import DataLinkServer

NODE = 100


class _Produce:
    def __init__(self) -> None:
        self.gate = asyncio.Event()

    def append_now(self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]) -> None:
        return None  # these appends await: the node serves them as tasks

    async def append(self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]) -> str:
        await self.gate.wait()
        return bytes(records[0]).decode()

    async def complete(
        self, staged: str, loop: asyncio.AbstractEventLoop | None = None
    ) -> storage_pb2.ProduceResponse:
        return storage_pb2.ProduceResponse(
            partitions=[storage_pb2.ProducePartitionResult(topic=staged)]
        )


class _Handlers:
    def __init__(self) -> None:
        self.produce = _Produce()


class _CountingTransport:
    """The connection's real transport, counting its ``writelines`` calls."""

    def __init__(self, real: asyncio.Transport) -> None:
        self.real = real
        self.writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def writelines(self, buffers: Sequence[Buffer]) -> None:
        self.writes += 1
        self.real.writelines(buffers)


@pytest.fixture
async def link() -> AsyncIterator[tuple[DataLinkServer, DataLinkPool, _Produce]]:
    handlers = _Handlers()
    async with served_data_link(handlers, NODE) as (server, pool):
        yield server, pool, handlers.produce


def _call(pool: DataLinkPool, name: str) -> asyncio.Future[Any]:
    meta = storage_pb2.ProduceRequest(acks=-1).SerializeToString()
    return asyncio.ensure_future(pool.call(NODE, PRODUCE, meta, [name.encode()], timeout=10))


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


async def test_answers_of_one_turn_leave_in_one_write(
    link: tuple[DataLinkServer, DataLinkPool, _Produce],
) -> None:
    server, pool, produce = link
    first = _call(pool, "p")
    await _settle()
    (conn,) = server.connections
    assert conn.transport is not None
    counting = _CountingTransport(conn.transport)
    conn.transport = cast(asyncio.Transport, counting)
    second = _call(pool, "q")
    await _settle()
    produce.gate.set()  # both appends finish in the same turn
    answers = await asyncio.wait_for(asyncio.gather(first, second), 10)
    topics = [storage_pb2.ProduceResponse.FromString(a.meta).partitions[0].topic for a in answers]
    assert topics == ["p", "q"]
    assert counting.writes == 1

    # An answer alone still goes out (in the next turn, not held for company).
    third = _call(pool, "r")
    answer = await asyncio.wait_for(third, 10)
    assert storage_pb2.ProduceResponse.FromString(answer.meta).partitions[0].topic == "r"
    assert counting.writes == 2
