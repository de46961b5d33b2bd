"""A Produce request that shared a storage call with an earlier request of its
connection (produce_lane.py) and got no answer, because the earlier request's handler
was cancelled while the call was out, answers REQUEST_TIMED_OUT for its partition:
its records' fate is unknown. The handler keeps a shared placeholder in the results
while the leader's answer is awaited (issue 18); none may reach the client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from gateway_testkit import CORRELATION_ID, offline_gateway, one_partition_metadata
from gateway_testkit import produce_request as kafka_produce_request

from odradek.datalink.frame import Buffer
from odradek.gateway.connection import ConnectionContext
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.headers import parse_request_header, parse_response_header
from odradek.protocol.messages import decode_response, encode_request
from odradek.protocol.versions import response_header_version
from odradek.records.record import BatchBuilder
from odradek.rpc.v1 import storage_pb2


class HangingNode:
    """Stands in for the gateway's storage client: takes a call and never answers."""

    def __init__(self) -> None:
        self.calls: list[storage_pb2.ProduceRequest] = []

    async def close(self) -> None:
        """Nothing to close."""

    async def produce(
        self,
        node_id: int,
        request: bytes,
        records: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> storage_pb2.ProduceResponse:
        self.calls.append(storage_pb2.ProduceRequest.FromString(request))
        await asyncio.Event().wait()
        raise AssertionError("never answered")


async def test_a_request_whose_run_was_never_answered_times_out() -> None:
    async with offline_gateway(one_partition_metadata()) as gw:
        node = HangingNode()
        gw.storage = node  # type: ignore[assignment]
        ctx = ConnectionContext(1, "test", None)

        async def dispatch(value: bytes) -> Any:
            builder = BatchBuilder()
            builder.append(1, None, value)
            frame = encode_request(
                ApiKey.PRODUCE, 9, CORRELATION_ID, "unit", kafka_produce_request(builder.build())
            )
            header, offset = parse_request_header(memoryview(frame)[4:])
            answer = await gw.dispatch(ctx, header, memoryview(frame)[4 + offset :])
            assert isinstance(answer, bytes | bytearray)
            _, start = parse_response_header(
                memoryview(answer)[4:], response_header_version(ApiKey.PRODUCE, 9)
            )
            return decode_response(ApiKey.PRODUCE, 9, memoryview(answer)[4 + start :])

        # Started in one loop turn: the two requests go as one run, sent by the first.
        first = asyncio.ensure_future(dispatch(b"first"))
        second = asyncio.ensure_future(dispatch(b"second"))
        for _ in range(100):
            if node.calls:
                break
            await asyncio.sleep(0.01)
        assert len(node.calls) == 1 and len(node.calls[0].partitions) == 2
        first.cancel()
        r = await asyncio.wait_for(second, 5)
        [topic] = r.responses
        [part] = topic.partition_responses
        assert (topic.name, part.index, part.error_code, part.base_offset) == (
            "orders",
            0,
            E.REQUEST_TIMED_OUT,
            -1,
        )
        assert first.cancelled() or isinstance(first.exception(), asyncio.CancelledError)
