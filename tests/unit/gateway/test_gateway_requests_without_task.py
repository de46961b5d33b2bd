"""A Produce and a consumer's Fetch through the gateway are handled without a task
(odradek.gateway.apis.produce and .fetch ``start``, the gateway's ``answer_at_once``):
a Produce takes its turn on its connection's lane and its run is written to the
leader's open data link from the lane's callback, a fetch from one leader is sent from
the connection's callback, both are answered from the data link answer's callback, and
the answer is written from there too (odradek.gateway.connection ``_flush``), with no
writer task (issue 18: the latency loop makes a Produce and a consumer Fetch per
record, and their tasks, their coroutines' steps and the writer's wake-ups were a
share of the gateway's CPU per record). The answers are the task path's, pipelined
requests are answered in order (pipelined Produce requests still coalesce), nothing is
left to the cyclic collector, and a client that goes away while its fetch is parked
leaves nothing behind.

A real leader partition (one replica: an append moves the high watermark), the real
storage Fetch handler behind a real data link, a real gateway listener and a client on
a real socket; the loop's task factory counts every task created.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import struct
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gateway_testkit import offline_gateway, produce_request
from helpers.batches import producer_batch
from helpers.data_links import leader_handlers
from helpers.waiting import wait_until_async

from odradek.datalink.client import DataLinkConnection
from odradek.datalink.frame import FETCH
from odradek.gateway.apis.produce import PRODUCE_COALESCED
from odradek.gateway.connection import KafkaListener
from odradek.gateway.gateway import Gateway
from odradek.gateway.produce_lane import QueuedProduce
from odradek.log.manager import LogManager
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    decode_response,
    encode_request,
)
from odradek.protocol.versions import response_header_version
from odradek.rpc.v1 import common_pb2, storage_pb2
from odradek.storage.data_link import DataLinkServer
from odradek.storage.partition import Partition
from odradek.storage.replica_manager import ReplicaManager

NODE = 100
VERSION = 12


def _metadata(data_port: int = 0) -> common_pb2.ClusterMetadata:
    """Gateway 0 and storage node 100 (its data link at ``data_port``), leading the one
    partition of topic ``t``."""
    online = common_pb2.ONLINE
    return common_pb2.ClusterMetadata(
        version=1,
        cluster_id="c",
        nodes=[
            common_pb2.Node(node_id=0, kind=common_pb2.GATEWAY, host="127.0.0.1", state=online),
            common_pb2.Node(
                node_id=NODE,
                kind=common_pb2.STORAGE,
                host="127.0.0.1",
                data_port=data_port,
                state=online,
            ),
        ],
        topics=[
            common_pb2.Topic(
                name="t",
                topic_id=b"\x01" * 16,
                partitions=[
                    common_pb2.Partition(
                        partition=0,
                        replicas=[NODE],
                        isr=[NODE],
                        leader=NODE,
                        leader_epoch=0,
                        partition_epoch=1,
                    )
                ],
            )
        ],
    )


class _Tasks:
    """A task factory noting the tasks the gateway and the storage node create (not the
    test's own, like ``asyncio.wait_for``'s)."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def __call__(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any
    ) -> asyncio.Task[Any]:
        frame = getattr(coro, "cr_frame", None)
        if frame is not None and frame.f_globals.get("__name__", "").startswith("odradek."):
            self.created.append(getattr(coro, "__qualname__", "?"))
        return asyncio.Task(coro, loop=loop, **kw)


@dataclass
class _Served:
    gateway: Gateway
    listener: KafkaListener
    server: DataLinkServer
    part: Partition
    tasks: _Tasks

    def parked(self) -> int:
        """Fetches parked at the storage node."""
        return sum(len(c.parked) for c in self.server.connections)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[_Served]:
    logs = LogManager([tmp_path / "logs"], NODE, "c", {})
    replicas = ReplicaManager(NODE, logs, {}, replica_lag_time_max_ms=30_000)
    replicas.apply(Snapshot.build(_metadata()))
    part = replicas.get("t", 0)
    assert part is not None and part.is_leader
    handlers = leader_handlers(replicas, NODE)
    server = DataLinkServer("127.0.0.1", 0, lambda: handlers)  # type: ignore[arg-type,return-value]
    port = await server.start()
    loop = asyncio.get_running_loop()
    tasks = _Tasks()
    try:
        async with offline_gateway(_metadata(port)) as gw:
            # Several requests of a connection handled at once, to see their order kept.
            limits = dataclasses.replace(gw.limits, max_handled_requests=8)
            listener = KafkaListener(
                "127.0.0.1", 0, gw.dispatch, limits, answer_at_once=gw.answer_at_once
            )
            await listener.start()
            loop.set_task_factory(tasks)  # type: ignore[arg-type]
            try:
                yield _Served(gw, listener, server, part, tasks)
            finally:
                loop.set_task_factory(None)
                await listener.stop(0.5)
    finally:
        await server.stop()
        logs.shutdown()


