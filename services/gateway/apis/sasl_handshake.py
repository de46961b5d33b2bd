"""SaslHandshake (key 17), versions 0-1: pick the SASL mechanism of this connection.

Answers the enabled mechanisms either way; UNSUPPORTED_SASL_MECHANISM for one not
enabled, ILLEGAL_SASL_STATE on a listener without SASL or for a second handshake
(Kafka's SaslServerAuthenticator). On an authenticated connection whose listener
sets ``connections.max.reauth.ms``, a handshake starts a re-authentication (KIP-368):
same mechanism, and (SaslAuthenticate) same principal. Deviation: after a v0 handshake Kafka reads raw
SASL tokens; Odradek expects SaslAuthenticate (clients since Kafka 1.0 send v1).
"""

from __future__ import annotations

from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import SaslHandshakeRequest, SaslHandshakeResponse

API_KEY = ApiKey.SASL_HANDSHAKE


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    session = ctx.sasl
    if session is not None and ctx.authenticated and ctx.reauth_ms > 0 and session.complete:
        session = ctx.sasl = session.reauthentication()
    if (
        session is None
        or session.mechanism is not None
        or (ctx.authenticated and session.previous is None)
    ):
        return SaslHandshakeResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            mechanisms=list(session.mechanisms) if session else [],
        )
    if not session.handshake(request.mechanism):
        return SaslHandshakeResponse(
            error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(session.mechanisms)
        )
    return SaslHandshakeResponse(error_code=0, mechanisms=list(session.mechanisms))
