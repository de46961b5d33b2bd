"""Metadata requests start a few per event loop turn over all connections
(metadata_turns.py), over real loopback sockets with a stand-in handler.

Issue 14's never-read clients connect together and take their answers together, so
their connections' writers started their next Metadata requests in the same loop
turns: 20 such connections had 70-110 answers computed in one turn, turns of 5-14 ms
of the gateway's own CPU that every other client's request waited behind. Every
request must still be answered, in order, also those read before a half-close."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from helpers.stand_in_frames import read_answers, stand_in_answer, stand_in_request

from odradek.gateway.connection import ConnectionContext, ConnectionLimits, KafkaListener
from odradek.gateway.metadata_turns import PER_TURN, TurnAllowance, metadata_turns
from odradek.protocol.headers import RequestHeader

CLIENTS = 20
PIPELINED = 60
# bench hostile's all-topics Metadata answer: ~6 of them are connection.max.unread.
# response.bytes (16 KiB), what one connection's writer starts after each write.
ANSWER_BYTES = 2861


class _AtOnce:
    """Answers the stand-in Metadata (API key 3) at once, counting the answers."""

    def __init__(self) -> None:
        self.answered = 0

    def __call__(
        self, _ctx: ConnectionContext, header: RequestHeader, _b: memoryview
    ) -> bytes | None:
        if header.api_key != 3:
            return None
        self.answered += 1
        return stand_in_answer(header.correlation_id, ANSWER_BYTES)


async def _handled(_ctx: ConnectionContext, header: RequestHeader, _b: memoryview) -> bytes:
    return stand_in_answer(header.correlation_id, ANSWER_BYTES)


async def test_pipelined_metadata_of_many_connections_is_spread_over_loop_turns() -> None:
    at_once = _AtOnce()
    lst = KafkaListener("127.0.0.1", 0, _handled, ConnectionLimits(), answer_at_once=at_once)
    port = await lst.start()
    loop = asyncio.get_running_loop()
    per_turn: list[int] = []
    counted = [0]
    done = False

    def tick() -> None:  # once per loop turn: the answers computed since the last one
        per_turn.append(at_once.answered - counted[0])
        counted[0] = at_once.answered
        if not done:
            loop.call_soon(tick)

    clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(CLIENTS)]
    try:
        loop.call_soon(tick)
        request = b"".join(stand_in_request(cid) for cid in range(PIPELINED))
        for _, writer in clients:
            writer.write(request)
        answers = await asyncio.wait_for(
            asyncio.gather(*(read_answers(reader, PIPELINED) for reader, _ in clients)), 60
        )
    finally:
        done = True
        for _, writer in clients:
            writer.close()
        await lst.stop(grace=0.1)
    assert all(cids == list(range(PIPELINED)) for cids in answers)
    assert at_once.answered > CLIENTS * PIPELINED // 2  # (the first of each is handled)
    # Before: the writers of the 20 connections started theirs in the same turns (up to
    # 6 each, their unread bound), 60-120 answers in one turn.
    assert max(per_turn) <= PER_TURN


async def test_allowance_goes_round_in_the_order_asked() -> None:
    loop = asyncio.get_running_loop()
    turns = TurnAllowance(loop, per_turn=2)
    started: list[str] = []

    def starter(name: str, wants: int) -> Callable[[], None]:
        left = [wants]

        def start() -> None:
            while left[0] and turns.may_start(start):
                left[0] -= 1
                started.append(name)

        return start

    a, b, c = starter("a", 3), starter("b", 1), starter("c", 2)
    for start in (a, b, c):
        start()
    assert started == ["a", "a"]  # this turn's two
    await asyncio.sleep(0)
    assert started == ["a", "a", "a", "b"]  # a asked first, then b
    await asyncio.sleep(0)
    assert started == ["a", "a", "a", "b", "c", "c"]
    await asyncio.sleep(0)
    assert started == ["a", "a", "a", "b", "c", "c"]  # and nothing twice


async def test_a_client_half_closed_before_its_turn_gets_its_answers() -> None:
    """Requests read before the client's EOF are answered (Kafka answers what it read),
    also when none of them has started yet because the turn's allowance was used up
    (one a turn here: the second connection's first request waits for the next)."""
    allowance = metadata_turns(asyncio.get_running_loop())
    allowance.per_turn = 1
    assert allowance.may_start(lambda: None)  # (a turn begins: the next one allows 1)
    await asyncio.sleep(0)
    lst = KafkaListener("127.0.0.1", 0, _handled, ConnectionLimits(), answer_at_once=_AtOnce())
    port = await lst.start()
    try:
        clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        request = b"".join(stand_in_request(cid) for cid in range(5))
        for _, writer in clients:
            writer.write(request)
            writer.write_eof()
        answers = await asyncio.wait_for(
            asyncio.gather(*(read_answers(reader, 5) for reader, _ in clients)), 30
        )
        assert all(cids == list(range(5)) for cids in answers)
        for reader, writer in clients:
            assert await asyncio.wait_for(reader.read(), 10) == b""  # then closed
            writer.close()
    finally:
        allowance.per_turn = PER_TURN
        await lst.stop(grace=0.1)
