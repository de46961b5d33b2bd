"""DescribeGroups (key 15), versions 0-6: each group asked of its coordinator, one call
per coordinator, in parallel.

As in Kafka, a group that is not a classic group (nobody knows it, or it is a KIP-848
consumer group) is described as ``Dead`` with no error below v6, and from v6 (KIP-1043)
as ``Dead`` with GROUP_ID_NOT_FOUND and the coordinator's error message ("Group g not
found." / "Group g is not a classic group."); members carry metadata and assignment
only while the group is Stable. Deviation: no authorizer, so ``authorized_operations``
(v3+) is Kafka's "not requested" value unless asked for, and then every group
operation.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.gateway.group_routing import rpc_error
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    authorized_operations,
)
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.DESCRIBE_GROUPS

Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = Described.DescribedGroupMember

# READ, DELETE, DESCRIBE (Kafka's AclOperation codes), encoded as a bit field.


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    version = header.api_version
    groups = gw.groups
    found: dict[str, coordinator_pb2.DescribedGroup] = {}
    by_node: dict[int, list[str]] = defaultdict(list)
    for group_id in request.groups:
        node = groups.coordinator_node(group_id)
        if not gw.authorizer.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            found[group_id] = coordinator_pb2.DescribedGroup(
                group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
            )
        elif node is None:
            found[group_id] = coordinator_pb2.DescribedGroup(
                group_id=group_id, error_code=ErrorCode.NOT_COORDINATOR
            )
        else:
            by_node[node.node_id].append(group_id)

    async def ask(group_ids: list[str]) -> None:
        stub = groups.coordinator_stub(group_ids[0])
        try:
            if stub is None:
                raise LookupError
            r = await stub.DescribeGroups(
                coordinator_pb2.DescribeGroupsRequest(group_ids=group_ids),
                timeout=groups.group_timeout_s(),
            )
        except (grpc.aio.AioRpcError, LookupError) as exc:
            code = (
                rpc_error(exc)
                if isinstance(exc, grpc.aio.AioRpcError)
                else ErrorCode.NOT_COORDINATOR
            )
            for g in group_ids:
                found[g] = coordinator_pb2.DescribedGroup(group_id=g, error_code=code)
            return
        for d in r.groups:
            found[d.group_id] = d

    await asyncio.gather(*(ask(ids) for ids in by_node.values()))
    include_ops = version >= 3 and bool(request.include_authorized_operations)
    out = []
    for group_id in request.groups:
        d = found[group_id]
        error = d.error_code
        message = d.error_message or None
        if error == ErrorCode.GROUP_ID_NOT_FOUND and version < 6:
            error, message = ErrorCode.NONE, None
        out.append(
            Described(
                error_code=error,
                error_message=message if error else None,
                group_id=group_id,
                group_state=d.state or ("Dead" if not d.error_code else ""),
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=[
                    DescribedMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id
                        if m.HasField("group_instance_id")
                        else None,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=bytes(m.metadata),
                        member_assignment=bytes(m.assignment),
                    )
                    for m in d.members
                ],
                authorized_operations=authorized_operations(
                    gw.authorizer.operations(ctx, ResourceType.GROUP, group_id)
                    if include_ops
                    else None
                ),
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)
