"""OffsetDelete (key 47), version 0 (KIP-496): checked by the group's coordinator,
tombstoned by the offset store.

Group errors: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group with
members). Per partition: GROUP_SUBSCRIBED_TO_TOPIC while a member of a consumer group
subscribes to the topic, UNKNOWN_TOPIC_OR_PARTITION for topics that do not exist.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.offset_commits import PartitionErrors, partition_answers
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse
from odradek.rpc.v1 import common_pb2, offsets_pb2

API_KEY = ApiKey.OFFSET_DELETE

TopicResp = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartResp = TopicResp.OffsetDeleteResponsePartition


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    snap = gw.metadata.current
    errors: PartitionErrors = {}
    # KafkaApis.handleOffsetDeleteRequest: DELETE on the group, READ on each topic.
    if not gw.authorizer.allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
        )
    denied = gw.authorizer.denied(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    call = offsets_pb2.DeleteOffsetsRequest(group_id=request.group_id)
    for topic in request.topics:
        known = snap.topics.get(topic.name)
        for p in topic.partitions:
            if topic.name in denied:
                errors[(topic.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif known is None or not 0 <= p.partition_index < len(known.partitions):
                errors[(topic.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                call.partitions.append(
                    common_pb2.TopicPartition(topic=topic.name, partition=p.partition_index)
                )
    answer = await gw.groups.call(request.group_id, lambda s: s.DeleteOffsets, call)
    r = offsets_pb2.DeleteOffsetsResponse(error_code=answer) if isinstance(answer, int) else answer
    if r.error_code:
        return OffsetDeleteResponse(error_code=r.error_code, throttle_time_ms=0, topics=[])
    for pe in r.partitions:
        errors[(pe.topic, pe.partition)] = pe.error_code
    return OffsetDeleteResponse(
        error_code=ErrorCode.NONE,
        throttle_time_ms=0,
        topics=partition_answers(request.topics, errors, TopicResp, PartResp),
    )
