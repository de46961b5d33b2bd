"""The partition entries of the gateway's storage calls (odradek.gateway.apis.produce
builds each once per partition and shares it between requests): a storage client that
writes records into its call's entries, as the gRPC path does, leaves the next request's
entries empty; each request's records reach the node as that request's."""

from __future__ import annotations

from gateway_testkit import (
    AppendingNode,
    call,
    offline_gateway,
    one_partition_metadata,
    produce_request,
)

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode as E
from odradek.records.record import BatchBuilder


async def test_entries_carry_no_records_of_an_earlier_request() -> None:
    async with offline_gateway(one_partition_metadata()) as gw:
        node = AppendingNode()
        gw.storage = node  # type: ignore[assignment]
        batches = []
        for value in (b"first", b"second", b"third"):
            builder = BatchBuilder()
            builder.append(1, None, value)
            batch = builder.build()
            batches.append(bytes(batch))
            r = await call(gw, ApiKey.PRODUCE, 9, produce_request(batch))
            assert r.responses[0].partition_responses[0].error_code == E.NONE
        assert node.seen == [(b"", b) for b in batches]
