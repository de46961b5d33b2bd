"""DeleteRecords (key 21), versions 0-2.

Moves each partition's log start offset up to the offset given (records below it
become unreadable and their segments deletable), on the storage node leading it;
partitions are grouped by leading node and sent in parallel. Offset -1 means the
high watermark. Each partition answers its new low watermark (the smallest log
start offset over its live replicas), OFFSET_OUT_OF_RANGE for an offset above the
high watermark or below -1, REQUEST_TIMED_OUT when the replicas did not follow
within ``timeout_ms``, and NOT_LEADER_OR_FOLLOWER when the storage node could not
be reached (the client refreshes metadata and retries).
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
from odradek.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse
from odradek.rpc.v1 import storage_pb2

API_KEY = ApiKey.DELETE_RECORDS

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1
GRPC_MARGIN_S = 5.0


def _error(code: int) -> storage_pb2.DeleteRecordsPartitionResult:
    return storage_pb2.DeleteRecordsPartitionResult(error_code=code, low_watermark=-1)


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    results: dict[tuple[str, int], storage_pb2.DeleteRecordsPartitionResult] = {}
    by_node: dict[int, list[storage_pb2.DeleteRecordsPartition]] = defaultdict(list)
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            part = leading(gw, ctx, AclOperation.DELETE, t.name, p.partition_index)
            if isinstance(part, ErrorCode):
                results[key] = _error(part)
            elif p.offset < HIGH_WATERMARK:
                results[key] = _error(ErrorCode.OFFSET_OUT_OF_RANGE)
            else:
                by_node[part.leader].append(
                    storage_pb2.DeleteRecordsPartition(
                        topic=t.name, partition=p.partition_index, offset=p.offset
                    )
                )
    timeout_ms = max(0, request.timeout_ms)

    await call_leaders(
        gw,
        by_node,
        lambda stub, parts: stub.DeleteRecords(
            storage_pb2.DeleteRecordsRequest(timeout_ms=timeout_ms, partitions=parts),
            timeout=timeout_ms / 1000.0 + GRPC_MARGIN_S,
        ),
        results,
        _error,
    )

    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            r = results.get((t.name, p.partition_index)) or _error(ErrorCode.UNKNOWN_SERVER_ERROR)
            partitions.append(
                PartitionResult(
                    partition_index=p.partition_index,
                    low_watermark=r.low_watermark if not r.error_code else -1,
                    error_code=r.error_code,
                )
            )
        topics.append(TopicResult(name=t.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
