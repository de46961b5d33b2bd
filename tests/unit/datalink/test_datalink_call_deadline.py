"""A data link call's deadline (odradek.datalink.client.DataLinkConnection.call), over a
real loopback socket to a stand-in storage node: an answer in time is returned, a call
past its deadline raises TimeoutError and its late answer is dropped, a cancelled call
leaves nothing behind, and the connection keeps serving calls after both."""

from __future__ import annotations

import asyncio
import struct

import pytest

from odradek.datalink.client import DataLinkError, open_connection
from odradek.datalink.frame import OK, PRODUCE, encode, parse


class _Node:
    """Answers each frame with its own meta, after the delay the meta names (ms)."""

    def __init__(self) -> None:
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = parse(await reader.readexactly(size))
                delay = int(bytes(frame.meta)) / 1000
                asyncio.get_running_loop().call_later(
                    delay, writer.writelines, encode(frame.correlation_id, OK, frame.meta, [])
                )
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()


async def test_answers_in_time_late_answers_dropped_cancelled_calls_cleaned() -> None:
    node = _Node()
    port = await node.start()
    conn = await open_connection(("127.0.0.1", port))
    try:
        frame = await conn.call(PRODUCE, b"0", [], timeout=5)
        assert bytes(frame.meta) == b"0"
        with pytest.raises(TimeoutError):
            await conn.call(PRODUCE, b"400", [], timeout=0.1)
        assert conn.pending == {}
        # The late answer arrives meanwhile and is dropped; the next call gets its own.
        slow = asyncio.ensure_future(conn.call(PRODUCE, b"600", [], timeout=5))
        await asyncio.sleep(0.05)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert conn.pending == {}
        await asyncio.sleep(0.5)
        frame = await conn.call(PRODUCE, b"10", [], timeout=5)
        assert bytes(frame.meta) == b"10"
        # Many calls in flight, each deadline its own.
        calls = [conn.call(PRODUCE, str(ms).encode(), [], timeout=0.25) for ms in (0, 500, 20)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert [bytes(r.meta) if not isinstance(r, BaseException) else "late" for r in results] == [
            b"0",
            "late",
            b"20",
        ]
        assert isinstance(results[1], TimeoutError)
        assert conn.pending == {}
    finally:
        conn.close()
        await node.stop()


async def test_every_call_keeps_its_own_deadline_under_one_timer() -> None:
    # One timer per connection, armed for the earliest deadline: a short deadline
    # after a long one still fires on time, and several late calls each time out.
    node = _Node()
    port = await node.start()
    conn = await open_connection(("127.0.0.1", port))
    loop = asyncio.get_running_loop()
    try:
        long = asyncio.ensure_future(conn.call(PRODUCE, b"700", [], timeout=5))
        await asyncio.sleep(0.01)
        start = loop.time()
        with pytest.raises(TimeoutError):
            await conn.call(PRODUCE, b"600", [], timeout=0.1)
        assert loop.time() - start < 0.5
        late = [conn.call(PRODUCE, b"600", [], timeout=t) for t in (0.15, 0.3)]
        results = await asyncio.gather(*late, return_exceptions=True)
        assert all(isinstance(r, TimeoutError) for r in results)
        assert bytes((await long).meta) == b"700"
        assert conn.pending == {} and conn.deadlines == {}
    finally:
        conn.close()
        await node.stop()


async def test_a_call_answered_by_callback_gets_its_frame_or_its_error() -> None:
    # DataLinkConnection.call_with (a replica fetcher's rounds, issue 18): the answer,
    # TimeoutError past the deadline (the late answer dropped), DataLinkError once the
    # connection is lost; nothing left behind.
    node = _Node()
    port = await node.start()
    conn = await open_connection(("127.0.0.1", port))
    answers: list[tuple[str, object]] = []
    try:
        conn.call_with(PRODUCE, b"0", [], 5, lambda a: answers.append(("fast", a)))
        conn.call_with(PRODUCE, b"300", [], 0.1, lambda a: answers.append(("late", a)))
        conn.call_with(PRODUCE, b"5000", [], 30, lambda a: answers.append(("lost", a)))
        await asyncio.sleep(0.5)
        assert [name for name, _ in answers] == ["fast", "late"]
        assert bytes(answers[0][1].meta) == b"0"  # type: ignore[attr-defined]
        assert isinstance(answers[1][1], TimeoutError)
        await node.stop()
        assert len(conn.callbacks) == 1  # the third call is still waiting
        conn.transport.abort()  # type: ignore[union-attr]
        await asyncio.sleep(0.05)
        assert [name for name, _ in answers] == ["fast", "late", "lost"]
        assert isinstance(answers[2][1], DataLinkError)
        assert conn.callbacks == {} and conn.deadlines == {}
        with pytest.raises(DataLinkError):
            conn.call_with(PRODUCE, b"0", [], 5, lambda a: None)
    finally:
        conn.close()
