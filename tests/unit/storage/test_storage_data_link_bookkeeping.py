"""The storage node's data link server keeps no per-call state once a call is answered
(odradek.storage.data_link): each call's task leaves the connection's task set itself
and a Produce's ordering lane is passed on without a done callback (issue 18: one loop
callback fewer per frame), so after the answers the connection holds no task and no
lane tail, for answered, failed and cancelled calls alike. Real sockets and the real
client; the handlers are stand-ins."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from helpers.data_links import served_data_link

from odradek.datalink.client import DataLinkError
from odradek.datalink.frame import FETCH, PRODUCE, Buffer
from odradek.rpc.v1 import storage_pb2
from odradek.storage.fetch import Answer

NODE = 100


class _Produce:
    def __init__(self) -> None:
        self.hanging = asyncio.Event()

    def append_now(self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]) -> None:
        return None  # these appends await: the node serves them as tasks

    async def append(self, request: storage_pb2.ProduceRequest, records: Sequence[Buffer]) -> str:
        name = bytes(records[0]).decode()
        if name == "fail":
            raise RuntimeError("refused")
        if name == "hang":
            self.hanging.set()
            await asyncio.sleep(3600)  # until its connection goes
        return name

    async def complete(
        self, staged: str, loop: asyncio.AbstractEventLoop | None = None
    ) -> storage_pb2.ProduceResponse:
        return storage_pb2.ProduceResponse(
            partitions=[storage_pb2.ProducePartitionResult(topic=staged)]
        )


class _Fetch:
    def fetch_later(
        self,
        request: storage_pb2.FetchRequest,
        loop: asyncio.AbstractEventLoop,
        answer: Callable[[Answer | Exception], None],
        *,
        lazy: bool = False,
    ) -> None:
        # A fetch is served without a task (data_link._fetch_now): answered at once here.
        answer((storage_pb2.FetchResponse(partitions=[storage_pb2.FetchPartitionResult()]), [b"r"]))


class _Handlers:
    def __init__(self) -> None:
        self.produce = _Produce()
        self.fetch = _Fetch()


async def test_answered_failed_and_cancelled_calls_leave_nothing_behind() -> None:
    handlers = _Handlers()
    async with served_data_link(handlers, NODE) as (server, pool):
        meta = storage_pb2.ProduceRequest(acks=1, ordering_lane=9).SerializeToString()
        names = ["a", "fail", "b", "c"]
        answers = await asyncio.gather(
            *(pool.call(NODE, PRODUCE, meta, [n.encode()], timeout=10) for n in names),
            pool.call(
                NODE, FETCH, storage_pb2.FetchRequest(replica_id=-1).SerializeToString(), [], 10
            ),
            return_exceptions=True,
        )
        assert isinstance(answers[1], DataLinkError)  # the failed append
        produced = [
            storage_pb2.ProduceResponse.FromString(bytes(a.meta)).partitions[0].topic
            for a in answers[:4]
            if not isinstance(a, BaseException)
        ]
        assert produced == ["a", "b", "c"]  # in lane order, after the failure too
        [conn] = server.connections
        await asyncio.sleep(0)
        assert not conn.tasks and not conn.lane_tails
        # A call that awaits is a task until its connection is lost.
        hang = asyncio.ensure_future(pool.call(NODE, PRODUCE, meta, [b"hang"], 10))
        await asyncio.wait_for(handlers.produce.hanging.wait(), 5)
        assert len(conn.tasks) == 1
        [task] = conn.tasks
        task.cancel()
        await asyncio.sleep(0.05)
        assert not conn.tasks
        hang.cancel()
