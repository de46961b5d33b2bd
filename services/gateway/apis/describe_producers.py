"""DescribeProducers (key 61), version 0 (KIP-664).

Each partition's active producers as its storage leader keeps them (Kafka's
ProducerStateManager): producer id and epoch, last sequence and timestamp, the
coordinator epoch of its last marker, and the first offset of its open transaction
(-1 for none). Partitions are grouped by leading storage node and asked in
parallel. An unknown partition is UNKNOWN_TOPIC_OR_PARTITION; one without a leader,
or whose leader cannot be reached, NOT_LEADER_OR_FOLLOWER (admin clients refresh
metadata and retry).
"""

from __future__ import annotations

from collections import defaultdict

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.leader_calls import call_leaders, leading
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from odradek.rpc.v1 import common_pb2, storage_pb2

API_KEY = ApiKey.DESCRIBE_PRODUCERS

TopicResp = DescribeProducersResponse.TopicResponse
PartResp = TopicResp.PartitionResponse
Producer = PartResp.ProducerState


def _error(code: int) -> storage_pb2.PartitionProducers:
    return storage_pb2.PartitionProducers(error_code=code)


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse:
    results: dict[tuple[str, int], storage_pb2.PartitionProducers] = {}
    by_node: dict[int, list[common_pb2.TopicPartition]] = defaultdict(list)
    for t in request.topics:
        for index in t.partition_indexes:
            part = leading(
                gw,
                ctx,
                AclOperation.READ,
                t.name,
                index,
                no_leader=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            )
            if isinstance(part, ErrorCode):
                results[(t.name, index)] = _error(part)
            else:
                by_node[part.leader].append(
                    common_pb2.TopicPartition(topic=t.name, partition=index)
                )
    await call_leaders(
        gw,
        by_node,
        lambda stub, parts: stub.DescribeProducers(
            storage_pb2.DescribeProducersRequest(partitions=parts), timeout=30.0
        ),
        results,
        _error,
    )
    return DescribeProducersResponse(
        throttle_time_ms=0,
        topics=[
            TopicResp(
                name=t.name,
                partitions=[
                    _partition(index, results.get((t.name, index))) for index in t.partition_indexes
                ],
            )
            for t in request.topics
        ],
    )


def _partition(index: int, r: storage_pb2.PartitionProducers | None) -> PartResp:
    if r is None:
        r = _error(ErrorCode.UNKNOWN_SERVER_ERROR)
    return PartResp(
        partition_index=index,
        error_code=r.error_code,
        error_message=None,
        active_producers=[
            Producer(
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                last_sequence=p.last_sequence,
                last_timestamp=p.last_timestamp,
                coordinator_epoch=p.coordinator_epoch,
                current_txn_start_offset=p.current_txn_start_offset,
            )
            for p in r.producers
        ],
    )