def _fetch(
    cid: int, offset: int, wait_ms: int = 10_000, partition_max_bytes: int = 1 << 20
) -> bytes:
    T = FetchRequest.FetchTopic
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic="t",
                partitions=[
                    T.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
    )
    return bytes(encode_request(ApiKey.FETCH, VERSION, cid, "unit", request))


async def _answer(reader: asyncio.StreamReader, api_key: int, version: int) -> tuple[int, Any]:
    """The next answer: its correlation id and the decoded response."""
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    body = memoryview(await reader.readexactly(size))
    cid, start = parse_response_header(body, response_header_version(api_key, version))
    return cid, decode_response(api_key, version, body[start:])


def _records(part: Partition, start: int, end: int) -> bytes:
    return bytes(part.read(start, 1 << 20, max_offset=end, min_one_message=True))


def _append(part: Partition, value: bytes) -> None:
    part.append_as_leader(producer_batch([(1000, None, value)]), 1)


async def _connect(served: _Served) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A client whose first fetch (waiting 10 ms) opened the gateway's data link."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.listener.port)
    writer.write(_fetch(0, 0, wait_ms=10))
    _, response = await _answer(reader, ApiKey.FETCH, VERSION)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE
    return reader, writer


async def test_a_parked_fetch_is_answered_without_a_task(served: _Served) -> None:
    reader, writer = await _connect(served)
    served.tasks.created.clear()
    for offset in range(3):
        writer.write(_fetch(offset + 1, offset))
        await wait_until_async(lambda: served.parked() == 1, "the fetch to park")
        _append(served.part, b"v%d" % offset)
        cid, response = await _answer(reader, ApiKey.FETCH, VERSION)
        answer = response.responses[0].partitions[0]
        assert (cid, answer.error_code, answer.high_watermark) == (offset + 1, 0, offset + 1)
        assert bytes(answer.records) == _records(served.part, offset, offset + 1)
    # Before: a task per request (the handler's) and the connection's writer task.
    assert served.tasks.created == []
    writer.close()


async def test_pipelined_requests_are_answered_in_order(served: _Served) -> None:
    reader, writer = await _connect(served)
    # A parked fetch (no task), an ApiVersions behind it (a task, answered at once),
    # a fetch of what is there (no task, answered at once): all three in one write.
    _append(served.part, b"a")
    versions = encode_request(ApiKey.API_VERSIONS, 0, 2, "unit", ApiVersionsRequest())
    writer.write(_fetch(1, 1) + versions + _fetch(3, 0))
    await wait_until_async(lambda: served.parked() == 1, "the first fetch to park")
    await asyncio.sleep(0.05)  # the two behind it are answered meanwhile, and held back
    _append(served.part, b"b")
    cid, first = await _answer(reader, ApiKey.FETCH, VERSION)
    assert cid == 1
    assert bytes(first.responses[0].partitions[0].records) == _records(served.part, 1, 2)
    cid, versions = await _answer(reader, ApiKey.API_VERSIONS, 0)
    assert cid == 2 and versions.error_code == ErrorCode.NONE
    cid, third = await _answer(reader, ApiKey.FETCH, VERSION)
    assert cid == 3
    assert bytes(third.responses[0].partitions[0].records) == _records(served.part, 0, 1)
    writer.close()


async def test_a_client_gone_while_its_fetch_is_parked(served: _Served) -> None:
    reader, writer = await _connect(served)
    writer.write(_fetch(1, 0))
    await wait_until_async(lambda: served.parked() == 1, "the fetch to park")
    writer.close()
    await wait_until_async(lambda: not served.listener.connections, "the gateway to see the close")
    _append(served.part, b"late")  # its answer reaches the gateway, for nobody
    await wait_until_async(lambda: served.parked() == 0, "the fetch to be answered")
    reader, writer = await _connect(served)
    writer.write(_fetch(1, 0))
    _, response = await _answer(reader, ApiKey.FETCH, VERSION)
    assert bytes(response.responses[0].partitions[0].records) == _records(served.part, 0, 1)
    writer.close()


