"""Ordering lanes on the storage node's data link (odradek.storage.data_link): Produce
requests of one ``ordering_lane`` append in arrival order, each after the previous
one's append, while other lanes, lane 0 and Fetch are not held up; a failed append
does not block its lane. Real sockets and the real client (odradek.datalink.client);
the handlers are stand-ins that record when each append starts and ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from helpers.data_links import served_data_link

from odradek.datalink.client import DataLinkError, DataLinkPool
from odradek.datalink.frame import PRODUCE, Buffer
from odradek.rpc.v1 import storage_pb2

NODE = 100


class _Produce:
    """Appends that take as long as the test says; ``log`` records their order."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    def append_now(self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]) -> None:
        return None  # these appends await: the node serves them as tasks

    async def append(self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]) -> str:
        name = bytes(records[0]).decode()
        self.log.append(f"start {name}")
        gate = self.gates.get(name)
        if gate is not None:
            await gate.wait()
        if name.startswith("fail"):
            self.log.append(f"failed {name}")
            raise RuntimeError("append failed")
        self.log.append(f"end {name}")
        return name

    async def complete(
        self, staged: str, loop: asyncio.AbstractEventLoop | None = None
    ) -> storage_pb2.ProduceResponse:
        return storage_pb2.ProduceResponse(
            partitions=[storage_pb2.ProducePartitionResult(topic=staged)]
        )


class _Handlers:
    def __init__(self) -> None:
        self.produce = _Produce()


@pytest.fixture
async def link() -> AsyncIterator[tuple[DataLinkPool, _Produce]]:
    handlers = _Handlers()
    async with served_data_link(handlers, NODE) as (_server, pool):
        yield pool, handlers.produce


def _call(pool: DataLinkPool, name: str, lane: int) -> asyncio.Future[Any]:
    meta = storage_pb2.ProduceRequest(acks=1, ordering_lane=lane).SerializeToString()
    return asyncio.ensure_future(pool.call(NODE, PRODUCE, meta, [name.encode()], timeout=10))


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0.01)


async def test_a_lane_appends_one_after_another(link: tuple[DataLinkPool, _Produce]) -> None:
    pool, produce = link
    produce.gates["a"] = asyncio.Event()
    first = _call(pool, "a", lane=7)
    await _settle()
    second = _call(pool, "b", lane=7)
    other = _call(pool, "c", lane=8)
    unordered = _call(pool, "d", lane=0)
    await asyncio.wait_for(asyncio.gather(other, unordered), 10)  # not held up by lane 7
    await _settle()
    assert "start b" not in produce.log  # waits for a's append
    produce.gates["a"].set()
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert produce.log.index("end a") < produce.log.index("start b")


async def test_a_failed_append_does_not_block_its_lane(
    link: tuple[DataLinkPool, _Produce],
) -> None:
    pool, produce = link
    produce.gates["fail-x"] = asyncio.Event()
    first = _call(pool, "fail-x", lane=9)
    await _settle()
    second = _call(pool, "y", lane=9)
    await _settle()
    assert "start y" not in produce.log
    produce.gates["fail-x"].set()
    with pytest.raises(DataLinkError, match="append failed"):
        await asyncio.wait_for(first, 10)
    answer = await asyncio.wait_for(second, 10)
    assert storage_pb2.ProduceResponse.FromString(answer.meta).partitions[0].topic == "y"
