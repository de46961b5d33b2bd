"""ListOffsets (key 2), versions 0-8.

-1 latest (the high watermark, or the last stable offset under READ_COMMITTED), -2
earliest (log start offset), -3 the record with the largest timestamp (v7+), and a
timestamp >= 0 finds the first offset whose timestamp is at least that, through the
time index (docs/compatibility.md C14). v1+ return one offset with its timestamp and, v4+,
its leader epoch; v0 returns the old ``old_style_offsets`` list with one entry.
Partitions are grouped by leading storage node and asked in parallel.
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
from odradek.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from odradek.rpc.v1 import storage_pb2

API_KEY = ApiKey.LIST_OFFSETS

TopicResp = ListOffsetsResponse.ListOffsetsTopicResponse
PartResp = TopicResp.ListOffsetsPartitionResponse


def _error(code: int) -> storage_pb2.ListOffsetsPartitionResult:
    return storage_pb2.ListOffsetsPartitionResult(
        error_code=code, timestamp=-1, offset=-1, leader_epoch=-1
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    version = header.api_version
    results: dict[tuple[str, int], storage_pb2.ListOffsetsPartitionResult] = {}
    by_node: dict[int, list[storage_pb2.ListOffsetsPartition]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if key in seen and version >= 1:
                results[key] = _error(ErrorCode.INVALID_REQUEST)
                continue
            seen.add(key)
            part = leading(gw, ctx, AclOperation.DESCRIBE, t.name, p.partition_index)
            if isinstance(part, ErrorCode):
                results[key] = _error(part)
            elif (p.timestamp == -3 and version < 7) or p.timestamp < -3:
                results[key] = _error(
                    ErrorCode.UNSUPPORTED_VERSION
                    if p.timestamp == -3
                    else ErrorCode.INVALID_REQUEST
                )
            else:
                by_node[part.leader].append(
                    storage_pb2.ListOffsetsPartition(
                        topic=t.name,
                        partition=p.partition_index,
                        timestamp=p.timestamp,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1)
                        if version >= 4
                        else -1,
                    )
                )
    isolation = request.isolation_level if version >= 2 else 0

    await call_leaders(
        gw,
        by_node,
        lambda stub, parts: stub.ListOffsets(
            storage_pb2.ListOffsetsRequest(isolation_level=isolation, partitions=parts),
            timeout=30.0,
        ),
        results,
        _error,
    )

    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            r = results.get((t.name, p.partition_index)) or _error(ErrorCode.UNKNOWN_SERVER_ERROR)
            if version == 0:
                parts.append(
                    PartResp(
                        partition_index=p.partition_index,
                        error_code=r.error_code,
                        old_style_offsets=[r.offset] if not r.error_code and r.offset >= 0 else [],
                    )
                )
            else:
                parts.append(
                    PartResp(
                        partition_index=p.partition_index,
                        error_code=r.error_code,
                        timestamp=r.timestamp,
                        offset=r.offset,
                        leader_epoch=r.leader_epoch,
                    )
                )
        topics.append(TopicResp(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