async def test_a_started_data_link_call_past_its_deadline(served: _Served) -> None:
    """DataLinkConnection.start_call: nobody awaits it, so the deadline drops its entry."""
    await _connect(served)  # opens the gateway's data link connection
    pool = served.gateway.storage._links
    assert pool is not None
    conn = pool._open_connection(NODE)
    assert isinstance(conn, DataLinkConnection)
    request = storage_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=10_000,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            storage_pb2.FetchPartition(
                topic="t", partition=0, fetch_offset=0, partition_max_bytes=1 << 20
            )
        ],
    ).SerializeToString()
    call = conn.start_call(FETCH, request, (), timeout=0.05)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(call, 10)
    assert not conn.pending and not conn.deadlines


def _produce(cid: int, value: bytes, acks: int = -1) -> bytes:
    request = produce_request(bytes(producer_batch([(1000, None, value)])), topic="t", acks=acks)
    return bytes(encode_request(ApiKey.PRODUCE, 9, cid, "unit", request))


async def _produced(reader: asyncio.StreamReader) -> tuple[int, int, int]:
    """The next Produce answer: correlation id, error code, base offset."""
    cid, response = await _answer(reader, ApiKey.PRODUCE, 9)
    answer = response.responses[0].partition_responses[0]
    return cid, answer.error_code, answer.base_offset


async def test_a_produce_is_answered_without_a_task(served: _Served) -> None:
    reader, writer = await _connect(served)
    served.tasks.created.clear()
    for offset in range(3):
        writer.write(_produce(offset, b"v%d" % offset))
        assert await _produced(reader) == (offset, ErrorCode.NONE, offset)
    # Before: a task per request (the handler's), and the writer task.
    assert served.tasks.created == []
    assert served.part.high_watermark == 3
    assert b"v2" in _records(served.part, 2, 3)
    writer.close()


async def test_pipelined_produces_coalesce_and_keep_their_order(served: _Served) -> None:
    reader, writer = await _connect(served)
    served.tasks.created.clear()
    coalesced = PRODUCE_COALESCED._pending
    writer.write(b"".join(_produce(cid, b"%d" % cid) for cid in range(20)))
    answers = [await _produced(reader) for _ in range(20)]
    assert [(cid, code) for cid, code, _ in answers] == [(cid, 0) for cid in range(20)]
    assert [offset for _, _, offset in answers] == list(range(20))  # appended in order
    assert PRODUCE_COALESCED._pending > coalesced  # runs of them went in one call
    assert served.tasks.created == []
    # Each offset holds the record of the request answered with it.
    for offset in (0, 7, 19):
        assert b"%d" % offset in _records(served.part, offset, offset + 1)
    writer.close()


async def test_acks_0_and_a_fetch_behind_produces_keep_their_order(served: _Served) -> None:
    """acks=0 still goes through a task (no answer at all); the answers of the requests
    around it, a Fetch behind them included, come in request order."""
    reader, writer = await _connect(served)
    writer.write(_produce(1, b"a") + _produce(2, b"b", acks=0) + _produce(3, b"c") + _fetch(4, 0))
    assert await _produced(reader) == (1, ErrorCode.NONE, 0)
    assert await _produced(reader) == (3, ErrorCode.NONE, 2)
    cid, response = await _answer(reader, ApiKey.FETCH, VERSION)
    assert cid == 4
    answer = response.responses[0].partitions[0]  # (what was appended when it read)
    assert answer.high_watermark >= 1
    assert bytes(answer.records) == _records(served.part, 0, answer.high_watermark)
    assert [b"a" in _records(served.part, i, i + 1) for i in range(3)] == [True, False, False]
    assert b"b" in _records(served.part, 1, 2) and b"c" in _records(served.part, 2, 3)
    writer.close()


async def test_a_produce_without_a_task_leaves_no_cycle(served: _Served) -> None:
    reader, writer = await _connect(served)
    writer.write(_produce(0, b"warm"))
    await _produced(reader)
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for cid in range(1, 4):
            writer.write(_produce(cid, b"x"))
            assert await _produced(reader) == (cid, ErrorCode.NONE, cid)
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, QueuedProduce)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert not left
    writer.close()


async def test_the_first_produce_opens_the_data_link_in_a_task(served: _Served) -> None:
    """No open data link yet: the run goes through the task path's sender, which opens
    it; the requests after it are sent from callbacks."""
    reader, writer = await asyncio.open_connection("127.0.0.1", served.listener.port)
    writer.write(_produce(0, b"first"))
    assert await _produced(reader) == (0, ErrorCode.NONE, 0)
    assert "_send_run" in served.tasks.created
    served.tasks.created.clear()
    writer.write(_produce(1, b"second"))
    assert await _produced(reader) == (1, ErrorCode.NONE, 1)
    assert served.tasks.created == []
    writer.close()
