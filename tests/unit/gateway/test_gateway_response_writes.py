"""Responses finished together go to the client's socket in one write
(odradek.gateway.connection's writer), over real loopback sockets with a stand-in
request handler: every response still arrives, in request order, the records of a
multi-buffer response included; a handler's error or ``close_after_response`` still
ends the connection with no response after the one that set it. One write per response was a syscall per one-record Produce (issue 18)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from helpers.stand_in_frames import read_answers, stand_in_answer, stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    CloseConnection,
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
    Result,
)
from odradek.protocol.headers import RequestHeader

RUN = 50


class _CountingTransport:
    """The connection's transport, counting the calls that hand it bytes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.writes = 0

    def write(self, data: Any) -> None:
        self.writes += 1
        self._inner.write(data)

    def writelines(self, data: Any) -> None:
        self.writes += 1
        self._inner.writelines(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def _serve(handler: Any) -> tuple[KafkaListener, asyncio.StreamReader, asyncio.StreamWriter]:
    lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(max_handled_requests=1))
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    await wait_until_async(lambda: len(lst.connections) == 1, "connection accepted")
    return lst, reader, writer


class _HeldRun:
    """A stand-in handler whose requests all wait until ``release_when_started`` sees
    ``count`` of them started: a run of responses finished together, as a coalesced
    Produce run is answered. ``answer`` gives each request's response (or raises)."""

    def __init__(self, answer: Callable[[ConnectionContext, RequestHeader], Result]) -> None:
        self.answer = answer
        self.started = 0
        self._release = asyncio.Event()

    async def handle(
        self, ctx: ConnectionContext, header: RequestHeader, _body: memoryview
    ) -> Result:
        self.started += 1
        await self._release.wait()
        return self.answer(ctx, header)

    async def release_when_started(self, count: int) -> None:
        await wait_until_async(lambda: self.started == count, "the run started")
        self._release.set()


async def test_a_run_answered_together_is_written_at_once_in_order() -> None:
    def answer(_ctx: ConnectionContext, header: RequestHeader) -> Result:
        cid = header.correlation_id
        if cid % 7 == 3:  # a Fetch-like answer: header and payload as separate buffers
            whole = stand_in_answer(cid)
            return [whole[:6], memoryview(bytearray(whole[6:]))]
        return stand_in_answer(cid)

    run = _HeldRun(answer)
    lst, reader, writer = await _serve(run.handle)
    conn = next(iter(lst.connections))
    counting = _CountingTransport(conn.transport)
    conn.transport = counting  # type: ignore[assignment]
    writer.write(b"".join(stand_in_request(cid, api_key=0) for cid in range(RUN)))
    await run.release_when_started(RUN)
    assert await asyncio.wait_for(read_answers(reader, RUN), 30) == list(range(RUN))
    # One write for the run (written one by one, it took RUN).
    assert counting.writes <= 2, counting.writes
    assert conn.queued_response_bytes == 0 and conn.inflight_bytes == 0
    writer.close()
    await lst.stop(grace=0.1)


async def test_close_after_response_still_ends_with_its_response() -> None:
    def answer(ctx: ConnectionContext, header: RequestHeader) -> Result:
        if header.correlation_id == 4:
            ctx.close_after_response = True  # e.g. SASL_AUTHENTICATION_FAILED
        return stand_in_answer(header.correlation_id)

    run = _HeldRun(answer)
    lst, reader, writer = await _serve(run.handle)
    writer.write(b"".join(stand_in_request(cid, api_key=0) for cid in range(10)))
    await run.release_when_started(10)
    # The connection closes once the flag is seen after a response: never a response
    # after the one whose handler set it (the writer checks it after each response).
    data = await asyncio.wait_for(reader.read(), 30)
    cids = [struct.unpack_from(">i", data, i + 4)[0] for i in range(0, len(data), 8)]
    assert len(data) % 8 == 0 and 1 <= len(cids) <= 5
    assert cids == list(range(len(cids)))
    writer.close()
    await lst.stop(grace=0.1)


async def test_a_failed_request_ends_the_connection_after_the_answers_before_it() -> None:
    def answer(_ctx: ConnectionContext, header: RequestHeader) -> Result:
        if header.correlation_id == 6:
            raise CloseConnection()
        return stand_in_answer(header.correlation_id)

    run = _HeldRun(answer)
    lst, reader, writer = await _serve(run.handle)
    writer.write(b"".join(stand_in_request(cid, api_key=0) for cid in range(10)))
    await run.release_when_started(10)
    assert await asyncio.wait_for(read_answers(reader, 6), 30) == list(range(6))
    assert await asyncio.wait_for(reader.read(), 30) == b""
    writer.close()
    await lst.stop(grace=0.1)


async def test_answers_are_written_without_a_writer_task() -> None:
    """Each request's task writes its answer from its completion callback when it is
    the oldest unanswered one: no writer task woken per answer (issue 18)."""
    tasks: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        tasks.append(getattr(coro, "__qualname__", "?"))
        return asyncio.Task(coro, loop=loop, **kw)

    async def handle(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        return stand_in_answer(header.correlation_id)

    lst, reader, writer = await _serve(handle)
    loop = asyncio.get_running_loop()
    loop.set_task_factory(factory)
    try:
        for cid in range(5):  # one at a time: each answer alone at the head
            writer.write(stand_in_request(cid, api_key=0))
            assert await asyncio.wait_for(read_answers(reader, 1), 30) == [cid]
        writer.write(b"".join(stand_in_request(cid, api_key=0) for cid in range(5, 25)))
        assert await asyncio.wait_for(read_answers(reader, 20), 30) == list(range(5, 25))
    finally:
        loop.set_task_factory(None)
    # One task per request, its handler's; before, the connection's writer task too.
    assert [t for t in tasks if t.startswith("KafkaConnection.")] == ["KafkaConnection._run"] * 25
    writer.close()
    await lst.stop(grace=0.1)
