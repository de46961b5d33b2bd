"""DescribeAcls (key 29), versions 1-3: the ACLs matching a filter, grouped by resource.

Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise); a filter
with UNKNOWN fields is INVALID_REQUEST. Without an authorizer Kafka answers
SECURITY_DISABLED, and so does Odradek.
"""

from __future__ import annotations

from odradek.acl import (
    AclError,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DescribeAclsRequest, DescribeAclsResponse

API_KEY = ApiKey.DESCRIBE_ACLS
Resource = DescribeAclsResponse.DescribeAclsResource
Description = Resource.AclDescription


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    if not gw.authorizer.enabled:
        return DescribeAclsResponse(
            error_code=ErrorCode.SECURITY_DISABLED,
            error_message="No Authorizer is configured.",
            resources=[],
        )
    if not gw.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return DescribeAclsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            resources=[],
        )
    try:
        f = AclFilter(
            ResourceType(request.resource_type_filter),
            request.resource_name_filter,
            PatternType(request.pattern_type_filter),
            request.principal_filter,
            request.host_filter,
            AclOperation(request.operation),
            AclPermissionType(request.permission_type),
        )
        f.validate()
    except (ValueError, AclError) as exc:
        return DescribeAclsResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message=str(exc), resources=[]
        )
    grouped: dict[tuple[int, str, int], list[Description]] = {}
    for acl in gw.authorizer.acls():
        if f.matches(acl):
            key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
            grouped.setdefault(key, []).append(
                Description(
                    principal=acl.principal,
                    host=acl.host,
                    operation=int(acl.operation),
                    permission_type=int(acl.permission),
                )
            )
    return DescribeAclsResponse(
        error_code=0,
        error_message=None,
        resources=[
            Resource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
            for (t, n, p), acls in grouped.items()
        ],
    )
