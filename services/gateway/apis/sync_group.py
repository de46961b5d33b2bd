"""SyncGroup (key 14), versions 0-5: a long-poll forwarded to the group's coordinator.

Followers wait until the leader's assignment is durable; every member gets an
assignment, empty when the leader gave it none (docs/compatibility.md C16). v5+ carry the
protocol type and name, checked against the group's (INCONSISTENT_GROUP_PROTOCOL).
"""

from __future__ import annotations

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import SYNC_BACKSTOP_S, rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import SyncGroupRequest, SyncGroupResponse
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.SYNC_GROUP


def _error(code: int) -> SyncGroupResponse:
    return SyncGroupResponse(
        throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None, assignment=b""
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: SyncGroupRequest
) -> SyncGroupResponse:
    version = header.api_version
    if not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    stub = gw.groups.coordinator_stub(request.group_id)
    if stub is None:
        return _error(ErrorCode.NOT_COORDINATOR)
    call = coordinator_pb2.SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        assignments=[
            coordinator_pb2.SyncAssignment(member_id=a.member_id, assignment=bytes(a.assignment))
            for a in request.assignments
        ],
    )
    if version >= 3 and request.group_instance_id is not None:
        call.group_instance_id = request.group_instance_id
    if version >= 5:
        if request.protocol_type is not None:
            call.protocol_type = request.protocol_type
        if request.protocol_name is not None:
            call.protocol_name = request.protocol_name
    try:
        r = await stub.SyncGroup(call, timeout=SYNC_BACKSTOP_S)
    except grpc.aio.AioRpcError as exc:
        return _error(rpc_error(exc, long_poll=True))
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=r.error_code,
        protocol_type=r.protocol_type if r.HasField("protocol_type") else None,
        protocol_name=r.protocol_name if r.HasField("protocol_name") else None,
        assignment=bytes(r.assignment),
    )
