"""The partition entries of the gateway's storage calls (odradek.gateway.apis.produce
builds each once per partition and shares it between requests): a storage client that
writes records into its call's entries, as the gRPC path does, leaves the next request's
entries empty; each request's records reach the node as that request's."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway_testkit import call, offline_gateway, one_partition_metadata, produce_request

from odradek.datalink.frame import Buffer
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode as E
from odradek.records.record import BatchBuilder
from odradek.rpc.v1 import storage_pb2


class _GrpcLikeNode:
    """Fills each entry's ``records`` from the blobs (StoragePool.produce over gRPC)."""

    def __init__(self) -> None:
        self.seen: list[tuple[bytes, bytes]] = []  # (records before filling, after)

    async def produce(
        self,
        node_id: int,
        request: storage_pb2.ProduceRequest,
        records: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> storage_pb2.ProduceResponse:
        results = []
        for part, data in zip(request.partitions, records, strict=True):
            before = part.records
            part.records = bytes(data)
            self.seen.append((before, part.records))
            results.append(
                storage_pb2.ProducePartitionResult(
                    topic=part.topic, partition=part.partition, base_offset=len(self.seen)
                )
            )
        return storage_pb2.ProduceResponse(partitions=results)

    async def close(self) -> None:
        """offline_gateway closes its storage client."""


async def test_entries_carry_no_records_of_an_earlier_request() -> None:
    async with offline_gateway(one_partition_metadata()) as gw:
        node = _GrpcLikeNode()
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
