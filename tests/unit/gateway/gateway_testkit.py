"""A gateway that is never started, for handler tests: requests go through
``Gateway.dispatch`` as encoded frames and come back decoded, against metadata the
test supplies (no listener bound; the controller address is one nobody serves)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from odradek.config import Config
from odradek.datalink.frame import Buffer
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway import DEFAULTS, Gateway
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.headers import parse_request_header, parse_response_header
from odradek.protocol.messages import ProduceRequest, decode_response, encode_request
from odradek.protocol.versions import response_header_version
from odradek.rpc.v1 import common_pb2, storage_pb2

CORRELATION_ID = 41


def one_partition_metadata(
    partitions: list[common_pb2.Partition] | None = None,
) -> common_pb2.ClusterMetadata:
    """Gateway 0 and storage node 100, leading the one partition of topic ``orders``
    (or ``orders`` with ``partitions`` as given)."""
    if partitions is None:
        partitions = [common_pb2.Partition(partition=0, replicas=[100], isr=[100], leader=100)]
    online = common_pb2.ONLINE
    return common_pb2.ClusterMetadata(
        version=3,
        cluster_id="Zq3sS1o8RkGx7YH0c2bVYA",
        nodes=[
            common_pb2.Node(
                node_id=0, kind=common_pb2.GATEWAY, host="127.0.0.1", kafka_port=9092, state=online
            ),
            common_pb2.Node(node_id=100, kind=common_pb2.STORAGE, host="127.0.0.1", state=online),
        ],
        topics=[common_pb2.Topic(name="orders", partitions=partitions)],
    )


def produce_request(
    records: bytes, *, topic: str = "orders", acks: int = -1, transactional_id: str | None = None
) -> ProduceRequest:
    """A Produce of ``records`` to partition 0 of ``topic`` (timeout 1 s)."""
    data = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            data(name=topic, partition_data=[data.PartitionProduceData(index=0, records=records)])
        ],
    )


@contextlib.asynccontextmanager
async def offline_gateway(metadata: common_pb2.ClusterMetadata) -> AsyncIterator[Gateway]:
    """Gateway node 0 believing ``metadata``; its clients are closed on exit."""
    gateway = Gateway(
        Config(
            DEFAULTS,
            overrides={
                "node.id": "0",
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "controller.address": "127.0.0.1:1",
            },
        )
    )
    await gateway.metadata.update(metadata)
    try:
        yield gateway
    finally:
        await gateway.producer_ids.close()
        await gateway.groups.close()
        await gateway.transactions.close()
        await gateway.storage.close()
        await gateway.controller.close()


async def call(
    gw: Gateway, api_key: ApiKey, version: int, request: Any, *, broker: int | None = None
) -> Any:
    """One request on the bootstrap listener, or on ``broker``'s port; the decoded answer."""
    frame = encode_request(api_key, version, CORRELATION_ID, "unit", request)
    header, offset = parse_request_header(memoryview(frame)[4:])
    body = memoryview(frame)[4 + offset :]
    answer = await gw.dispatch(ConnectionContext(1, "test", broker), header, body)
    assert answer is not None
    if isinstance(answer, list):  # Fetch answers buffers for writelines
        answer = b"".join(answer)
    cid, start = parse_response_header(
        memoryview(answer)[4:], response_header_version(api_key, version)
    )
    assert cid == CORRELATION_ID
    return decode_response(api_key, version, memoryview(answer)[4 + start :])


class AppendingNode:
    """Stands in for the gateway's storage client (``gw.storage``): every partition's
    batch is appended at the next offset, and its records are written into the call's
    entry (parsed from the serialized request) as StoragePool.produce does over gRPC. ``seen`` holds each entry's records
    before and after that write."""

    def __init__(self) -> None:
        self.next_offset = 0
        self.seen: list[tuple[bytes, bytes]] = []

    async def close(self) -> None:
        """Nothing to close: no connections were opened."""

    async def produce(
        self,
        node_id: int,
        request: bytes,
        records: Sequence[Buffer],
        timeout: float,
        on_sent: Callable[[], None] | None = None,
    ) -> storage_pb2.ProduceResponse:
        if on_sent is not None:
            on_sent()
        results = []
        rpc = storage_pb2.ProduceRequest.FromString(request)
        for part, data in zip(rpc.partitions, records, strict=True):
            before = part.records
            part.records = bytes(data)
            self.seen.append((before, part.records))
            results.append(
                storage_pb2.ProducePartitionResult(
                    topic=part.topic, partition=part.partition, base_offset=self.next_offset
                )
            )
            self.next_offset += 1
        return storage_pb2.ProduceResponse(partitions=results)
