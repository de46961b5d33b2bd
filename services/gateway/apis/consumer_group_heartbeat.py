"""ConsumerGroupHeartbeat (key 68), versions 0-1: the KIP-848 consumer group protocol,
forwarded to the group's coordinator (:mod:`odradek.coordinator.consumer_groups`).

Each heartbeat joins (member epoch 0), stays (its current epoch) or leaves (-1, or -2
for a static member coming back) and is answered with the member epoch, the heartbeat
interval and, when it changed, the assignment (by topic id); the assignment also goes
out, as Kafka's, to a full request, and, beyond Kafka, on every heartbeat until the
member reports owning it (a client retrying a timed-out heartbeat as is, as librdkafka
does, would otherwise never learn what the lost response carried). v1 adds
``SubscribedTopicRegex``. Errors are Kafka's: FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID,
UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION,
GROUP_MAX_SIZE_REACHED, INVALID_REQUEST (with Kafka's messages); NOT_COORDINATOR when
the coordinator cannot be reached, so the client looks it up again. One deviation: a
member's heartbeat (epoch > 0) after its group went back to being a classic group
(it was fenced, e.g. after missing its session, and only classic members remained)
answers UNKNOWN_MEMBER_ID, so that it rejoins; Kafka answers GROUP_ID_NOT_FOUND, which
librdkafka 2.16 and the Java client treat as fatal ([C17](#c17)). And a heartbeat at the
member's previous epoch (its response was lost) is accepted even without
TopicPartitions, and answered the assignment; Kafka fences it (FENCED_MEMBER_EPOCH)
unless it reports a subset of the assignment.
"""

from __future__ import annotations

import uuid
from typing import Any

import grpc

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import client_host, rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT

Assignment: Any = ConsumerGroupHeartbeatResponse.Assignment


def _error(code: int, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        member_id=None,
        member_epoch=-1,
        heartbeat_interval_ms=0,
        assignment=None,
    )


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse:
    groups = gw.groups
    stub = groups.coordinator_stub(request.group_id)
    if stub is None:
        return _error(ErrorCode.NOT_COORDINATOR)
    call = coordinator_pb2.ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        client_id=header.client_id or "",
        client_host=client_host(ctx),
    )
    if request.instance_id is not None:
        call.instance_id = request.instance_id
    if request.rack_id is not None:
        call.rack_id = request.rack_id
    if request.subscribed_topic_names is not None:
        call.has_subscribed_topic_names = True
        call.subscribed_topic_names.extend(request.subscribed_topic_names)
    if header.api_version >= 1 and request.subscribed_topic_regex is not None:
        call.subscribed_topic_regex = request.subscribed_topic_regex
    if request.server_assignor is not None:
        call.server_assignor = request.server_assignor
    if request.topic_partitions is not None:
        call.has_topic_partitions = True
        for tp in request.topic_partitions:
            call.topic_partitions.add(topic_id=tp.topic_id.bytes, partitions=tp.partitions)
    try:
        r = await stub.ConsumerGroupHeartbeat(call, timeout=groups.group_timeout_s())
    except grpc.aio.AioRpcError as exc:
        return _error(rpc_error(exc))
    assignment = None
    if r.has_assignment:
        assignment = Assignment(
            topic_partitions=[
                Assignment.TopicPartitions(
                    topic_id=uuid.UUID(bytes=bytes(t.topic_id)), partitions=list(t.partitions)
                )
                for t in r.assignment
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=r.error_code,
        error_message=r.error_message if r.HasField("error_message") else None,
        member_id=r.member_id if r.HasField("member_id") else None,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )
