"""DeleteAcls (key 31), versions 1-3: remove the ACLs matching each filter.

Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per filter otherwise);
each filter's result lists the ACLs it removed.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import ControllerFailure, forward_security_change
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DeleteAclsRequest, DeleteAclsResponse
from odradek.rpc.v1 import controller_pb2

API_KEY = ApiKey.DELETE_ACLS
FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
Matching = FilterResult.DeleteAclsMatchingAcl


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER):
        return DeleteAclsResponse(
            filter_results=[
                FilterResult(
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Cluster authorization failed.",
                    matching_acls=[],
                )
                for _ in request.filters
            ]
        )
    filters = []
    for f in request.filters:
        pf = controller_pb2.AclFilter(
            resource_type=f.resource_type_filter,
            pattern_type=f.pattern_type_filter,
            operation=f.operation,
            permission_type=f.permission_type,
        )
        if f.resource_name_filter is not None:
            pf.resource_name = f.resource_name_filter
        if f.principal_filter is not None:
            pf.principal = f.principal_filter
        if f.host_filter is not None:
            pf.host = f.host_filter
        filters.append(pf)
    if not filters:
        return DeleteAclsResponse(filter_results=[])
    answer = await forward_security_change(
        gw,
        lambda s: s.AlterAcls,
        controller_pb2.AlterAclsRequest(deletions=filters),
        lambda a: any(d.deleted for d in a.deletions),
    )
    if isinstance(answer, ControllerFailure):
        return DeleteAclsResponse(
            filter_results=[
                FilterResult(
                    error_code=answer.error_code, error_message=answer.message, matching_acls=[]
                )
                for _ in filters
            ]
        )
    return DeleteAclsResponse(
        filter_results=[
            FilterResult(
                error_code=d.error_code,
                error_message=d.error_message or None,
                matching_acls=[
                    Matching(
                        error_code=0,
                        error_message=None,
                        resource_type=a.resource_type,
                        resource_name=a.resource_name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
                    for a in d.deleted
                ],
            )
            for d in answer.deletions
        ]
    )
