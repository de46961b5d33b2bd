"""AlterUserScramCredentials (key 51), version 0: add, replace or delete SCRAM credentials.

Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED per user otherwise). The
request carries the client-computed salted password; the gateway derives
StoredKey/ServerKey and only those reach the controller (Kafka's
ScramCredentialUtils). Errors per user as Kafka's ScramControlManager gives them:
UNSUPPORTED_SASL_MECHANISM, UNACCEPTABLE_CREDENTIAL (iterations outside
4096-16384, empty salt or password), DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.controller_forward import ControllerFailure, forward_security_change
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from odradek.rpc.v1 import common_pb2, controller_pb2
from odradek.sasl.scram import ScramMechanism, credential_from_salted

API_KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse:
    names = list(
        dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    )
    if not gw.authorizer.cluster(ctx, AclOperation.ALTER):
        return AlterUserScramCredentialsResponse(
            results=[
                Result(user=n, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for n in names
            ]
        )
    errors: dict[str, tuple[int, str]] = {}
    upserts = []
    for u in request.upsertions:
        if u.mechanism not in (1, 2):
            errors[u.name] = (int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), "Unknown SCRAM mechanism")
            continue
        salt, salted = bytes(u.salt), bytes(u.salted_password)
        if not salt or not salted:
            errors[u.name] = (
                int(ErrorCode.UNACCEPTABLE_CREDENTIAL),
                "Salt and salted password must not be empty",
            )
            continue
        c = credential_from_salted(ScramMechanism(u.mechanism), salted, salt, u.iterations)
        upserts.append(
            common_pb2.ScramCredential(
                user=u.name,
                mechanism=u.mechanism,
                salt=c.salt,
                stored_key=c.stored_key,
                server_key=c.server_key,
                iterations=c.iterations,
            )
        )
    deletions = [
        controller_pb2.ScramDeletion(user=d.name, mechanism=d.mechanism)
        for d in request.deletions
        if d.name not in errors
    ]
    upserts = [u for u in upserts if u.user not in errors]
    # The client's next authentication may come to this gateway: wait until it can.
    answer = await forward_security_change(
        gw,
        lambda s: s.AlterScramCredentials,
        controller_pb2.AlterScramCredentialsRequest(upsertions=upserts, deletions=deletions),
        lambda a: any(r.error_code == 0 for r in a.results),
    )
    if isinstance(answer, ControllerFailure):
        for n in names:
            errors.setdefault(n, (answer.error_code, answer.message))
    else:
        for r in answer.results:
            errors.setdefault(r.user, (r.error_code, r.error_message))
    return AlterUserScramCredentialsResponse(
        results=[
            Result(
                user=n,
                error_code=errors.get(n, (0, ""))[0],
                error_message=errors.get(n, (0, ""))[1] or None,
            )
            for n in names
        ]
    )
