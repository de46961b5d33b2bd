"""Minimal request and answer frames for tests of the gateway's connection handling
with a stand-in request handler (no codec, no cluster): a request is a v0 header with
the given API key and correlation id, an answer is the correlation id alone."""

from __future__ import annotations

import asyncio
import struct


def stand_in_request(cid: int, api_key: int = 3, payload: bytes = b"") -> bytes:
    """A framed request: INT16 key, INT16 version 0, INT32 correlation id, client id
    "x", then ``payload`` (a body the stand-in handler never reads)."""
    body = struct.pack(">hhih", api_key, 0, cid, 1) + b"x" + payload
    return struct.pack(">i", len(body)) + body


def stand_in_answer(cid: int, size: int = 4) -> bytes:
    """A framed answer of ``size`` bytes starting with the correlation id."""
    payload = struct.pack(">i", cid) + b"a" * (size - 4)
    return struct.pack(">i", len(payload)) + payload


async def read_answers(reader: asyncio.StreamReader, count: int) -> list[int]:
    """The correlation ids of the next ``count`` answers, in the order they arrive."""
    cids = []
    for _ in range(count):
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        cids.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
    return cids
