"""DeleteGroups (key 42), versions 0-2: each group deleted by its coordinator.

An Empty group is deleted with its committed offsets (tombstones in
``__consumer_offsets``); a group with members answers NON_EMPTY_GROUP, an unknown one
GROUP_ID_NOT_FOUND.
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
from odradek.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse
from odradek.rpc.v1 import coordinator_pb2

API_KEY = ApiKey.DELETE_GROUPS

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    groups = gw.groups
    results: dict[str, int] = {}
    by_node: dict[int, list[str]] = defaultdict(list)
    for group_id in request.groups_names:
        node = groups.coordinator_node(group_id)
        if not gw.authorizer.allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            results[group_id] = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif node is None:
            results[group_id] = ErrorCode.NOT_COORDINATOR
        else:
            by_node[node.node_id].append(group_id)

    async def delete(group_ids: list[str]) -> None:
        stub = groups.coordinator_stub(group_ids[0])
        if stub is None:
            results.update(dict.fromkeys(group_ids, ErrorCode.NOT_COORDINATOR))
            return
        try:
            r = await stub.DeleteGroups(
                coordinator_pb2.DeleteGroupsRequest(group_ids=group_ids),
                timeout=groups.group_timeout_s(),
            )
        except grpc.aio.AioRpcError as exc:
            results.update(dict.fromkeys(group_ids, rpc_error(exc)))
            return
        for res in r.results:
            results[res.group_id] = res.error_code

    await asyncio.gather(*(delete(ids) for ids in by_node.values()))
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            Result(group_id=g, error_code=results.get(g, ErrorCode.UNKNOWN_SERVER_ERROR))
            for g in request.groups_names
        ],
    )
