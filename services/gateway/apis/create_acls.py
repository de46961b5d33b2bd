"""CreateAcls (key 30), versions 1-3: add ACLs, kept by the controller.

Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per creation otherwise).
Each creation is checked as Kafka's AclControlManager does (INVALID_REQUEST with its
message); an ACL that exists already is a success. Version 0 is gone from Kafka 4.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import ControllerFailure, forward_security_change
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import CreateAclsRequest, CreateAclsResponse
from odradek.rpc.v1 import common_pb2, controller_pb2

API_KEY = ApiKey.CREATE_ACLS
Result = CreateAclsResponse.AclCreationResult


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: CreateAclsRequest
) -> CreateAclsResponse:
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER):
        return CreateAclsResponse(
            results=[
                Result(
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Cluster authorization failed.",
                )
                for _ in request.creations
            ]
        )
    creations = [
        common_pb2.AclBinding(
            resource_type=c.resource_type,
            resource_name=c.resource_name,
            pattern_type=c.resource_pattern_type,
            principal=c.principal,
            host=c.host,
            operation=c.operation,
            permission_type=c.permission_type,
        )
        for c in request.creations
    ]
    if not creations:
        return CreateAclsResponse(results=[])
    answer = await forward_security_change(
        gw,
        lambda s: s.AlterAcls,
        controller_pb2.AlterAclsRequest(creations=creations),
        lambda a: any(code == 0 for code in a.creation_errors),
    )
    if isinstance(answer, ControllerFailure):
        return CreateAclsResponse(
            results=[
                Result(error_code=answer.error_code, error_message=answer.message)
                for _ in creations
            ]
        )
    return CreateAclsResponse(
        results=[
            Result(
                error_code=code,
                error_message="Invalid ACL creation" if code else None,
            )
            for code in answer.creation_errors
        ]
    )
