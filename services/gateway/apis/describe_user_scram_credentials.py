"""DescribeUserScramCredentials (key 50), version 0: mechanisms and iterations per user.

Needs DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED for the whole request
otherwise). Null or empty ``users``: every user with a credential. A user named
twice is DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND (Kafka's wording).
"""

from __future__ import annotations

from collections import Counter

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

API_KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = Result.CredentialInfo


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse:
    if not gw.authorizer.cluster(ctx, AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=None,
            results=[],
        )
    gw.credentials.update(gw.metadata.current)
    users = gw.credentials.users()
    wanted = [u.name for u in request.users] if request.users else sorted(users)
    counts = Counter(wanted)
    results = []
    for name in dict.fromkeys(wanted):
        if counts[name] > 1:
            results.append(
                Result(
                    user=name,
                    error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message=f"Cannot describe SCRAM credentials for the same user twice "
                    f"in a single request: {name}",
                    credential_infos=[],
                )
            )
        elif name not in users:
            results.append(
                Result(
                    user=name,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    error_message=f"Attempt to describe a user credential that does not exist: "
                    f"{name}",
                    credential_infos=[],
                )
            )
        else:
            infos = [
                Info(mechanism=int(c.mechanism), iterations=c.iterations)
                for c in sorted(users[name], key=lambda c: c.mechanism)
            ]
            results.append(Result(user=name, error_code=0, credential_infos=infos))
    return DescribeUserScramCredentialsResponse(error_code=0, results=results)
