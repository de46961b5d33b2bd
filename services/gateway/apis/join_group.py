"""JoinGroup (key 11), versions 0-9: a long-poll forwarded to the group's coordinator.

The gateway holds the request while the coordinator completes the rebalance (bounded
by the members' rebalance timeout plus ``group.initial.rebalance.delay.ms``; the call's
own deadline sits 10 s above that). v0 has no rebalance timeout (the session timeout
serves), v4+ get MEMBER_ID_REQUIRED on a first join (KIP-394, docs/compatibility.md C15),
v5+ carry ``group.instance.id`` (static membership), v9 ``skip_assignment`` (KIP-814).
A coordinator that cannot be reached answers NOT_COORDINATOR so the client looks it up
again.
"""

from __future__ import annotations

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import LONG_POLL_MARGIN_S, client_host, rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import JoinGroupRequest, JoinGroupResponse
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.JOIN_GROUP

Member = JoinGroupResponse.JoinGroupResponseMember


def _error(version: int, code: int, member_id: str) -> JoinGroupResponse:
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=code,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if version >= 7 else "",
        leader="",
        skip_assignment=False,
        member_id=member_id,
        members=[],
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: JoinGroupRequest
) -> JoinGroupResponse:
    version = header.api_version
    rebalance_ms = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
    if not gw.authorizer.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(version, ErrorCode.GROUP_AUTHORIZATION_FAILED, request.member_id)
    groups = gw.groups
    stub = groups.coordinator_stub(request.group_id)
    if stub is None:
        return _error(version, ErrorCode.NOT_COORDINATOR, request.member_id)
    call = coordinator_pb2.JoinGroupRequest(
        group_id=request.group_id,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_ms,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=[
            coordinator_pb2.JoinProtocol(name=p.name, metadata=bytes(p.metadata))
            for p in request.protocols
        ],
        client_id=header.client_id or "",
        client_host=client_host(ctx),
        require_known_member_id=version >= 4,
        reason=(request.reason or "") if version >= 8 else "",
        supports_skip_assignment=version >= 9,
    )
    if version >= 5 and request.group_instance_id is not None:
        call.group_instance_id = request.group_instance_id
    delay_ms = int(gw.cluster_config("group.initial.rebalance.delay.ms"))
    timeout = (max(rebalance_ms, 0) + max(delay_ms, 0)) / 1000.0 + LONG_POLL_MARGIN_S
    try:
        r = await stub.JoinGroup(call, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        return _error(version, rpc_error(exc, long_poll=True), request.member_id)
    protocol_name = r.protocol_name if r.HasField("protocol_name") else None
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=r.error_code,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type if r.HasField("protocol_type") else None,
        protocol_name=protocol_name if version >= 7 else (protocol_name or ""),
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[
            Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id if m.HasField("group_instance_id") else None,
                metadata=bytes(m.metadata),
            )
            for m in r.members
        ],
    )
