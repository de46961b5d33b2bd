"""``connection.max.handled.requests``: how many requests of one connection the
gateway's listener handles at once (odradek.gateway.connection), over real loopback
sockets with a stand-in request handler (no cluster needed).

A client that pipelines hundreds of CPU-costly requests and never reads must not delay
another connection's answer by its whole backlog; under the cap, requests still start
in arrival order (what keeps a connection's Produce requests in order) and are
answered in request order; a handler that hands its request off (a Produce whose
records went to the storage nodes) lets the next one start before it is answered.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time

from helpers.stand_in_frames import read_answers, stand_in_answer, stand_in_request
from helpers.waiting import wait_until_async

from odradek.gateway.connection import (
    ConnectionContext,
    ConnectionLimits,
    KafkaListener,
    Result,
    request_handed_off,
)
from odradek.protocol.headers import RequestHeader

BURN_S = 0.002  # CPU one stand-in request costs the event loop
BACKLOG = 400  # requests the never-reading client pipelines


async def _good_request_wait(max_handled: int) -> tuple[int, float]:
    """How many of the never-reading client's requests the loop handled while another
    connection's one request waited for its turn (from just before it was sent to its
    handler's start), and that request's answer time in seconds. The never-reading
    client has BACKLOG requests pipelined that each cost BURN_S of loop time. Both
    clients are threads with blocking sockets, so the event loop under test only
    serves."""
    first_handled = threading.Event()
    burned = [0]  # backlog requests handled so far
    burned_at_send = [-1]
    burned_at_start = [-1]

    async def burn(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        if header.correlation_id == 0:
            first_handled.set()  # the whole backlog has been read by now
        if header.correlation_id == 10_000:
            burned_at_start[0] = burned[0]
        end = time.perf_counter() + BURN_S
        while time.perf_counter() < end:
            pass
        if header.correlation_id != 10_000:
            burned[0] += 1
        return stand_in_answer(header.correlation_id)

    def hostile(port: int) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"".join(stand_in_request(cid) for cid in range(BACKLOG)))
        return s

    def good(port: int) -> float:
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert first_handled.wait(30)
            burned_at_send[0] = burned[0]
            start = time.monotonic()
            s.sendall(stand_in_request(10_000))
            s.settimeout(30)
            answer = b""
            while len(answer) < 8:
                answer += s.recv(8 - len(answer))
            assert struct.unpack(">ii", answer) == (4, 10_000)
            return time.monotonic() - start

    limits = ConnectionLimits(max_handled_requests=max_handled)
    lst = KafkaListener("127.0.0.1", 0, burn, limits)
    await lst.start()
    latency = asyncio.ensure_future(asyncio.to_thread(good, lst.port))
    hostile_socket = await asyncio.to_thread(hostile, lst.port)
    seconds = await asyncio.wait_for(latency, 60)
    hostile_socket.close()
    await lst.stop(grace=0.1)
    return burned_at_start[0] - burned_at_send[0], seconds


async def test_never_reading_backlog_does_not_delay_another_connection() -> None:
    # Uncapped, the request waits for the whole backlog: every request read is started
    # on one loop turn, ~BACKLOG x BURN_S = 0.8 s of loop time queued ahead of it.
    # Capped at 4, it waits for a handful. Counted in requests handled, not seconds:
    # on a loaded machine the seconds were sometimes past the bound (0.268 s of 0.2 s)
    # while the loop had done what it should.
    waited_for, seconds = await _good_request_wait(max_handled=4)
    assert waited_for < BACKLOG // 4, (waited_for, seconds)


async def test_requests_start_in_arrival_order_and_answer_in_order_under_the_cap() -> None:
    started: list[int] = []
    running = 0  # requests other than Produce being handled
    most = 0
    rng = random.Random(14)
    keys = [rng.choice((0, 3, 3)) for _ in range(300)]  # Produce and Metadata mixed

    async def jittery(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        nonlocal running, most
        started.append(header.correlation_id)
        other = header.api_key != 0
        running += other
        most = max(most, running)
        try:
            for _ in range(rng.randrange(3)):
                await asyncio.sleep(rng.random() / 1000)
        finally:
            running -= other
        return stand_in_answer(header.correlation_id)

    lst = KafkaListener("127.0.0.1", 0, jittery, ConnectionLimits(max_handled_requests=3))
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    writer.write(b"".join(stand_in_request(cid, key) for cid, key in enumerate(keys)))
    assert await asyncio.wait_for(read_answers(reader, 300), 30) == list(range(300))
    assert started == list(range(300))
    assert most == 3
    writer.close()
    await lst.stop(grace=0.1)


async def test_pipelined_produce_requests_start_together_and_free_their_place_when_handed_off() -> (
    None
):
    hand_off = asyncio.Event()
    release = asyncio.Event()
    started: list[int] = []

    async def parked(_ctx: ConnectionContext, header: RequestHeader, _body: memoryview) -> Result:
        started.append(header.correlation_id)
        if header.api_key == 0:  # "Produce": its records reach the storage nodes ...
            await hand_off.wait()
            request_handed_off()()
        await release.wait()  # ... and its answer comes later
        return stand_in_answer(header.correlation_id)

    lst = KafkaListener("127.0.0.1", 0, parked, ConnectionLimits(max_handled_requests=1))
    await lst.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", lst.port)
    # Five pipelined Produce requests are handled together (they would coalesce) ...
    writer.write(b"".join(stand_in_request(cid, api_key=0) for cid in range(5)))
    await wait_until_async(lambda: len(started) == 5, "pipelined Produce requests started")
    # ... a Metadata behind them waits for its turn, and so does a Produce behind it ...
    writer.write(stand_in_request(5, api_key=3) + stand_in_request(6, api_key=0))
    await asyncio.sleep(0.2)
    assert started == list(range(5))
    # ... which comes once the five are handed to the storage nodes, unanswered yet;
    # the Metadata is then the one request being handled: the Produce still waits.
    hand_off.set()
    await wait_until_async(lambda: len(started) == 6, "the Metadata started")
    await asyncio.sleep(0.2)
    assert started == list(range(6))
    release.set()
    assert await asyncio.wait_for(read_answers(reader, 7), 30) == list(range(7))
    assert started == list(range(7))
    writer.close()
    await lst.stop(grace=0.1)
