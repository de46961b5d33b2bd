"""Heartbeat (key 12), versions 0-4: forwarded to the group's coordinator.

REBALANCE_IN_PROGRESS tells a member to rejoin; ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID
and FENCED_INSTANCE_ID (v3+, static members) fence stale members.
"""

from __future__ import annotations

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import HeartbeatRequest, HeartbeatResponse
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.HEARTBEAT


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: HeartbeatRequest
) -> HeartbeatResponse:
    if not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return HeartbeatResponse(
            throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    groups = gw.groups
    stub = groups.coordinator_stub(request.group_id)
    if stub is None:
        return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR)
    call = coordinator_pb2.GroupHeartbeatRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
    )
    if header.api_version >= 3 and request.group_instance_id is not None:
        call.group_instance_id = request.group_instance_id
    try:
        r = await stub.Heartbeat(call, timeout=groups.group_timeout_s())
    except grpc.aio.AioRpcError as exc:
        return HeartbeatResponse(throttle_time_ms=0, error_code=rpc_error(exc))
    return HeartbeatResponse(throttle_time_ms=0, error_code=r.error_code)
