"""A consumer's repeated Fetch (the same request with other offsets) is neither decoded
nor planned again: the gateway remembers the last fetch it sent on a connection
(odradek.gateway.apis.fetch ``Repeat``, odradek.protocol.fetch_repeat) and sends the
same storage request with the new offsets (issue 18: a consumer's long poll per record
in the latency loop). The answers are those of a decoded request; a request that
differs in anything but its offsets, or a metadata change, goes the full way again.

The same real leader partition, data link, listener and client sockets as
test_gateway_requests_without_task.py; the gateway's decoder is wrapped to count its
calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from test_gateway_requests_without_task import (  # the fixture and its helpers
    VERSION,
    _answer,
    _append,
    _connect,
    _fetch,
    _metadata,
    _records,
    _Served,
    served,
)

from odradek.gateway import gateway as gateway_module
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

__all__ = ["served"]  # (the fixture, imported)


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The API keys of the requests the gateway decoded without a task."""
    keys: list[int] = []
    real = gateway_module.decode_request

    def counting(header: Any, body: Any) -> Any:
        keys.append(header.api_key)
        return real(header, body)

    monkeypatch.setattr(gateway_module, "decode_request", counting)
    yield keys


async def _served_fetch(
    served: _Served,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    cid: int,
    offset: int,
) -> Any:
    """A fetch at ``offset`` parked until a record is appended there; its partition."""
    writer.write(_fetch(cid, offset))
    await asyncio.sleep(0.02)
    _append(served.part, b"v%d" % offset)
    got, response = await _answer(reader, ApiKey.FETCH, VERSION)
    assert got == cid
    return response.responses[0].partitions[0]


async def test_a_repeated_fetch_is_not_decoded_again(served: _Served, decoded: list[int]) -> None:
    reader, writer = await _connect(served)
    decoded.clear()
    for offset in range(4):
        answer = await _served_fetch(served, reader, writer, offset + 1, offset)
        assert (answer.error_code, answer.high_watermark) == (ErrorCode.NONE, offset + 1)
        assert bytes(answer.records) == _records(served.part, offset, offset + 1)
    # Before: every fetch decoded (four). The connect's fetch (another max_wait_ms) is
    # another request: the first of these is decoded, the three after it are not.
    assert decoded == [ApiKey.FETCH]
    # What the connection keeps holds no record buffer (views of the data link's reads).
    [conn] = served.listener.connections
    repeat = conn.ctx.fetch_repeat
    assert repeat is not None and repeat.plan.results == {}
    writer.close()


async def test_a_fetch_that_differs_is_decoded_and_answered_as_itself(
    served: _Served, decoded: list[int]
) -> None:
    reader, writer = await _connect(served)
    await _served_fetch(served, reader, writer, 1, 0)
    decoded.clear()
    # Another max_wait_ms: its own wait (10 ms, answered empty), not the remembered one.
    writer.write(_fetch(2, 1, wait_ms=10))
    cid, response = await _answer(reader, ApiKey.FETCH, VERSION)
    answer = response.responses[0].partitions[0]
    assert (cid, answer.error_code, bytes(answer.records)) == (2, ErrorCode.NONE, b"")
    # Another partition_max_bytes: a record cut to nothing would differ; decoded anew.
    writer.write(_fetch(3, 0, wait_ms=10, partition_max_bytes=1))
    cid, response = await _answer(reader, ApiKey.FETCH, VERSION)
    answer = response.responses[0].partitions[0]
    # (the first batch is returned whole even past partition_max_bytes, as Kafka does)
    assert (cid, bytes(answer.records)) == (3, _records(served.part, 0, 1))
    assert decoded == [ApiKey.FETCH, ApiKey.FETCH]
    writer.close()


async def test_a_metadata_change_is_planned_anew(served: _Served, decoded: list[int]) -> None:
    reader, writer = await _connect(served)
    await _served_fetch(served, reader, writer, 1, 0)
    await _served_fetch(served, reader, writer, 2, 1)
    decoded.clear()
    # The partition loses its leader: the remembered plan (ask node 100) no longer holds.
    moved = _metadata(served.server.port)
    moved.version = 2
    moved.topics[0].partitions[0].leader = -1
    await served.gateway.metadata.update(moved)
    writer.write(_fetch(3, 2))
    cid, response = await _answer(reader, ApiKey.FETCH, VERSION)
    answer = response.responses[0].partitions[0]
    assert (cid, answer.error_code) == (3, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert decoded == [ApiKey.FETCH]
    writer.close()
