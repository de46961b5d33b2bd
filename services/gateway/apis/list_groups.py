"""ListGroups (key 16), versions 0-5.

Asks every coordinator in parallel. On a broker port it answers the groups whose
coordinator (what FindCoordinator names) is that broker, so admin clients that ask
every broker and merge see each group once; on the bootstrap listener it answers
every group. v4+ filter by state, v5+ by type: "classic" or "consumer" (KIP-848
groups, whose states are Empty, Assigning, Reconciling and Stable). COORDINATOR_LOAD_IN_PROGRESS while some shard is still loading (the
groups found so far are still listed); COORDINATOR_NOT_AVAILABLE if a coordinator
could not be asked.
"""

from __future__ import annotations

import asyncio

import grpc

from odradek.gateway.authorizer import AclOperation, ResourceType
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ListGroupsRequest, ListGroupsResponse
from odradek.rpc.v1 import coordinator_pb2, coordinator_pb2_grpc

API_KEY = ApiKey.LIST_GROUPS

Listed = ListGroupsResponse.ListedGroup
CLASSIC = "classic"


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: ListGroupsRequest
) -> ListGroupsResponse:
    version = header.api_version
    states = list(request.states_filter or []) if version >= 4 else []
    types = [t.lower() for t in (request.types_filter or [])] if version >= 5 else []
    groups = gw.groups
    call = coordinator_pb2.ListGroupsRequest(states_filter=states)
    errors: list[int] = []
    listed: dict[str, coordinator_pb2.ListedGroup] = {}

    async def ask(stub: coordinator_pb2_grpc.GroupCoordinatorStub) -> None:
        try:
            r = await stub.ListGroups(call, timeout=groups.group_timeout_s())
        except grpc.aio.AioRpcError:
            errors.append(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return
        if r.error_code:
            errors.append(r.error_code)
        for g in r.groups:
            listed[g.group_id] = g

    await asyncio.gather(*(ask(s) for s in groups.all_coordinators()))
    everything = gw.authorizer.cluster(ctx, AclOperation.DESCRIBE)
    error: int = ErrorCode.NONE
    if ErrorCode.COORDINATOR_NOT_AVAILABLE in errors:
        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif errors:
        error = errors[0]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            Listed(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type or CLASSIC,
            )
            for g in sorted(listed.values(), key=lambda g: g.group_id)
            # KafkaApis.handleListGroupsRequest: all with DESCRIBE on the cluster, else
            # the groups the principal may DESCRIBE.
            if everything
            or gw.authorizer.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
            if groups.listed_on(g.group_id, ctx.broker_id)
            and (not types or (g.group_type or CLASSIC) in types)
        ],
    )
