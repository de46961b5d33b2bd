"""Requests answered without a task (``answer_at_once``): a repeated all-topics
Metadata request whose shared answer still holds is framed in the connection's own
callback and written with the answers queued beside it, over real loopback sockets.

Issue 14's never-read clients pipeline all-topics Metadata requests; each answer had
been a task, a wake-up of the writer and a write system call of its own (73-137 us of
the gateway's loop each, docs/security.md "Hostile clients"). The answers must stay in
request order with the handled ones, obey the same per-connection limits, and be
exactly what the handler path answers.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Coroutine, Generator
from typing import Any

from gateway_testkit import CORRELATION_ID, offline_gateway
from helpers.stand_in_frames import read_answers, stand_in_answer, stand_in_request
from test_gateway_metadata_answers import _all_topics, _cluster
from test_gateway_unread_responses import UNREAD_LIMIT, _Handler, _settled

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaConnection,
    KafkaListener,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import RequestHeader, parse_request_header
from odradek.protocol.messages import encode_request

ANSWER_BYTES = 1024


class _AtOnce:
    """Answers API key 3 (the stand-in Metadata) at once; everything else goes to the
    handler."""

    def __init__(self) -> None:
        self.answered = 0

    def __call__(
        self, _ctx: ConnectionContext, header: RequestHeader, _b: memoryview
    ) -> bytes | None:
        if header.api_key != 3:
            return None
        self.answered += 1
        return stand_in_answer(header.correlation_id, ANSWER_BYTES)


class _CountingTasks:
    """The loop's task factory while installed: counts the tasks created (the loop's own
    tasks, not a stand-in)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.created = 0
        self._loop = loop

    def __call__(
        self,
        loop: asyncio.AbstractEventLoop,
        coro: Coroutine[Any, Any, Any] | Generator[Any, None, Any],
        **kwargs: Any,
    ) -> asyncio.Task[Any]:
        self.created += 1
        return asyncio.Task(coro, loop=loop, **kwargs)  # type: ignore[arg-type]


async def test_pipelined_answers_at_once_need_no_task_and_keep_request_order() -> None:
    handler = _Handler()
    at_once = _AtOnce()
    lst = KafkaListener("127.0.0.1", 0, handler, ConnectionLimits(), answer_at_once=at_once)
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    loop = asyncio.get_running_loop()
    counting = _CountingTasks(loop)
    loop.set_task_factory(counting)  # type: ignore[arg-type]
    try:
        # Every tenth request is handled (API key 18); the rest are answered at once.
        count = 200
        keys = [18 if cid % 10 == 9 else 3 for cid in range(count)]
        writer.write(b"".join(stand_in_request(cid, key) for cid, key in enumerate(keys)))
        cids = await asyncio.wait_for(read_answers(reader, count), 10)
        assert cids == list(range(count))
        assert at_once.answered + handler.started == count
        # Most at once: a request waits for a task only while the answers ahead of it
        # come near connection.max.unread.response.bytes (until the client's kernel is
        # asked how much it took).
        assert at_once.answered >= keys.count(3) // 2, at_once.answered
        # A task per handled request and the connection's writer; before, one per
        # request (200).
        assert counting.created <= handler.started + 2, (counting.created, handler.started)
    finally:
        loop.set_task_factory(None)
        writer.close()
        await lst.stop(grace=0.1)


async def test_a_never_reading_client_is_held_back_as_before() -> None:
    # The answers made at once count toward connection.max.unread.response.bytes as the
    # handled ones do: a client that never reads gets about the limit answered.
    handler = _Handler()
    at_once = _AtOnce()
    limits = ConnectionLimits(max_inflight_requests=20, max_unread_response_bytes=UNREAD_LIMIT)
    lst = KafkaListener("127.0.0.1", 0, handler, limits, answer_at_once=at_once)
    await lst.start()
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(s, ("127.0.0.1", lst.port))
    sender = asyncio.ensure_future(
        loop.sock_sendall(s, b"".join(stand_in_request(cid) for cid in range(3000)))
    )
    try:

        class _Both:
            @property
            def started(self) -> int:
                return handler.started + at_once.answered

        answered = await _settled(_Both())  # type: ignore[arg-type]
        (conn,) = lst.connections
        assert isinstance(conn, KafkaConnection)
        assert conn.unread_backlog
        # The limit, what our small receive window took, and one batch of answers.
        assert answered <= (UNREAD_LIMIT + 8192) // ANSWER_BYTES + 20 + 4, answered
    finally:
        sender.cancel()
        s.close()
        await lst.stop(grace=0.1)


async def test_the_gateway_answers_at_once_what_its_handler_answered() -> None:
    frame = encode_request(ApiKey.METADATA, 12, CORRELATION_ID, "unit", _all_topics())
    header, offset = parse_request_header(memoryview(frame)[4:])
    body = memoryview(frame)[4 + offset :]
    again = encode_request(ApiKey.METADATA, 12, CORRELATION_ID + 1, "unit", _all_topics())
    header2, offset2 = parse_request_header(memoryview(again)[4:])
    body2 = memoryview(again)[4 + offset2 :]
    async with offline_gateway(_cluster(1, leader=100)) as gw:
        ctx = ConnectionContext(1, "test", None)
        assert gw.answer_at_once(ctx, header, body) is None  # never answered yet
        handled = await gw.dispatch(ctx, header, body)
        assert isinstance(handled, bytes)
        at_once = gw.answer_at_once(ctx, header2, body2)
        assert at_once is not None
        # The same frame but for its own correlation id (after the size prefix).
        assert at_once[:4] == handled[:4] and at_once[8:] == handled[8:]
        assert struct.unpack(">i", at_once[4:8])[0] == CORRELATION_ID + 1
        # Not on a connection whose SASL session can expire (KIP-368: the handler path
        # checks it), nor before authentication, nor once the snapshot changed.
        expiring = ConnectionContext(2, "test", None, session_expires_at=1e18)
        assert gw.answer_at_once(expiring, header2, body2) is None
        unauthenticated = ConnectionContext(3, "test", None, authenticated=False)
        assert gw.answer_at_once(unauthenticated, header2, body2) is None
        await gw.metadata.update(_cluster(2, leader=101))
        assert gw.answer_at_once(ctx, header2, body2) is None
