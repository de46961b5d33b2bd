"""SaslAuthenticate (key 36), versions 0-2: one token of the SASL exchange.

A failed exchange answers SASL_AUTHENTICATION_FAILED with Kafka's message and the
connection is closed after the response (Kafka closes it too). Deviation:
``session_lifetime_ms`` is 0 (no ``connections.max.reauth.ms``, KIP-368 not served),
so clients never re-authenticate.
"""

from __future__ import annotations

import logging

from odradek.gateway.authentication import AuthenticationFailed
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import SaslAuthenticateRequest, SaslAuthenticateResponse

API_KEY = ApiKey.SASL_AUTHENTICATE
log = logging.getLogger(__name__)


async def handle(
    gw: GatewayApi,
    ctx: ConnectionContext,
    header: RequestHeader,
    request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse:
    session = ctx.sasl
    if session is None or session.mechanism is None or ctx.authenticated:
        ctx.close_after_response = True
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="Unexpected SaslAuthenticate request",
            auth_bytes=b"",
        )
    gw.credentials.update(gw.metadata.current)
    try:
        answer = session.step(bytes(request.auth_bytes), gw.credentials)
    except AuthenticationFailed as exc:
        log.info("authentication of %s (%r) failed: %s", ctx.peer, session.user, exc)
        ctx.close_after_response = True
        return SaslAuthenticateResponse(
            error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
            error_message=f"Authentication failed during authentication due to invalid "
            f"credentials with SASL mechanism {session.mechanism}",
            auth_bytes=b"",
        )
    if session.complete:
        ctx.principal = "User:" + session.user
        ctx.authenticated = True
    return SaslAuthenticateResponse(
        error_code=0, error_message=None, auth_bytes=answer, session_lifetime_ms=0
    )
