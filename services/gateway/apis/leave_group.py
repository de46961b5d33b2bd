"""LeaveGroup (key 13), versions 0-5: forwarded to the group's coordinator.

v0-2 name one member and report its error at the top level; v3+ batch members
(KIP-345), each with its own error, and may name a static member by
``group.instance.id`` alone (administrative removal). v5 carries a reason.

In a consumer group (KIP-848) LeaveGroup serves its classic members and
``AdminClient.removeMembersFromConsumerGroup``: any member may be removed by member id,
a static one by ``group.instance.id`` alone, the consumer-protocol ones included
(Kafka 4's ``classicGroupLeaveToConsumerGroup``, KAFKA-18188); the group gets one new
epoch. An unknown member or instance id answers UNKNOWN_MEMBER_ID and a member id that
is not the instance's FENCED_INSTANCE_ID, per member.
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
from odradek.protocol.messages import LeaveGroupRequest, LeaveGroupResponse
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.LEAVE_GROUP

MemberResponse = LeaveGroupResponse.MemberResponse


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    version = header.api_version
    call = coordinator_pb2.LeaveGroupRequest(group_id=request.group_id)
    if version >= 3:
        for m in request.members:
            member = call.members.add(
                member_id=m.member_id, reason=(m.reason or "") if version >= 5 else ""
            )
            if m.group_instance_id is not None:
                member.group_instance_id = m.group_instance_id
    else:
        call.members.add(member_id=request.member_id)
    groups = gw.groups
    stub = groups.coordinator_stub(request.group_id)
    error: int
    if not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        r = coordinator_pb2.LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    elif stub is None:
        r = coordinator_pb2.LeaveGroupResponse(error_code=ErrorCode.NOT_COORDINATOR)
    else:
        try:
            r = await stub.LeaveGroup(call, timeout=groups.group_timeout_s())
        except grpc.aio.AioRpcError as exc:
            r = coordinator_pb2.LeaveGroupResponse(error_code=rpc_error(exc))
    if version < 3:
        error = r.error_code or (r.members[0].error_code if r.members else ErrorCode.NONE)
        return LeaveGroupResponse(throttle_time_ms=0, error_code=error)
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=r.error_code,
        members=[
            MemberResponse(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id if m.HasField("group_instance_id") else None,
                error_code=m.error_code,
            )
            for m in r.members
        ],
    )
