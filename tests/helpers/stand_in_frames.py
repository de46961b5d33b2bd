"""Minimal request and answer frames for tests of the gateway's connection handling
with a stand-in request handler (no codec, no cluster): a request is a v0 header with
the given API key and correlation id, an answer is the correlation id alone."""

from __future__ import annotations

import asyncio
import struct


def stand_in_request(cid: int, api_key: int = 3) -> bytes:
    """A framed request: INT16 key, INT16 version 0, INT32 correlation id, client id "x"."""
    body = struct.pack(">hhih", api_key, 0, cid, 1) + b"x"
    return struct.pack(">i", len(body)) + body


def stand_in_answer(cid: int) -> bytes:
    """A framed answer carrying only the correlation id."""
    return struct.pack(">ii", 4, cid)


async def read_answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    """The correlation ids of the next ``count`` answers, in the order they arrive."""
    cids = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        cids.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
    return cids
